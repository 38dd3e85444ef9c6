/**
 * The storage boundary of the RAG app. SQLite (one process, embedded) and PostgreSQL (shared by
 * several replicas) implement it; both keep every write all-or-nothing so that a crash leaves an
 * index as it was before the write.
 */
import type { ScorerName, SegmentRecord, Tombstone } from "../search/types.js";
import type { VectorStorage } from "../search/vectors/quantize.js";
import type { ObjectRecords } from "./openai-objects.js";

export type { VectorStorage };

/**
 * The embedding space of an index with vectors: the model that made them, their dimension and how
 * the engine stores them. Every segment of such an index carries one vector per chunk.
 */
export interface VectorSpace {
  model: string;
  dimension: number;
  storage: VectorStorage;
}

/** The engine's segment and tombstone rows, as the stores keep them (one definition, in search/types). */
export type { SegmentRecord, Tombstone };

export type Metadata = Record<string, unknown>;

/** A source document as accepted by a build or an append. */
export interface DocumentRecord {
  /** Caller's id, or one the service assigned. Unique within an index. */
  id: string;
  title: string | null;
  text: string;
  metadata: Metadata;
  /** Source path (file builds) or null for inline documents. */
  source: string | null;
  /** sha256 (hex) of the source file's bytes (folder sync), or null. */
  contentHash: string | null;
}

/** One chunk of a document; what the search engine indexes. */
export interface ChunkRecord {
  /** `<documentId>#<seq>`, stable for a given document version. */
  chunkId: string;
  documentId: string;
  /** Position of the chunk within its document, from 0. */
  seq: number;
  text: string;
  /** Character offsets of the chunk in its document's text. */
  start: number;
  end: number;
  /** Document metadata plus chunk-level facts (e.g. page). */
  metadata: Metadata;
}

export interface IndexKey {
  tenantId: string;
  name: string;
}

export interface IndexSettings {
  scorer: ScorerName;
  chunkSize: number;
  overlap: number;
}

/** The engine's counters, persisted with the index so that keys and segment ids are never reused. */
export interface EngineState {
  /** The next document key the engine will assign (keys are u32, never reused while a segment holds them). */
  nextKey: number;
  /** The next segment id the engine will assign. */
  nextSegmentId: number;
  /** Sum of the live documents' lengths (an integer, so exact). */
  totalLength: number;
}

/** A chunk as stored: the record plus the engine key of the document the engine made of it. */
export interface StoredChunk extends ChunkRecord {
  engineKey: number;
}

export interface IndexMeta extends IndexKey, IndexSettings {
  documentsCount: number;
  /** Live chunks (= live engine documents). */
  chunksCount: number;
  vocabularySize: number;
  /** Segments the index holds. */
  segmentsCount: number;
  /** Tombstones the index holds (deleted chunks still present in a segment until a merge drops them). */
  deletedChunksCount: number;
  engine: EngineState;
  /** The index's embedding space; null for a lexical-only index. */
  vectors: VectorSpace | null;
  /** Bytes the index occupies in the store (documents, chunks, segment and vector bytes). */
  sizeBytes: number;
  /** ISO 8601. */
  createdAt: string;
  updatedAt: string;
  /**
   * Increases on every committed write and merge; caches compare it to know they are stale. Drawn
   * from one store-wide counter, so it is never reused, even by an index deleted and created again.
   */
  version: number;
}

/**
 * One atomic change to an index. The store applies all of it in one transaction or none of it, and
 * touches only the rows it names (its segment, its tombstones, its documents and chunks, the index
 * row): its cost grows with the change, not with the index.
 * - `create`: fails with a 409 ApiError ("conflict") if the index exists.
 * - `replace`: every segment, tombstone, document and chunk row of the index goes (created if
 *   missing), then the write's are added.
 * - `update`: documents in `deleteDocumentIds` and documents whose id is in `upsert` lose their
 *   document and chunk rows (their engine documents are deleted by `tombstones`, which the caller
 *   computes); then `upsert` is added. Fails with a 404 ApiError ("not_found") if the index is missing.
 *   Deleting an id the index does not hold is a no-op.
 * In every mode `settings`, `engine` and `vocabularySize` are stored as given: they describe the index
 * *after* the change. The same document id twice in `upsert` is a 400 ApiError. A 500 ApiError, changing
 * nothing: a chunk's engine key that the index already holds or that is not below `engine.nextKey`;
 * chunks without a segment; a segment id the index holds or not below `engine.nextSegmentId`; a
 * tombstone on a segment the index lacks, beyond its documents, or given before; and an index whose
 * live engine documents (segment documents minus tombstones) would not equal its chunks after the
 * change (e.g. a deleted document whose chunks got no tombstone).
 */
export interface IndexWrite {
  key: IndexKey;
  mode: "create" | "replace" | "update";
  settings: IndexSettings;
  upsert: Array<{ document: DocumentRecord; chunks: StoredChunk[] }>;
  /** Their document and chunk rows go (their tombstones come in `tombstones`). */
  deleteDocumentIds: string[];
  /** The write's one new segment (null: the write adds no chunk). */
  segment: SegmentRecord | null;
  /** Chunks this write deletes (old versions of upserted documents included). */
  tombstones: Tombstone[];
  engine: EngineState;
  vocabularySize: number;
  /**
   * The index's embedding space after the write. Left out: an update keeps the index's, a create or
   * replace makes a lexical index. When it is not null, the write's segment must carry `vectors` (one
   * per document, of this dimension and storage), and must not otherwise (a 500 changing nothing).
   */
  vectors?: VectorSpace | null;
  /**
   * Version the writer read (0: the index was absent); the write fails with a 409
   * StaleVersionError (an ApiError "conflict", see common.ts) if the stored one differs. null: no check.
   */
  expectedVersion: number | null;
}

/**
 * A committed merge: `removedSegmentIds` (and their tombstones) are replaced by `segment`, whose own
 * tombstones are the deletes that happened while the merge ran. It bumps the version (replicas then
 * reload segments). Fails with a StaleVersionError if the stored version is not `expectedVersion`,
 * and with a 500 ApiError if a removed segment is missing.
 */
export interface MergeWrite {
  key: IndexKey;
  expectedVersion: number;
  removedSegmentIds: number[];
  segment: SegmentRecord;
  /** Tombstones of the new segment. */
  tombstones: Tombstone[];
  engine: EngineState;
}

/** A segment as loaded, with the ordinals of its deleted documents (ascending). */
export type LoadedSegment = SegmentRecord & { deleted: number[] };

/**
 * Everything the engine needs to serve one index version; segments in ascending id order.
 * An index written by a Lectern before the segmented index (old format) has chunks but no segments:
 * `segments` is empty while `meta.chunksCount > 0`. The service then re-indexes it from its chunk
 * texts (`getDocumentChunks`), in engine key order (the migration gave each chunk its old ordinal).
 */
export interface StoredIndex {
  meta: IndexMeta;
  segments: LoadedSegment[];
}

/**
 * What changed in an index after `sinceVersion` (for a replica that holds that version). A segment in
 * `addedSegments` replaces any segment of the same id the replica holds (after a `replace`, or a
 * delete and re-create, segment ids may be used again). With `sinceVersion` >= the current version,
 * nothing is added and `tombstones` is empty.
 */
export interface IndexDelta {
  meta: IndexMeta;
  /** Segments created after sinceVersion, with all their tombstones. */
  addedSegments: LoadedSegment[];
  /** Every segment id the index has now (a replica drops the others). */
  liveSegmentIds: number[];
  /** Tombstones created after sinceVersion on segments NOT in addedSegments. */
  tombstones: Tombstone[];
  /** Segment bytes in this delta, their vectors' included (for stats/metrics). */
  bytesLoaded: number;
}

/** A live chunk with its document's title and source, as a query's hit needs it. */
export interface ChunkHit extends StoredChunk {
  title: string | null;
  source: string | null;
}

/** A committed change to one index, announced to every process that shares the store. */
export interface IndexChange {
  tenantId: string;
  name: string;
  /** The version the write committed, or null when the index was deleted. */
  version: number | null;
}

/**
 * A subscription to the store's changes. Changes are delivered after they commit, in commit order per
 * index, to every subscriber in every process. While `live` is false (not connected yet, or the feed
 * was interrupted), changes may be missed: a cache must then check versions itself. Each time the feed
 * (re)connects `epoch` increases, so a cache can tell what it validated before a gap it cannot trust.
 */
export interface ChangeFeed {
  readonly live: boolean;
  readonly epoch: number;
  close(): void;
}

/** A document's chunks (engine key and text, in seq order) and title, by document id. */
export type DocumentChunks = Map<
  string,
  { title: string | null; chunks: Array<{ engineKey: number; text: string }> }
>;

/** What folder sync compares a document by. */
export interface DocumentListing {
  id: string;
  source: string | null;
  contentHash: string | null;
}

export interface IndexStore {
  readonly kind: "sqlite" | "postgres";
  /** OpenAI's vector store, vector store file and file batch records (openai-objects.ts). */
  readonly objects: ObjectRecords;
  listIndices(tenantId: string | null): Promise<IndexMeta[]>;
  getMeta(key: IndexKey): Promise<IndexMeta | undefined>;
  /** Meta and every segment with its tombstones, from one committed version. */
  loadIndex(key: IndexKey): Promise<StoredIndex | undefined>;
  /** What changed after `sinceVersion`; undefined if the index is missing. */
  loadChanges(key: IndexKey, sinceVersion: number): Promise<IndexDelta | undefined>;
  /**
   * Live chunks by engine key (order of the result: as `engineKeys`; unknown keys left out). One or a
   * few statements for any number of keys. An unknown index gives [] (as do getDocumentChunks,
   * listDocuments and hasDocument: empty, [] and false).
   */
  getChunks(key: IndexKey, engineKeys: readonly number[]): Promise<ChunkHit[]>;
  /** The chunks (key + text, in seq order) and title of each given document that exists. */
  getDocumentChunks(key: IndexKey, documentIds: readonly string[]): Promise<DocumentChunks>;
  /** Every document's id, source and content hash (folder sync). */
  listDocuments(key: IndexKey): Promise<DocumentListing[]>;
  hasDocument(key: IndexKey, documentId: string): Promise<boolean>;
  write(change: IndexWrite): Promise<IndexMeta>;
  /** Swaps merged segments for their merge result; bumps the version. */
  commitMerge(change: MergeWrite): Promise<IndexMeta>;
  deleteIndex(key: IndexKey): Promise<boolean>;
  /** Total bytes used by the store on disk (or in the database). */
  sizeBytes(): Promise<number>;
  close(): Promise<void>;
  /**
   * Optional: calls `listener` for every committed write, merge and delete of any index, by any
   * process sharing the store (PostgreSQL: LISTEN/NOTIFY). A cache may then serve without asking the
   * store for the version on each read, ask `loadChanges` for what changed, and drop an index when
   * told. Stores without it (SQLite, where every read checks the version at almost no cost) leave it out.
   */
  subscribe?(listener: (change: IndexChange) => void): ChangeFeed;
  /**
   * Optional: runs `work` while holding a lock on the index that writers in every process sharing the
   * store take, so that a read-modify-write (prepare a segment, write with `expectedVersion`) by one
   * replica waits for another's instead of failing with a stale version.
   * It is an aid, not the guarantee: `write` still checks `expectedVersion`.
   */
  withWriteLock?<T>(key: IndexKey, work: () => Promise<T>): Promise<T>;
}

/** What a list of indices holds, summed: /rag/stats and the store gauges of /metrics read the same figures. */
export function indexTotals(indices: readonly IndexMeta[]) {
  const sum = (field: "documentsCount" | "chunksCount" | "segmentsCount" | "deletedChunksCount") =>
    indices.reduce((total, meta) => total + meta[field], 0);
  return {
    indices: indices.length,
    documents: sum("documentsCount"),
    chunks: sum("chunksCount"),
    segments: sum("segmentsCount"),
    deletedChunks: sum("deletedChunksCount"),
  };
}
