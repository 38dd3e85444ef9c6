/**
 * Scoring models. Every posting has a query-independent *factor* that depends only on (tf, dl, avgdl),
 * increasing in tf and decreasing in dl; every query term has a *weight* that depends on the collection
 * statistics (N live documents, df live documents containing the term):
 *
 * - bm25 (Okapi, as Lucene): factor `tf / (tf + k1·(1 − b + b·dl/avgdl))`, weight `qtf·idf·(k1 + 1)`,
 *   `idf = ln(1 + (N − df + 0.5)/(df + 0.5))`. Defaults k1 = 1.2, b = 0.75.
 * - tfidf (pivoted length normalisation, Singhal et al. 1996): factor `(1 + ln tf) / (1 − s + s·√(dl/avgdl))`,
 *   s = 0.75, weight `(1 + ln qtf)·idf²`, `idf = ln((1 + N)/(1 + df)) + 1` (sklearn's smooth idf).
 *   Cosine normalisation is not used: a document's norm changes whenever any document is added or
 *   deleted, so no incremental index could keep it exact.
 *
 * A score is `Σ weight·factor / U(q)` with `U(q) = Σ weight_t · (max over live postings of t of factor)`,
 * so it lies within 0 … 1 (clamped against rounding). Every path (fresh, segmented, pruned, exhaustive,
 * loaded) computes it with the same operations in the same order, so scores are bitwise equal.
 *
 * The length part of the factor only depends on dl, so it is tabulated per avgdl ({@link LengthNorms}).
 */

import type { Bm25Parameters, ScorerName } from "./types.js";

export const DEFAULT_BM25: Readonly<Bm25Parameters> = Object.freeze({ k1: 1.2, b: 0.75 });

/** tfidf's pivot slope s. */
export const TFIDF_SLOPE = 0.75;

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

/** What the scorer needs besides the postings: its kind and parameters. */
export interface ScorerParameters {
  readonly kind: ScorerName;
  readonly k1: number;
  readonly b: number;
}

/** A query term's weight from its query frequency and the live statistics. */
export function termWeight(scorer: ScorerParameters, qtf: number, documentCount: number, df: number): number {
  if (scorer.kind === "bm25") return qtf * bm25Idf(documentCount, df) * (scorer.k1 + 1);
  const idf = tfidfIdf(documentCount, df);
  return sublinearTf(qtf) * idf * idf;
}

/**
 * The length part of the factor for one avgdl: bm25's `k1·(1 − b + b·dl/avgdl)` (the factor is
 * `tf / (tf + norm)`), tfidf's `1 − s + s·√(dl/avgdl)` (the factor is `(1 + ln tf) / norm`).
 */
export function lengthNorm(scorer: ScorerParameters, dl: number, averageLength: number): number {
  if (scorer.kind === "bm25") return scorer.k1 * (1 - scorer.b + (scorer.b * dl) / averageLength);
  return 1 - TFIDF_SLOPE + TFIDF_SLOPE * Math.sqrt(dl / averageLength);
}

/** The factor of a posting given its length norm (the same expression in every path). */
export function factorOf(bm25: boolean, tf: number, norm: number): number {
  return bm25 ? tf / (tf + norm) : sublinearTf(tf) / norm;
}

/** Length norms tabulated for dl = 0 … maxLength at one avgdl (values identical to {@link lengthNorm}). */
export interface LengthNorms {
  readonly averageLength: number;
  readonly table: Float64Array;
}

export function tabulateLengthNorms(
  scorer: ScorerParameters,
  averageLength: number,
  maxLength: number,
): LengthNorms {
  const table = new Float64Array(maxLength + 1);
  for (let dl = 0; dl <= maxLength; dl++) table[dl] = lengthNorm(scorer, dl, averageLength);
  return { averageLength, table };
}

/**
 * How much larger a factor can be at `averageLength` than at the `reference` avgdl it was bounded with:
 * bm25 `max(1, avgdl/ref)`, tfidf `max(1, √(avgdl/ref))` (both proven upper bounds on the ratio).
 */
export function boundScale(scorer: ScorerParameters, averageLength: number, reference: number): number {
  const ratio = averageLength / reference;
  if (!(ratio > 1)) return 1;
  return scorer.kind === "bm25" ? ratio : Math.sqrt(ratio);
}

export const BLOCK_SHIFT = 6;
export const BLOCK_SIZE = 1 << BLOCK_SHIFT;
