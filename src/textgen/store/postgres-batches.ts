/**
 * The Batch API's tables in PostgreSQL (types.ts, BatchBackend), beside the Responses store's and
 * created by its migrations, so replicas that share DATABASE_URL share batches and their progress.
 */
import type pg from "pg";
import type { BatchBackend, JsonPage, StoredBatch } from "./types.js";

const F = "lectern_batch_files";
const B = "lectern_batches";
const L = "lectern_batch_lines";

/** The Responses store's second migration (postgres-backend.ts applies it). */
export const BATCH_MIGRATION = `
  CREATE TABLE ${F} (
    seq bigserial PRIMARY KEY,
    tenant text NOT NULL,
    id text NOT NULL,
    created_ms bigint NOT NULL,
    body text NOT NULL,
    UNIQUE (tenant, id)
  );
  CREATE TABLE ${B} (
    seq bigserial PRIMARY KEY,
    tenant text NOT NULL,
    id text NOT NULL,
    created_ms bigint NOT NULL,
    active boolean NOT NULL,
    body text NOT NULL,
    UNIQUE (tenant, id)
  );
  CREATE INDEX ${B}_active ON ${B} (active, seq);
  CREATE TABLE ${L} (
    tenant text NOT NULL,
    batch_id text NOT NULL,
    line integer NOT NULL,
    ok boolean NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (tenant, batch_id, line)
  );
`;

type Query = Pick<pg.PoolClient, "query">;
type Run = <T>(work: (client: Query) => Promise<T>, write?: boolean) => Promise<T>;

export class PostgresBatchTables implements BatchBackend {
  constructor(private readonly run: Run) {}

  async saveFile(tenant: string, id: string, body: string, now: number): Promise<void> {
    await this.run((client) =>
      client.query(`INSERT INTO ${F} (tenant, id, created_ms, body) VALUES ($1, $2, $3, $4)`, [
        tenant,
        id,
        now,
        body,
      ]),
    );
  }

  file(tenant: string, id: string): Promise<string | undefined> {
    return this.run(async (client) => {
      const { rows } = await client.query<{ body: string }>(
        `SELECT body FROM ${F} WHERE tenant = $1 AND id = $2`,
        [tenant, id],
      );
      return rows[0]?.body;
    }, false);
  }

  listFiles(tenant: string, after: string | undefined, limit: number) {
    return this.page(F, tenant, after, limit);
  }

  deleteFile(tenant: string, id: string): Promise<boolean> {
    return this.run(async (client) => {
      const { rowCount } = await client.query(`DELETE FROM ${F} WHERE tenant = $1 AND id = $2`, [tenant, id]);
      return (rowCount ?? 0) > 0;
    });
  }

  async saveBatch(tenant: string, id: string, body: string, active: boolean, now: number): Promise<void> {
    await this.run((client) =>
      client.query(
        `INSERT INTO ${B} (tenant, id, created_ms, active, body) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (tenant, id) DO UPDATE SET active = excluded.active, body = excluded.body`,
        [tenant, id, now, active, body],
      ),
    );
  }

  batch(tenant: string, id: string): Promise<StoredBatch | undefined> {
    return this.run(async (client) => {
      const { rows } = await client.query<{ body: string; completed: string; failed: string }>(
        `SELECT body,
           (SELECT count(*) FROM ${L} l WHERE l.tenant = b.tenant AND l.batch_id = b.id AND ok) AS completed,
           (SELECT count(*) FROM ${L} l WHERE l.tenant = b.tenant AND l.batch_id = b.id AND NOT ok) AS failed
         FROM ${B} b WHERE tenant = $1 AND id = $2`,
        [tenant, id],
      );
      const row = rows[0];
      return row && { body: row.body, completed: Number(row.completed), failed: Number(row.failed) };
    }, false);
  }

  listBatches(tenant: string, after: string | undefined, limit: number) {
    return this.page(B, tenant, after, limit);
  }

  activeBatches(): Promise<{ tenant: string; id: string }[]> {
    return this.run(async (client) => {
      const { rows } = await client.query<{ tenant: string; id: string }>(
        `SELECT tenant, id FROM ${B} WHERE active ORDER BY seq`,
      );
      return rows;
    }, false);
  }

  recordLine(tenant: string, batchId: string, line: number, ok: boolean, body: string): Promise<boolean> {
    return this.run(async (client) => {
      const { rowCount } = await client.query(
        `INSERT INTO ${L} (tenant, batch_id, line, ok, body) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING`,
        [tenant, batchId, line, ok, body],
      );
      return (rowCount ?? 0) > 0;
    });
  }

  recordedLines(tenant: string, batchId: string): Promise<number[]> {
    return this.run(async (client) => {
      const { rows } = await client.query<{ line: number }>(
        `SELECT line FROM ${L} WHERE tenant = $1 AND batch_id = $2 ORDER BY line`,
        [tenant, batchId],
      );
      return rows.map((row) => row.line);
    }, false);
  }

  lineResults(tenant: string, batchId: string, ok: boolean): Promise<string[]> {
    return this.run(async (client) => {
      const { rows } = await client.query<{ body: string }>(
        `SELECT body FROM ${L} WHERE tenant = $1 AND batch_id = $2 AND ok = $3 ORDER BY line`,
        [tenant, batchId, ok],
      );
      return rows.map((row) => row.body);
    }, false);
  }

  /** Newest first, after the row `after` names (a table name from this file, never a client's). */
  private page(table: string, tenant: string, after: string | undefined, limit: number) {
    return this.run(async (client): Promise<JsonPage | "no_cursor"> => {
      let before = "9223372036854775807";
      if (after !== undefined) {
        const { rows } = await client.query<{ seq: string }>(
          `SELECT seq FROM ${table} WHERE tenant = $1 AND id = $2`,
          [tenant, after],
        );
        if (!rows[0]) return "no_cursor";
        before = rows[0].seq;
      }
      const { rows } = await client.query<{ body: string }>(
        `SELECT body FROM ${table} WHERE tenant = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`,
        [tenant, before, limit + 1],
      );
      return { rows: rows.slice(0, limit).map((row) => row.body), hasMore: rows.length > limit };
    }, false);
  }
}
