/**
 * Applies a PostgreSQL store's migrations not yet applied, in order, in one transaction. The advisory
 * lock makes a second replica starting at the same moment wait, then find everything applied. Shared
 * by the RAG store and the Responses store: each has its own ledger table and lock.
 */
import type pg from "pg";

export interface PgMigrationPlan {
  /** The advisory lock's key (a bigint, as text). */
  lock: string;
  /** The ledger table of applied versions; `named` ledgers also keep each migration's name. */
  ledger: { table: string; named: boolean };
  migrations: ReadonlyArray<{ name?: string; sql: string }>;
  /** What the error names when the database is newer than this program ("the database"). */
  subject: string;
}

export async function applyPgMigrations(pool: pg.Pool, plan: PgMigrationPlan): Promise<void> {
  const { table, named } = plan.ledger;
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock($1)", [plan.lock]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${table} (
         version integer PRIMARY KEY,${named ? "\n         name text NOT NULL," : ""}
         applied_at timestamptz NOT NULL DEFAULT now()
       )`,
    );
    const { rows } = await client.query<{ applied: number }>(
      `SELECT coalesce(max(version), 0)::integer AS applied FROM ${table}`,
    );
    const applied = rows[0]!.applied;
    const known = plan.migrations.length;
    if (applied > known)
      throw new Error(
        `${plan.subject} has schema version ${applied}, newer than this program's ${known}; upgrade Lectern`,
      );
    for (let version = applied + 1; version <= known; version++) {
      const migration = plan.migrations[version - 1]!;
      await client.query(migration.sql);
      if (named)
        await client.query(`INSERT INTO ${table} (version, name) VALUES ($1, $2)`, [
          version,
          migration.name ?? "",
        ]);
      else await client.query(`INSERT INTO ${table} (version) VALUES ($1)`, [version]);
    }
    await client.query("COMMIT");
    client.release();
  } catch (error) {
    await client.query("ROLLBACK").then(
      () => client.release(),
      (rollback: Error) => client.release(rollback),
    );
    throw error;
  }
}
