/**
 * What RAG's retrieval needs of the models of the text generation app in this process, as ports:
 * embedding (dense and hybrid retrieval) and reranking. src/rag/local-models.ts implements them over
 * that app's service; the composition root (src/server.ts) connects them. EMBEDDING_URL and RERANK_URL
 * are reached over HTTP instead (embedder.ts, reranker.ts), without a port.
 */

/** A model that embeds, as a request names it. */
export interface EmbeddingModel {
  /** The name responses and indices record. */
  readonly name: string;
  embed(texts: readonly string[], signal?: AbortSignal): Promise<{ vectors: Float32Array[] }>;
}

/** A model that scores documents against a query. */
export interface RerankModel {
  readonly name: string;
  rerank(query: string, documents: readonly string[], signal?: AbortSignal): Promise<{ scores: number[] }>;
}

export interface EmbeddingPort {
  /**
   * The model `model` names (null: the default embedding model). Fails with a DomainError: not_found
   * for a name that is not served, invalid for a model that cannot embed.
   */
  resolve(model: string | null): EmbeddingModel;
}

export interface RerankPort {
  /** The model `model` names (null: the default reranker); DomainErrors as EmbeddingPort's. */
  resolve(model: string | null): RerankModel;
}

/** The models of this process, for RAG; each absent where the process has no text generation app. */
export interface LocalModelPorts {
  embedding?: EmbeddingPort;
  rerank?: RerankPort;
}
