/**
 * Scoring models. Both are computed term-at-a-time from raw statistics (term frequencies, document
 * lengths, document frequencies); everything per-document or per-term that does not depend on the query
 * is precomputed once, when an index is built or loaded.
 *
 * ## tfidf (default)
 * The vector-space model with sklearn's `TfidfVectorizer(sublinear_tf=True)` weighting:
 *   w(t, d) = (1 + ln tf) · idf(t),   idf(t) = ln((1 + N) / (1 + df)) + 1   ("smoothed" idf)
 * Document vectors are L2-normalised (norms precomputed); the query vector is weighted the same way
 * (with its own term counts) and normalised, so the score is the cosine, naturally within 0 … 1.
 * Query terms that are not in the index have no idf and are ignored, as in sklearn.
 *
 * ## bm25
 * Okapi BM25 as in Lucene/Anserini:
 *   score(q, d) = Σ_t qtf · idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avgdl))
 *   idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))   (always > 0)
 * dl counts a document's terms after analysis (stop words removed). Defaults k1 = 1.2, b = 0.75: the
 * textbook values (Robertson; Manning et al.) and Lucene's/Elasticsearch's defaults, i.e. the most widely
 * used untuned setting. On BEIR SciFact they gave nDCG@10 0.683 vs 0.678 for Anserini's 0.9/0.4.
 *
 * Normalisation to 0 … 1: the raw score is divided by the query's MaxScore bound
 *   U(q) = Σ_t qtf · max_d [ idf(t) · tf·(k1 + 1) / (tf + K_d) ],
 * the largest contribution each query term makes to any document in the index (precomputed per term at
 * build/load time; the same bound the MaxScore/WAND dynamic-pruning algorithms use). No document can
 * score above U(q), and U(q) is a per-query constant, so dividing by it cannot change the ranking.
 * A score of 1 means "as good as this index allows for every query term" — e.g. the best document of a
 * one-word query scores 1. (The looser Σ qtf·idf·(k1 + 1), the tf → ∞ limit, would squash real scores
 * towards 0 and make `minScore` thresholds depend on k1.)
 */

import type { Bm25Parameters, ScorerName } from "./types.js";

export const DEFAULT_BM25: Readonly<Bm25Parameters> = Object.freeze({ k1: 1.2, b: 0.75 });

export const SCORER_NAMES: readonly ScorerName[] = Object.freeze(["tfidf", "bm25"]);

export function resolveBm25(parameters: Partial<Bm25Parameters> = {}): Bm25Parameters {
  const k1 = parameters.k1 ?? DEFAULT_BM25.k1;
  const b = parameters.b ?? DEFAULT_BM25.b;
  if (typeof k1 !== "number" || !Number.isFinite(k1) || k1 < 0) {
    throw new RangeError(`bm25 k1 must be a finite number ≥ 0, got ${String(k1)}`);
  }
  if (typeof b !== "number" || !(b >= 0 && b <= 1)) {
    throw new RangeError(`bm25 b must be within 0 … 1, got ${String(b)}`);
  }
  return { k1, b };
}

/** Raw statistics of an index, in CSR layout: term t's postings are [termOffsets[t], termOffsets[t+1]). */
export interface IndexData {
  /** Term id → term. */
  readonly terms: readonly string[];
  /** Document ordinal → number of terms (after analysis). */
  readonly docLengths: Uint32Array;
  /** Length vocabularySize + 1. */
  readonly termOffsets: Uint32Array;
  /** Posting → document ordinal, ascending within a term. */
  readonly docIds: Uint32Array;
  /** Posting → term frequency in that document (≥ 1). */
  readonly termFreqs: Uint16Array | Uint32Array;
}

/** ln(tf) for small tf, looked up rather than computed. */
const LN_TABLE_SIZE = 1024;
const LN_TABLE = (() => {
  const table = new Float64Array(LN_TABLE_SIZE);
  for (let i = 1; i < LN_TABLE_SIZE; i++) table[i] = Math.log(i);
  return table;
})();

/** 1 + ln(tf), tf ≥ 1. */
export function sublinearTf(tf: number): number {
  return 1 + (tf < LN_TABLE_SIZE ? (LN_TABLE[tf] ?? 0) : Math.log(tf));
}

export function tfidfIdf(documentCount: number, df: number): number {
  return Math.log((1 + documentCount) / (1 + df)) + 1;
}

export function bm25Idf(documentCount: number, df: number): number {
  return Math.log(1 + (documentCount - df + 0.5) / (df + 0.5));
}

/** Query-independent, precomputed part of a scorer. */
export interface TfidfModel {
  readonly kind: "tfidf";
  /** Term id → smoothed idf. */
  readonly idf: Float64Array;
  /** Document ordinal → 1 / ‖d‖ (0 for documents without terms). */
  readonly inverseNorms: Float64Array;
}

export interface Bm25Model {
  readonly kind: "bm25";
  readonly k1: number;
  readonly b: number;
  readonly idf: Float64Array;
  /** Document ordinal → k1·(1 − b + b·dl/avgdl). */
  readonly lengthNorms: Float64Array;
  /** Term id → max over its postings of idf·tf·(k1+1)/(tf + K_d): the term's MaxScore bound. */
  readonly maxImpacts: Float64Array;
}

export type ScoringModel = TfidfModel | Bm25Model;

export function prepareTfidf(data: IndexData): TfidfModel {
  const { termOffsets, docIds, termFreqs, docLengths } = data;
  const documentCount = docLengths.length;
  const vocabularySize = termOffsets.length - 1;
  const idf = new Float64Array(vocabularySize);
  const squaredNorms = new Float64Array(documentCount);
  for (let t = 0; t < vocabularySize; t++) {
    const start = termOffsets[t] ?? 0;
    const end = termOffsets[t + 1] ?? 0;
    const termIdf = tfidfIdf(documentCount, end - start);
    idf[t] = termIdf;
    for (let p = start; p < end; p++) {
      const w = sublinearTf(termFreqs[p] ?? 1) * termIdf;
      const d = docIds[p] ?? 0;
      squaredNorms[d] = (squaredNorms[d] ?? 0) + w * w;
    }
  }
  const inverseNorms = new Float64Array(documentCount);
  for (let d = 0; d < documentCount; d++) {
    const squared = squaredNorms[d] ?? 0;
    inverseNorms[d] = squared > 0 ? 1 / Math.sqrt(squared) : 0;
  }
  return { kind: "tfidf", idf, inverseNorms };
}

export function prepareBm25(data: IndexData, parameters: Bm25Parameters): Bm25Model {
  const { termOffsets, docIds, termFreqs, docLengths } = data;
  const { k1, b } = parameters;
  const documentCount = docLengths.length;
  const vocabularySize = termOffsets.length - 1;
  let totalLength = 0;
  for (let d = 0; d < documentCount; d++) totalLength += docLengths[d] ?? 0;
  const averageLength = documentCount > 0 && totalLength > 0 ? totalLength / documentCount : 1;
  const lengthNorms = new Float64Array(documentCount);
  for (let d = 0; d < documentCount; d++) {
    lengthNorms[d] = k1 * (1 - b + (b * (docLengths[d] ?? 0)) / averageLength);
  }
  const idf = new Float64Array(vocabularySize);
  const maxImpacts = new Float64Array(vocabularySize);
  for (let t = 0; t < vocabularySize; t++) {
    const start = termOffsets[t] ?? 0;
    const end = termOffsets[t + 1] ?? 0;
    const termIdf = bm25Idf(documentCount, end - start);
    idf[t] = termIdf;
    let best = 0;
    for (let p = start; p < end; p++) {
      const tf = termFreqs[p] ?? 1;
      const saturation = tf / (tf + (lengthNorms[docIds[p] ?? 0] ?? 0));
      if (saturation > best) best = saturation;
    }
    maxImpacts[t] = termIdf * (k1 + 1) * best;
  }
  return { kind: "bm25", k1, b, idf, lengthNorms, maxImpacts };
}
