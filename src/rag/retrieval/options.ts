/**
 * What the request fields of retrieval beyond keywords (#26) mean to the service: `retrieval`,
 * `fusion` and `rerank` on every route that searches, `embeddings` on every route that writes. One
 * module, so that /rag/query, /rag/chat, the OpenAI routes and the document routes read them alike.
 */
import type { Embedder } from "./embedder.js";
import type { Retrievers } from "./retrievers.js";
import { fusionOptions, type EmbeddingsField, type FusionField, type RerankField } from "./schemas.js";
import type { QueryInput } from "../service.js";
import type { IndexMeta } from "../store/types.js";

export interface RetrievalFields {
  retrieval?: "lexical" | "dense" | "hybrid";
  fusion?: FusionField;
  rerank?: RerankField;
}

/** The QueryInput fields of a request's retrieval fields (an OpenAI route has none: the defaults). */
export function retrievalInput(
  retrievers: Retrievers,
  fields: RetrievalFields,
  signal?: AbortSignal,
): Pick<QueryInput, "retrieval" | "fusion" | "rerank" | "embedderFor" | "signal"> {
  const { rerank } = fields;
  return {
    // Without any embedder configured, an index with vectors is searched by keywords unless asked.
    retrieval: fields.retrieval ?? (retrievers.embedder === null ? "lexical" : undefined),
    fusion: fusionOptions(fields.fusion),
    // A query is embedded only when its index holds vectors; no embedder is then its 503.
    embedderFor: (model) => retrievers.embedderFor(model),
    ...(rerank !== undefined &&
      rerank !== false && {
        rerank: {
          reranker: retrievers.rerankerFor(rerank === true ? null : (rerank.model ?? null)),
          topN: rerank === true ? undefined : rerank.top_n,
        },
      }),
    signal,
  };
}

/**
 * The embedder a write uses, or undefined for none. `embeddings` as the request says; left out, a new
 * index (create, replace) gets vectors when an embedder is configured, and a write to an existing
 * index keeps it as it is: with vectors (of its model) or without.
 */
export function writeEmbedding(
  retrievers: Retrievers,
  field: EmbeddingsField | undefined,
  existing: Pick<IndexMeta, "vectors"> | null,
): { embedder: Embedder } | undefined {
  if (field === false) return undefined;
  if (field === undefined) {
    if (existing)
      return existing.vectors ? { embedder: retrievers.embedderFor(existing.vectors.model) } : undefined;
    return retrievers.embeddingsByDefault ? { embedder: retrievers.embedderFor(null) } : undefined;
  }
  const model = field === true ? (existing?.vectors?.model ?? null) : field.model;
  return { embedder: retrievers.embedderFor(model) };
}

/**
 * The `retrieval` field of a response: said whenever the request chose retrieval or the path is not
 * keywords; a plain keyword query answers in the contract's shape, as before embeddings existed.
 */
export function reportedRetrieval(
  fields: RetrievalFields,
  retrieval: "lexical" | "dense" | "hybrid" | undefined,
): { retrieval?: "lexical" | "dense" | "hybrid" } {
  if (retrieval === undefined) return {};
  const chosen = fields.retrieval !== undefined || (fields.rerank !== undefined && fields.rerank !== false);
  return chosen || retrieval !== "lexical" ? { retrieval } : {};
}
