/**
 * Reranking: a model with a rank (classification) head scores how well each document answers a
 * query, through node-llama-cpp's ranking context (llama.cpp's RANK pooling). The scores are the
 * head's output as a probability (0…1): a sigmoid of one logit, or for Qwen3-style heads the
 * softmax of the "yes"/"no" rows. `POST /v1/rerank` (aliases `/rerank`, `/v1/reranking`) takes the
 * shape the llama.cpp server, Jina and Cohere share.
 */
import type { LlamaModel, LlamaRankingContext } from "node-llama-cpp";
import { Type, type Static } from "typebox";
import { badRequest } from "../core/errors.js";
import type { TypedApp } from "../core/http.js";
import { sharedLlama } from "./llama-binary.js";
import { clientGoneSignal } from "./routes.js";
import type { TextgenService } from "./service.js";

export interface RankResult {
  scores: number[];
  promptTokens: number;
}

export interface Ranker {
  rank(query: string, documents: readonly string[], signal?: AbortSignal): Promise<RankResult>;
  close(): Promise<void>;
}

export interface LlamaRankerOptions {
  file: string;
  threads: number;
  contextSize: number;
  gpu: "auto" | false;
}

export class LlamaRanker implements Ranker {
  private constructor(
    private readonly model: LlamaModel,
    private readonly context: LlamaRankingContext,
  ) {}

  static async load(options: LlamaRankerOptions): Promise<LlamaRanker> {
    const llama = await sharedLlama({ gpu: options.gpu });
    const model = await llama.loadModel({ modelPath: options.file });
    try {
      const context = await model.createRankingContext({
        contextSize: Math.min(options.contextSize, model.trainContextSize),
        threads: options.threads,
      });
      return new LlamaRanker(model, context);
    } catch (error) {
      await model.dispose();
      throw error;
    }
  }

  async rank(query: string, documents: readonly string[], signal?: AbortSignal): Promise<RankResult> {
    const limit = this.context.contextSize;
    let promptTokens = 0;
    documents.forEach((document, i) => {
      const length = this.context.calculateInputLength(query, document);
      if (length >= limit)
        throw badRequest(
          `query and document ${i} are ${length} tokens together, but this reranker reads ${limit - 1} at most (ctx-size). Shorten them.`,
          [{ path: `/documents/${i}` }],
        );
      promptTokens += length;
    });
    const scores: number[] = [];
    // One document at a time on the one ranking sequence, so a client that leaves stops the work.
    for (const document of documents) {
      signal?.throwIfAborted();
      scores.push(await this.context.rank(query, document));
    }
    return { scores, promptTokens };
  }

  async close(): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
  }
}

const RerankRequest = Type.Object(
  {
    model: Type.Optional(
      Type.String({ description: "a model with a rank head; the only reranker when absent" }),
    ),
    query: Type.String({ minLength: 1 }),
    documents: Type.Array(
      Type.Union([Type.String(), Type.Object({ text: Type.String() }, { additionalProperties: false })]),
      { minItems: 1, maxItems: 1000 },
    ),
    top_n: Type.Optional(Type.Integer({ minimum: 1 })),
    return_documents: Type.Optional(Type.Boolean({ default: false })),
    keep_alive: Type.Optional(Type.Union([Type.String(), Type.Number()])),
  },
  { additionalProperties: false },
);
type RerankBody = Static<typeof RerankRequest>;

const RerankResponse = Type.Object({
  object: Type.Literal("list"),
  model: Type.String(),
  results: Type.Array(
    Type.Object({
      index: Type.Integer(),
      relevance_score: Type.Number(),
      document: Type.Optional(Type.Object({ text: Type.String() })),
    }),
  ),
  usage: Type.Object({ prompt_tokens: Type.Integer(), total_tokens: Type.Integer() }),
});

/** `POST /v1/rerank`, `/rerank`, `/v1/reranking`; errors in the contract's shape (as llama-server's). */
export function registerRerankRoutes(app: TypedApp, service: TextgenService): void {
  const handler = async (body: RerankBody, signal: AbortSignal) => {
    const target = service.resolveModel(body.model, "rerank", { keepAlive: body.keep_alive });
    const documents = body.documents.map((document) =>
      typeof document === "string" ? document : document.text,
    );
    const { scores, promptTokens } = await target.rerank(body.query, documents, signal);
    const ranked = scores
      .map((relevance_score, index) => ({ index, relevance_score }))
      .sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index)
      .slice(0, body.top_n ?? documents.length);
    return {
      object: "list" as const,
      model: target.name,
      results: ranked.map((result) => ({
        ...result,
        ...(body.return_documents && { document: { text: documents[result.index]! } }),
      })),
      usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
    };
  };
  for (const url of ["/v1/rerank", "/rerank", "/v1/reranking"])
    app.post(
      url,
      {
        schema: {
          tags: ["generation"],
          summary: "Rerank documents for a query with a reranker model (llama.cpp / Jina / Cohere shape)",
          body: RerankRequest,
          response: { 200: RerankResponse },
        },
      },
      async (request, reply) => handler(request.body, clientGoneSignal(request, reply)),
    );
}
