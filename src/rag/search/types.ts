/**
 * Public types of the search engine. The engine is a pure library: no HTTP, no I/O.
 * A "document" here is whatever the caller indexes (the RAG app indexes chunks); documents are
 * addressed by their ordinal, the position in which they were given to the builder.
 */

export type ScorerName = "tfidf" | "bm25";

export interface Bm25Parameters {
  /** Term-frequency saturation. */
  k1: number;
  /** Length normalisation strength, 0 … 1. */
  b: number;
}

/**
 * How text is turned into terms. The same options are used for documents and queries, and they are
 * stored in the serialised index so that a loaded index analyses queries exactly as it did documents.
 */
export interface AnalyzerOptions {
  /** English Porter stemming ("running" → "run"). Default true. */
  stemming?: boolean;
  /**
   * Stop words removed before stemming: `true` (default) = a short English list (Lucene's
   * EnglishAnalyzer set), `false` = none, or your own list (matched after case folding).
   */
  stopWords?: boolean | readonly string[];
}

export interface SearchIndexOptions {
  scorer: ScorerName;
  /** Only for `bm25`; defaults chosen by the engine. */
  bm25?: Partial<Bm25Parameters>;
  /**
   * Analyzer the documents were indexed with. Fixed when the {@link IndexBuilder} is created; if given
   * here it must match the builder's (it exists so that `index.options` fully describes an index).
   */
  analyzer?: AnalyzerOptions;
}

export interface SearchOptions {
  /** How many hits at most, ≥ 1. */
  topK: number;
  /** Hits scoring below this normalised score (0 … 1) are dropped. Default 0. */
  minScore?: number;
  /** Only documents for which this returns true are collected (metadata filters). */
  accept?: (ordinal: number) => boolean;
  /**
   * How the top k are found. `true`: score every posting of every query term (term-at-a-time).
   * `false`: dynamic pruning (MaxScore with block-max windows), which skips documents that provably
   * cannot make the top k. Left out (the default): pruning when the query terms have enough postings for
   * it to pay (more than 16,384), else exhaustive. All three return exactly the same hits and scores;
   * the option exists for benchmarks and cross-checks.
   */
  exhaustive?: boolean;
}

export interface SearchHit {
  /** Ordinal of the document, as given to the builder. */
  ordinal: number;
  /** Normalised score in 0 … 1, higher is better. */
  score: number;
}
