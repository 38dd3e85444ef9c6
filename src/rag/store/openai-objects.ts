/**
 * Records of OpenAI's API objects that are not an index's own rows: vector stores (their id, free-form
 * name, metadata, expiry; the index behind one is named by its id), vector store files (attributes,
 * status, chunking strategy) and file batches. Each is a small JSON body in one table per store, keyed
 * by tenant, kind, parent (the vector store of a file or batch; "" for a store) and id, so a tenant's
 * records are never read with another's. The routes (http/vector-store-records.ts) give the bodies
 * their meaning; the stores only keep them.
 */
import type Database from "better-sqlite3";
import type pg from "pg";

export type ObjectKind = "vector_store" | "vector_store.file" | "vector_store.files_batch";

export interface StoredObject {
  tenantId: string;
  kind: ObjectKind;
  /** The vector store a file or batch belongs to; "" for a vector store. */
  parentId: string;
  id: string;
  /** Unix milliseconds: listings are ordered by it, then by id. */
  createdAt: number;
  /** The object's fields, as JSON. */
  body: string;
}

/** Where the objects are kept (every IndexStore has one). */
export interface ObjectRecords {
  /** Inserts the object, or replaces the one with its tenant, kind, parent and id. */
  put(object: StoredObject): Promise<void>;
  get(tenantId: string, kind: ObjectKind, parentId: string, id: string): Promise<StoredObject | undefined>;
  /** The objects of a kind under a parent (all tenants' with tenantId null), by created_at then id. */
  list(tenantId: string | null, kind: ObjectKind, parentId: string): Promise<StoredObject[]>;
  /** Removes one object; whether it was there. */
  remove(tenantId: string, kind: ObjectKind, parentId: string, id: string): Promise<boolean>;
  /** Removes every object under a parent (a deleted vector store's files and batches). */
  removeChildren(tenantId: string, parentId: string): Promise<void>;
}

/** The table, as the migration appended to each store's list creates it (SQLite and PostgreSQL alike). */
export const objectsTableSql = (table: string, text: string, bigint: string) => `
  CREATE TABLE ${table} (
    tenant_id ${text} NOT NULL,
    kind ${text} NOT NULL,
    parent_id ${text} NOT NULL,
    id ${text} NOT NULL,
    created_at ${bigint} NOT NULL,
    body ${text} NOT NULL,
    PRIMARY KEY (tenant_id, kind, parent_id, id)
  );
`;

interface ObjectRow {
  tenant_id: string;
  kind: ObjectKind;
  parent_id: string;
  id: string;
  created_at: number | string;
  body: string;
}

const COLUMNS = "tenant_id, kind, parent_id, id, created_at, body";
const toObject = (row: ObjectRow): StoredObject => ({
  tenantId: row.tenant_id,
  kind: row.kind,
  parentId: row.parent_id,
  id: row.id,
  createdAt: Number(row.created_at),
  body: row.body,
});

/** The records in SQLite's `openai_objects`; `beforeWrite` waits for a write committing elsewhere. */
export function sqliteObjects(db: Database.Database, beforeWrite: () => Promise<void>): ObjectRecords {
  const put = db.prepare(`INSERT OR REPLACE INTO openai_objects (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)`);
  const get = db.prepare<[string, string, string, string], ObjectRow>(
    `SELECT ${COLUMNS} FROM openai_objects WHERE tenant_id = ? AND kind = ? AND parent_id = ? AND id = ?`,
  );
  const order = "ORDER BY created_at, id";
  const listTenant = db.prepare<[string, string, string], ObjectRow>(
    `SELECT ${COLUMNS} FROM openai_objects WHERE tenant_id = ? AND kind = ? AND parent_id = ? ${order}`,
  );
  const listAll = db.prepare<[string, string], ObjectRow>(
    `SELECT ${COLUMNS} FROM openai_objects WHERE kind = ? AND parent_id = ? ${order}`,
  );
  const remove = db.prepare(
    "DELETE FROM openai_objects WHERE tenant_id = ? AND kind = ? AND parent_id = ? AND id = ?",
  );
  const removeChildren = db.prepare("DELETE FROM openai_objects WHERE tenant_id = ? AND parent_id = ?");
  return {
    async put(o) {
      await beforeWrite();
      put.run(o.tenantId, o.kind, o.parentId, o.id, o.createdAt, o.body);
    },
    async get(tenantId, kind, parentId, id) {
      const row = get.get(tenantId, kind, parentId, id);
      return row === undefined ? undefined : toObject(row);
    },
    async list(tenantId, kind, parentId) {
      const rows = tenantId === null ? listAll.all(kind, parentId) : listTenant.all(tenantId, kind, parentId);
      return rows.map(toObject);
    },
    async remove(tenantId, kind, parentId, id) {
      await beforeWrite();
      return remove.run(tenantId, kind, parentId, id).changes > 0;
    },
    async removeChildren(tenantId, parentId) {
      await beforeWrite();
      removeChildren.run(tenantId, parentId);
    },
  };
}

/** The records in PostgreSQL's `lectern_openai_objects`; `run` translates the driver's errors. */
export function postgresObjects(
  pool: pg.Pool,
  run: <T>(work: () => Promise<T>) => Promise<T>,
): ObjectRecords {
  const query = (sql: string, values: unknown[]) => run(() => pool.query<ObjectRow>(sql, values));
  const table = "lectern_openai_objects";
  const order = "ORDER BY created_at, id";
  return {
    async put(o) {
      await query(
        `INSERT INTO ${table} (${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (tenant_id, kind, parent_id, id) DO UPDATE SET created_at = $5, body = $6`,
        [o.tenantId, o.kind, o.parentId, o.id, o.createdAt, o.body],
      );
    },
    async get(tenantId, kind, parentId, id) {
      const { rows } = await query(
        `SELECT ${COLUMNS} FROM ${table} WHERE tenant_id = $1 AND kind = $2 AND parent_id = $3 AND id = $4`,
        [tenantId, kind, parentId, id],
      );
      return rows[0] === undefined ? undefined : toObject(rows[0]);
    },
    async list(tenantId, kind, parentId) {
      const { rows } =
        tenantId === null
          ? await query(`SELECT ${COLUMNS} FROM ${table} WHERE kind = $1 AND parent_id = $2 ${order}`, [
              kind,
              parentId,
            ])
          : await query(
              `SELECT ${COLUMNS} FROM ${table} WHERE tenant_id = $1 AND kind = $2 AND parent_id = $3 ${order}`,
              [tenantId, kind, parentId],
            );
      return rows.map(toObject);
    },
    async remove(tenantId, kind, parentId, id) {
      const result = await query(
        `DELETE FROM ${table} WHERE tenant_id = $1 AND kind = $2 AND parent_id = $3 AND id = $4`,
        [tenantId, kind, parentId, id],
      );
      return (result.rowCount ?? 0) > 0;
    },
    async removeChildren(tenantId, parentId) {
      await query(`DELETE FROM ${table} WHERE tenant_id = $1 AND parent_id = $2`, [tenantId, parentId]);
    },
  };
}
