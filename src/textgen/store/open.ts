/**
 * The Responses store the configuration names: PostgreSQL with DATABASE_URL, else SQLite
 * `responses.db` under DATA_DIR; none with RESPONSES_TTL=0 (nothing is kept). Nothing is opened
 * here: the database is opened at the store's first use, so an app that never keeps a response
 * never starts the worker or a connection pool.
 */
import path from "node:path";
import type { Config } from "../../core/config.js";
import { postgresBackend } from "./postgres-backend.js";
import { DurableResponsesStore } from "./responses-store.js";
import { RESPONSES_DB_FILE } from "./sqlite-backend.js";
import { sqliteWorkerBackend } from "./worker-backend.js";

export function responsesStoreOf(
  config: Pick<Config, "responses"> & { rag: Pick<Config["rag"], "dataDir" | "databaseUrl"> },
  log?: { warn: (object: object, message: string) => void },
): DurableResponsesStore | undefined {
  const limits = config.responses;
  if (limits.ttlMs === 0) return undefined;
  const { databaseUrl, dataDir } = config.rag;
  if (databaseUrl) {
    const where = new URL(databaseUrl);
    if (where.password) where.password = "***";
    return new DurableResponsesStore(postgresBackend(databaseUrl, limits, log), {
      limits,
      log,
      where: `PostgreSQL at ${where.toString()}`,
    });
  }
  return new DurableResponsesStore(sqliteWorkerBackend(dataDir, limits), {
    limits,
    log,
    where: `SQLite at ${path.join(dataDir, RESPONSES_DB_FILE)}`,
  });
}
