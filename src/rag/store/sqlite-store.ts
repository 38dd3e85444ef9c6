/**
 * The embedded store of the RAG app: one SQLite database file, `<DATA_DIR>/lectern.db`.
 *
 * Durability: WAL journal with `synchronous=FULL`, so the WAL is fsynced at every commit and an
 * acknowledged write survives a power loss, not only a process crash. Writes are whole builds or
 * document batches (one transaction each), so the extra fsync per commit costs nothing noticeable.
 *
 * Atomicity: every `write` and `commitMerge` runs in one `BEGIN IMMEDIATE` transaction; anything
 * thrown inside it, or a crash before COMMIT, leaves the index exactly as it was.
 *
 * Cost: a write touches only its own rows (its segment, its tombstones, its documents and chunks, the
 * index row, whose counters it updates incrementally); every statement of it is an indexed lookup or
 * insert, so a write costs what it adds whatever the size of the index. Queries read their top-k
 * chunks by engine key (`chunks_by_engine_key`).
 *
 * Versions come from one store-wide counter, so they increase on every committed write and are
 * never reused, even when an index is deleted and created again under the same name: a cache
 * holding (tenant, name, version) can never mistake a new index for an old one.
 */
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { Worker } from "node:worker_threads";

import Database from "better-sqlite3";

import { storageFull } from "../../core/errors.js";
import { toParts } from "../search/vectors/vector-codec.js";
import {
  asBuffer,
  chunkHitsInKeyOrder,
  internal,
  label,
  validateMerge,
  validateWrite,
  type ChunkHitRow,
  type SegmentRow,
  type TombstoneRow,
} from "./common.js";
import {
  runSliced,
  runSync,
  type IndexSnapshot,
  type IndexTransaction,
  type RemovedDocument,
  type RemovedSegments,
  type SerialisedDocument,
} from "./port.js";
import { objectsTableSql, sqliteObjects, type ObjectRecords } from "./openai-objects.js";
import { loadChanges, loadIndex } from "./read-plan.js";
import { StorageReserve } from "./reserve.js";
import type {
  ChunkHit,
  DocumentChunks,
  DocumentListing,
  IndexDelta,
  IndexKey,
  IndexMeta,
  IndexSettings,
  IndexStore,
  IndexWrite,
  MergeWrite,
  Metadata,
  SegmentRecord,
  StoredIndex,
  Tombstone,
} from "./types.js";
import {
  META_COLUMNS,
  applyMerge,
  applyWrite,
  dropIndex,
  toMeta,
  type IndexRowOf,
  type IndexUpdate,
} from "./write-plan.js";

export const SQLITE_FILE_NAME = "lectern.db";

/** Milliseconds a writer waits for another process's write lock before failing with SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 10_000;
/** better-sqlite3 as a plain script requires it (checkpointOffThread). */
const betterSqlitePath = createRequire(import.meta.url).resolve("better-sqlite3");

/**
 * Schema migrations, applied in order at open; `PRAGMA user_version` holds how many have run.
 * Append new entries, never edit a released one.
 */
export const SQLITE_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE store_state (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    -- Last version given to a committed write, store-wide.
    last_version INTEGER NOT NULL
  );
  INSERT INTO store_state (id, last_version) VALUES (1, 0);

  CREATE TABLE indices (
    id INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    name TEXT NOT NULL,
    scorer TEXT NOT NULL CHECK (scorer IN ('tfidf', 'bm25')),
    chunk_size INTEGER NOT NULL,
    overlap INTEGER NOT NULL,
    documents_count INTEGER NOT NULL,
    chunks_count INTEGER NOT NULL,
    vocabulary_size INTEGER NOT NULL,
    size_bytes INTEGER NOT NULL,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    -- Large values last, so reading the metadata columns never touches their overflow pages.
    -- JSON array of chunk ids: chunk_order[i] is the chunk that is engine document i.
    chunk_order TEXT NOT NULL,
    engine_index BLOB NOT NULL,
    UNIQUE (tenant_id, name)
  );

  CREATE TABLE documents (
    index_id INTEGER NOT NULL REFERENCES indices (id) ON DELETE CASCADE,
    doc_id TEXT NOT NULL,
    chunks_count INTEGER NOT NULL,
    -- UTF-8 bytes of this document's text, metadata and chunks.
    size_bytes INTEGER NOT NULL,
    title TEXT,
    source TEXT,
    metadata TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (index_id, doc_id)
  );

  CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    index_id INTEGER NOT NULL,
    doc_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    chunk_id TEXT NOT NULL,
    start_offset INTEGER NOT NULL,
    end_offset INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    text TEXT NOT NULL,
    FOREIGN KEY (index_id, doc_id) REFERENCES documents (index_id, doc_id) ON DELETE CASCADE
  );
  CREATE UNIQUE INDEX chunks_by_id ON chunks (index_id, chunk_id);
  CREATE UNIQUE INDEX chunks_by_document ON chunks (index_id, doc_id, seq);
  `,
  // The segmented index (#14). An index of the old format (one engine blob and a JSON chunk order)
  // keeps its documents and chunks, each chunk getting its position in the old order as engine key,
  // and has no segment: the service re-indexes it from its chunk texts when it first loads it.
  `
  ALTER TABLE indices ADD COLUMN next_key INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE indices ADD COLUMN next_segment_id INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE indices ADD COLUMN total_length INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE indices ADD COLUMN segments_count INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE indices ADD COLUMN deleted_chunks_count INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE documents ADD COLUMN content_hash TEXT;
  ALTER TABLE chunks ADD COLUMN engine_key INTEGER;

  CREATE TEMP TABLE old_chunk_positions (
    index_id INTEGER NOT NULL,
    chunk_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (index_id, chunk_id)
  ) WITHOUT ROWID;
  INSERT INTO old_chunk_positions
    SELECT i.id, j.value, j.key FROM indices AS i, json_each(i.chunk_order) AS j;
  UPDATE chunks SET engine_key = p.position
    FROM old_chunk_positions AS p
    WHERE p.index_id = chunks.index_id AND p.chunk_id = chunks.chunk_id;
  DROP TABLE old_chunk_positions;
  UPDATE indices SET
    next_key = json_array_length(chunk_order),
    size_bytes = (SELECT coalesce(sum(d.size_bytes), 0) FROM documents AS d WHERE d.index_id = indices.id);
  ALTER TABLE indices DROP COLUMN chunk_order;
  ALTER TABLE indices DROP COLUMN engine_index;
  CREATE UNIQUE INDEX chunks_by_engine_key ON chunks (index_id, engine_key);

  -- Immutable once written; a merge deletes some and inserts their replacement.
  CREATE TABLE segments (
    index_id INTEGER NOT NULL REFERENCES indices (id) ON DELETE CASCADE,
    segment_id INTEGER NOT NULL,
    doc_count INTEGER NOT NULL,
    created_version INTEGER NOT NULL,
    -- The engine's bytes, last so that reading the other columns never touches their overflow pages.
    bytes BLOB NOT NULL,
    PRIMARY KEY (index_id, segment_id)
  );

  CREATE TABLE tombstones (
    index_id INTEGER NOT NULL,
    segment_id INTEGER NOT NULL,
    ordinal INTEGER NOT NULL,
    created_version INTEGER NOT NULL,
    PRIMARY KEY (index_id, segment_id, ordinal),
    FOREIGN KEY (index_id, segment_id) REFERENCES segments (index_id, segment_id) ON DELETE CASCADE
  ) WITHOUT ROWID;
  -- What a replica asks for: the tombstones created after the version it holds.
  CREATE INDEX tombstones_by_version ON tombstones (index_id, created_version);
  `,
  `
  -- The index's embedding space (all null: a lexical-only index).
  ALTER TABLE indices ADD COLUMN vector_model TEXT;
  ALTER TABLE indices ADD COLUMN vector_dimension INTEGER;
  ALTER TABLE indices ADD COLUMN vector_storage TEXT CHECK (vector_storage IN ('f32', 'f16', 'i8'));

  -- A segment's vectors (vectors/vector-codec.ts), cut in parts (toParts): written and dropped with it.
  CREATE TABLE segment_vectors (
    index_id INTEGER NOT NULL,
    segment_id INTEGER NOT NULL,
    part INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (index_id, segment_id, part),
    FOREIGN KEY (index_id, segment_id) REFERENCES segments (index_id, segment_id) ON DELETE CASCADE
  );
  `,
  // OpenAI's vector stores, vector store files and file batches (openai-objects.ts).
  objectsTableSql("openai_objects", "TEXT", "INTEGER"),
];

/** SQLite gives integers as numbers and keeps timestamps as ISO text. */
type IndexRow = IndexRowOf<number, string>;

/** Every statement the store runs, prepared once per connection. */
function prepareStatements(db: Database.Database) {
  return {
    meta: db.prepare<[string, string], IndexRow>(
      `SELECT ${META_COLUMNS} FROM indices WHERE tenant_id = ? AND name = ?`,
    ),
    indexId: db
      .prepare<[string, string], number>("SELECT id FROM indices WHERE tenant_id = ? AND name = ?")
      .pluck(),
    listAll: db.prepare<[], IndexRow>(`SELECT ${META_COLUMNS} FROM indices ORDER BY tenant_id, name`),
    listTenant: db.prepare<[string], IndexRow>(
      `SELECT ${META_COLUMNS} FROM indices WHERE tenant_id = ? ORDER BY name`,
    ),
    nextVersion: db
      .prepare<[], number>("UPDATE store_state SET last_version = last_version + 1 RETURNING last_version")
      .pluck(),
    insertIndex: db.prepare<[{ tenantId: string; name: string; version: number; now: string } & object]>(
      `INSERT INTO indices (tenant_id, name, scorer, chunk_size, overlap, documents_count, chunks_count,
         vocabulary_size, size_bytes, version, created_at, updated_at)
       VALUES (@tenantId, @name, @scorer, @chunkSize, @overlap, 0, 0, 0, 0, @version, @now, @now)`,
    ),
    updateIndex: db.prepare<[IndexUpdate & { id: number }], IndexRow>(
      `UPDATE indices SET scorer = @scorer, chunk_size = @chunkSize, overlap = @overlap,
         documents_count = @documentsCount, chunks_count = @chunksCount, vocabulary_size = @vocabularySize,
         size_bytes = @sizeBytes, version = @version, updated_at = @now, next_key = @nextKey,
         next_segment_id = @nextSegmentId, total_length = @totalLength, segments_count = @segmentsCount,
         deleted_chunks_count = @deletedChunksCount, vector_model = @vectorModel,
         vector_dimension = @vectorDimension, vector_storage = @vectorStorage
       WHERE id = @id
       RETURNING ${META_COLUMNS}`,
    ),
    deleteIndex: db.prepare<[number]>("DELETE FROM indices WHERE id = ?"),
    deleteAllTombstones: db.prepare<[number]>("DELETE FROM tombstones WHERE index_id = ?"),
    deleteAllSegments: db.prepare<[number]>("DELETE FROM segments WHERE index_id = ?"),
    deleteAllChunks: db.prepare<[number]>("DELETE FROM chunks WHERE index_id = ?"),
    deleteAllDocuments: db.prepare<[number]>("DELETE FROM documents WHERE index_id = ?"),
    deleteDocumentChunks: db.prepare<[number, string]>(
      "DELETE FROM chunks WHERE index_id = ? AND doc_id = ?",
    ),
    deleteDocument: db.prepare<[number, string], { chunks_count: number; size_bytes: number }>(
      "DELETE FROM documents WHERE index_id = ? AND doc_id = ? RETURNING chunks_count, size_bytes",
    ),
    insertDocument: db.prepare(
      `INSERT INTO documents (index_id, doc_id, chunks_count, size_bytes, title, source, metadata, text,
         content_hash)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    insertChunk: db.prepare(
      `INSERT INTO chunks (index_id, doc_id, seq, chunk_id, start_offset, end_offset, metadata, text,
         engine_key)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    insertSegment: db.prepare<[number, number, number, number, Buffer]>(
      `INSERT INTO segments (index_id, segment_id, doc_count, created_version, bytes) VALUES (?, ?, ?, ?, ?)`,
    ),
    insertVectorPart: db.prepare<[number, number, number, Buffer]>(
      "INSERT INTO segment_vectors (index_id, segment_id, part, bytes) VALUES (?, ?, ?, ?)",
    ),
    vectorParts: db
      .prepare<[number, number], Buffer>(
        "SELECT bytes FROM segment_vectors WHERE index_id = ? AND segment_id = ? ORDER BY part",
      )
      .pluck(),
    vectorBytes: db
      .prepare<[number, number], number>(
        "SELECT coalesce(sum(length(bytes)), 0) FROM segment_vectors WHERE index_id = ? AND segment_id = ?",
      )
      .pluck(),
    deleteSegment: db.prepare<[number, number], { doc_count: number; size: number }>(
      "DELETE FROM segments WHERE index_id = ? AND segment_id = ? RETURNING doc_count, length(bytes) AS size",
    ),
    deleteSegmentTombstones: db.prepare<[number, number]>(
      "DELETE FROM tombstones WHERE index_id = ? AND segment_id = ?",
    ),
    segmentDocumentCount: db
      .prepare<[number, number], number>(
        "SELECT doc_count FROM segments WHERE index_id = ? AND segment_id = ?",
      )
      .pluck(),
    segmentDocumentTotal: db
      .prepare<[number], number>("SELECT coalesce(sum(doc_count), 0) FROM segments WHERE index_id = ?")
      .pluck(),
    /** One statement for all of a write's tombstones: `[[segmentId, ordinal], …]` as JSON. */
    insertTombstones: db.prepare<[number, number, string]>(
      `INSERT INTO tombstones (index_id, segment_id, ordinal, created_version)
       SELECT ?, t.value ->> 0, t.value ->> 1, ? FROM json_each(?) AS t`,
    ),
    segments: db.prepare<[number], SegmentRow>(
      "SELECT segment_id, doc_count, bytes FROM segments WHERE index_id = ? ORDER BY segment_id",
    ),
    segmentsSince: db.prepare<[number, number], SegmentRow>(
      `SELECT segment_id, doc_count, bytes FROM segments WHERE index_id = ? AND created_version > ?
       ORDER BY segment_id`,
    ),
    segmentIds: db
      .prepare<[number], number>("SELECT segment_id FROM segments WHERE index_id = ? ORDER BY segment_id")
      .pluck(),
    tombstones: db.prepare<[number], TombstoneRow>(
      "SELECT segment_id, ordinal FROM tombstones WHERE index_id = ? ORDER BY segment_id, ordinal",
    ),
    tombstonesSince: db.prepare<[number, number], TombstoneRow>(
      `SELECT segment_id, ordinal FROM tombstones WHERE index_id = ? AND created_version > ?
       ORDER BY segment_id, ordinal`,
    ),
    /** The chunks of the keys in a JSON array, with their documents' title and source. */
    chunksByKey: db.prepare<[number, string], ChunkHitRow<number, string>>(
      `SELECT c.engine_key, c.chunk_id, c.doc_id, c.seq, c.start_offset, c.end_offset, c.metadata, c.text,
         d.title, d.source
       FROM chunks AS c JOIN documents AS d ON d.index_id = c.index_id AND d.doc_id = c.doc_id
       WHERE c.index_id = ? AND c.engine_key IN (SELECT k.value FROM json_each(?) AS k)`,
    ),
    documentTitles: db.prepare<[number, string], { doc_id: string; title: string | null }>(
      `SELECT doc_id, title FROM documents
       WHERE index_id = ? AND doc_id IN (SELECT d.value FROM json_each(?) AS d)`,
    ),
    documentChunks: db.prepare<[number, string], { doc_id: string; engine_key: number; text: string }>(
      `SELECT doc_id, engine_key, text FROM chunks
       WHERE index_id = ? AND doc_id IN (SELECT d.value FROM json_each(?) AS d)
       ORDER BY doc_id, seq`,
    ),
    listDocuments: db.prepare<
      [number],
      { doc_id: string; source: string | null; content_hash: string | null }
    >("SELECT doc_id, source, content_hash FROM documents WHERE index_id = ? ORDER BY doc_id"),
    hasDocument: db
      .prepare<[number, string], number>("SELECT 1 FROM documents WHERE index_id = ? AND doc_id = ?")
      .pluck(),
  };
}

type Statements = ReturnType<typeof prepareStatements>;

/** The store's port (port.ts): its statements, run synchronously inside a better-sqlite3 transaction. */
class SqlitePort implements IndexTransaction<IndexRow>, IndexSnapshot<IndexRow> {
  constructor(private readonly stmt: Statements) {}

  readIndex(key: IndexKey): IndexRow | undefined {
    return this.stmt.meta.get(key.tenantId, key.name);
  }

  nextVersion(): number {
    return this.stmt.nextVersion.get()!;
  }

  insertIndex(key: IndexKey, settings: IndexSettings, version: number, now: string): number {
    const { tenantId, name } = key;
    return Number(this.stmt.insertIndex.run({ ...settings, tenantId, name, version, now }).lastInsertRowid);
  }

  clearIndex(id: number): void {
    this.stmt.deleteAllTombstones.run(id);
    this.stmt.deleteAllSegments.run(id);
    this.stmt.deleteAllChunks.run(id);
    this.stmt.deleteAllDocuments.run(id);
  }

  deleteIndex(id: number): void {
    this.stmt.deleteIndex.run(id);
  }

  removeDocuments(id: number, documentIds: readonly string[]): RemovedDocument[] {
    const removed: RemovedDocument[] = [];
    for (const docId of documentIds) {
      this.stmt.deleteDocumentChunks.run(id, docId);
      const row = this.stmt.deleteDocument.get(id, docId);
      if (row !== undefined) removed.push({ chunksCount: row.chunks_count, sizeBytes: row.size_bytes });
    }
    return removed;
  }

  insertSegment(id: number, segment: SegmentRecord, version: number): void {
    this.stmt.insertSegment.run(id, segment.id, segment.documentCount, version, asBuffer(segment.bytes));
    if (segment.vectors == null) return;
    toParts(segment.vectors).forEach((part, i) =>
      this.stmt.insertVectorPart.run(id, segment.id, i, asBuffer(part)),
    );
  }

  segmentDocumentCounts(id: number, segmentIds: readonly number[]): Map<number, number> {
    const counts = new Map<number, number>();
    for (const segmentId of segmentIds) {
      const count = this.stmt.segmentDocumentCount.get(id, segmentId);
      if (count !== undefined) counts.set(segmentId, count);
    }
    return counts;
  }

  /** One statement for all of them: `[[segmentId, ordinal], …]` as JSON. */
  insertTombstones(id: number, tombstones: readonly Tombstone[], version: number): void {
    const pairs = JSON.stringify(tombstones.map((t) => [t.segmentId, t.ordinal]));
    this.stmt.insertTombstones.run(id, version, pairs);
  }

  insertDocuments(id: number, documents: readonly SerialisedDocument[]): void {
    for (const { document, chunks, metadata, chunkMetadata, bytes, chunkCount, documentRow } of documents) {
      const { title, source, text, contentHash } = document;
      if (documentRow)
        this.stmt.insertDocument.run(
          id,
          document.id,
          chunkCount,
          bytes,
          title,
          source,
          metadata,
          text,
          contentHash,
        );
      chunks.forEach((chunk, i) => {
        const { seq, chunkId, start, end } = chunk;
        this.stmt.insertChunk.run(
          id,
          document.id,
          seq,
          chunkId,
          start,
          end,
          chunkMetadata[i]!,
          chunk.text,
          chunk.engineKey,
        );
      });
    }
  }

  segmentDocumentTotal(id: number): number {
    return this.stmt.segmentDocumentTotal.get(id) ?? 0;
  }

  removeSegments(id: number, segmentIds: readonly number[]): RemovedSegments {
    let tombstones = 0;
    const segments: Array<{ documentCount: number; sizeBytes: number }> = [];
    for (const segmentId of segmentIds) {
      tombstones += this.stmt.deleteSegmentTombstones.run(id, segmentId).changes;
      // Vector parts go with their segment (ON DELETE CASCADE); their bytes count in its size.
      const vectorBytes = this.stmt.vectorBytes.get(id, segmentId) ?? 0;
      const removed = this.stmt.deleteSegment.get(id, segmentId);
      if (removed !== undefined)
        segments.push({ documentCount: removed.doc_count, sizeBytes: removed.size + vectorBytes });
    }
    return { segments, tombstones };
  }

  updateIndex(id: number, update: IndexUpdate): IndexRow {
    return this.stmt.updateIndex.get({ id, ...update })!;
  }

  segments(id: number, createdAfter: number | null): SegmentRow[] {
    return createdAfter === null ? this.stmt.segments.all(id) : this.stmt.segmentsSince.all(id, createdAfter);
  }

  segmentIds(id: number): number[] {
    return this.stmt.segmentIds.all(id);
  }

  tombstones(id: number, createdAfter: number | null): TombstoneRow[] {
    return createdAfter === null
      ? this.stmt.tombstones.all(id)
      : this.stmt.tombstonesSince.all(id, createdAfter);
  }

  vectorParts(id: number, segmentId: number): Buffer[] {
    return this.stmt.vectorParts.all(id, segmentId);
  }
}

/**
 * Runs `work`, its SQLite errors as domain errors: SQLITE_FULL is a full disk (507, what reserve.ts
 * acts on); in a write to `key`, a constraint the schema enforces (a key or tombstone given twice, a
 * tombstone on no segment) is a broken invariant (500).
 */
function translated<T>(work: () => T, key?: IndexKey): T {
  try {
    return work();
  } catch (error) {
    throw translatedError(error, key);
  }
}

/**
 * Characters of text (documents and chunks) above which a write commits in slices (writeInSlices)
 * rather than in one synchronous transaction: about 40 ms of inserts.
 */
export const SLICED_WRITE_CHARS = 4 * 1024 * 1024;
/** How long a slice of a large write's inserts may hold the event loop before it runs, in ms. */
const WRITE_SLICE_MS = 20;

/** Whether `change` is large enough that its inserts would hold the event loop (tens of ms or more). */
function writesInSlices(change: IndexWrite): boolean {
  let chars = change.segment?.bytes.byteLength ?? 0;
  for (const { document, chunks } of change.upsert) {
    chars += document.text.length;
    for (const chunk of chunks) chars += chunk.text.length;
    if (chars > SLICED_WRITE_CHARS) return true;
  }
  return chars > SLICED_WRITE_CHARS;
}

/** The page cache of a sliced write's connection, in KiB: its dirty pages are what COMMIT writes inline. */
const SLICED_WRITE_CACHE_KIB = 2048;

/** fsync of `file` on libuv's thread pool (absent: nothing to do). */
async function syncFile(file: string): Promise<void> {
  let handle: fs.promises.FileHandle;
  try {
    handle = await fs.promises.open(file, "r");
  } catch {
    return;
  }
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Copies the WAL's committed pages into the database (a PASSIVE checkpoint: readers and writers go on)
 * on a short-lived thread: after a large write it is hundreds of milliseconds of copying and an fsync.
 * The thread is plain JavaScript with better-sqlite3 alone (no module of ours), so it costs a few MB.
 * A failure is harmless (the pages stay in the WAL; the next checkpoint copies them), so it is ignored.
 */
function checkpointOffThread(file: string): Promise<void> {
  const source = `
    const { workerData } = require("node:worker_threads");
    const Database = require(workerData.module);
    const db = new Database(workerData.file);
    try {
      db.pragma("busy_timeout = ${BUSY_TIMEOUT_MS}");
      db.pragma("wal_checkpoint(PASSIVE)");
    } finally {
      db.close();
    }`;
  const worker = new Worker(source, {
    eval: true,
    workerData: { file, module: betterSqlitePath },
  });
  return new Promise<void>((resolve) => {
    worker.once("error", () => resolve());
    worker.once("exit", () => resolve());
  });
}

/** The store's own error for a failed SQLite call (a broken constraint, a full disk), else the error. */
function translatedError(error: unknown, key?: IndexKey): unknown {
  if (error instanceof Database.SqliteError) {
    if (key !== undefined && error.code.startsWith("SQLITE_CONSTRAINT"))
      return internal(`the write to ${label(key)} breaks a constraint of the store: ${error.message}`);
    if (error.code === "SQLITE_FULL") return storageFull();
  }
  return error;
}

/**
 * A connection to `file` as the store uses one: WAL journal (checked), fsync at every commit, foreign
 * keys, a busy timeout for another writer's lock. `before` runs first (the store's own pragmas).
 */
function openConnection(file: string, before?: (db: Database.Database) => void): Database.Database {
  const db = new Database(file);
  try {
    before?.(db);
    const mode = db.pragma("journal_mode = WAL", { simple: true });
    if (mode !== "wal") {
      throw new Error(`could not switch ${file} to WAL journal mode (got ${String(mode)})`);
    }
    db.pragma("synchronous = FULL");
    db.pragma("foreign_keys = ON");
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    // Truncate the WAL after checkpoints so that a big build does not leave a big file behind.
    db.pragma(`journal_size_limit = ${64 * 1024 * 1024}`);
    db.pragma("cache_size = -16000");
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/** A write's transaction on `db` (BEGIN IMMEDIATE), its errors as the store's (translated). */
function sqliteWriter(db: Database.Database): (change: IndexWrite) => IndexMeta {
  const port = new SqlitePort(prepareStatements(db));
  const transaction = db.transaction((change: IndexWrite) => runSync(applyWrite(port, change)));
  return (change) => translated(() => transaction.immediate(change), change.key);
}

export class SqliteIndexStore implements IndexStore {
  readonly kind = "sqlite" as const;
  readonly path: string;
  private readonly db: Database.Database;
  private readonly stmt: Statements;
  readonly objects: ObjectRecords;
  private readonly writeInline: (change: IndexWrite) => IndexMeta;
  /** The large write committing on a worker thread, if one is (writeOffThread); writes wait for it. */
  private offThread: Promise<unknown> | null = null;
  private readonly mergeTransaction: Database.Transaction<(change: MergeWrite) => IndexMeta>;
  private readonly deleteTransaction: Database.Transaction<(key: IndexKey) => boolean>;
  private readonly loadTransaction: Database.Transaction<(key: IndexKey) => StoredIndex | undefined>;
  private readonly changesTransaction: Database.Transaction<
    (key: IndexKey, sinceVersion: number) => IndexDelta | undefined
  >;

  /** Slack kept beside the database so deletes work on a full disk (reserve.ts). */
  private readonly reserve: StorageReserve;

  private constructor(file: string, reserveBytes: number) {
    this.path = file;
    this.reserve = new StorageReserve(`${file}.reserve`, reserveBytes);
    const db = openConnection(file, (connection) => {
      // New databases give freed pages back to the file system on request (after a delete on a full
      // disk, so the slack can return); no effect on a database that already has tables.
      connection.pragma("auto_vacuum = INCREMENTAL");
    });
    this.db = db;
    try {
      migrate(db);
    } catch (error) {
      db.close();
      throw error;
    }

    this.stmt = prepareStatements(db);
    this.objects = sqliteObjects(db, () => this.afterOffThread());

    const port = new SqlitePort(this.stmt);
    this.writeInline = sqliteWriter(db);
    this.mergeTransaction = db.transaction((change: MergeWrite) => runSync(applyMerge(port, change)));
    this.deleteTransaction = db.transaction((key: IndexKey) => runSync(dropIndex(port, key)));
    this.loadTransaction = db.transaction((key: IndexKey) => runSync(loadIndex(port, key)));
    this.changesTransaction = db.transaction((key: IndexKey, sinceVersion: number) =>
      runSync(loadChanges(port, key, sinceVersion)),
    );
  }

  /**
   * Opens (creating if needed) `<dataDir>/lectern.db` and brings its schema up to date. `reserveBytes`
   * (DISK_RESERVE_BYTES) of slack are kept beside it for deletes on a full disk; 0: none.
   */
  static open(dataDir: string, reserveBytes = 0): SqliteIndexStore {
    fs.mkdirSync(dataDir, { recursive: true });
    return new SqliteIndexStore(path.join(dataDir, SQLITE_FILE_NAME), reserveBytes);
  }

  async listIndices(tenantId: string | null): Promise<IndexMeta[]> {
    const rows = tenantId === null ? this.stmt.listAll.all() : this.stmt.listTenant.all(tenantId);
    return rows.map(toMeta);
  }

  async getMeta(key: IndexKey): Promise<IndexMeta | undefined> {
    const row = this.stmt.meta.get(key.tenantId, key.name);
    return row === undefined ? undefined : toMeta(row);
  }

  async loadIndex(key: IndexKey): Promise<StoredIndex | undefined> {
    // One read transaction: meta, segments and tombstones all come from the same committed version.
    return translated(() => this.loadTransaction.deferred(key));
  }

  async loadChanges(key: IndexKey, sinceVersion: number): Promise<IndexDelta | undefined> {
    return translated(() => this.changesTransaction.deferred(key, sinceVersion));
  }

  async getChunks(key: IndexKey, engineKeys: readonly number[]): Promise<ChunkHit[]> {
    const id = this.stmt.indexId.get(key.tenantId, key.name);
    if (id === undefined || engineKeys.length === 0) return [];
    const rows = this.stmt.chunksByKey.all(id, JSON.stringify(engineKeys));
    return chunkHitsInKeyOrder(engineKeys, rows, (json: string) => JSON.parse(json) as Metadata);
  }

  async getDocumentChunks(key: IndexKey, documentIds: readonly string[]): Promise<DocumentChunks> {
    const result: DocumentChunks = new Map();
    const id = this.stmt.indexId.get(key.tenantId, key.name);
    if (id === undefined || documentIds.length === 0) return result;
    const ids = JSON.stringify(documentIds);
    this.db
      .transaction(() => {
        for (const doc of this.stmt.documentTitles.iterate(id, ids)) {
          result.set(doc.doc_id, { title: doc.title, chunks: [] });
        }
        for (const chunk of this.stmt.documentChunks.iterate(id, ids)) {
          result.get(chunk.doc_id)?.chunks.push({ engineKey: chunk.engine_key, text: chunk.text });
        }
      })
      .deferred();
    return result;
  }

  async listDocuments(key: IndexKey): Promise<DocumentListing[]> {
    const id = this.stmt.indexId.get(key.tenantId, key.name);
    if (id === undefined) return [];
    return this.stmt.listDocuments
      .all(id)
      .map((row) => ({ id: row.doc_id, source: row.source, contentHash: row.content_hash }));
  }

  async hasDocument(key: IndexKey, documentId: string): Promise<boolean> {
    const id = this.stmt.indexId.get(key.tenantId, key.name);
    return id !== undefined && this.stmt.hasDocument.get(id, documentId) !== undefined;
  }

  async write(change: IndexWrite): Promise<IndexMeta> {
    validateWrite(change);
    await this.afterOffThread();
    // A write that only deletes may use the slack on a full disk; one that adds data needs it in place.
    if (change.upsert.length === 0 && change.segment === null)
      return this.reserve.guardDelete(() => this.writeInline(change), this.reclaim);
    if (!writesInSlices(change)) return this.reserve.guardWrite(() => this.writeInline(change));
    const committing = this.reserve.guardWriteAsync(() => this.writeInSlices(change));
    const done = committing.then(({ checkpoint }) => checkpoint);
    this.offThread = done;
    void done
      .catch(() => undefined)
      .finally(() => {
        if (this.offThread === done) this.offThread = null;
      });
    return (await committing).meta;
  }

  /**
   * Waits while a large write commits on its worker thread: this connection's own writes would
   * otherwise wait for its lock in busy_timeout, holding the event loop. Reads need not wait (WAL).
   */
  private async afterOffThread(): Promise<void> {
    while (this.offThread !== null) await this.offThread.catch(() => undefined);
  }

  /**
   * Commits a large `change` in slices with the event loop free between them: on a connection of its
   * own, which holds the write transaction (BEGIN IMMEDIATE) from the first insert to the commit, so
   * the store's readers see the index as it was until then (WAL) and a crash at any moment leaves it
   * before or after. The store's other writes wait (afterOffThread) until its checkpoint is done too.
   * Unlike a worker thread, it needs no copy of the write: a thread took a copy of every text and
   * the segment, and a heap of its own (+150 MB of peak memory for a 52 MB build).
   *
   * What stays synchronous is kept small: the connection's page cache is small (pages spill to the
   * WAL while the slices run), the WAL is fsynced off the loop before COMMIT (whose own fsync then
   * has little left to write), and the checkpoint that copies the WAL into the database runs on a
   * thread (checkpointOffThread) rather than in COMMIT.
   */
  private async writeInSlices(change: IndexWrite): Promise<{ meta: IndexMeta; checkpoint: Promise<void> }> {
    const db = openConnection(this.path);
    try {
      db.pragma("wal_autocheckpoint = 0");
      db.pragma(`cache_size = -${SLICED_WRITE_CACHE_KIB}`);
      const port = new SqlitePort(prepareStatements(db));
      db.exec("BEGIN IMMEDIATE");
      try {
        const meta = await runSliced(applyWrite(port, change), WRITE_SLICE_MS);
        await syncFile(`${this.path}-wal`);
        db.exec("COMMIT");
        return { meta, checkpoint: checkpointOffThread(this.path) };
      } catch (error) {
        if (db.inTransaction) db.exec("ROLLBACK");
        throw translatedError(error, change.key);
      }
    } finally {
      db.close();
    }
  }

  async commitMerge(change: MergeWrite): Promise<IndexMeta> {
    validateMerge(change);
    await this.afterOffThread();
    return this.reserve.guardWrite(() =>
      translated(() => this.mergeTransaction.immediate(change), change.key),
    );
  }

  async deleteIndex(key: IndexKey): Promise<boolean> {
    await this.afterOffThread();
    return this.reserve.guardDelete(
      () => translated(() => this.deleteTransaction.immediate(key)),
      this.reclaim,
    );
  }

  /**
   * Gives the room of freed pages back to the file system: the free pages first (so the database the
   * checkpoint writes is already small: it must not need to grow on a full disk), then the WAL.
   */
  private readonly reclaim = () =>
    translated(() => {
      this.db.pragma("incremental_vacuum");
      this.db.pragma("wal_checkpoint(TRUNCATE)");
    });

  async sizeBytes(): Promise<number> {
    let total = 0;
    for (const file of [this.path, `${this.path}-wal`]) {
      try {
        total += fs.statSync(file).size;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      }
    }
    return total;
  }

  async close(): Promise<void> {
    await this.afterOffThread();
    if (this.db.open) this.db.close();
  }

  /** `PRAGMA integrity_check` and `PRAGMA foreign_key_check`: "ok" or the problems found. */
  integrityCheck(): string {
    const integrity = this.db.pragma("integrity_check", { simple: true });
    if (integrity !== "ok") return String(integrity);
    const orphans = this.db.pragma("foreign_key_check") as unknown[];
    return orphans.length === 0 ? "ok" : `foreign key violations: ${JSON.stringify(orphans)}`;
  }

  /**
   * `EXPLAIN QUERY PLAN` of the statements on the hot path of writes and queries, by name: what a test
   * checks to know that none of them reads the whole index.
   */
  queryPlans(): Record<string, string[]> {
    const hot = {
      getChunks: this.stmt.chunksByKey,
      insertTombstones: this.stmt.insertTombstones,
      insertSegment: this.stmt.insertSegment,
      insertChunk: this.stmt.insertChunk,
      updateIndex: this.stmt.updateIndex,
      deleteDocument: this.stmt.deleteDocument,
      deleteDocumentChunks: this.stmt.deleteDocumentChunks,
      segmentDocumentCount: this.stmt.segmentDocumentCount,
      segmentDocumentTotal: this.stmt.segmentDocumentTotal,
      tombstonesSince: this.stmt.tombstonesSince,
    };
    return Object.fromEntries(
      Object.entries(hot).map(([name, statement]) => {
        const explain = this.db.prepare<unknown[], { detail: string }>(
          `EXPLAIN QUERY PLAN ${statement.source}`,
        );
        // The plan does not depend on the values: bind NULL to every parameter.
        const named = [...statement.source.matchAll(/@(\w+)/g)].map((m) => [m[1]!, null] as const);
        const positional = Array.from(statement.source.match(/\?/g) ?? [], () => null);
        const rows = named.length > 0 ? explain.all(Object.fromEntries(named)) : explain.all(...positional);
        return [name, rows.map((row) => row.detail)];
      }),
    );
  }
}

/** Applies the migrations not yet applied, all in one transaction. */
function migrate(db: Database.Database): void {
  db.transaction(() => {
    const applied = db.pragma("user_version", { simple: true }) as number;
    if (applied > SQLITE_MIGRATIONS.length) {
      throw new Error(
        `${db.name} has schema version ${applied}, newer than this program's ${SQLITE_MIGRATIONS.length}; upgrade Lectern`,
      );
    }
    for (let version = applied; version < SQLITE_MIGRATIONS.length; version++)
      db.exec(SQLITE_MIGRATIONS[version]!);
    if (applied !== SQLITE_MIGRATIONS.length) db.pragma(`user_version = ${SQLITE_MIGRATIONS.length}`);
  }).immediate();
}
