/**
 * Public types of the search engine. The engine is a pure library: no HTTP, and no I/O but through the
 * Directory an index is given (directory.ts).
 * A "document" here is whatever the caller indexes (the RAG app indexes chunks); documents are
 * addressed by their **key**, a u32 the index assigns when the document is added and never changes.
 */
import type { Directory } from "./directory.js";

export type ScorerName = "tfidf" | "bm25";

export interface Bm25Parameters {
  /** Term-frequency saturation. */
  k1: number;
  /** Length normalisation strength, 0 … 1. */
  b: number;
}

/**
 * How text is turned into terms. The same options are used for documents and queries; the caller
 * persists them with the index so that a loaded index analyses queries exactly as it did documents.
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
  /** Analyzer of documents and queries (default: stemming and English stop words). */
  analyzer?: AnalyzerOptions;
  /**
   * One embedding per document, kept per segment beside the postings (vectors/): every write then
   * gives one vector per added document, and `searchDense` ranks by cosine. Left out: a lexical index.
   */
  vectors?: VectorIndexOptions;
  /**
   * Where the index keeps what it does not hold in memory (directory.ts): the stored codes of segments
   * with an HNSW graph. Left out: everything in memory.
   */
  directory?: Directory;
}

/** How an index keeps its vectors (see vectors/segment-vectors.ts). */
export interface VectorIndexOptions {
  dimension: number;
  storage: "f32" | "f16" | "i8";
  /** Segments with at least this many vectors get an HNSW graph (default 10 000); smaller: exact search. */
  graphThreshold?: number;
}

export interface DenseSearchOptions {
  /** How many hits at most, ≥ 1. */
  topK: number;
  /** Only documents for which this returns true are collected (metadata filters; searched exactly). */
  accept?: (key: number) => boolean;
  /** Brute force even where a segment has a graph. */
  exact?: boolean;
}

/** What an index holds of vectors: live ones, their dimension, the bytes of every stored code. */
export interface VectorStats {
  count: number;
  dimension: number;
  bytes: number;
}

export interface SearchOptions {
  /** How many hits at most, ≥ 1. */
  topK: number;
  /** Hits scoring below this normalised score (0 … 1) are dropped. Default 0. */
  minScore?: number;
  /** Only documents for which this returns true are collected (metadata filters). */
  accept?: (key: number) => boolean;
  /**
   * How the top k are found. `true`: score every posting of every query term (term-at-a-time).
   * `false`: dynamic pruning (MaxScore with block-max windows), which skips documents that provably
   * cannot make the top k. Left out (the default): pruning when the query terms have enough postings for
   * it to pay (more than 16,384), else exhaustive. All three return exactly the same hits and scores.
   */
  exhaustive?: boolean;
}

export interface SearchHit {
  /** Key of the document. */
  key: number;
  /** Normalised score in 0 … 1, higher is better. */
  score: number;
}

/** Counters the caller persists with the index. */
export interface IndexState {
  /** The key the next added document gets. */
  nextKey: number;
  /** The id the next segment gets. */
  nextSegmentId: number;
}

export interface SegmentInfo {
  id: number;
  documentCount: number;
  deletedCount: number;
  byteLength: number;
}

export interface SegmentRecord {
  id: number;
  documentCount: number;
  bytes: Uint8Array;
  /** The segment's vectors (vectors/vector-codec.ts), one per document; absent in a lexical index. */
  vectors?: Uint8Array | null;
}

/** A deleted document: its segment and local ordinal there. */
export interface Tombstone {
  segmentId: number;
  ordinal: number;
}

/** Persisted segment bytes and the ordinals tombstoned in it. */
export interface StoredSegment {
  bytes: Uint8Array;
  deleted: Iterable<number>;
  /** Its vectors' bytes (an index with vectors has them on every segment). */
  vectors?: Uint8Array | null;
}
