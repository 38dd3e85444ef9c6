/** POST /v1/rerank (aliases /rerank, /v1/reranking): the llama.cpp server's, Jina's and Cohere's shape. */
import { Type, type Static } from "typebox";
import type { TypedApp } from "../../core/http.js";
import { clientGoneSignal } from "./dialects/run.js";
import type { TextgenService } from "../engine/service.js";

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
