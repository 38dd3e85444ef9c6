/** What the RAG service takes and gives: the types its façade (../service.ts) and its parts share. */
import type {
  Directory,
  ScorerName,
  SegmentInfo,
  SegmentedIndex,
  TieredMergePolicy,
} from "../search/index.js";
import type { Embedder } from "../retrieval/embedder.js";
import type { FusionOptions } from "../retrieval/fusion.js";
import type { Reranker } from "../retrieval/reranker.js";
import type { IndexKey, IndexMeta, Metadata, VectorStorage } from "../store/types.js";
import type { Section } from "../ingest/sections.js";
import type { FilterCut } from "./filters.js";

export interface DocumentInput {
  id?: string;
  text: string;
  title?: string | null;
  metadata?: Metadata;
  source?: string | null;
  /** sha256 (hex) of the source file's bytes, for folder sync; null or absent otherwise. */
  contentHash?: string | null;
  /** For paged sources (PDF): where each page starts in `text`, so chunks can carry their page. */
  pageStarts?: number[];
  /** For structured sources (Markdown, HTML, DOCX): where each section starts and its heading path. */
  sections?: Section[];
  /** Chunking of this document alone (an OpenAI file's static chunking strategy); the index's otherwise. */
  chunking?: { chunkSize: number; overlap: number };
}

/**
 * Embeddings for a write: every new chunk's engine text (title and text) is embedded with `embedder`
 * (`embedFor`, in the embedder's batches) before anything is committed; an embedder error (503
 * unavailable, 409 another model or dimension than the index's) fails the write and commits nothing.
 * - create / replace: the index records the embedder's model and the vectors' dimension
 *   (`IndexMeta.vectors`), stored as `storage` (default f32). Without `embedding`: a lexical index.
 * - append / upsert to an index with vectors: `embedding` is required (a 409 without it, naming the
 *   index's model) and must be the index's model and dimension (409 otherwise); `storage` is ignored.
 *   A write that only deletes needs none.
 * - append / upsert to a lexical index: `embedding` is ignored (the index has no vectors to add to;
 *   rebuild it with mode "replace" to give it some).
 */
export interface WriteEmbedding {
  embedder: Embedder;
  storage?: VectorStorage;
}

export interface BuildInput {
  key: IndexKey;
  documents: DocumentInput[];
  /** The new index's settings; defaults and checks in settings.ts (an append keeps the index's own). */
  chunkSize?: number;
  overlap?: number;
  scorer?: ScorerName;
  mode: "create" | "replace" | "append";
  /** Create the index even with no text (an OpenAI vector store starts empty). */
  allowEmpty?: boolean;
  /** Embeddings for the chunks (see WriteEmbedding). */
  embedding?: WriteEmbedding;
}

/** Documents upserted and deleted in one atomic write (folder sync, the document routes). */
export interface DocumentChange {
  upsert: DocumentInput[];
  deleteIds: string[];
  /** Embeddings for the upserted documents' chunks (see WriteEmbedding). */
  embedding?: WriteEmbedding;
}

export interface BuildOutput {
  meta: IndexMeta;
  documentsCount: number;
  chunksCount: number;
  buildMs: number;
}

export type AnswerMode = "none" | "extractive" | "generative";

export interface QueryInput {
  key: IndexKey;
  query: string;
  topK: number;
  minScore: number;
  filter?: Metadata;
  /** A compiled metadata predicate (OpenAI's comparison and compound filters); with `filter`, both hold. */
  predicate?: (metadata: Metadata) => boolean;
  /** RM3 pseudo-relevance feedback (src/rag/retrieval/expansion.ts). */
  expand?: boolean;
  /** How candidates are found (#26): default "hybrid" when the index has vectors, else "lexical". */
  retrieval?: "lexical" | "dense" | "hybrid";
  /** Weighted RRF's k and weights for "hybrid" (src/rag/retrieval/fusion.ts). */
  fusion?: FusionOptions;
  /** The embedder of the index's model (dense, hybrid); it throws 503 / 409 when there is none. */
  embedderFor?: (model: string) => Embedder;
  /** Rescore the first `topN` candidates (default: the candidate pool) with `reranker`. */
  rerank?: { reranker: Reranker; topN?: number };
  /** Stops embedding and reranking when the client goes away. */
  signal?: AbortSignal;
}

export interface QueryResult {
  text: string;
  score: number;
  document_id: string;
  file: string;
  chunk_id: string;
  title: string | null;
  metadata: Metadata;
  /** Each retriever's own score, where computed (dense, hybrid or reranked queries). */
  scores?: { lexical?: number; dense?: number; rerank?: number };
}

export interface QueryOutput {
  results: QueryResult[];
  elapsedMs: number;
  /** How candidates were found (the default resolved). */
  retrieval?: "lexical" | "dense" | "hybrid";
  /** For answer composition. */
  loaded: LoadedIndex;
  /** With a filter: the candidates it examined, and whether FILTER_MAX_CANDIDATES cut the search. */
  filter?: FilterCut;
}

/**
 * One index as served: its meta at the version the engine index was brought to, and the engine index
 * (postings and statistics; chunk texts stay in the store). The engine index object lives on across
 * versions (writes, catch-ups and merges change it in place); a LoadedIndex is made per version.
 */
export interface LoadedIndex {
  meta: IndexMeta;
  engine: SegmentedIndex;
}

/** Segments and bytes read from the store into the cache, and merges committed, by this process. */
export interface SegmentCounters {
  segmentsLoaded: number;
  bytesLoaded: number;
  mergesCompleted: number;
}

/** One index's segments and this process's counters of it, for GET /rag/stats/{name}. */
export interface IndexStats {
  meta: IndexMeta;
  segments: SegmentInfo[];
  deletedChunks: number;
  /** The live chunks' vectors as loaded (SegmentedIndex.vectorStats); null without embeddings. */
  vectors?: { count: number; dimension: number; bytes: number } | null;
  merges: { completed: number; running: number };
  loaded: { segmentsLoaded: number; bytesLoaded: number };
}

/** Where the service reports what it drops on the floor (a merge that could not be committed). */
export interface ServiceLog {
  warn(details: object, message: string): void;
}

export interface RagServiceOptions {
  /** Picks the segments to merge after a write; Lucene's tiered defaults when left out. */
  mergePolicy?: TieredMergePolicy;
  log?: ServiceLog;
  /**
   * Where the loaded indices keep the vector codes of segments with an HNSW graph (search/directory.ts:
   * the server's VECTOR_SPILL_DIR); left out, in memory.
   */
  vectorDirectory?: Directory;
}
