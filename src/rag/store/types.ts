/**
 * The storage boundary of the RAG app. SQLite (one process, embedded) and PostgreSQL (shared by
 * several replicas) implement it; both keep every write all-or-nothing so that a crash leaves an
 * index as it was before the write.
 */
import type { ScorerName } from "../search/types.js";

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

export interface IndexMeta extends IndexKey, IndexSettings {
  documentsCount: number;
  chunksCount: number;
  vocabularySize: number;
  /** Bytes the index occupies in the store (documents, chunks and serialised engine index). */
  sizeBytes: number;
  /** ISO 8601. */
  createdAt: string;
  updatedAt: string;
  /**
   * Increases on every committed write; caches compare it to know they are stale. Drawn from one
   * store-wide counter, so it is never reused, even by an index deleted and created again.
   */
  version: number;
}

/**
 * Everything needed to serve queries for one index version: the serialised engine index and the
 * chunks in engine ordinal order (chunks[i] is engine document i), with their documents.
 */
export interface IndexSnapshot {
  meta: IndexMeta;
  engineIndex: Uint8Array;
  chunks: ChunkRecord[];
  documents: Map<string, Pick<DocumentRecord, "id" | "title" | "source" | "metadata">>;
}

/**
 * One atomic change to an index. The store applies all of it in one transaction or none of it.
 * - `create`: fails with a 409 ApiError ("conflict") if the index exists.
 * - `replace`: the index afterwards holds exactly `upsert` (created if missing).
 * - `update`: documents in `deleteDocumentIds` and documents whose id is in `upsert` lose their old
 *   rows; then `upsert` is added. Fails with a 404 ApiError ("not_found") if the index is missing.
 *   Deleting an id the index does not hold is a no-op.
 * In every mode `settings` are stored as given, and `engineIndex` and `chunkOrder` describe the index
 * *after* the change: chunkOrder[i] is the chunkId of engine document i, and it covers every chunk of
 * the index after the change exactly once (else the write fails with a 500 ApiError, changing nothing).
 * The same document id twice in `upsert` is a 400 ApiError.
 */
export interface IndexWrite {
  key: IndexKey;
  mode: "create" | "replace" | "update";
  settings: IndexSettings;
  upsert: Array<{ document: DocumentRecord; chunks: ChunkRecord[] }>;
  deleteDocumentIds: string[];
  engineIndex: Uint8Array;
  chunkOrder: string[];
  vocabularySize: number;
  /**
   * Version the writer read (0: the index was absent); the write fails with a 409
   * StaleVersionError (an ApiError "conflict", see common.ts) if the stored one differs. null: no check.
   */
  expectedVersion: number | null;
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

export interface IndexStore {
  readonly kind: "sqlite" | "postgres";
  listIndices(tenantId: string | null): Promise<IndexMeta[]>;
  getMeta(key: IndexKey): Promise<IndexMeta | undefined>;
  loadSnapshot(key: IndexKey): Promise<IndexSnapshot | undefined>;
  /**
   * Chunks of an index in current engine order, for rebuilding the engine index on change.
   * A missing index is a 404 ApiError.
   */
  loadChunks(key: IndexKey): Promise<ChunkRecord[]>;
  write(change: IndexWrite): Promise<IndexMeta>;
  deleteIndex(key: IndexKey): Promise<boolean>;
  /** Total bytes used by the store on disk (or in the database). */
  sizeBytes(): Promise<number>;
  close(): Promise<void>;
  /**
   * Optional: calls `listener` for every committed write and delete of any index, by any process
   * sharing the store (PostgreSQL: LISTEN/NOTIFY). A cache may then serve without asking the store
   * for the version on each read, and drop an index when told. Stores without it (SQLite, where
   * every read checks the version at almost no cost) leave it out.
   */
  subscribe?(listener: (change: IndexChange) => void): ChangeFeed;
  /**
   * Optional: runs `work` while holding a lock on the index that writers in every process sharing the
   * store take, so that a read-modify-write (read the chunks, rebuild the engine index, write with
   * `expectedVersion`) by one replica waits for another's instead of failing with a stale version.
   * It is an aid, not the guarantee: `write` still checks `expectedVersion`.
   */
  withWriteLock?<T>(key: IndexKey, work: () => Promise<T>): Promise<T>;
}
