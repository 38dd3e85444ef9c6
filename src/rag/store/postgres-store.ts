/**
 * The shared store of the RAG app: PostgreSQL, chosen by `DATABASE_URL`, so that several RAG replicas
 * serve the same indices. Same semantics as the SQLite store (see store-contract.ts), plus what
 * replicas need:
 *
 * - Schema: created and migrated by the app at open. `lectern_schema_migrations` records the applied
 *   migrations; they run in order in one transaction under `pg_advisory_xact_lock`, so replicas that
 *   start together neither race nor apply a migration twice. Every table has a `tenant_id` column and
 *   every statement filters by it.
 * - Atomicity: a write (its segment as `bytea`, its tombstones, documents and chunks, the index row)
 *   or a merge is one transaction; a failure or a crash before COMMIT leaves the index as it was. A
 *   write touches only its own rows, with multi-row INSERTs over arrays: its cost grows with what it
 *   adds, not with the index.
 * - Concurrent writers: a write takes `pg_advisory_xact_lock` on its (tenant, index), so writes of one
 *   index from any number of replicas are serialised; `expectedVersion` is checked under that lock, so
 *   a writer that read an older version gets a 409 (StaleVersionError) instead of losing the other's
 *   documents. `withWriteLock` lets the RAG service hold a second, session-level advisory lock across
 *   its whole read-rebuild-write, so that replicas queue for an index instead of failing.
 * - Versions come from one sequence, so they increase on every write and are never reused (a rolled
 *   back write leaves a gap, which is harmless: caches only compare versions for equality and order).
 * - Change feed: each committed write, merge or delete sends `NOTIFY lectern_index_changed` with
 *   `{"tenantId","name","version"}` from inside its transaction (so it is delivered on commit, and
 *   never for a rolled-back write); `subscribe` LISTENs on a dedicated connection that reconnects
 *   after errors, with an `epoch` that tells caches when they may have missed changes. A replica then
 *   asks `loadChanges(version it holds)` for the segments and tombstones created since, and loads
 *   only those.
 * - Snapshots: `loadIndex` and `loadChanges` read the index row, segments and tombstones in one
 *   REPEATABLE READ transaction, so a replica never mixes two versions.
 */
import pg from "pg";
import { applyPgMigrations } from "../../core/pg-migrations.js";

import { badRequest, conflict, DomainError, notReady, storageFull } from "../../core/errors.js";
import { toParts } from "../search/vectors/vector-codec.js";
import {
  asBuffer,
  chunkHitsInKeyOrder,
  internal,
  utf8,
  validateMerge,
  validateWrite,
  type ChunkHitRow,
  type SegmentRow,
  type TombstoneRow,
} from "./common.js";
import {
  runAsync,
  type IndexSnapshot,
  type IndexTransaction,
  type RemovedDocument,
  type RemovedSegments,
  type SerialisedDocument,
} from "./port.js";
import { objectsTableSql, postgresObjects, type ObjectRecords } from "./openai-objects.js";
import { loadChanges, loadIndex } from "./read-plan.js";
import type {
  ChangeFeed,
  ChunkHit,
  DocumentChunks,
  DocumentListing,
  IndexChange,
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
  {
    name: "segments, tombstones and engine keys (segmented index)",
    // An index of the old format (one engine blob and a JSON chunk order) keeps its documents and
    // chunks, each chunk getting its position in the old order as engine key, and has no segment: the
    // service re-indexes it from its chunk texts when it first loads it.
    sql: `
    ALTER TABLE lectern_indices
      ADD COLUMN next_key bigint NOT NULL DEFAULT 0,
      ADD COLUMN next_segment_id integer NOT NULL DEFAULT 0,
      ADD COLUMN total_length bigint NOT NULL DEFAULT 0,
      ADD COLUMN segments_count integer NOT NULL DEFAULT 0,
      ADD COLUMN deleted_chunks_count integer NOT NULL DEFAULT 0;
    ALTER TABLE lectern_documents ADD COLUMN content_hash text;
    ALTER TABLE lectern_chunks ADD COLUMN engine_key bigint;

    UPDATE lectern_chunks AS c SET engine_key = p.position - 1
      FROM lectern_indices AS i
        CROSS JOIN LATERAL json_array_elements_text(i.chunk_order::json) WITH ORDINALITY AS p (chunk_id, position)
      WHERE c.tenant_id = i.tenant_id AND c.index_id = i.id AND c.chunk_id = p.chunk_id;
    UPDATE lectern_indices AS i SET
      next_key = json_array_length(i.chunk_order::json),
      size_bytes = coalesce(
        (SELECT sum(d.size_bytes) FROM lectern_documents AS d WHERE d.tenant_id = i.tenant_id AND d.index_id = i.id),
        0);
    ALTER TABLE lectern_indices DROP COLUMN chunk_order, DROP COLUMN engine_index;
    CREATE UNIQUE INDEX lectern_chunks_by_engine_key ON lectern_chunks (tenant_id, index_id, engine_key);

    -- Immutable once written; a merge deletes some and inserts their replacement.
    CREATE TABLE lectern_segments (
      tenant_id text COLLATE "C" NOT NULL,
      index_id bigint NOT NULL,
      segment_id integer NOT NULL,
      doc_count integer NOT NULL,
      created_version bigint NOT NULL,
      bytes bytea NOT NULL,
      PRIMARY KEY (tenant_id, index_id, segment_id),
      FOREIGN KEY (tenant_id, index_id) REFERENCES lectern_indices (tenant_id, id) ON DELETE CASCADE
    );
    -- Typed arrays that compress poorly: uncompressed, out of line, so loading costs a copy only.
    ALTER TABLE lectern_segments ALTER COLUMN bytes SET STORAGE EXTERNAL;

    CREATE TABLE lectern_tombstones (
      tenant_id text COLLATE "C" NOT NULL,
      index_id bigint NOT NULL,
      segment_id integer NOT NULL,
      ordinal integer NOT NULL,
      created_version bigint NOT NULL,
      PRIMARY KEY (tenant_id, index_id, segment_id, ordinal),
      FOREIGN KEY (tenant_id, index_id, segment_id)
        REFERENCES lectern_segments (tenant_id, index_id, segment_id) ON DELETE CASCADE
    );
    -- What a replica asks for: the tombstones created after the version it holds.
    CREATE INDEX lectern_tombstones_by_version ON lectern_tombstones (tenant_id, index_id, created_version);
    `,
  },
  {
    name: "vectors",
    sql: `
    -- The index's embedding space (all null: a lexical-only index).
    ALTER TABLE lectern_indices
      ADD COLUMN vector_model text,
      ADD COLUMN vector_dimension integer,
      ADD COLUMN vector_storage text CHECK (vector_storage IN ('f32', 'f16', 'i8'));

    -- A segment's vectors (vectors/vector-codec.ts), cut in parts (toParts): written and dropped with it.
    CREATE TABLE lectern_segment_vectors (
      tenant_id text COLLATE "C" NOT NULL,
      index_id bigint NOT NULL,
      segment_id integer NOT NULL,
      part integer NOT NULL,
      bytes bytea NOT NULL,
      PRIMARY KEY (tenant_id, index_id, segment_id, part),
      FOREIGN KEY (tenant_id, index_id, segment_id)
        REFERENCES lectern_segments (tenant_id, index_id, segment_id) ON DELETE CASCADE
    );
    -- Quantised floats compress poorly: uncompressed, out of line, as segment bytes are.
    ALTER TABLE lectern_segment_vectors ALTER COLUMN bytes SET STORAGE EXTERNAL;
    `,
  },
  {
    name: "OpenAI vector stores, files and batches",
    sql: objectsTableSql("lectern_openai_objects", 'text COLLATE "C"', "bigint"),
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

/** PostgreSQL gives bigints as strings and timestamps as Dates. */
type IndexRow = IndexRowOf<string, Date>;

/** The id of an index by key, as a subquery of statements that take ($1 tenant, $2 name). */
const INDEX_ID = "(SELECT id FROM lectern_indices WHERE tenant_id = $1 AND name = $2)";

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
  if (error instanceof DomainError || !(error instanceof Error)) return error;
  const code = (error as { code?: unknown }).code;
  if (error instanceof pg.DatabaseError) {
    // 22021: invalid byte sequence (a NUL character); 22P05: untranslatable character.
    if (code === "22021" || code === "22P05") {
      return badRequest(
        "A document contains a character PostgreSQL cannot store in text (a NUL, \\u0000); remove it",
      );
    }
    // 23505 / 23503: a key or tombstone given twice, a tombstone on no segment (the caller's bug).
    if (code === "23505" || code === "23503") {
      return internal(`the write breaks a constraint of the store: ${error.message} (${error.detail ?? ""})`);
    }
    // 53100: disk_full.
    if (code === "53100") return storageFull();
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
  readonly objects: ObjectRecords;
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
    this.objects = postgresObjects(this.pool, translated);
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

  async loadIndex(key: IndexKey): Promise<StoredIndex | undefined> {
    return this.readTransaction((client) => runAsync(loadIndex(new PostgresPort(client, key, false), key)));
  }

  async loadChanges(key: IndexKey, sinceVersion: number): Promise<IndexDelta | undefined> {
    return this.readTransaction((client) =>
      runAsync(loadChanges(new PostgresPort(client, key, false), key, sinceVersion)),
    );
  }

  async getChunks(key: IndexKey, engineKeys: readonly number[]): Promise<ChunkHit[]> {
    if (engineKeys.length === 0) return [];
    // One statement whatever the number of keys: an index scan of (tenant, index, engine_key) per key.
    const { rows } = await translated(() =>
      this.pool.query<ChunkHitRow<string, Metadata>>(
        `SELECT c.engine_key, c.chunk_id, c.doc_id, c.seq, c.start_offset, c.end_offset, c.metadata, c.text,
           d.title, d.source
         FROM lectern_chunks AS c
           JOIN lectern_documents AS d
             ON d.tenant_id = c.tenant_id AND d.index_id = c.index_id AND d.doc_id = c.doc_id
         WHERE c.tenant_id = $1 AND c.index_id = ${INDEX_ID} AND c.engine_key = ANY($3::bigint[])`,
        [key.tenantId, key.name, engineKeys],
      ),
    );
    return chunkHitsInKeyOrder(engineKeys, rows, (metadata: Metadata) => metadata);
  }

  async getDocumentChunks(key: IndexKey, documentIds: readonly string[]): Promise<DocumentChunks> {
    const result: DocumentChunks = new Map();
    if (documentIds.length === 0) return result;
    // One statement, so documents and chunks come from one snapshot.
    const { rows } = await translated(() =>
      this.pool.query<{
        doc_id: string;
        title: string | null;
        engine_key: string | null;
        text: string | null;
      }>(
        `SELECT d.doc_id, d.title, c.engine_key, c.text
         FROM lectern_documents AS d
           LEFT JOIN lectern_chunks AS c
             ON c.tenant_id = d.tenant_id AND c.index_id = d.index_id AND c.doc_id = d.doc_id
         WHERE d.tenant_id = $1 AND d.index_id = ${INDEX_ID} AND d.doc_id = ANY($3::text[])
         ORDER BY d.doc_id, c.seq`,
        [key.tenantId, key.name, documentIds],
      ),
    );
    for (const row of rows) {
      let document = result.get(row.doc_id);
      if (document === undefined) result.set(row.doc_id, (document = { title: row.title, chunks: [] }));
      if (row.engine_key !== null)
        document.chunks.push({ engineKey: Number(row.engine_key), text: row.text! });
    }
    return result;
  }

  async listDocuments(key: IndexKey): Promise<DocumentListing[]> {
    const { rows } = await translated(() =>
      this.pool.query<{ doc_id: string; source: string | null; content_hash: string | null }>(
        `SELECT doc_id, source, content_hash FROM lectern_documents
         WHERE tenant_id = $1 AND index_id = ${INDEX_ID} ORDER BY doc_id`,
        [key.tenantId, key.name],
      ),
    );
    return rows.map((row) => ({ id: row.doc_id, source: row.source, contentHash: row.content_hash }));
  }

  async hasDocument(key: IndexKey, documentId: string): Promise<boolean> {
    const { rows } = await translated(() =>
      this.pool.query(
        `SELECT 1 FROM lectern_documents WHERE tenant_id = $1 AND index_id = ${INDEX_ID} AND doc_id = $3`,
        [key.tenantId, key.name, documentId],
      ),
    );
    return rows.length > 0;
  }

  async write(change: IndexWrite): Promise<IndexMeta> {
    validateWrite(change);
    return this.transaction((client) => runAsync(applyWrite(new PostgresPort(client, change.key), change)));
  }

  async commitMerge(change: MergeWrite): Promise<IndexMeta> {
    validateMerge(change);
    return this.transaction((client) => runAsync(applyMerge(new PostgresPort(client, change.key), change)));
  }

  async deleteIndex(key: IndexKey): Promise<boolean> {
    return this.transaction((client) => runAsync(dropIndex(new PostgresPort(client, key), key)));
  }

  async sizeBytes(): Promise<number> {
    const { rows } = await translated(() =>
      this.pool.query<{ bytes: string }>(
        `SELECT pg_total_relation_size('lectern_indices') + pg_total_relation_size('lectern_documents')
           + pg_total_relation_size('lectern_chunks') + pg_total_relation_size('lectern_segments')
           + pg_total_relation_size('lectern_tombstones') AS bytes`,
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

  /** Runs `body` in one REPEATABLE READ, READ ONLY transaction: everything it reads is one version. */
  private async readTransaction<T>(body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.transaction(body, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  }
}

/**
 * The store's port (port.ts) on one pooled connection inside a transaction: every statement names the
 * tenant of the transaction's index. A write transaction (`lockWriters`) takes the index's advisory
 * lock before reading its row, so writes of one index from any replica are serialised.
 */
class PostgresPort implements IndexTransaction<IndexRow>, IndexSnapshot<IndexRow> {
  private readonly tenant: string;

  constructor(
    private readonly client: pg.PoolClient,
    key: IndexKey,
    private readonly lockWriters = true,
  ) {
    this.tenant = key.tenantId;
  }

  private async rows<Row extends pg.QueryResultRow>(sql: string, args: unknown[]): Promise<Row[]> {
    return (await this.client.query<Row>(sql, [this.tenant, ...args])).rows;
  }

  async readIndex(key: IndexKey): Promise<IndexRow | undefined> {
    if (this.lockWriters) {
      await this.client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [
        WRITE_LOCK_SPACE,
        lockKey(key),
      ]);
    }
    return (
      await this.rows<IndexRow>(
        `SELECT ${META_COLUMNS} FROM lectern_indices WHERE tenant_id = $1 AND name = $2`,
        [key.name],
      )
    )[0];
  }

  async nextVersion(): Promise<number> {
    const next = await this.client.query<{ version: string }>(
      "SELECT nextval('lectern_version_seq') AS version",
    );
    return Number(next.rows[0]!.version);
  }

  async insertIndex(key: IndexKey, settings: IndexSettings, version: number, now: string): Promise<string> {
    const inserted = await this.rows<{ id: string }>(
      `INSERT INTO lectern_indices (tenant_id, name, scorer, chunk_size, overlap, documents_count,
         chunks_count, vocabulary_size, size_bytes, version, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, 0, 0, 0, 0, $6, $7, $7) RETURNING id`,
      [key.name, settings.scorer, settings.chunkSize, settings.overlap, version, now],
    );
    return inserted[0]!.id;
  }

  async clearIndex(id: string): Promise<void> {
    for (const table of ["lectern_tombstones", "lectern_segments", "lectern_chunks", "lectern_documents"])
      await this.rows(`DELETE FROM ${table} WHERE tenant_id = $1 AND index_id = $2`, [id]);
  }

  async deleteIndex(id: string): Promise<void> {
    await this.rows("DELETE FROM lectern_indices WHERE tenant_id = $1 AND id = $2", [id]);
  }

  async removeDocuments(id: string, documentIds: readonly string[]): Promise<RemovedDocument[]> {
    const args = [id, documentIds];
    await this.rows(
      "DELETE FROM lectern_chunks WHERE tenant_id = $1 AND index_id = $2 AND doc_id = ANY($3::text[])",
      args,
    );
    const removed = await this.rows<{ chunks_count: number; size_bytes: string }>(
      `DELETE FROM lectern_documents WHERE tenant_id = $1 AND index_id = $2 AND doc_id = ANY($3::text[])
       RETURNING chunks_count, size_bytes`,
      args,
    );
    return removed.map((row) => ({ chunksCount: row.chunks_count, sizeBytes: Number(row.size_bytes) }));
  }

  async insertSegment(id: string, segment: SegmentRecord, version: number): Promise<void> {
    await this.rows(
      `INSERT INTO lectern_segments (tenant_id, index_id, segment_id, doc_count, created_version, bytes)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [id, segment.id, segment.documentCount, version, asBuffer(segment.bytes)],
    );
    if (segment.vectors == null) return;
    for (const [part, bytes] of toParts(segment.vectors).entries()) {
      await this.rows(
        `INSERT INTO lectern_segment_vectors (tenant_id, index_id, segment_id, part, bytes)
         VALUES ($1, $2, $3, $4, $5)`,
        [id, segment.id, part, asBuffer(bytes)],
      );
    }
  }

  async segmentDocumentCounts(id: string, segmentIds: readonly number[]): Promise<Map<number, number>> {
    const rows = await this.rows<{ segment_id: number; doc_count: number }>(
      `SELECT segment_id, doc_count FROM lectern_segments
       WHERE tenant_id = $1 AND index_id = $2 AND segment_id = ANY($3::integer[])`,
      [id, segmentIds],
    );
    return new Map(rows.map((row) => [row.segment_id, row.doc_count]));
  }

  async insertTombstones(id: string, tombstones: readonly Tombstone[], version: number): Promise<void> {
    await this.rows(
      `INSERT INTO lectern_tombstones (tenant_id, index_id, segment_id, ordinal, created_version)
       SELECT $1, $2, t.segment_id, t.ordinal, $5 FROM unnest($3::integer[], $4::integer[]) AS t (segment_id, ordinal)`,
      [id, tombstones.map((t) => t.segmentId), tombstones.map((t) => t.ordinal), version],
    );
  }

  /** Multi-row INSERTs over arrays (a few statements per write); chunks after all their documents. */
  async insertDocuments(id: string, documents: readonly SerialisedDocument[]): Promise<void> {
    const documentRows = new ColumnBatch(this.client, "lectern_documents", DOCUMENT_COLUMNS, [
      this.tenant,
      id,
    ]);
    for (const { document, metadata, bytes, chunkCount, documentRow } of documents) {
      if (!documentRow) continue;
      const { title, source, text, contentHash } = document;
      await documentRows.add(
        [document.id, chunkCount, bytes, title, source, metadata, text, contentHash],
        utf8(text) + utf8(metadata),
      );
    }
    await documentRows.flush();
    const chunkRows = new ColumnBatch(this.client, "lectern_chunks", CHUNK_COLUMNS, [this.tenant, id]);
    for (const { document, chunks, chunkMetadata } of documents) {
      for (const [i, chunk] of chunks.entries()) {
        const metadata = chunkMetadata[i]!;
        await chunkRows.add(
          [
            document.id,
            chunk.seq,
            chunk.chunkId,
            chunk.start,
            chunk.end,
            metadata,
            chunk.text,
            chunk.engineKey,
          ],
          utf8(chunk.text) + utf8(metadata),
        );
      }
    }
    await chunkRows.flush();
  }

  async segmentDocumentTotal(id: string): Promise<number> {
    const total = await this.rows<{ documents: string }>(
      "SELECT coalesce(sum(doc_count), 0) AS documents FROM lectern_segments WHERE tenant_id = $1 AND index_id = $2",
      [id],
    );
    return Number(total[0]!.documents);
  }

  async removeSegments(id: string, segmentIds: readonly number[]): Promise<RemovedSegments> {
    const args = [id, segmentIds];
    const tombstones = await this.client.query(
      "DELETE FROM lectern_tombstones WHERE tenant_id = $1 AND index_id = $2 AND segment_id = ANY($3::integer[])",
      [this.tenant, ...args],
    );
    // Vector parts go with their segment (ON DELETE CASCADE); their bytes count in the segment's size.
    const removed = await this.rows<{ doc_count: number; size: string }>(
      `DELETE FROM lectern_segments AS s WHERE tenant_id = $1 AND index_id = $2 AND segment_id = ANY($3::integer[])
       RETURNING doc_count, octet_length(bytes) + coalesce((SELECT sum(octet_length(v.bytes))
         FROM lectern_segment_vectors AS v
         WHERE v.tenant_id = s.tenant_id AND v.index_id = s.index_id AND v.segment_id = s.segment_id), 0) AS size`,
      args,
    );
    return {
      segments: removed.map((row) => ({ documentCount: row.doc_count, sizeBytes: Number(row.size) })),
      tombstones: tombstones.rowCount ?? 0,
    };
  }

  async updateIndex(id: string, update: IndexUpdate): Promise<IndexRow> {
    const updated = await this.rows<IndexRow>(
      `UPDATE lectern_indices SET scorer = $3, chunk_size = $4, overlap = $5, documents_count = $6,
         chunks_count = $7, vocabulary_size = $8, size_bytes = $9, version = $10, updated_at = $11,
         next_key = $12, next_segment_id = $13, total_length = $14, segments_count = $15,
         deleted_chunks_count = $16, vector_model = $17, vector_dimension = $18, vector_storage = $19
       WHERE tenant_id = $1 AND id = $2
       RETURNING ${META_COLUMNS}`,
      [
        id,
        update.scorer,
        update.chunkSize,
        update.overlap,
        update.documentsCount,
        update.chunksCount,
        update.vocabularySize,
        update.sizeBytes,
        update.version,
        update.now,
        update.nextKey,
        update.nextSegmentId,
        update.totalLength,
        update.segmentsCount,
        update.deletedChunksCount,
        update.vectorModel,
        update.vectorDimension,
        update.vectorStorage,
      ],
    );
    return updated[0]!;
  }

  /** Queued by the transaction and delivered to every listener when (and only if) it commits. */
  async announce(change: IndexChange): Promise<void> {
    await this.client.query("SELECT pg_notify($1, $2)", [CHANGE_CHANNEL, JSON.stringify(change)]);
  }

  async segments(id: string, createdAfter: number | null): Promise<SegmentRow[]> {
    return createdAfter === null
      ? this.rows<SegmentRow>(
          `SELECT segment_id, doc_count, bytes FROM lectern_segments WHERE tenant_id = $1 AND index_id = $2
           ORDER BY segment_id`,
          [id],
        )
      : this.rows<SegmentRow>(
          `SELECT segment_id, doc_count, bytes FROM lectern_segments
           WHERE tenant_id = $1 AND index_id = $2 AND created_version > $3 ORDER BY segment_id`,
          [id, createdAfter],
        );
  }

  async segmentIds(id: string): Promise<number[]> {
    const rows = await this.rows<{ segment_id: number }>(
      "SELECT segment_id FROM lectern_segments WHERE tenant_id = $1 AND index_id = $2 ORDER BY segment_id",
      [id],
    );
    return rows.map((row) => row.segment_id);
  }

  async tombstones(id: string, createdAfter: number | null): Promise<TombstoneRow[]> {
    return createdAfter === null
      ? this.rows<TombstoneRow>(
          `SELECT segment_id, ordinal FROM lectern_tombstones WHERE tenant_id = $1 AND index_id = $2
           ORDER BY segment_id, ordinal`,
          [id],
        )
      : this.rows<TombstoneRow>(
          `SELECT segment_id, ordinal FROM lectern_tombstones
           WHERE tenant_id = $1 AND index_id = $2 AND created_version > $3
           ORDER BY segment_id, ordinal`,
          [id, createdAfter],
        );
  }

  /** One statement per segment: a part is up to 64 MB. */
  async vectorParts(id: string, segmentId: number): Promise<Buffer[]> {
    const rows = await this.rows<{ bytes: Buffer }>(
      `SELECT bytes FROM lectern_segment_vectors
       WHERE tenant_id = $1 AND index_id = $2 AND segment_id = $3 ORDER BY part`,
      [id, segmentId],
    );
    return rows.map((row) => row.bytes);
  }
}

/** A table's columns after (tenant_id, index_id), with their types; json ones travel as text. */
type Columns = ReadonlyArray<readonly [name: string, type: "text" | "integer" | "bigint" | "json"]>;

const DOCUMENT_COLUMNS: Columns = [
  ["doc_id", "text"],
  ["chunks_count", "integer"],
  ["size_bytes", "bigint"],
  ["title", "text"],
  ["source", "text"],
  ["metadata", "json"],
  ["text", "text"],
  ["content_hash", "text"],
];

const CHUNK_COLUMNS: Columns = [
  ["doc_id", "text"],
  ["seq", "integer"],
  ["chunk_id", "text"],
  ["start_offset", "integer"],
  ["end_offset", "integer"],
  ["metadata", "json"],
  ["text", "text"],
  ["engine_key", "bigint"],
];

/**
 * Rows gathered column by column and inserted with one multi-row INSERT over arrays (`SELECT $1, $2,
 * r.… FROM unnest($3::…[], …)`) each BATCH_ROWS rows or BATCH_BYTES of text, so that one statement
 * stays well below protocol limits.
 */
class ColumnBatch {
  private readonly sql: string;
  private readonly columns: unknown[][];
  private bytes = 0;

  constructor(
    private readonly client: pg.PoolClient,
    table: string,
    columns: Columns,
    /** $1, $2: the tenant and the index, shared by every row. */
    private readonly shared: readonly [string, string],
  ) {
    const names = columns.map(([name]) => name).join(", ");
    const values = columns.map(([name, type]) => (type === "json" ? `r.${name}::json` : `r.${name}`));
    const arrays = columns.map(([, type], i) => `$${i + 3}::${type === "json" ? "text" : type}[]`);
    this.sql =
      `INSERT INTO ${table} (tenant_id, index_id, ${names}) ` +
      `SELECT $1, $2, ${values.join(", ")} FROM unnest(${arrays.join(", ")}) AS r (${names})`;
    this.columns = columns.map(() => []);
  }

  async add(row: readonly unknown[], bytes: number): Promise<void> {
    row.forEach((value, i) => this.columns[i]!.push(value));
    this.bytes += bytes;
    if (this.columns[0]!.length >= BATCH_ROWS || this.bytes >= BATCH_BYTES) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.columns[0]!.length === 0) return;
    await this.client.query(this.sql, [...this.shared, ...this.columns]);
    for (const column of this.columns) column.length = 0;
    this.bytes = 0;
  }
}

/**
 * Applies the migrations not yet applied, in order, in one transaction. The advisory lock makes a
 * second replica starting at the same moment wait, then find everything applied.
 */
function migrate(pool: pg.Pool): Promise<void> {
  return applyPgMigrations(pool, {
    lock: MIGRATION_LOCK.toString(),
    ledger: { table: "lectern_schema_migrations", named: true },
    migrations: PG_MIGRATIONS,
    subject: "the database",
  });
}
