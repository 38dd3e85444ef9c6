/**
 * Request and response fields of retrieval beyond keywords (#26), for src/rag/http/schemas.ts to place in
 * its request and result schemas: at once the types, the validation and the OpenAPI document.
 */
import { Type, type Static } from "typebox";
import { DEFAULT_RRF_K, resolveFusion, type FusionOptions } from "./fusion.js";

const strict = { additionalProperties: false } as const;

/** Bounds: generous for tuning, small enough that no value misbehaves (k > 0, weights finite). */
const RRF_MAX_K = 10_000;
const RRF_MAX_WEIGHT = 1000;
/** Candidates one query may send to the reranker. */
export const RERANK_MAX_TOP_N = 1000;

export const RetrievalField = Type.Union(
  [Type.Literal("lexical"), Type.Literal("dense"), Type.Literal("hybrid")],
  {
    description:
      'how candidates are found: "lexical" (BM25/TF-IDF keywords), "dense" (embedding similarity) or "hybrid" (both, fused); default "hybrid" when the index has vectors, else "lexical"',
  },
);
export type RetrievalField = Static<typeof RetrievalField>;

const FusionWeight = (source: string) =>
  Type.Number({
    minimum: 0,
    maximum: RRF_MAX_WEIGHT,
    default: 1,
    description: `weight of the ${source} ranking`,
  });

export const FusionField = Type.Object(
  {
    method: Type.Optional(
      Type.Literal("rrf", { default: "rrf", description: "weighted Reciprocal Rank Fusion" }),
    ),
    k: Type.Optional(
      Type.Number({
        exclusiveMinimum: 0,
        maximum: RRF_MAX_K,
        default: DEFAULT_RRF_K,
        description: "rank constant: a result scores Σ weight / (k + rank) over the rankings holding it",
      }),
    ),
    weights: Type.Optional(
      Type.Object(
        { lexical: Type.Optional(FusionWeight("lexical")), dense: Type.Optional(FusionWeight("dense")) },
        strict,
      ),
    ),
  },
  {
    ...strict,
    description: "how hybrid retrieval fuses the lexical and dense rankings",
    examples: [{ method: "rrf", k: 60, weights: { lexical: 1, dense: 1 } }],
  },
);
export type FusionField = Static<typeof FusionField>;

/** The fusion a request asks for, defaults filled in. */
export function fusionOptions(field: FusionField | undefined): FusionOptions {
  return resolveFusion({ k: field?.k, weights: field?.weights ?? {} });
}

export const ExpandField = Type.Boolean({
  default: false,
  description:
    "expand the keyword query with RM3 pseudo-relevance feedback (terms of its top 10 results, Anserini's defaults); lexical retrieval only",
});

export const RerankField = Type.Union(
  [
    Type.Boolean(),
    Type.Object(
      {
        model: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
        top_n: Type.Optional(
          Type.Integer({
            minimum: 1,
            maximum: RERANK_MAX_TOP_N,
            description: "candidates the reranker scores",
          }),
        ),
      },
      strict,
    ),
  ],
  {
    description:
      "rescore the candidates with a reranker (this process's /v1/rerank, or RERANK_URL): true, or {model, top_n}",
  },
);
export type RerankField = Static<typeof RerankField>;

export const EmbeddingsField = Type.Union(
  [Type.Boolean(), Type.Object({ model: Type.String({ minLength: 1, maxLength: 256 }) }, strict)],
  {
    description:
      "store an embedding per chunk (true, or {model}); default: on when an embedder is configured (EMBEDDING_URL, or a model in this process)",
  },
);
export type EmbeddingsField = Static<typeof EmbeddingsField>;

/** Each retriever's own score of a result, where it was computed. */
export const ResultScores = {
  lexical: Type.Optional(Type.Number({ description: "keyword score, 0 … 1" })),
  dense: Type.Optional(Type.Number({ description: "embedding similarity (cosine)" })),
  rerank: Type.Optional(Type.Number({ description: "the reranker's score" })),
};
