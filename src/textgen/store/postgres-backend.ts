/**
 * The Responses store in PostgreSQL (DATABASE_URL), so that several text generation replicas share
 * it: the same tables and semantics as SQLite's (sqlite-backend.ts), prefixed `lectern_responses_`
 * beside the RAG store's tables. The schema is created at first use under an advisory lock, so
 * replicas that start together do not race. Every write is one transaction; appends to a
 * conversation lock its row, so its items keep the order their transactions committed in.
 * Items are `text` holding JSON, not `jsonb`: jsonb refuses `\u0000`, which JSON text may carry.
 */
import pg from "pg";
import { applyPgMigrations } from "../../core/pg-migrations.js";
import { DomainError, notReady } from "../../core/errors.js";
import { planPage, toPage } from "./paging.js";
import { BATCH_MIGRATION, PostgresBatchTables } from "./postgres-batches.js";
import {
  EVICTION_BATCH,
  utf8Bytes,
  type History,
  type ItemPage,
  type ItemRow,
  type NewResponse,
  type ObjectKind,
  type PageQuery,
  type BatchBackend,
  type ResponsesBackend,
  type StoreLimits,
  type StoredResponse,
} from "./types.js";

const O = "lectern_responses_objects";
const I = "lectern_responses_items";
const T = "lectern_responses_totals";

/** Append, never edit a released one; `lectern_responses_migrations` records those applied. */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE ${O} (
    tenant text NOT NULL,
    id text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('response', 'conversation')),
    changed_ms bigint NOT NULL,
    previous_id text,
    bytes bigint NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (tenant, id)
  );
  CREATE INDEX ${O}_by_age ON ${O} (changed_ms);
  CREATE TABLE ${I} (
    seq bigserial PRIMARY KEY,
    tenant text NOT NULL,
    owner_id text NOT NULL,
    role text NOT NULL CHECK (role IN ('input', 'output', 'item')),
    id text NOT NULL,
    bytes bigint NOT NULL,
    body text NOT NULL,
    FOREIGN KEY (tenant, owner_id) REFERENCES ${O} (tenant, id) ON DELETE CASCADE
  );
  CREATE INDEX ${I}_by_owner ON ${I} (tenant, owner_id, role, seq);
  CREATE INDEX ${I}_by_id ON ${I} (tenant, id);
  CREATE TABLE ${T} (id integer PRIMARY KEY CHECK (id = 1), bytes bigint NOT NULL);
  INSERT INTO ${T} (id, bytes) VALUES (1, 0);
  `,
  BATCH_MIGRATION,
];

/** "lectern" and "responses" in ASCII, apart from the RAG store's lock. */
const MIGRATION_LOCK = 0x6c65637265737073n;

type Query = Pick<pg.PoolClient, "query">;

/** A database that cannot be reached, or is shutting down, is a 503 to retry; others stay as they are. */
function translated(error: unknown): unknown {
  if (error instanceof DomainError || !(error instanceof Error)) return error;
  const code = (error as { code?: unknown }).code;
  const unreachable =
    (typeof code === "string" && (code.startsWith("08") || /^57P0[123]$/.test(code))) ||
    ["ECONNREFUSED", "ECONNRESET", "ENOTFOUND", "ETIMEDOUT", "EHOSTUNREACH"].includes(String(code)) ||
    /Connection terminated|timeout exceeded when trying to connect/i.test(error.message);
  return unreachable ? notReady(`The Responses store (PostgreSQL) is unavailable: ${error.message}`) : error;
}

class PostgresResponsesBackend implements ResponsesBackend {
  private readonly pool: pg.Pool;
  private migrated: Promise<void> | undefined;

  constructor(
    databaseUrl: string,
    private readonly limits: StoreLimits,
    onError: (error: Error) => void,
  ) {
    this.pool = new pg.Pool({
      connectionString: databaseUrl,
      application_name: "lectern-responses",
      max: 4,
      keepAlive: true,
      connectionTimeoutMillis: 10_000,
      idle_in_transaction_session_timeout: 60_000,
    });
    // An idle pooled connection that breaks is dropped by the pool; without a handler it would crash.
    this.pool.on("error", onError);
  }

  private ready(): Promise<void> {
    this.migrated ??= migrate(this.pool).catch((error: unknown) => {
      this.migrated = undefined;
      throw error;
    });
    return this.migrated;
  }

  private async run<T>(work: (client: Query) => Promise<T>, write = true): Promise<T> {
    try {
      await this.ready();
      const client = await this.pool.connect();
      try {
        await client.query(write ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        const result = await work(client);
        await client.query("COMMIT");
        client.release();
        return result;
      } catch (error) {
        await client.query("ROLLBACK").then(
          () => client.release(),
          (rollback: Error) => client.release(rollback),
        );
        throw error;
      }
    } catch (error) {
      throw translated(error);
    }
  }

  private since(now: number): number {
    return now - this.limits.ttlMs;
  }

  private async live(client: Query, tenant: string, kind: ObjectKind, id: string, now: number, lock = false) {
    const { rows } = await client.query<{ body: string; previous_id: string | null }>(
      `SELECT body, previous_id FROM ${O} WHERE tenant = $1 AND id = $2 AND kind = $3 AND changed_ms >= $4
       ${lock ? "FOR UPDATE" : ""}`,
      [tenant, id, kind, this.since(now)],
    );
    return rows[0];
  }

  private async insertItems(client: Query, tenant: string, owner: string, role: string, items: ItemRow[]) {
    if (items.length === 0) return 0;
    const sizes = items.map((item) => utf8Bytes(item.json));
    await client.query(
      `INSERT INTO ${I} (tenant, owner_id, role, id, bytes, body)
       SELECT $1, $2, $3, item.id, item.bytes, item.body
       FROM unnest($4::text[], $5::bigint[], $6::text[]) WITH ORDINALITY AS item (id, bytes, body, n)
       ORDER BY item.n`,
      [tenant, owner, role, items.map((item) => item.id), sizes, items.map((item) => item.json)],
    );
    return sizes.reduce((sum, size) => sum + size, 0);
  }

  private async addTotal(client: Query, delta: number) {
    if (delta !== 0) await client.query(`UPDATE ${T} SET bytes = bytes + $1 WHERE id = 1`, [delta]);
  }

  /** Call with the conversation's row locked (`live(..., true)`). */
  private async append(client: Query, tenant: string, id: string, items: ItemRow[], now: number) {
    const bytes = await this.insertItems(client, tenant, id, "item", items);
    await client.query(`UPDATE ${O} SET bytes = bytes + $1, changed_ms = $2 WHERE tenant = $3 AND id = $4`, [
      bytes,
      now,
      tenant,
      id,
    ]);
    await this.addTotal(client, bytes);
  }

  saveResponse(tenant: string, response: NewResponse, now: number) {
    return this.run(async (client): Promise<"saved" | "no_conversation"> => {
      if (response.keep) {
        await client.query(
          `INSERT INTO ${O} (tenant, id, kind, changed_ms, previous_id, bytes, body)
           VALUES ($1, $2, 'response', $3, $4, 0, $5)`,
          [tenant, response.id, now, response.previousId, response.body],
        );
        const bytes =
          utf8Bytes(response.body) +
          (await this.insertItems(client, tenant, response.id, "input", response.input)) +
          (await this.insertItems(client, tenant, response.id, "output", response.output));
        await client.query(`UPDATE ${O} SET bytes = $1 WHERE tenant = $2 AND id = $3`, [
          bytes,
          tenant,
          response.id,
        ]);
        await this.addTotal(client, bytes);
      }
      const conversation = response.conversationId;
      if (conversation === null) return "saved";
      if (!(await this.live(client, tenant, "conversation", conversation, now, true)))
        return "no_conversation";
      await this.append(client, tenant, conversation, [...response.input, ...response.output], now);
      return "saved";
    });
  }

  private async itemsOf(client: Query, tenant: string, owner: string, roles: string[]) {
    const { rows } = await client.query<{ body: string }>(
      `SELECT body FROM ${I} WHERE tenant = $1 AND owner_id = $2 AND role = ANY($3::text[]) ORDER BY seq`,
      [tenant, owner, roles],
    );
    return rows.map((row) => row.body);
  }

  response(tenant: string, id: string, now: number) {
    return this.run(async (client): Promise<StoredResponse | undefined> => {
      const row = await this.live(client, tenant, "response", id, now);
      return row && { body: row.body, output: await this.itemsOf(client, tenant, id, ["output"]) };
    }, false);
  }

  deleteObject(tenant: string, kind: ObjectKind, id: string, now: number) {
    return this.run(async (client) => {
      const { rows } = await client.query<{ bytes: string }>(
        `DELETE FROM ${O} WHERE tenant = $1 AND id = $2 AND kind = $3 AND changed_ms >= $4 RETURNING bytes`,
        [tenant, id, kind, this.since(now)],
      );
      if (rows[0]) await this.addTotal(client, -Number(rows[0].bytes));
      return rows.length > 0;
    });
  }

  history(tenant: string, id: string, now: number) {
    return this.run(async (client): Promise<History | undefined> => {
      const { rows: chain } = await client.query<{ id: string; previous_id: string | null }>(
        `WITH RECURSIVE chain (id, previous_id, depth) AS (
           SELECT id, previous_id, 0 FROM ${O}
           WHERE tenant = $1 AND id = $2 AND kind = 'response' AND changed_ms >= $3
           UNION ALL
           SELECT o.id, o.previous_id, chain.depth + 1 FROM ${O} o JOIN chain
             ON o.tenant = $1 AND o.id = chain.previous_id AND o.kind = 'response' AND o.changed_ms >= $3
         )
         SELECT id, previous_id FROM chain ORDER BY depth`,
        [tenant, id, this.since(now)],
      );
      const oldest = chain.at(-1);
      if (!oldest) return undefined;
      if (oldest.previous_id !== null) return { missing: oldest.previous_id };
      const { rows } = await client.query<{ body: string }>(
        `SELECT i.body FROM ${I} i JOIN unnest($2::text[]) WITH ORDINALITY AS link (id, n) ON i.owner_id = link.id
         WHERE i.tenant = $1 AND i.role IN ('input', 'output') ORDER BY link.n, i.seq`,
        [tenant, chain.reverse().map((link) => link.id)],
      );
      return { items: rows.map((row) => row.body) };
    }, false);
  }

  item(tenant: string, itemId: string, now: number) {
    return this.run(async (client) => {
      const { rows } = await client.query<{ body: string }>(
        `SELECT i.body FROM ${I} i JOIN ${O} o ON o.tenant = i.tenant AND o.id = i.owner_id
         WHERE i.tenant = $1 AND i.id = $2 AND o.changed_ms >= $3 ORDER BY i.seq DESC LIMIT 1`,
        [tenant, itemId, this.since(now)],
      );
      return rows[0]?.body;
    }, false);
  }

  page(tenant: string, kind: ObjectKind, ownerId: string, query: PageQuery, now: number) {
    return this.run(async (client): Promise<ItemPage | "no_cursor" | undefined> => {
      if (!(await this.live(client, tenant, kind, ownerId, now))) return undefined;
      const role = kind === "response" ? "input" : "item";
      const seqOf = async (itemId: string | undefined) => {
        if (itemId === undefined) return undefined;
        const { rows } = await client.query<{ seq: string }>(
          `SELECT seq FROM ${I} WHERE tenant = $1 AND owner_id = $2 AND role = $3 AND id = $4 ORDER BY seq LIMIT 1`,
          [tenant, ownerId, role, itemId],
        );
        return rows[0] ? Number(rows[0].seq) : null;
      };
      const after = await seqOf(query.after);
      const before = await seqOf(query.before);
      if (after === null || before === null) return "no_cursor";
      const plan = planPage(query, { after, before });
      const { rows } = await client.query<ItemRow>(
        `SELECT id, body AS json FROM ${I} WHERE tenant = $1 AND owner_id = $2 AND role = $3
         ${plan.bounds.map(([op], at) => `AND seq ${op} $${at + 5}`).join(" ")}
         ORDER BY seq ${plan.descending ? "DESC" : "ASC"} LIMIT $4`,
        [tenant, ownerId, role, query.limit + 1, ...plan.bounds.map(([, seq]) => seq)],
      );
      const { rows: items, hasMore } = toPage(rows, query.limit, plan.reverse);
      return { items, hasMore };
    }, false);
  }

  createConversation(tenant: string, id: string, body: string, items: ItemRow[], now: number) {
    return this.run(async (client) => {
      const bytes = utf8Bytes(body);
      await client.query(
        `INSERT INTO ${O} (tenant, id, kind, changed_ms, previous_id, bytes, body)
         VALUES ($1, $2, 'conversation', $3, NULL, $4, $5)`,
        [tenant, id, now, bytes, body],
      );
      await this.addTotal(client, bytes);
      await this.append(client, tenant, id, items, now);
    });
  }

  conversation(tenant: string, id: string, now: number) {
    return this.run(
      async (client) => (await this.live(client, tenant, "conversation", id, now))?.body,
      false,
    );
  }

  updateConversation(tenant: string, id: string, body: string, now: number) {
    return this.run(async (client) => {
      const row = await this.live(client, tenant, "conversation", id, now, true);
      if (!row) return false;
      const delta = utf8Bytes(body) - utf8Bytes(row.body);
      await client.query(
        `UPDATE ${O} SET body = $1, bytes = bytes + $2, changed_ms = $3 WHERE tenant = $4 AND id = $5`,
        [body, delta, now, tenant, id],
      );
      await this.addTotal(client, delta);
      return true;
    });
  }

  conversationItems(tenant: string, id: string, now: number) {
    return this.run(async (client) => {
      if (!(await this.live(client, tenant, "conversation", id, now))) return undefined;
      return this.itemsOf(client, tenant, id, ["item"]);
    }, false);
  }

  addConversationItems(tenant: string, id: string, items: ItemRow[], now: number) {
    return this.run(async (client) => {
      if (!(await this.live(client, tenant, "conversation", id, now, true))) return false;
      await this.append(client, tenant, id, items, now);
      return true;
    });
  }

  conversationItem(tenant: string, id: string, itemId: string, now: number) {
    return this.run(async (client) => {
      if (!(await this.live(client, tenant, "conversation", id, now))) return undefined;
      const { rows } = await client.query<{ body: string }>(
        `SELECT body FROM ${I} WHERE tenant = $1 AND owner_id = $2 AND role = 'item' AND id = $3
         ORDER BY seq DESC LIMIT 1`,
        [tenant, id, itemId],
      );
      return rows[0]?.body;
    }, false);
  }

  deleteConversationItem(tenant: string, id: string, itemId: string, now: number) {
    return this.run(async (client): Promise<"deleted" | "no_item" | "no_conversation"> => {
      if (!(await this.live(client, tenant, "conversation", id, now, true))) return "no_conversation";
      const { rows } = await client.query<{ bytes: string }>(
        `DELETE FROM ${I} WHERE tenant = $1 AND owner_id = $2 AND role = 'item' AND id = $3 RETURNING bytes`,
        [tenant, id, itemId],
      );
      if (rows.length === 0) return "no_item";
      const bytes = rows.reduce((sum, row) => sum + Number(row.bytes), 0);
      await client.query(
        `UPDATE ${O} SET bytes = bytes - $1, changed_ms = $2 WHERE tenant = $3 AND id = $4`,
        [bytes, now, tenant, id],
      );
      await this.addTotal(client, -bytes);
      return "deleted";
    });
  }

  /** One bounded batch, as SQLite's; rows another replica is deleting are skipped, not waited for. */
  evict(now: number) {
    return this.run(async (client) => {
      const expired = await client.query<{ bytes: string }>(
        `DELETE FROM ${O} WHERE (tenant, id) IN (
           SELECT tenant, id FROM ${O} WHERE changed_ms < $1 ORDER BY changed_ms LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING bytes`,
        [this.since(now), EVICTION_BATCH],
      );
      if (expired.rows.length > 0) {
        await this.addTotal(client, -expired.rows.reduce((sum, row) => sum + Number(row.bytes), 0));
        return expired.rows.length;
      }
      let excess = (await this.total(client)) - this.limits.maxBytes;
      if (excess <= 0) return 0;
      const { rows: oldest } = await client.query<{ tenant: string; id: string; bytes: string }>(
        `SELECT tenant, id, bytes FROM ${O} ORDER BY changed_ms, id LIMIT $1 FOR UPDATE SKIP LOCKED`,
        [EVICTION_BATCH],
      );
      const victims: typeof oldest = [];
      for (const row of oldest) {
        if (excess <= 0) break;
        victims.push(row);
        excess -= Number(row.bytes);
      }
      if (victims.length === 0) return 0;
      await client.query(
        `DELETE FROM ${O} WHERE (tenant, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
        [victims.map((row) => row.tenant), victims.map((row) => row.id)],
      );
      await this.addTotal(client, -victims.reduce((sum, row) => sum + Number(row.bytes), 0));
      return victims.length;
    });
  }

  private async total(client: Query): Promise<number> {
    const { rows } = await client.query<{ bytes: string }>(`SELECT bytes FROM ${T} WHERE id = 1`);
    return Number(rows[0]!.bytes);
  }

  sizeBytes() {
    return this.run((client) => this.total(client), false);
  }

  // The Batch API's tables (postgres-batches.ts), through this pool and its migrations.
  private readonly batches = new PostgresBatchTables((work, write) => this.run(work, write));
  saveFile: BatchBackend["saveFile"] = (...args) => this.batches.saveFile(...args);
  file: BatchBackend["file"] = (...args) => this.batches.file(...args);
  listFiles: BatchBackend["listFiles"] = (...args) => this.batches.listFiles(...args);
  deleteFile: BatchBackend["deleteFile"] = (...args) => this.batches.deleteFile(...args);
  saveBatch: BatchBackend["saveBatch"] = (...args) => this.batches.saveBatch(...args);
  batch: BatchBackend["batch"] = (...args) => this.batches.batch(...args);
  listBatches: BatchBackend["listBatches"] = (...args) => this.batches.listBatches(...args);
  activeBatches: BatchBackend["activeBatches"] = () => this.batches.activeBatches();
  recordLine: BatchBackend["recordLine"] = (...args) => this.batches.recordLine(...args);
  recordedLines: BatchBackend["recordedLines"] = (...args) => this.batches.recordedLines(...args);
  lineResults: BatchBackend["lineResults"] = (...args) => this.batches.lineResults(...args);

  async close(): Promise<void> {
    await this.migrated?.catch(() => undefined);
    await this.pool.end();
  }
}

function migrate(pool: pg.Pool): Promise<void> {
  return applyPgMigrations(pool, {
    lock: MIGRATION_LOCK.toString(),
    ledger: { table: "lectern_responses_migrations", named: false },
    migrations: MIGRATIONS.map((sql) => ({ sql })),
    subject: "the database's Responses store",
  });
}

export function postgresBackend(
  databaseUrl: string,
  limits: StoreLimits,
  log?: { warn: (object: object, message: string) => void },
): ResponsesBackend {
  return new PostgresResponsesBackend(databaseUrl, limits, (error) =>
    log?.warn({ err: error }, "Responses store: idle PostgreSQL connection failed"),
  );
}
