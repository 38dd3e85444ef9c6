/**
 * The shared store of the RAG app: PostgreSQL, chosen by `DATABASE_URL`, so that several RAG replicas
 * serve the same indices. Same semantics as the SQLite store (see store-contract.ts), plus what
 * replicas need:
 *
 * - Schema: created and migrated by the app at open. `lectern_schema_migrations` records the applied
 *   migrations; they run in order in one transaction under `pg_advisory_xact_lock`, so replicas that
 *   start together neither race nor apply a migration twice. Every table has a `tenant_id` column and
 *   every statement filters by it.
 * - Atomicity: a write (documents, chunks, the serialised engine index as `bytea`, the index row) is
 *   one transaction; a failure or a crash before COMMIT leaves the index as it was.
 * - Concurrent writers: a write takes `pg_advisory_xact_lock` on its (tenant, index), so writes of one
 *   index from any number of replicas are serialised; `expectedVersion` is checked under that lock, so
 *   a writer that read an older version gets a 409 (StaleVersionError) instead of losing the other's
 *   documents. `withWriteLock` lets the RAG service hold a second, session-level advisory lock across
 *   its whole read-rebuild-write, so that replicas queue for an index instead of failing.
 * - Versions come from one sequence, so they increase on every write and are never reused (a rolled
 *   back write leaves a gap, which is harmless: caches only compare versions for equality and order).
 * - Change feed: each committed write or delete sends `NOTIFY lectern_index_changed` with
 *   `{"tenantId","name","version"}` from inside its transaction (so it is delivered on commit, and
 *   never for a rolled-back write); `subscribe` LISTENs on a dedicated connection that reconnects
 *   after errors, with an `epoch` that tells caches when they may have missed changes.
 * - Snapshots: `loadSnapshot` reads the index row, its chunks and documents in one REPEATABLE READ
 *   transaction, so a query never mixes two versions.
 */
import pg from "pg";

import { ApiError, badRequest, conflict, notFound, notReady } from "../../core/errors.js";
import type { ScorerName } from "../search/types.js";
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
import type {
  ChangeFeed,
  ChunkRecord,
  IndexChange,
  IndexKey,
  IndexMeta,
  IndexSnapshot,
  IndexStore,
  IndexWrite,
  Metadata,
} from "./types.js";

/** The NOTIFY channel of committed changes. */
export const CHANGE_CHANNEL = "lectern_index_changed";

/** Key of the advisory lock that serialises migrations (any fixed bigint; "lectern" in ASCII). */
const MIGRATION_LOCK = 0x6c6563746572;
/** First key of the transaction lock a write or delete takes on its index. */
const WRITE_LOCK_SPACE = 0x4c43_5701;
/** First key of the session lock `withWriteLock` holds across a replica's read-rebuild-write. */
const WRITER_LOCK_SPACE = 0x4c43_5702;
/** Rows per multi-row INSERT, and their bytes (so one statement stays well below protocol limits). */
const BATCH_ROWS = 2000;
/** How long a request waits for a connection (to an unreachable server, or from a busy pool). */
const CONNECT_TIMEOUT_MS = 15_000;
/** Connections that can hold writer locks at once, per replica (apart from the query pool). */
const LOCK_POOL_SIZE = 4;
const BATCH_BYTES = 16 * 1024 * 1024;

/**
 * Schema migrations, applied in order at open; `lectern_schema_migrations` holds the ones applied.
 * Append new entries, never edit a released one.
 */
export const PG_MIGRATIONS: ReadonlyArray<{ name: string; sql: string }> = [
  {
    name: "indices, documents and chunks",
    sql: `
    -- One store-wide counter: versions are never reused, even by an index deleted and created again.
    CREATE SEQUENCE lectern_version_seq AS bigint;

    CREATE TABLE lectern_indices (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      tenant_id text COLLATE "C" NOT NULL,
      name text COLLATE "C" NOT NULL,
      scorer text NOT NULL CHECK (scorer IN ('tfidf', 'bm25')),
      chunk_size integer NOT NULL,
      overlap integer NOT NULL,
      documents_count integer NOT NULL,
      chunks_count integer NOT NULL,
      vocabulary_size integer NOT NULL,
      size_bytes bigint NOT NULL,
      version bigint NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      -- JSON array of chunk ids: chunk_order[i] is the chunk that is engine document i.
      chunk_order text NOT NULL,
      engine_index bytea NOT NULL,
      UNIQUE (tenant_id, name),
      UNIQUE (tenant_id, id)
    );
    -- The engine index is typed arrays that compress poorly: store it uncompressed, out of line,
    -- so that loading it costs a copy and no decompression.
    ALTER TABLE lectern_indices ALTER COLUMN engine_index SET STORAGE EXTERNAL;

    CREATE TABLE lectern_documents (
      tenant_id text COLLATE "C" NOT NULL,
      index_id bigint NOT NULL,
      doc_id text COLLATE "C" NOT NULL,
      chunks_count integer NOT NULL,
      -- UTF-8 bytes of this document's text, metadata and chunks.
      size_bytes bigint NOT NULL,
      title text,
      source text,
      -- json, not jsonb: metadata comes back exactly as it was given, key order included.
      metadata json NOT NULL,
      text text NOT NULL,
      PRIMARY KEY (tenant_id, index_id, doc_id),
      FOREIGN KEY (tenant_id, index_id) REFERENCES lectern_indices (tenant_id, id) ON DELETE CASCADE
    );

    CREATE TABLE lectern_chunks (
      tenant_id text COLLATE "C" NOT NULL,
      index_id bigint NOT NULL,
      doc_id text COLLATE "C" NOT NULL,
      seq integer NOT NULL,
      chunk_id text COLLATE "C" NOT NULL,
      start_offset integer NOT NULL,
      end_offset integer NOT NULL,
      metadata json NOT NULL,
      text text NOT NULL,
      PRIMARY KEY (tenant_id, index_id, chunk_id),
      UNIQUE (tenant_id, index_id, doc_id, seq),
      FOREIGN KEY (tenant_id, index_id, doc_id)
        REFERENCES lectern_documents (tenant_id, index_id, doc_id) ON DELETE CASCADE
    );
    `,
  },
];

export interface PostgresStoreOptions {
  /** Connections of the query pool (default 10). */
  poolSize?: number;
  /** Shown in pg_stat_activity (default "lectern-rag"). */
  applicationName?: string;
  /**
   * How long `withWriteLock` waits for another replica's writer of the same index before the request
   * fails with a 409 (default 60 s).
   */
  writerLockTimeoutMs?: number;
  /** Told about errors that do not fail a request (a dropped LISTEN connection, an idle client). */
  onError?: (error: Error, context: string) => void;
}

interface IndexRow {
  id: string;
  tenant_id: string;
  name: string;
  scorer: ScorerName;
  chunk_size: number;
  overlap: number;
  documents_count: number;
  chunks_count: number;
  vocabulary_size: number;
  size_bytes: string;
  version: string;
  created_at: Date;
  updated_at: Date;
}

interface IndexDataRow extends IndexRow {
  chunk_order: string;
  /** bytea arrives hex-encoded and pg decodes it to a Buffer. (pg's binary transfer mode would decode
   * the bytes as UTF-8 text and corrupt them, so it is not an option.) */
  engine_index: Buffer;
}

interface ChunkRow {
  chunk_id: string;
  doc_id: string;
  seq: number;
  start_offset: number;
  end_offset: number;
  metadata: Metadata;
  text: string;
}

interface DocumentRow {
  doc_id: string;
  title: string | null;
  source: string | null;
  metadata: Metadata;
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
    sizeBytes: Number(row.size_bytes),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    version: Number(row.version),
  };
}

const lockKey = (key: IndexKey) => `${key.tenantId}/${key.name}`;

/** Node socket errors that mean the database cannot be reached right now. */
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENOTFOUND",
]);

/**
 * PostgreSQL errors as the API errors they are: what a client caused is a 4xx, an unreachable or
 * restarting database a 503 (so a load balancer or client retries), everything else stays a 500.
 */
function translate(error: unknown): unknown {
  if (error instanceof ApiError || !(error instanceof Error)) return error;
  const code = (error as { code?: unknown }).code;
  if (error instanceof pg.DatabaseError) {
    // 22021: invalid byte sequence (a NUL character); 22P05: untranslatable character.
    if (code === "22021" || code === "22P05") {
      return badRequest(
        "A document contains a character PostgreSQL cannot store in text (a NUL, \\u0000); remove it",
      );
    }
    // 55P03: lock_timeout expired while waiting for another writer of the same index.
    if (code === "55P03") {
      return conflict("Another replica has been writing this index for too long; retry later");
    }
    // Class 08: connection exception; 57P01-57P03: the server is shutting down or starting.
    if (typeof code === "string" && (code.startsWith("08") || /^57P0[123]$/.test(code))) {
      return notReady(`The PostgreSQL store is unavailable (${error.message}); retry shortly`);
    }
    return error;
  }
  if (
    (typeof code === "string" && UNREACHABLE.has(code)) ||
    /Connection terminated|timeout exceeded when trying to connect/i.test(error.message)
  ) {
    return notReady(`The PostgreSQL store is unreachable (${error.message}); retry shortly`);
  }
  return error;
}

/** Runs `work`, rethrowing its error as translate() makes it. */
async function translated<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw translate(error);
  }
}

/**
 * The LISTEN side of the change feed: one dedicated connection (never a pooled one, which would stop
 * listening when returned), reconnected with backoff after any error, and checked by a heartbeat so
 * that a silently dead connection is noticed too.
 */
class ListenConnection {
  live = false;
  epoch = 0;
  private client: pg.Client | null = null;
  private closed = false;
  private retryMs = 100;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly deliver: (change: IndexChange) => void,
    private readonly onError: (error: Error, context: string) => void,
    private readonly heartbeatMs = 10_000,
  ) {
    void this.connect();
  }

  close(): void {
    this.closed = true;
    this.live = false;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.heartbeatTimer);
    const client = this.client;
    this.client = null;
    if (client) void client.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ ...this.config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    this.client = client;
    // Stays attached for the client's lifetime, so a late error on a dropped client is never unhandled.
    client.on("error", (error) => this.fail(client, error));
    client.on("end", () => this.fail(client, new Error("the LISTEN connection closed")));
    client.on("notification", (message) => {
      if (this.client !== client || message.channel !== CHANGE_CHANNEL || !message.payload) return;
      const change = parseChange(message.payload);
      if (change) this.deliver(change);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANGE_CHANNEL}`);
    } catch (error) {
      this.fail(client, error as Error);
      return;
    }
    if (this.client !== client) return;
    // Changes committed from now on are delivered; what came before, readers check for themselves.
    this.epoch++;
    this.live = true;
    this.retryMs = 100;
    this.heartbeatTimer = setInterval(() => void this.heartbeat(client), this.heartbeatMs);
    this.heartbeatTimer.unref();
  }

  private async heartbeat(client: pg.Client): Promise<void> {
    const timer = setTimeout(
      () => this.fail(client, new Error("the LISTEN connection did not answer a heartbeat in 5 s")),
      5000,
    );
    timer.unref();
    try {
      await client.query("SELECT 1");
    } catch (error) {
      this.fail(client, error as Error);
    } finally {
      clearTimeout(timer);
    }
  }

  private fail(client: pg.Client, error: Error): void {
    if (this.client !== client) return;
    this.client = null;
    this.live = false;
    clearInterval(this.heartbeatTimer);
    void client.end().catch(() => undefined);
    if (this.closed) return;
    this.onError(error, `LISTEN ${CHANGE_CHANNEL}; reconnecting`);
    const delay = this.retryMs * (0.5 + Math.random());
    this.retryMs = Math.min(5000, this.retryMs * 2);
    this.reconnectTimer = setTimeout(() => void this.connect(), delay);
    this.reconnectTimer.unref();
  }
}

function parseChange(payload: string): IndexChange | undefined {
  try {
    const value = JSON.parse(payload) as Partial<IndexChange>;
    if (typeof value.tenantId !== "string" || typeof value.name !== "string") return undefined;
    if (value.version !== null && typeof value.version !== "number") return undefined;
    return { tenantId: value.tenantId, name: value.name, version: value.version };
  } catch {
    return undefined;
  }
}

export class PostgresIndexStore implements IndexStore {
  readonly kind = "postgres" as const;
  private readonly pool: pg.Pool;
  /** Connections that hold `withWriteLock` locks; apart from the query pool so they cannot starve it. */
  private readonly lockPool: pg.Pool;
  private readonly listeners = new Set<(change: IndexChange) => void>();
  private listen: ListenConnection | null = null;
  private closed = false;

  private constructor(
    private readonly clientConfig: pg.ClientConfig,
    private readonly options: PostgresStoreOptions,
  ) {
    const onError = options.onError ?? (() => undefined);
    this.pool = new pg.Pool({
      ...clientConfig,
      max: options.poolSize ?? 10,
      // A transaction left open by a stuck request would hold its index's lock; end it.
      idle_in_transaction_session_timeout: 60_000,
      // An unreachable database (or a pool busy that long) fails the request with a 503, not a hang.
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    });
    this.lockPool = new pg.Pool({
      ...clientConfig,
      // One connection per index being written at this moment by this replica; more wait their turn.
      max: LOCK_POOL_SIZE,
      connectionTimeoutMillis: options.writerLockTimeoutMs ?? 60_000,
      lock_timeout: options.writerLockTimeoutMs ?? 60_000,
    });
    // An idle pooled connection that breaks is dropped by the pool; without a handler it would crash.
    this.pool.on("error", (error) => onError(error, "idle PostgreSQL connection"));
    this.lockPool.on("error", (error) => onError(error, "idle PostgreSQL lock connection"));
  }

  /** Connects to `databaseUrl` and brings the schema up to date (creating it in an empty database). */
  static async open(databaseUrl: string, options: PostgresStoreOptions = {}): Promise<PostgresIndexStore> {
    const config: pg.ClientConfig = {
      connectionString: databaseUrl,
      application_name: options.applicationName ?? "lectern-rag",
      keepAlive: true,
    };
    const store = new PostgresIndexStore(config, options);
    try {
      await migrate(store.pool);
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  }

  async listIndices(tenantId: string | null): Promise<IndexMeta[]> {
    const result = await translated(() =>
      tenantId === null
        ? this.pool.query<IndexRow>(`SELECT ${META_COLUMNS} FROM lectern_indices ORDER BY tenant_id, name`)
        : this.pool.query<IndexRow>(
            `SELECT ${META_COLUMNS} FROM lectern_indices WHERE tenant_id = $1 ORDER BY name`,
            [tenantId],
          ),
    );
    return result.rows.map(toMeta);
  }

  async getMeta(key: IndexKey): Promise<IndexMeta | undefined> {
    const { rows } = await translated(() =>
      this.pool.query<IndexRow>(
        `SELECT ${META_COLUMNS} FROM lectern_indices WHERE tenant_id = $1 AND name = $2`,
        [key.tenantId, key.name],
      ),
    );
    return rows[0] === undefined ? undefined : toMeta(rows[0]);
  }

  async loadSnapshot(key: IndexKey): Promise<IndexSnapshot | undefined> {
    const loaded = await this.readIndex(key, true);
    if (loaded === undefined) return undefined;
    const bytes = loaded.row.engine_index;
    return {
      meta: toMeta(loaded.row),
      engineIndex: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
      chunks: loaded.chunks,
      documents: loaded.documents,
    };
  }

  async loadChunks(key: IndexKey): Promise<ChunkRecord[]> {
    const loaded = await this.readIndex(key, false);
    if (loaded === undefined) throw notFound(`${label(key)} not found`);
    return loaded.chunks;
  }

  async write(change: IndexWrite): Promise<IndexMeta> {
    validateWrite(change);
    return this.transaction((client) => this.applyWrite(client, change));
  }

  async deleteIndex(key: IndexKey): Promise<boolean> {
    return this.transaction(async (client) => {
      await lockIndex(client, key);
      const { rows } = await client.query<{ id: string }>(
        "SELECT id FROM lectern_indices WHERE tenant_id = $1 AND name = $2",
        [key.tenantId, key.name],
      );
      const id = rows[0]?.id;
      if (id === undefined) return false;
      const args = [key.tenantId, id];
      await client.query("DELETE FROM lectern_chunks WHERE tenant_id = $1 AND index_id = $2", args);
      await client.query("DELETE FROM lectern_documents WHERE tenant_id = $1 AND index_id = $2", args);
      await client.query("DELETE FROM lectern_indices WHERE tenant_id = $1 AND id = $2", args);
      await notify(client, { tenantId: key.tenantId, name: key.name, version: null });
      return true;
    });
  }

  async sizeBytes(): Promise<number> {
    const { rows } = await translated(() =>
      this.pool.query<{ bytes: string }>(
        `SELECT pg_total_relation_size('lectern_indices') + pg_total_relation_size('lectern_documents')
           + pg_total_relation_size('lectern_chunks') AS bytes`,
      ),
    );
    return Number(rows[0]!.bytes);
  }

  subscribe(listener: (change: IndexChange) => void): ChangeFeed {
    if (this.closed) throw new Error("the store is closed");
    this.listeners.add(listener);
    this.listen ??= new ListenConnection(
      this.clientConfig,
      (change) => {
        for (const l of this.listeners) l(change);
      },
      this.options.onError ?? (() => undefined),
    );
    const connection = this.listen;
    return {
      get live() {
        return connection.live;
      },
      get epoch() {
        return connection.epoch;
      },
      close: () => {
        this.listeners.delete(listener);
        if (this.listeners.size === 0 && this.listen === connection) {
          connection.close();
          this.listen = null;
        }
      },
    };
  }

  async withWriteLock<T>(key: IndexKey, work: () => Promise<T>): Promise<T> {
    const client = await translated(() => this.lockPool.connect());
    try {
      await client.query("SELECT pg_advisory_lock($1, hashtext($2))", [WRITER_LOCK_SPACE, lockKey(key)]);
    } catch (error) {
      client.release(true);
      throw translate(error);
    }
    try {
      return await work();
    } finally {
      try {
        await client.query("SELECT pg_advisory_unlock($1, hashtext($2))", [WRITER_LOCK_SPACE, lockKey(key)]);
        client.release();
      } catch (error) {
        // Closing the connection releases its session locks too.
        client.release(error as Error);
      }
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.listen?.close();
    this.listen = null;
    this.listeners.clear();
    await Promise.allSettled([this.pool.end(), this.lockPool.end()]);
  }

  /** Runs `body` in one transaction on one pooled connection; any error rolls it back. */
  private async transaction<T>(body: (client: pg.PoolClient) => Promise<T>, begin = "BEGIN"): Promise<T> {
    const client = await translated(() => this.pool.connect());
    try {
      await client.query(begin);
      const result = await body(client);
      await client.query("COMMIT");
      client.release();
      return result;
    } catch (error) {
      try {
        await client.query("ROLLBACK");
        client.release();
      } catch (rollbackError) {
        client.release(rollbackError as Error);
      }
      throw translate(error);
    }
  }

  /** The index row, chunks in engine order and (optionally) documents, all from one snapshot. */
  private async readIndex(key: IndexKey, withDocuments: boolean) {
    return this.transaction(async (client) => {
      const { rows } = await client.query<IndexDataRow>(
        `SELECT ${META_COLUMNS}, chunk_order, ${withDocuments ? "engine_index" : "'\\x'::bytea AS engine_index"}
         FROM lectern_indices WHERE tenant_id = $1 AND name = $2`,
        [key.tenantId, key.name],
      );
      const row = rows[0];
      if (row === undefined) return undefined;
      const chunkRows = await client.query<ChunkRow>(
        `SELECT chunk_id, doc_id, seq, start_offset, end_offset, metadata, text FROM lectern_chunks
         WHERE tenant_id = $1 AND index_id = $2`,
        [key.tenantId, row.id],
      );
      const chunks = orderChunks(row.name, row.chunk_order, chunkRows.rows, (metadata) => metadata);
      const documents: IndexSnapshot["documents"] = new Map();
      if (withDocuments) {
        const documentRows = await client.query<DocumentRow>(
          `SELECT doc_id, title, source, metadata FROM lectern_documents
           WHERE tenant_id = $1 AND index_id = $2`,
          [key.tenantId, row.id],
        );
        for (const doc of documentRows.rows) {
          documents.set(doc.doc_id, {
            id: doc.doc_id,
            title: doc.title,
            source: doc.source,
            metadata: doc.metadata,
          });
        }
      }
      return { row, chunks, documents };
    }, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  }

  /** The body of the write transaction. */
  private async applyWrite(client: pg.PoolClient, change: IndexWrite): Promise<IndexMeta> {
    const { key, mode, settings } = change;
    const tenant = key.tenantId;
    await lockIndex(client, key);
    const found = await client.query<IndexRow>(
      `SELECT ${META_COLUMNS} FROM lectern_indices WHERE tenant_id = $1 AND name = $2`,
      [tenant, key.name],
    );
    const existing = found.rows[0] === undefined ? undefined : toMeta(found.rows[0]);
    if (mode === "create" && existing !== undefined) throw conflict(`${label(key)} already exists`);
    if (mode === "update" && existing === undefined) throw notFound(`${label(key)} not found`);
    if (change.expectedVersion !== null && (existing?.version ?? 0) !== change.expectedVersion) {
      throw new StaleVersionError(key, existing?.version, change.expectedVersion);
    }

    const next = await client.query<{ version: string }>("SELECT nextval('lectern_version_seq') AS version");
    const version = Number(next.rows[0]!.version);
    const now = new Date().toISOString();
    let id: string;
    if (found.rows[0] === undefined) {
      const inserted = await client.query<{ id: string }>(
        `INSERT INTO lectern_indices (tenant_id, name, scorer, chunk_size, overlap, documents_count,
           chunks_count, vocabulary_size, size_bytes, version, created_at, updated_at, chunk_order, engine_index)
         VALUES ($1, $2, $3, $4, $5, 0, 0, 0, 0, $6, $7, $7, '[]', '\\x') RETURNING id`,
        [tenant, key.name, settings.scorer, settings.chunkSize, settings.overlap, version, now],
      );
      id = inserted.rows[0]!.id;
    } else {
      id = found.rows[0].id;
      if (mode === "replace") {
        await client.query("DELETE FROM lectern_chunks WHERE tenant_id = $1 AND index_id = $2", [tenant, id]);
        await client.query("DELETE FROM lectern_documents WHERE tenant_id = $1 AND index_id = $2", [
          tenant,
          id,
        ]);
      } else {
        const gone = [...new Set([...change.deleteDocumentIds, ...change.upsert.map((u) => u.document.id)])];
        if (gone.length > 0) {
          await client.query(
            "DELETE FROM lectern_chunks WHERE tenant_id = $1 AND index_id = $2 AND doc_id = ANY($3::text[])",
            [tenant, id, gone],
          );
          await client.query(
            "DELETE FROM lectern_documents WHERE tenant_id = $1 AND index_id = $2 AND doc_id = ANY($3::text[])",
            [tenant, id, gone],
          );
        }
      }
    }

    await insertDocuments(client, tenant, id, change.upsert);

    const totals = await client.query<{ documents: string; chunks: string; bytes: string }>(
      `SELECT count(*) AS documents, coalesce(sum(chunks_count), 0) AS chunks,
         coalesce(sum(size_bytes), 0) AS bytes
       FROM lectern_documents WHERE tenant_id = $1 AND index_id = $2`,
      [tenant, id],
    );
    const documentsCount = Number(totals.rows[0]!.documents);
    const chunksCount = Number(totals.rows[0]!.chunks);
    await checkChunkOrder(client, tenant, id, change.chunkOrder, chunksCount);

    const chunkOrder = JSON.stringify(change.chunkOrder);
    const engineIndex = asBuffer(change.engineIndex);
    const sizeBytes = Number(totals.rows[0]!.bytes) + engineIndex.byteLength + utf8(chunkOrder);
    const updated = await client.query<IndexRow>(
      `UPDATE lectern_indices SET scorer = $3, chunk_size = $4, overlap = $5, documents_count = $6,
         chunks_count = $7, vocabulary_size = $8, size_bytes = $9, version = $10, updated_at = $11,
         chunk_order = $12, engine_index = $13
       WHERE tenant_id = $1 AND id = $2
       RETURNING ${META_COLUMNS}`,
      [
        tenant,
        id,
        settings.scorer,
        settings.chunkSize,
        settings.overlap,
        documentsCount,
        chunksCount,
        change.vocabularySize,
        sizeBytes,
        version,
        now,
        chunkOrder,
        engineIndex,
      ],
    );
    await notify(client, { tenantId: tenant, name: key.name, version });
    return toMeta(updated.rows[0]!);
  }
}

/** Serialises writes of one index across every connection and replica, until COMMIT or ROLLBACK. */
async function lockIndex(client: pg.PoolClient, key: IndexKey): Promise<void> {
  await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [WRITE_LOCK_SPACE, lockKey(key)]);
}

/** Queued by the transaction and delivered to every listener when (and only if) it commits. */
async function notify(client: pg.PoolClient, change: IndexChange): Promise<void> {
  await client.query("SELECT pg_notify($1, $2)", [CHANGE_CHANNEL, JSON.stringify(change)]);
}

/** Inserts documents and their chunks with multi-row INSERTs over arrays (a few statements per write). */
async function insertDocuments(
  client: pg.PoolClient,
  tenant: string,
  indexId: string,
  upsert: IndexWrite["upsert"],
): Promise<void> {
  const docs = {
    ids: [] as string[],
    chunks: [] as number[],
    bytes: [] as number[],
    titles: [] as Array<string | null>,
    sources: [] as Array<string | null>,
    metadata: [] as string[],
    texts: [] as string[],
  };
  const chunks = {
    docIds: [] as string[],
    seqs: [] as number[],
    ids: [] as string[],
    starts: [] as number[],
    ends: [] as number[],
    metadata: [] as string[],
    texts: [] as string[],
  };
  let docBytes = 0;
  let chunkBytes = 0;

  const flushDocuments = async () => {
    if (docs.ids.length === 0) return;
    await client.query(
      `INSERT INTO lectern_documents (tenant_id, index_id, doc_id, chunks_count, size_bytes, title, source,
         metadata, text)
       SELECT $1, $2, d.doc_id, d.chunks_count, d.size_bytes, d.title, d.source, d.metadata::json, d.text
       FROM unnest($3::text[], $4::integer[], $5::bigint[], $6::text[], $7::text[], $8::text[], $9::text[])
         AS d (doc_id, chunks_count, size_bytes, title, source, metadata, text)`,
      [
        tenant,
        indexId,
        docs.ids,
        docs.chunks,
        docs.bytes,
        docs.titles,
        docs.sources,
        docs.metadata,
        docs.texts,
      ],
    );
    for (const list of Object.values(docs)) list.length = 0;
    docBytes = 0;
  };
  const flushChunks = async () => {
    if (chunks.ids.length === 0) return;
    await client.query(
      `INSERT INTO lectern_chunks (tenant_id, index_id, doc_id, seq, chunk_id, start_offset, end_offset,
         metadata, text)
       SELECT $1, $2, c.doc_id, c.seq, c.chunk_id, c.start_offset, c.end_offset, c.metadata::json, c.text
       FROM unnest($3::text[], $4::integer[], $5::text[], $6::integer[], $7::integer[], $8::text[], $9::text[])
         AS c (doc_id, seq, chunk_id, start_offset, end_offset, metadata, text)`,
      [
        tenant,
        indexId,
        chunks.docIds,
        chunks.seqs,
        chunks.ids,
        chunks.starts,
        chunks.ends,
        chunks.metadata,
        chunks.texts,
      ],
    );
    for (const list of Object.values(chunks)) list.length = 0;
    chunkBytes = 0;
  };

  const serialisedAll = upsert.map(({ document, chunks: documentChunks }) =>
    serialiseDocument(document, documentChunks),
  );
  for (const [n, { document, chunks: documentChunks }] of upsert.entries()) {
    const serialised = serialisedAll[n]!;
    docs.ids.push(document.id);
    docs.chunks.push(documentChunks.length);
    docs.bytes.push(serialised.bytes);
    docs.titles.push(document.title);
    docs.sources.push(document.source);
    docs.metadata.push(serialised.metadata);
    docs.texts.push(document.text);
    docBytes += utf8(document.text) + utf8(serialised.metadata);
    if (docs.ids.length >= BATCH_ROWS || docBytes >= BATCH_BYTES) await flushDocuments();
  }
  await flushDocuments();

  // Chunks after all their documents: each chunk row references its document row.
  for (const [n, { document, chunks: documentChunks }] of upsert.entries()) {
    const serialised = serialisedAll[n]!;
    documentChunks.forEach((chunk, i) => {
      chunks.docIds.push(document.id);
      chunks.seqs.push(chunk.seq);
      chunks.ids.push(chunk.chunkId);
      chunks.starts.push(chunk.start);
      chunks.ends.push(chunk.end);
      chunks.metadata.push(serialised.chunkMetadata[i]!);
      chunks.texts.push(chunk.text);
      chunkBytes += utf8(chunk.text) + utf8(serialised.chunkMetadata[i]!);
    });
    if (chunks.ids.length >= BATCH_ROWS || chunkBytes >= BATCH_BYTES) await flushChunks();
  }
  await flushChunks();
}

/** chunkOrder must list exactly the chunks the index holds after the change. */
async function checkChunkOrder(
  client: pg.PoolClient,
  tenant: string,
  indexId: string,
  chunkOrder: string[],
  chunksCount: number,
): Promise<void> {
  if (chunkOrder.length !== chunksCount) {
    throw internal(`chunkOrder lists ${chunkOrder.length} chunks but the index holds ${chunksCount}`);
  }
  const wanted = new Set(chunkOrder);
  const { rows } = await client.query<{ chunk_id: string }>(
    "SELECT chunk_id FROM lectern_chunks WHERE tenant_id = $1 AND index_id = $2",
    [tenant, indexId],
  );
  for (const { chunk_id: chunkId } of rows) {
    if (!wanted.has(chunkId)) throw internal(`chunkOrder misses chunk "${chunkId}"`);
  }
}

/**
 * Applies the migrations not yet applied, in order, in one transaction. The advisory lock makes a
 * second replica starting at the same moment wait, then find everything applied.
 */
async function migrate(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS lectern_schema_migrations (
         version integer PRIMARY KEY,
         name text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const { rows } = await client.query<{ applied: number }>(
      "SELECT coalesce(max(version), 0)::integer AS applied FROM lectern_schema_migrations",
    );
    const applied = rows[0]!.applied;
    if (applied > PG_MIGRATIONS.length) {
      throw new Error(
        `the database has schema version ${applied}, newer than this program's ${PG_MIGRATIONS.length}; upgrade Lectern`,
      );
    }
    for (let version = applied + 1; version <= PG_MIGRATIONS.length; version++) {
      const migration = PG_MIGRATIONS[version - 1]!;
      await client.query(migration.sql);
      await client.query("INSERT INTO lectern_schema_migrations (version, name) VALUES ($1, $2)", [
        version,
        migration.name,
      ]);
    }
    await client.query("COMMIT");
    client.release();
  } catch (error) {
    try {
      await client.query("ROLLBACK");
      client.release();
    } catch (rollbackError) {
      client.release(rollbackError as Error);
    }
    throw error;
  }
}
