/**
 * The Batch API's tables in the SQLite store (types.ts, BatchBackend): the same database file and
 * worker as the Responses store, so a line's result commits (fsynced, WAL) before the runner moves on.
 */
import type Database from "better-sqlite3";
import type { BatchBackend, JsonPage, StoredBatch } from "./types.js";

/** The Responses store's second migration (sqlite-backend.ts applies it). */
export const BATCH_MIGRATION = `
  CREATE TABLE batch_files (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (tenant, id)
  );
  CREATE TABLE batches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    active INTEGER NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (tenant, id)
  );
  CREATE INDEX batches_active ON batches (active, seq);
  CREATE TABLE batch_lines (
    tenant TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    line INTEGER NOT NULL,
    ok INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, batch_id, line)
  );
`;

export class SqliteBatchTables implements BatchBackend {
  constructor(private readonly db: Database.Database) {}

  async saveFile(tenant: string, id: string, body: string, now: number): Promise<void> {
    this.db
      .prepare("INSERT INTO batch_files (tenant, id, created_ms, body) VALUES (?, ?, ?, ?)")
      .run(tenant, id, now, body);
  }

  async file(tenant: string, id: string): Promise<string | undefined> {
    return this.db
      .prepare<[string, string], { body: string }>("SELECT body FROM batch_files WHERE tenant = ? AND id = ?")
      .get(tenant, id)?.body;
  }

  async listFiles(tenant: string, after: string | undefined, limit: number) {
    return this.page("batch_files", tenant, after, limit);
  }

  async deleteFile(tenant: string, id: string): Promise<boolean> {
    return this.db.prepare("DELETE FROM batch_files WHERE tenant = ? AND id = ?").run(tenant, id).changes > 0;
  }

  async saveBatch(tenant: string, id: string, body: string, active: boolean, now: number): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO batches (tenant, id, created_ms, active, body) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (tenant, id) DO UPDATE SET active = excluded.active, body = excluded.body`,
      )
      .run(tenant, id, now, active ? 1 : 0, body);
  }

  async batch(tenant: string, id: string): Promise<StoredBatch | undefined> {
    return this.db
      .prepare<[string, string], StoredBatch>(
        `SELECT body,
           (SELECT count(*) FROM batch_lines l WHERE l.tenant = b.tenant AND l.batch_id = b.id AND ok = 1) AS completed,
           (SELECT count(*) FROM batch_lines l WHERE l.tenant = b.tenant AND l.batch_id = b.id AND ok = 0) AS failed
         FROM batches b WHERE tenant = ? AND id = ?`,
      )
      .get(tenant, id);
  }

  async listBatches(tenant: string, after: string | undefined, limit: number) {
    return this.page("batches", tenant, after, limit);
  }

  async activeBatches(): Promise<{ tenant: string; id: string }[]> {
    return this.db
      .prepare<[], { tenant: string; id: string }>(
        "SELECT tenant, id FROM batches WHERE active = 1 ORDER BY seq",
      )
      .all();
  }

  async recordLine(tenant: string, batchId: string, line: number, ok: boolean, body: string) {
    const insert = this.db.prepare(
      `INSERT INTO batch_lines (tenant, batch_id, line, ok, body) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT DO NOTHING`,
    );
    return insert.run(tenant, batchId, line, ok ? 1 : 0, body).changes > 0;
  }

  async recordedLines(tenant: string, batchId: string): Promise<number[]> {
    return this.db
      .prepare<[string, string], { line: number }>(
        "SELECT line FROM batch_lines WHERE tenant = ? AND batch_id = ? ORDER BY line",
      )
      .all(tenant, batchId)
      .map((row) => row.line);
  }

  async lineResults(tenant: string, batchId: string, ok: boolean): Promise<string[]> {
    return this.db
      .prepare<[string, string, number], { body: string }>(
        "SELECT body FROM batch_lines WHERE tenant = ? AND batch_id = ? AND ok = ? ORDER BY line",
      )
      .all(tenant, batchId, ok ? 1 : 0)
      .map((row) => row.body);
  }

  /** Newest first, after the row `after` names (a table name from this file, never a client's). */
  private page(table: "batch_files" | "batches", tenant: string, after: string | undefined, limit: number) {
    let before = Number.MAX_SAFE_INTEGER;
    if (after !== undefined) {
      const cursor = this.db
        .prepare<[string, string], { seq: number }>(`SELECT seq FROM ${table} WHERE tenant = ? AND id = ?`)
        .get(tenant, after);
      if (!cursor) return "no_cursor" as const;
      before = cursor.seq;
    }
    const rows = this.db
      .prepare<[string, number, number], { body: string }>(
        `SELECT body FROM ${table} WHERE tenant = ? AND seq < ? ORDER BY seq DESC LIMIT ?`,
      )
      .all(tenant, before, limit + 1)
      .map((row) => row.body);
    return { rows: rows.slice(0, limit), hasMore: rows.length > limit } satisfies JsonPage;
  }
}
