/**
 * Pseudo-relevance feedback with RM3 (Lavrenko & Croft's relevance model, interpolated with the query
 * as Abdul-Jaleel et al. 2004 do), with Anserini's defaults and feedback-term filters, so that results
 * compare with its published BEIR "bm25+rm3" runs:
 *
 * 1. The query's top `fbDocs` documents are its feedback. Each one's term vector (its analysed terms
 *    and their frequencies) keeps terms of 2 … 20 characters of `[a-z0-9]` whose live document
 *    frequency is at most 10% of the live documents (Anserini's df filter instead of a stop list), and
 *    then only its `fbTerms` most frequent ones.
 * 2. The relevance model: `P(t) ∝ Σ_d score(d) · tf(t, d) / |d|` over the feedback documents (|d| the
 *    kept terms' total frequency), pruned to its `fbTerms` largest weights and scaled to sum 1.
 * 3. The expanded query: `λ · q(t) + (1 − λ) · P(t)`, λ = `originalQueryWeight`, q the query's terms
 *    scaled to sum 1; each term searched with that weight as its boost (`SegmentedIndex.searchBoosted`).
 *
 * The feedback scores only enter as ratios (P is normalised), so the engine's per-query normalised
 * scores give the same model as raw BM25 scores would. Ties (equal frequency or weight) are broken by
 * term, so an expansion is deterministic.
 */

import type { SegmentedIndex } from "./core/segmented-index.js";
import type { SearchHit, SearchOptions } from "./types.js";

export interface Rm3Parameters {
  /** Feedback documents: the first-pass top n. */
  fbDocs: number;
  /** Terms kept per feedback document, and in the relevance model. */
  fbTerms: number;
  /** λ: the original query's share of the expanded query's weight. */
  originalQueryWeight: number;
}

/** Anserini's defaults (`-rm3`: fbDocs 10, fbTerms 10, originalQueryWeight 0.5). */
export const RM3_DEFAULTS: Readonly<Rm3Parameters> = Object.freeze({
  fbDocs: 10,
  fbTerms: 10,
  originalQueryWeight: 0.5,
});

/** A feedback document: its analysed terms (repeats count) and its first-pass score. */
export interface FeedbackDocument {
  readonly terms: readonly string[];
  readonly score: number;
}

/** What the df filter needs of the collection (live documents only). */
export interface FeedbackStatistics {
  readonly documentCount: number;
  documentFrequency(term: string): number;
}

/** A feedback term's df may be at most this share of the documents (Anserini's non-tweet threshold). */
export const MAX_FEEDBACK_DF_RATIO = 0.1;
const FEEDBACK_TERM = /^[a-z0-9]{2,20}$/;

export function resolveRm3(parameters: Partial<Rm3Parameters> = {}): Rm3Parameters {
  const resolved = { ...RM3_DEFAULTS, ...parameters };
  for (const name of ["fbDocs", "fbTerms"] as const) {
    const value = resolved[name];
    if (!Number.isInteger(value) || value < 1 || value > 1000)
      throw new RangeError(`rm3 ${name} must be an integer within 1 … 1000, got ${String(value)}`);
  }
  const lambda = resolved.originalQueryWeight;
  if (typeof lambda !== "number" || !(lambda >= 0 && lambda <= 1))
    throw new RangeError(`rm3 originalQueryWeight must be within 0 … 1, got ${String(lambda)}`);
  return resolved;
}

/** The `n` largest entries (ties by term), as a new map in that order. */
function largest(weights: ReadonlyMap<string, number>, n: number): Map<string, number> {
  const entries = [...weights].sort(([a, x], [b, y]) => (y !== x ? y - x : a < b ? -1 : a > b ? 1 : 0));
  return new Map(entries.slice(0, n));
}

/** Scales positive weights to sum 1 (an all-zero vector stays as it is). */
function unitL1(weights: Map<string, number>): Map<string, number> {
  let sum = 0;
  for (const value of weights.values()) sum += value;
  if (sum > 0) for (const [term, value] of weights) weights.set(term, value / sum);
  return weights;
}

/** A feedback document's term vector: filtered as Anserini's, then its `fbTerms` most frequent terms. */
function documentVector(
  terms: readonly string[],
  statistics: FeedbackStatistics,
  fbTerms: number,
): Map<string, number> {
  const counts = new Map<string, number>();
  for (const term of terms) counts.set(term, (counts.get(term) ?? 0) + 1);
  const kept = new Map<string, number>();
  const maxDf = statistics.documentCount * MAX_FEEDBACK_DF_RATIO;
  for (const [term, tf] of counts) {
    if (!FEEDBACK_TERM.test(term)) continue;
    if (statistics.documentFrequency(term) > maxDf) continue;
    kept.set(term, tf);
  }
  return largest(kept, fbTerms);
}

/**
 * The expanded query of RM3: each term (the query's first, in query order, then the new ones by
 * descending weight) and its weight, all > 0, summing to 1 (up to rounding). `feedback` is the
 * first pass's ranking, best first; only its first `fbDocs` entries are read.
 */
export function rm3Query(
  queryTerms: readonly string[],
  feedback: readonly FeedbackDocument[],
  statistics: FeedbackStatistics,
  parameters: Partial<Rm3Parameters> = {},
): Map<string, number> {
  const { fbDocs, fbTerms, originalQueryWeight } = resolveRm3(parameters);
  const relevance = new Map<string, number>();
  for (const document of feedback.slice(0, fbDocs)) {
    const vector = documentVector(document.terms, statistics, fbTerms);
    let norm = 0;
    for (const tf of vector.values()) norm += tf;
    if (norm === 0 || !(document.score > 0)) continue;
    for (const [term, tf] of vector)
      relevance.set(term, (relevance.get(term) ?? 0) + (tf / norm) * document.score);
  }
  const model = unitL1(largest(relevance, fbTerms));

  const query = new Map<string, number>();
  for (const term of queryTerms) query.set(term, (query.get(term) ?? 0) + 1);
  unitL1(query);
  const expanded = new Map<string, number>();
  for (const [term, weight] of query) {
    expanded.set(term, originalQueryWeight * weight + (1 - originalQueryWeight) * (model.get(term) ?? 0));
  }
  for (const [term, weight] of model) {
    if (!query.has(term)) expanded.set(term, (1 - originalQueryWeight) * weight);
  }
  for (const [term, weight] of expanded) if (!(weight > 0)) expanded.delete(term);
  return expanded;
}

/**
 * Searches `index` with RM3: a first pass for the feedback documents (with the same `accept` filter),
 * their texts from `textOf`, then the expanded query. An empty first pass returns [].
 */
export function searchExpanded(
  index: SegmentedIndex,
  query: string,
  textOf: (key: number) => string,
  options: SearchOptions,
  parameters: Partial<Rm3Parameters> = {},
): SearchHit[] {
  const resolved = resolveRm3(parameters);
  const terms = index.analyze(query);
  const first = index.searchTerms(terms, { ...options, topK: resolved.fbDocs, minScore: 0 });
  if (first.length === 0) return [];
  const feedback = first.map((hit) => ({ terms: index.analyze(textOf(hit.key)), score: hit.score }));
  const expanded = rm3Query(terms, feedback, rm3Statistics(index), resolved);
  return index.searchBoosted(expanded, options);
}

/** The live statistics of an index as the df filter reads them. */
export function rm3Statistics(index: SegmentedIndex): FeedbackStatistics {
  return {
    documentCount: index.liveDocumentCount,
    documentFrequency: (term) => index.documentFrequency(term),
  };
}
