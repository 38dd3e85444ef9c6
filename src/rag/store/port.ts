/**
 * The narrow port a store implements: the rows it reads and writes inside one transaction, nothing
 * more. What a write, a merge, a delete or a load means (the order of its steps, its checks, the index
 * row after it) is written once, as scripts over this port (write-plan.ts, read-plan.ts); a store
 * supplies the statements and the transaction around them (docs/design/storage.md).
 *
 * A script is a generator that yields each port call's result: a value from a synchronous store
 * (better-sqlite3, whose transactions must not span an await) or a promise from an asynchronous one
 * (pg). `runSync` and `runAsync` drive the same script either way, so the SQLite store keeps its
 * synchronous transactions and the PostgreSQL store its awaits. (Babel's gensync does this too, but
 * wants every operation wrapped as one of its own functions; over a port of plain methods, the two
 * small drivers below are less code than the wrapping.)
 */
import type { ScorerName } from "../search/types.js";
import type { SegmentRow, TombstoneRow } from "./common.js";
import type {
  DocumentRecord,
  IndexChange,
  IndexKey,
  IndexSettings,
  SegmentRecord,
  StoredChunk,
  Tombstone,
  VectorStorage,
} from "./types.js";

export type Awaitable<T> = T | PromiseLike<T>;

/** A store script: yields what port calls return, resumed with their values. */
export type Script<T> = Generator<Awaitable<unknown>, T, unknown>;

/** One port call inside a script: `const row = yield* step(tx.readIndex(key))`. */
export function* step<T>(value: Awaitable<T>): Script<T> {
  return (yield value) as T;
}

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  typeof (value as { then?: unknown } | null)?.then === "function";

/** Runs a script over a synchronous port (inside a better-sqlite3 transaction function). */
export function runSync<T>(script: Script<T>): T {
  let next = script.next();
  while (next.done !== true) {
    if (isThenable(next.value)) throw new TypeError("a synchronous store's port returned a promise");
    next = script.next(next.value);
  }
  return next.value;
}

/**
 * Runs a script over a synchronous port in slices: after each step that ends a slice of `sliceMs`,
 * the event loop runs before the next (a large write's inserts, on a connection of their own that
 * holds the transaction in between).
 */
export async function runSliced<T>(script: Script<T>, sliceMs: number): Promise<T> {
  let sliceStart = performance.now();
  let next = script.next();
  while (next.done !== true) {
    if (isThenable(next.value)) throw new TypeError("a synchronous store's port returned a promise");
    const value = next.value;
    if (performance.now() - sliceStart >= sliceMs) {
      await new Promise((resume) => setImmediate(resume));
      sliceStart = performance.now();
    }
    next = script.next(value);
  }
  return next.value;
}

/** Runs a script over an asynchronous port; a rejected step is thrown into the script where it stands. */
export async function runAsync<T>(script: Script<T>): Promise<T> {
  let next = script.next();
  while (next.done !== true) {
    let value: unknown;
    try {
      value = await next.value;
    } catch (error) {
      next = script.throw(error);
      continue;
    }
    next = script.next(value);
  }
  return next.value;
}

/**
 * An index row as a store reads it: `Big` is how its 64-bit columns arrive (numbers from SQLite,
 * strings from PostgreSQL's bigint), `Time` its timestamps (ISO strings, or Dates from PostgreSQL).
 */
export interface IndexRowOf<Big extends number | string, Time extends string | Date> {
  id: Big;
  tenant_id: string;
  name: string;
  scorer: ScorerName;
  chunk_size: number;
  overlap: number;
  documents_count: number;
  chunks_count: number;
  vocabulary_size: number;
  size_bytes: Big;
  version: Big;
  created_at: Time;
  updated_at: Time;
  next_key: Big;
  next_segment_id: number;
  total_length: Big;
  segments_count: number;
  deleted_chunks_count: number;
  vector_model: string | null;
  vector_dimension: number | null;
  vector_storage: string | null;
}

/** An index row of either store. */
export type AnyIndexRow = IndexRowOf<number | string, string | Date>;

/** What the index row holds after a write or merge: every column a store updates. */
export interface IndexUpdate {
  scorer: ScorerName;
  chunkSize: number;
  overlap: number;
  documentsCount: number;
  chunksCount: number;
  vocabularySize: number;
  sizeBytes: number;
  version: number;
  /** ISO 8601: updated_at. */
  now: string;
  nextKey: number;
  nextSegmentId: number;
  totalLength: number;
  segmentsCount: number;
  deletedChunksCount: number;
  vectorModel: string | null;
  vectorDimension: number | null;
  vectorStorage: VectorStorage | null;
}

/** A document to insert with its metadata serialised (common.ts serialiseDocument) and its size. */
export interface SerialisedDocument {
  document: DocumentRecord;
  /** The chunks to insert with it: all of them, or a run of them (a large document goes in parts). */
  chunks: readonly StoredChunk[];
  metadata: string;
  /** The metadata of `chunks`, in their order. */
  chunkMetadata: readonly string[];
  /** UTF-8 bytes of the text, metadata and chunks (the whole document's). */
  bytes: number;
  /** The document's chunks in all (its row's count). */
  chunkCount: number;
  /** Whether this part inserts the document's row (its first part); later parts add chunks only. */
  documentRow: boolean;
}

/** What a removed document row held. */
export interface RemovedDocument {
  chunksCount: number;
  sizeBytes: number;
}

/** What a merge's removed segment rows held (vector parts included) and how many tombstones went. */
export interface RemovedSegments {
  segments: ReadonlyArray<{ documentCount: number; sizeBytes: number }>;
  tombstones: number;
}

/**
 * What every transaction reads: the index row. A store whose writers are serialised by a lock (rather
 * than by its transaction, as SQLite's BEGIN IMMEDIATE is) takes it here, before the row is read.
 */
export interface IndexRowReader<Row extends AnyIndexRow> {
  readIndex(key: IndexKey): Awaitable<Row | undefined>;
}

/**
 * One write transaction's statements. Every row named by `id` is of that index; a store that keeps
 * tenants in shared tables filters by the tenant of the transaction's key as well.
 */
export interface IndexTransaction<Row extends AnyIndexRow> extends IndexRowReader<Row> {
  /** The next version from the store-wide counter (never reused, even after a rollback). */
  nextVersion(): Awaitable<number>;
  /** Inserts the row of a new index: its settings, every counter at zero, created and updated `now`. */
  insertIndex(key: IndexKey, settings: IndexSettings, version: number, now: string): Awaitable<Row["id"]>;
  /** Deletes every tombstone, segment (vector parts included), chunk and document row of the index. */
  clearIndex(id: Row["id"]): Awaitable<void>;
  /** Deletes the index row (after clearIndex). */
  deleteIndex(id: Row["id"]): Awaitable<void>;
  /** Deletes these documents' chunk rows, then their document rows: what each removed document row held. */
  removeDocuments(id: Row["id"], documentIds: readonly string[]): Awaitable<readonly RemovedDocument[]>;
  /** Inserts a segment row (created at `version`) and its vectors cut in parts (vector-codec.ts toParts). */
  insertSegment(id: Row["id"], segment: SegmentRecord, version: number): Awaitable<void>;
  /** The document counts of those of `segmentIds` the index holds (a tombstone's bounds). */
  segmentDocumentCounts(id: Row["id"], segmentIds: readonly number[]): Awaitable<ReadonlyMap<number, number>>;
  /** Inserts tombstones (already checked against their segments), created at `version`. */
  insertTombstones(id: Row["id"], tombstones: readonly Tombstone[], version: number): Awaitable<void>;
  /**
   * Inserts documents (the parts with `documentRow`), then their chunks (a chunk row references its
   * document row, inserted by this call or an earlier one of the same transaction).
   */
  insertDocuments(id: Row["id"], documents: readonly SerialisedDocument[]): Awaitable<void>;
  /** Documents in all the index's segments, deleted ones included. */
  segmentDocumentTotal(id: Row["id"]): Awaitable<number>;
  /** Deletes these segments' tombstones, then the segments (their vector parts with them). */
  removeSegments(id: Row["id"], segmentIds: readonly number[]): Awaitable<RemovedSegments>;
  /** Stores the index row a script computed; the row as stored. */
  updateIndex(id: Row["id"], update: IndexUpdate): Awaitable<Row>;
  /** Optional: tells every process sharing the store, when (and only if) the transaction commits. */
  announce?(change: IndexChange): Awaitable<void>;
}

/** One read transaction's statements: everything they read comes from one committed version. */
export interface IndexSnapshot<Row extends AnyIndexRow> extends IndexRowReader<Row> {
  /** Segment rows ascending by id: all of them, or (`createdAfter`) those created after a version. */
  segments(id: Row["id"], createdAfter: number | null): Awaitable<readonly SegmentRow[]>;
  /** The ids of every segment the index holds, ascending. */
  segmentIds(id: Row["id"]): Awaitable<readonly number[]>;
  /** Tombstones ascending by segment then ordinal: all, or (`createdAfter`) those created after a version. */
  tombstones(id: Row["id"], createdAfter: number | null): Awaitable<readonly TombstoneRow[]>;
  /** A segment's vector parts in order ([]: it has none). */
  vectorParts(id: Row["id"], segmentId: number): Awaitable<readonly Uint8Array[]>;
}
