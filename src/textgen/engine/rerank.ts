/**
 * Reranking: a model with a rank (classification) head scores how well each document answers a
 * query, through node-llama-cpp's ranking context (llama.cpp's RANK pooling). The scores are the
 * head's output as a probability (0…1): a sigmoid of one logit, or for Qwen3-style heads the
 * softmax of the "yes"/"no" rows. `POST /v1/rerank` (aliases `/rerank`, `/v1/reranking`) takes the
 * shape the llama.cpp server, Jina and Cohere share.
 */
import type { LlamaModel, LlamaRankingContext } from "node-llama-cpp";
import { badRequest } from "../../core/errors.js";
import { sharedLlama } from "./llama-binary.js";

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
