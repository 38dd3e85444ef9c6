/**
 * The Responses store in SQLite: `<DATA_DIR>/responses.db`, beside the RAG store's `lectern.db`.
 * Runs on a worker thread (sqlite-worker.ts): better-sqlite3 is synchronous, and a commit fsyncs
 * (WAL, `synchronous=FULL`, as the RAG store: an acknowledged save survives a power loss), a history
 * reads every item of a chain and an eviction deletes many rows — none of which may stall the event
 * loop that streams tokens. Every write is one `BEGIN IMMEDIATE` transaction, so a kill at any moment
 * leaves the store as before or after it, and several processes may share the file (busy_timeout).
 */
import fs from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { planPage, toPage } from "./paging.js";
import { BATCH_MIGRATION, SqliteBatchTables } from "./sqlite-batches.js";
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

export const RESPONSES_DB_FILE = "responses.db";

const BUSY_TIMEOUT_MS = 10_000;

/** Applied in order at open; `PRAGMA user_version` counts them. Append, never edit a released one. */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE objects (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('response', 'conversation')),
    -- When it was created (a response) or last changed (a conversation): what the TTL counts from.
    changed_ms INTEGER NOT NULL,
    previous_id TEXT,
    -- UTF-8 bytes of the body and of every item it owns.
    bytes INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, id)
  );
  CREATE INDEX objects_by_age ON objects (changed_ms);

  CREATE TABLE items (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('input', 'output', 'item')),
    id TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    body TEXT NOT NULL,
    FOREIGN KEY (tenant, owner_id) REFERENCES objects (tenant, id) ON DELETE CASCADE
  );
  CREATE INDEX items_by_owner ON items (tenant, owner_id, role, seq);
  CREATE INDEX items_by_id ON items (tenant, id);

  CREATE TABLE totals (id INTEGER PRIMARY KEY CHECK (id = 1), bytes INTEGER NOT NULL);
  INSERT INTO totals (id, bytes) VALUES (1, 0);
  `,
  BATCH_MIGRATION,
];

interface ObjectRow {
  bytes: number;
  body: string;
  previous_id: string | null;
}

export class SqliteResponsesBackend implements ResponsesBackend {
  private readonly db: Database.Database;
  private readonly batches: SqliteBatchTables;

  private constructor(
    file: string,
    private readonly limits: StoreLimits,
  ) {
    const db = new Database(file);
    this.db = db;
    try {
      const mode = db.pragma("journal_mode = WAL", { simple: true });
      if (mode !== "wal")
        throw new Error(`could not switch ${file} to WAL journal mode (got ${String(mode)})`);
      db.pragma("synchronous = FULL");
      db.pragma("foreign_keys = ON");
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      migrate(db);
      this.batches = new SqliteBatchTables(db);
    } catch (error) {
      db.close();
      throw error;
    }
  }

  static open(dataDir: string, limits: StoreLimits): SqliteResponsesBackend {
    fs.mkdirSync(dataDir, { recursive: true });
    return new SqliteResponsesBackend(path.join(dataDir, RESPONSES_DB_FILE), limits);
  }

  private live(tenant: string, kind: ObjectKind, id: string, now: number): ObjectRow | undefined {
    return this.db
      .prepare<[string, string, string, number], ObjectRow>(
        `SELECT bytes, body, previous_id FROM objects
         WHERE tenant = ? AND id = ? AND kind = ? AND changed_ms >= ?`,
      )
      .get(tenant, id, kind, now - this.limits.ttlMs);
  }

  private addTotal(delta: number): void {
    if (delta !== 0) this.db.prepare("UPDATE totals SET bytes = bytes + ? WHERE id = 1").run(delta);
  }

  /** Inserts items under an owner; their bytes. */
  private insertItems(tenant: string, ownerId: string, role: string, items: ItemRow[]): number {
    const insert = this.db.prepare(
      "INSERT INTO items (tenant, owner_id, role, id, bytes, body) VALUES (?, ?, ?, ?, ?, ?)",
    );
    let bytes = 0;
    for (const item of items) {
      const size = utf8Bytes(item.json);
      insert.run(tenant, ownerId, role, item.id, size, item.json);
      bytes += size;
    }
    return bytes;
  }

  /** Items join a conversation: its size, its change time and the store's total follow. */
  private appendToConversation(tenant: string, id: string, items: ItemRow[], now: number): void {
    const bytes = this.insertItems(tenant, id, "item", items);
    this.db
      .prepare("UPDATE objects SET bytes = bytes + ?, changed_ms = ? WHERE tenant = ? AND id = ?")
      .run(bytes, now, tenant, id);
    this.addTotal(bytes);
  }

  async saveResponse(tenant: string, response: NewResponse, now: number) {
    return this.db
      .transaction((): "saved" | "no_conversation" => {
        if (response.keep) {
          const bodyBytes = utf8Bytes(response.body);
          this.db
            .prepare(
              `INSERT INTO objects (tenant, id, kind, changed_ms, previous_id, bytes, body)
               VALUES (?, ?, 'response', ?, ?, 0, ?)`,
            )
            .run(tenant, response.id, now, response.previousId, response.body);
          const bytes =
            bodyBytes +
            this.insertItems(tenant, response.id, "input", response.input) +
            this.insertItems(tenant, response.id, "output", response.output);
          this.db
            .prepare("UPDATE objects SET bytes = ? WHERE tenant = ? AND id = ?")
            .run(bytes, tenant, response.id);
          this.addTotal(bytes);
        }
        const conversation = response.conversationId;
        if (conversation === null) return "saved";
        if (!this.live(tenant, "conversation", conversation, now)) return "no_conversation";
        this.appendToConversation(tenant, conversation, [...response.input, ...response.output], now);
        return "saved";
      })
      .immediate();
  }

  async response(tenant: string, id: string, now: number): Promise<StoredResponse | undefined> {
    const row = this.live(tenant, "response", id, now);
    if (!row) return undefined;
    return { body: row.body, output: this.itemsOf(tenant, id, ["output"]) };
  }

  private itemsOf(tenant: string, ownerId: string, roles: string[]): string[] {
    return this.db
      .prepare<unknown[], { body: string }>(
        `SELECT body FROM items WHERE tenant = ? AND owner_id = ? AND role IN (${roles.map(() => "?").join(", ")})
         ORDER BY seq`,
      )
      .all(tenant, ownerId, ...roles)
      .map((row) => row.body);
  }

  async deleteObject(tenant: string, kind: ObjectKind, id: string, now: number): Promise<boolean> {
    return this.db
      .transaction(() => {
        const row = this.db
          .prepare<[string, string, string, number], { bytes: number }>(
            `DELETE FROM objects WHERE tenant = ? AND id = ? AND kind = ? AND changed_ms >= ? RETURNING bytes`,
          )
          .get(tenant, id, kind, now - this.limits.ttlMs);
        if (row) this.addTotal(-row.bytes);
        return row !== undefined;
      })
      .immediate();
  }

  async history(tenant: string, id: string, now: number): Promise<History | undefined> {
    const since = now - this.limits.ttlMs;
    // Read in one transaction: a chain deleted half-way by another process is never mixed in.
    return this.db.transaction((): History | undefined => {
      const chain = this.db
        .prepare<unknown[], { id: string; previous_id: string | null }>(
          `WITH RECURSIVE chain (id, previous_id, depth) AS (
             SELECT id, previous_id, 0 FROM objects
             WHERE tenant = ? AND id = ? AND kind = 'response' AND changed_ms >= ?
             UNION ALL
             SELECT o.id, o.previous_id, chain.depth + 1 FROM objects o JOIN chain
               ON o.tenant = ? AND o.id = chain.previous_id AND o.kind = 'response' AND o.changed_ms >= ?
           )
           SELECT id, previous_id FROM chain ORDER BY depth`,
        )
        .all(tenant, id, since, tenant, since);
      const oldest = chain.at(-1);
      if (!oldest) return undefined;
      if (oldest.previous_id !== null) return { missing: oldest.previous_id };
      return {
        items: chain.reverse().flatMap((link) => this.itemsOf(tenant, link.id, ["input", "output"])),
      };
    })();
  }

  async item(tenant: string, itemId: string, now: number): Promise<string | undefined> {
    return this.db
      .prepare<[string, string, number], { body: string }>(
        `SELECT i.body FROM items i JOIN objects o ON o.tenant = i.tenant AND o.id = i.owner_id
         WHERE i.tenant = ? AND i.id = ? AND o.changed_ms >= ? ORDER BY i.seq DESC LIMIT 1`,
      )
      .get(tenant, itemId, now - this.limits.ttlMs)?.body;
  }

  async page(tenant: string, kind: ObjectKind, ownerId: string, query: PageQuery, now: number) {
    return this.db.transaction((): ItemPage | "no_cursor" | undefined => {
      if (!this.live(tenant, kind, ownerId, now)) return undefined;
      const role = kind === "response" ? "input" : "item";
      const seqOf = (itemId: string | undefined) =>
        itemId === undefined
          ? undefined
          : (this.db
              .prepare<[string, string, string, string], { seq: number }>(
                `SELECT seq FROM items WHERE tenant = ? AND owner_id = ? AND role = ? AND id = ?
                 ORDER BY seq LIMIT 1`,
              )
              .get(tenant, ownerId, role, itemId)?.seq ?? null);
      const after = seqOf(query.after);
      const before = seqOf(query.before);
      if (after === null || before === null) return "no_cursor";
      const plan = planPage(query, { after, before });
      const rows = this.db
        .prepare<unknown[], ItemRow>(
          `SELECT id, body AS json FROM items WHERE tenant = ? AND owner_id = ? AND role = ?
           ${plan.bounds.map(([op]) => `AND seq ${op} ?`).join(" ")}
           ORDER BY seq ${plan.descending ? "DESC" : "ASC"} LIMIT ?`,
        )
        .all(tenant, ownerId, role, ...plan.bounds.map(([, seq]) => seq), query.limit + 1);
      const { rows: items, hasMore } = toPage(rows, query.limit, plan.reverse);
      return { items, hasMore };
    })();
  }

  async createConversation(tenant: string, id: string, body: string, items: ItemRow[], now: number) {
    this.db
      .transaction(() => {
        const bytes = utf8Bytes(body);
        this.db
          .prepare(
            `INSERT INTO objects (tenant, id, kind, changed_ms, previous_id, bytes, body)
             VALUES (?, ?, 'conversation', ?, NULL, ?, ?)`,
          )
          .run(tenant, id, now, bytes, body);
        this.addTotal(bytes);
        this.appendToConversation(tenant, id, items, now);
      })
      .immediate();
  }

  async conversation(tenant: string, id: string, now: number): Promise<string | undefined> {
    return this.live(tenant, "conversation", id, now)?.body;
  }

  async updateConversation(tenant: string, id: string, body: string, now: number): Promise<boolean> {
    return this.db
      .transaction(() => {
        const row = this.live(tenant, "conversation", id, now);
        if (!row) return false;
        const delta = utf8Bytes(body) - utf8Bytes(row.body);
        this.db
          .prepare(
            "UPDATE objects SET body = ?, bytes = bytes + ?, changed_ms = ? WHERE tenant = ? AND id = ?",
          )
          .run(body, delta, now, tenant, id);
        this.addTotal(delta);
        return true;
      })
      .immediate();
  }

  async conversationItems(tenant: string, id: string, now: number): Promise<string[] | undefined> {
    return this.db.transaction(() =>
      this.live(tenant, "conversation", id, now) ? this.itemsOf(tenant, id, ["item"]) : undefined,
    )();
  }

  async addConversationItems(tenant: string, id: string, items: ItemRow[], now: number): Promise<boolean> {
    return this.db
      .transaction(() => {
        if (!this.live(tenant, "conversation", id, now)) return false;
        this.appendToConversation(tenant, id, items, now);
        return true;
      })
      .immediate();
  }

  async conversationItem(tenant: string, id: string, itemId: string, now: number) {
    return this.db.transaction(() => {
      if (!this.live(tenant, "conversation", id, now)) return undefined;
      return this.db
        .prepare<[string, string, string], { body: string }>(
          `SELECT body FROM items WHERE tenant = ? AND owner_id = ? AND role = 'item' AND id = ?
           ORDER BY seq DESC LIMIT 1`,
        )
        .get(tenant, id, itemId)?.body;
    })();
  }

  async deleteConversationItem(tenant: string, id: string, itemId: string, now: number) {
    return this.db
      .transaction((): "deleted" | "no_item" | "no_conversation" => {
        if (!this.live(tenant, "conversation", id, now)) return "no_conversation";
        const deleted = this.db
          .prepare<[string, string, string], { bytes: number }>(
            `DELETE FROM items WHERE tenant = ? AND owner_id = ? AND role = 'item' AND id = ?
             RETURNING bytes`,
          )
          .all(tenant, id, itemId);
        if (deleted.length === 0) return "no_item";
        const bytes = deleted.reduce((sum, row) => sum + row.bytes, 0);
        this.db
          .prepare("UPDATE objects SET bytes = bytes - ?, changed_ms = ? WHERE tenant = ? AND id = ?")
          .run(bytes, now, tenant, id);
        this.addTotal(-bytes);
        return "deleted";
      })
      .immediate();
  }

  /**
   * One bounded batch: up to EVICTION_BATCH objects past their TTL, else the oldest objects the
   * size bound needs gone. The caller repeats while it deletes something, so other requests on
   * the worker run between batches.
   */
  async evict(now: number): Promise<number> {
    return this.db
      .transaction(() => {
        const expired = this.db
          .prepare<[number, number], { bytes: number }>(
            `DELETE FROM objects WHERE rowid IN
               (SELECT rowid FROM objects WHERE changed_ms < ? ORDER BY changed_ms LIMIT ?)
             RETURNING bytes`,
          )
          .all(now - this.limits.ttlMs, EVICTION_BATCH);
        if (expired.length > 0) {
          this.addTotal(-expired.reduce((sum, row) => sum + row.bytes, 0));
          return expired.length;
        }
        let excess = this.totalBytes() - this.limits.maxBytes;
        if (excess <= 0) return 0;
        const oldest = this.db
          .prepare<[number], { rowid: number; bytes: number }>(
            "SELECT rowid, bytes FROM objects ORDER BY changed_ms, rowid LIMIT ?",
          )
          .all(EVICTION_BATCH);
        const remove = this.db.prepare("DELETE FROM objects WHERE rowid = ?");
        let count = 0;
        for (const row of oldest) {
          if (excess <= 0) break;
          remove.run(row.rowid);
          this.addTotal(-row.bytes);
          excess -= row.bytes;
          count++;
        }
        return count;
      })
      .immediate();
  }

  private totalBytes(): number {
    return this.db.prepare<[], { bytes: number }>("SELECT bytes FROM totals WHERE id = 1").get()!.bytes;
  }

  async sizeBytes(): Promise<number> {
    return this.totalBytes();
  }

  // The Batch API's tables (sqlite-batches.ts).
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
    if (this.db.open) this.db.close();
  }
}

function migrate(db: Database.Database): void {
  db.transaction(() => {
    const applied = db.pragma("user_version", { simple: true }) as number;
    if (applied > MIGRATIONS.length)
      throw new Error(
        `${db.name} has schema version ${applied}, newer than this program's ${MIGRATIONS.length}; upgrade Lectern`,
      );
    for (const sql of MIGRATIONS.slice(applied)) db.exec(sql);
    if (applied !== MIGRATIONS.length) db.pragma(`user_version = ${MIGRATIONS.length}`);
  }).immediate();
}
