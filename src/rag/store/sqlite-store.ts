/**
 * The embedded store of the RAG app: one SQLite database file, `<DATA_DIR>/lectern.db`.
 *
 * Durability: WAL journal with `synchronous=FULL`, so the WAL is fsynced at every commit and an
 * acknowledged write survives a power loss, not only a process crash. Writes are whole builds or
 * document batches (one transaction each), so the extra fsync per commit costs nothing noticeable.
 *
 * Atomicity: every `write` runs in one `BEGIN IMMEDIATE` transaction; anything thrown inside it, or
 * a crash before COMMIT, leaves the index exactly as it was.
 *
 * Versions come from one store-wide counter, so they increase on every committed write and are
 * never reused, even when an index is deleted and created again under the same name: a cache
 * holding (tenant, name, version) can never mistake a new index for an old one.
 */
import fs from "node:fs";
import path from "node:path";

import Database from "better-sqlite3";

import { conflict, notFound } from "../../core/errors.js";
import type { ScorerName } from "../search/types.js";
import type {
  ChunkRecord,
  DocumentRecord,
  IndexKey,
  IndexMeta,
  IndexSnapshot,
  IndexStore,
  IndexWrite,
  Metadata,
} from "./types.js";
import {
  StaleVersionError,
  asBuffer,
  internal,
  label,
  orderChunks,
  serialiseDocument,
  utf8,
  validateWrite,
} from "./common.js";

export const SQLITE_FILE_NAME = "lectern.db";

/** Milliseconds a writer waits for another process's write lock before failing with SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 10_000;

/**
 * Schema migrations, applied in order at open; `PRAGMA user_version` holds how many have run.
 * Append new entries, never edit a released one.
 */
export const MIGRATIONS: readonly string[] = [
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
];

interface IndexRow {
  id: number;
  tenant_id: string;
  name: string;
  scorer: ScorerName;
  chunk_size: number;
  overlap: number;
  documents_count: number;
  chunks_count: number;
  vocabulary_size: number;
  size_bytes: number;
  version: number;
  created_at: string;
  updated_at: string;
}

interface IndexDataRow extends IndexRow {
  chunk_order: string;
  engine_index: Buffer;
}

interface ChunkRow {
  chunk_id: string;
  doc_id: string;
  seq: number;
  start_offset: number;
  end_offset: number;
  metadata: string;
  text: string;
}

interface DocumentRow {
  doc_id: string;
  title: string | null;
  source: string | null;
  metadata: string;
}

interface LoadedIndex {
  row: IndexDataRow;
  chunks: ChunkRecord[];
  documents: IndexSnapshot["documents"];
}

const META_COLUMNS =
  "id, tenant_id, name, scorer, chunk_size, overlap, documents_count, chunks_count, vocabulary_size, " +
  "size_bytes, version, created_at, updated_at";

function toMeta(row: IndexRow): IndexMeta {
  return {
    tenantId: row.tenant_id,
    name: row.name,
    scorer: row.scorer,
    chunkSize: row.chunk_size,
    overlap: row.overlap,
    documentsCount: row.documents_count,
    chunksCount: row.chunks_count,
    vocabularySize: row.vocabulary_size,
    sizeBytes: row.size_bytes,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    version: row.version,
  };
}

/** Every statement the store runs, prepared once per connection. */
function prepareStatements(db: Database.Database) {
  return {
    meta: db.prepare<[string, string], IndexRow>(
      `SELECT ${META_COLUMNS} FROM indices WHERE tenant_id = ? AND name = ?`,
    ),
    data: db.prepare<[string, string], IndexDataRow>(
      `SELECT ${META_COLUMNS}, chunk_order, engine_index FROM indices WHERE tenant_id = ? AND name = ?`,
    ),
    listAll: db.prepare<[], IndexRow>(`SELECT ${META_COLUMNS} FROM indices ORDER BY tenant_id, name`),
    listTenant: db.prepare<[string], IndexRow>(
      `SELECT ${META_COLUMNS} FROM indices WHERE tenant_id = ? ORDER BY name`,
    ),
    nextVersion: db
      .prepare<[], number>("UPDATE store_state SET last_version = last_version + 1 RETURNING last_version")
      .pluck(),
    insertIndex: db.prepare(
      `INSERT INTO indices (tenant_id, name, scorer, chunk_size, overlap, documents_count, chunks_count,
         vocabulary_size, size_bytes, version, created_at, updated_at, chunk_order, engine_index)
       VALUES (@tenantId, @name, @scorer, @chunkSize, @overlap, 0, 0, 0, 0, @version, @now, @now, '[]', x'')`,
    ),
    updateIndex: db.prepare(
      `UPDATE indices SET scorer = @scorer, chunk_size = @chunkSize, overlap = @overlap,
         documents_count = @documentsCount, chunks_count = @chunksCount, vocabulary_size = @vocabularySize,
         size_bytes = @sizeBytes, version = @version, updated_at = @now, chunk_order = @chunkOrder,
         engine_index = @engineIndex
       WHERE id = @id`,
    ),
    deleteIndex: db.prepare<[number]>("DELETE FROM indices WHERE id = ?"),
    deleteAllChunks: db.prepare<[number]>("DELETE FROM chunks WHERE index_id = ?"),
    deleteAllDocuments: db.prepare<[number]>("DELETE FROM documents WHERE index_id = ?"),
    deleteDocumentChunks: db.prepare<[number, string]>(
      "DELETE FROM chunks WHERE index_id = ? AND doc_id = ?",
    ),
    deleteDocument: db.prepare<[number, string]>("DELETE FROM documents WHERE index_id = ? AND doc_id = ?"),
    insertDocument: db.prepare(
      `INSERT INTO documents (index_id, doc_id, chunks_count, size_bytes, title, source, metadata, text)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    insertChunk: db.prepare(
      `INSERT INTO chunks (index_id, doc_id, seq, chunk_id, start_offset, end_offset, metadata, text)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    totals: db.prepare<[number], { documents: number; chunks: number; bytes: number }>(
      `SELECT count(*) AS documents, coalesce(sum(chunks_count), 0) AS chunks, coalesce(sum(size_bytes), 0) AS bytes
       FROM documents WHERE index_id = ?`,
    ),
    chunkIds: db.prepare<[number], string>("SELECT chunk_id FROM chunks WHERE index_id = ?").pluck(),
    chunks: db.prepare<[number], ChunkRow>(
      `SELECT chunk_id, doc_id, seq, start_offset, end_offset, metadata, text FROM chunks WHERE index_id = ?`,
    ),
    documents: db.prepare<[number], DocumentRow>(
      "SELECT doc_id, title, source, metadata FROM documents WHERE index_id = ?",
    ),
  };
}

type Statements = ReturnType<typeof prepareStatements>;

export class SqliteIndexStore implements IndexStore {
  readonly kind = "sqlite" as const;
  readonly path: string;
  private readonly db: Database.Database;
  private readonly stmt: Statements;
  private readonly writeTransaction: Database.Transaction<(change: IndexWrite) => IndexMeta>;
  private readonly deleteTransaction: Database.Transaction<(key: IndexKey) => boolean>;
  private readonly snapshotTransaction: Database.Transaction<
    (key: IndexKey, withDocuments: boolean) => LoadedIndex | undefined
  >;

  private constructor(file: string) {
    this.path = file;
    const db = new Database(file);
    this.db = db;
    try {
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
      migrate(db);
    } catch (error) {
      db.close();
      throw error;
    }

    this.stmt = prepareStatements(db);

    this.writeTransaction = db.transaction((change: IndexWrite) => this.applyWrite(change));
    this.deleteTransaction = db.transaction((key: IndexKey) => {
      const row = this.stmt.meta.get(key.tenantId, key.name);
      if (row === undefined) return false;
      this.stmt.deleteAllChunks.run(row.id);
      this.stmt.deleteAllDocuments.run(row.id);
      this.stmt.deleteIndex.run(row.id);
      return true;
    });
    this.snapshotTransaction = db.transaction((key: IndexKey, withDocuments: boolean) => {
      const row = this.stmt.data.get(key.tenantId, key.name);
      if (row === undefined) return undefined;
      return this.readIndex(row, withDocuments);
    });
  }

  /** Opens (creating if needed) `<dataDir>/lectern.db` and brings its schema up to date. */
  static open(dataDir: string): SqliteIndexStore {
    fs.mkdirSync(dataDir, { recursive: true });
    return new SqliteIndexStore(path.join(dataDir, SQLITE_FILE_NAME));
  }

  async listIndices(tenantId: string | null): Promise<IndexMeta[]> {
    const rows = tenantId === null ? this.stmt.listAll.all() : this.stmt.listTenant.all(tenantId);
    return rows.map(toMeta);
  }

  async getMeta(key: IndexKey): Promise<IndexMeta | undefined> {
    const row = this.stmt.meta.get(key.tenantId, key.name);
    return row === undefined ? undefined : toMeta(row);
  }

  async loadSnapshot(key: IndexKey): Promise<IndexSnapshot | undefined> {
    // One read transaction: meta, chunks and documents all come from the same committed version.
    const result = this.snapshotTransaction.deferred(key, true);
    if (result === undefined) return undefined;
    return {
      meta: toMeta(result.row),
      engineIndex: new Uint8Array(
        result.row.engine_index.buffer,
        result.row.engine_index.byteOffset,
        result.row.engine_index.byteLength,
      ),
      chunks: result.chunks,
      documents: result.documents,
    };
  }

  async loadChunks(key: IndexKey): Promise<ChunkRecord[]> {
    const result = this.snapshotTransaction.deferred(key, false);
    if (result === undefined) throw notFound(`${label(key)} not found`);
    return result.chunks;
  }

  async write(change: IndexWrite): Promise<IndexMeta> {
    validateWrite(change);
    return this.writeTransaction.immediate(change);
  }

  async deleteIndex(key: IndexKey): Promise<boolean> {
    return this.deleteTransaction.immediate(key);
  }

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
    if (this.db.open) this.db.close();
  }

  /** `PRAGMA integrity_check` and `PRAGMA foreign_key_check`: "ok" or the problems found. */
  integrityCheck(): string {
    const integrity = this.db.pragma("integrity_check", { simple: true });
    if (integrity !== "ok") return String(integrity);
    const orphans = this.db.pragma("foreign_key_check") as unknown[];
    return orphans.length === 0 ? "ok" : `foreign key violations: ${JSON.stringify(orphans)}`;
  }

  private readIndex(row: IndexDataRow, withDocuments: boolean): LoadedIndex {
    const chunks = orderChunks(
      row.name,
      row.chunk_order,
      this.stmt.chunks.all(row.id),
      (metadata) => JSON.parse(metadata) as Metadata,
    );
    const documents: IndexSnapshot["documents"] = new Map();
    if (withDocuments) {
      for (const doc of this.stmt.documents.all(row.id)) {
        documents.set(doc.doc_id, {
          id: doc.doc_id,
          title: doc.title,
          source: doc.source,
          metadata: JSON.parse(doc.metadata) as Metadata,
        });
      }
    }
    return { row, chunks, documents };
  }

  /** The body of the write transaction. */
  private applyWrite(change: IndexWrite): IndexMeta {
    const { key, mode, settings } = change;
    const stmt = this.stmt;
    const existing = stmt.meta.get(key.tenantId, key.name);
    if (mode === "create" && existing !== undefined) throw conflict(`${label(key)} already exists`);
    if (mode === "update" && existing === undefined) throw notFound(`${label(key)} not found`);
    if (change.expectedVersion !== null && (existing?.version ?? 0) !== change.expectedVersion) {
      throw new StaleVersionError(key, existing?.version, change.expectedVersion);
    }

    const version = stmt.nextVersion.get() as number;
    const now = new Date().toISOString();
    let id: number;
    if (existing === undefined) {
      id = Number(
        stmt.insertIndex.run({
          tenantId: key.tenantId,
          name: key.name,
          scorer: settings.scorer,
          chunkSize: settings.chunkSize,
          overlap: settings.overlap,
          version,
          now,
        }).lastInsertRowid,
      );
    } else {
      id = existing.id;
      if (mode === "replace") {
        stmt.deleteAllChunks.run(id);
        stmt.deleteAllDocuments.run(id);
      } else {
        const gone = new Set(change.deleteDocumentIds);
        for (const { document } of change.upsert) gone.add(document.id);
        for (const docId of gone) {
          stmt.deleteDocumentChunks.run(id, docId);
          stmt.deleteDocument.run(id, docId);
        }
      }
    }

    for (const { document, chunks } of change.upsert) this.insertDocument(id, document, chunks);

    const totals = stmt.totals.get(id)!;
    this.checkChunkOrder(id, change.chunkOrder, totals.chunks);
    const chunkOrder = JSON.stringify(change.chunkOrder);
    const engineIndex = asBuffer(change.engineIndex);
    const sizeBytes = totals.bytes + engineIndex.byteLength + utf8(chunkOrder);
    stmt.updateIndex.run({
      id,
      scorer: settings.scorer,
      chunkSize: settings.chunkSize,
      overlap: settings.overlap,
      documentsCount: totals.documents,
      chunksCount: totals.chunks,
      vocabularySize: change.vocabularySize,
      sizeBytes,
      version,
      now,
      chunkOrder,
      engineIndex,
    });
    return toMeta(stmt.meta.get(key.tenantId, key.name)!);
  }

  private insertDocument(indexId: number, document: DocumentRecord, chunks: ChunkRecord[]): void {
    const { metadata, chunkMetadata: chunkJson, bytes } = serialiseDocument(document, chunks);
    const rows = chunks.map((chunk, i) => [chunk, chunkJson[i]!] as const);
    this.stmt.insertDocument.run(
      indexId,
      document.id,
      chunks.length,
      bytes,
      document.title,
      document.source,
      metadata,
      document.text,
    );
    for (const [chunk, chunkMetadata] of rows) {
      this.stmt.insertChunk.run(
        indexId,
        document.id,
        chunk.seq,
        chunk.chunkId,
        chunk.start,
        chunk.end,
        chunkMetadata,
        chunk.text,
      );
    }
  }

  /** chunkOrder must list exactly the chunks the index holds after the change. */
  private checkChunkOrder(indexId: number, chunkOrder: string[], chunksCount: number): void {
    if (chunkOrder.length !== chunksCount) {
      throw internal(`chunkOrder lists ${chunkOrder.length} chunks but the index holds ${chunksCount}`);
    }
    const wanted = new Set(chunkOrder);
    for (const chunkId of this.stmt.chunkIds.iterate(indexId)) {
      if (!wanted.has(chunkId)) throw internal(`chunkOrder misses chunk "${chunkId}"`);
    }
  }
}

/** Applies the migrations not yet applied, all in one transaction. */
function migrate(db: Database.Database): void {
  db.transaction(() => {
    const applied = db.pragma("user_version", { simple: true }) as number;
    if (applied > MIGRATIONS.length) {
      throw new Error(
        `${db.name} has schema version ${applied}, newer than this program's ${MIGRATIONS.length}; upgrade Lectern`,
      );
    }
    for (let version = applied; version < MIGRATIONS.length; version++) db.exec(MIGRATIONS[version]!);
    if (applied !== MIGRATIONS.length) db.pragma(`user_version = ${MIGRATIONS.length}`);
  }).immediate();
}
