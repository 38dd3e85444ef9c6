/**
 * Weighted Reciprocal Rank Fusion (Cormack, Clarke & Büttcher 2009), as LangChain's EnsembleRetriever,
 * R2R and Elasticsearch's `rrf` retriever compute it: a result's fused score is
 * `Σ_i w_i / (k + rank_i)` over the lists it appears in, ranks 1-based, k = 60 by default. Only ranks
 * count, so lists whose scores live on different scales (BM25's normalised scores, cosine
 * similarities) fuse without calibration.
 *
 * Deterministic: the sum runs over the sources in a fixed order (lexical, then dense), and equal fused
 * scores are ordered by ascending key, as the engine orders equal scores. Each result keeps every
 * source's own score and rank, so /rag/query can show why it ranks where it does.
 */

/** The retrievers a fusion combines, in the order their terms are summed. */
export const FUSION_SOURCES = ["lexical", "dense"] as const;
export type FusionSource = (typeof FUSION_SOURCES)[number];

/** Elasticsearch's, LangChain's and the RRF paper's rank constant. */
export const DEFAULT_RRF_K = 60;

export interface FusionOptions {
  /** The rank constant k, > 0: larger flattens the difference between top and lower ranks. */
  k: number;
  /** Each source's weight, ≥ 0 (left out: 1). */
  weights: Partial<Record<FusionSource, number>>;
}

/** One retriever's hit: a key and that retriever's own score. */
export interface RankedHit {
  key: number;
  score: number;
}

/** Each source's ranking, best first; a source left out (or empty) contributes nothing. */
export type FusionLists = Partial<Record<FusionSource, readonly RankedHit[]>>;

export interface FusedHit {
  key: number;
  /** `Σ_i w_i / (k + rank_i)`. */
  score: number;
  /** Each source's own score, for the sources whose list holds the key. */
  scores: Partial<Record<FusionSource, number>>;
  /** Each source's 1-based rank, for the sources whose list holds the key. */
  ranks: Partial<Record<FusionSource, number>>;
}

export function resolveFusion(options: Partial<FusionOptions> = {}): FusionOptions {
  const k = options.k ?? DEFAULT_RRF_K;
  if (typeof k !== "number" || !Number.isFinite(k) || !(k > 0))
    throw new RangeError(`rrf k must be a finite number > 0, got ${String(k)}`);
  const weights: Partial<Record<FusionSource, number>> = {};
  for (const source of FUSION_SOURCES) {
    const weight = options.weights?.[source] ?? 1;
    if (typeof weight !== "number" || !Number.isFinite(weight) || weight < 0)
      throw new RangeError(`rrf weight of ${source} must be a finite number ≥ 0, got ${String(weight)}`);
    weights[source] = weight;
  }
  return { k, weights };
}

/**
 * Fuses the lists into one ranking: every key found in any list, best fused score first, equal scores
 * by ascending key; `topK` cuts it (default: all). A key repeated within one list counts at its first
 * (best) rank only.
 */
export function reciprocalRankFusion(
  lists: FusionLists,
  options: Partial<FusionOptions> = {},
  topK = Number.POSITIVE_INFINITY,
): FusedHit[] {
  const { k, weights } = resolveFusion(options);
  const fused = new Map<number, FusedHit>();
  // Sources in their fixed order, so that every key's sum is added up in the same order.
  for (const source of FUSION_SOURCES) {
    const list = lists[source];
    if (list === undefined) continue;
    const weight = weights[source] ?? 1;
    list.forEach((hit, index) => {
      let entry = fused.get(hit.key);
      if (entry === undefined) {
        entry = { key: hit.key, score: 0, scores: {}, ranks: {} };
        fused.set(hit.key, entry);
      } else if (entry.ranks[source] !== undefined) return;
      const rank = index + 1;
      entry.ranks[source] = rank;
      entry.scores[source] = hit.score;
      entry.score += weight / (k + rank);
    });
  }
  const ranking = [...fused.values()].sort((a, b) => b.score - a.score || a.key - b.key);
  return Number.isFinite(topK) ? ranking.slice(0, Math.max(0, topK)) : ranking;
}

/**
 * The largest fused score any key can reach (rank 1 in every list): `Σ_i w_i / (k + 1)`. Dividing by it
 * puts fused scores within 0 … 1, the range /rag/query's `score` and `min_score` use.
 */
export function maxFusedScore(
  options: Partial<FusionOptions> = {},
  sources: readonly FusionSource[] = FUSION_SOURCES,
): number {
  const { k, weights } = resolveFusion(options);
  let total = 0;
  for (const source of FUSION_SOURCES)
    if (sources.includes(source)) total += (weights[source] ?? 1) / (k + 1);
  return total;
}
