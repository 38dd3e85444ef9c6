/** Opens the store the configuration names: PostgreSQL with DATABASE_URL, else SQLite under DATA_DIR. */
import type { Config } from "../../core/config.js";
import { PostgresIndexStore } from "./postgres-store.js";
import { SqliteIndexStore } from "./sqlite-store.js";
import type { IndexStore } from "./types.js";

export async function openIndexStore(
  config: Pick<Config["rag"], "databaseUrl" | "dataDir"> & Partial<Pick<Config["rag"], "diskReserveBytes">>,
  log: { warn: (object: object, message: string) => void } = { warn: () => undefined },
): Promise<IndexStore> {
  if (!config.databaseUrl) return SqliteIndexStore.open(config.dataDir, config.diskReserveBytes ?? 0);
  try {
    return await PostgresIndexStore.open(config.databaseUrl, {
      onError: (error, context) => log.warn({ err: error }, `PostgreSQL store: ${context}`),
    });
  } catch (error) {
    const where = new URL(config.databaseUrl);
    if (where.password) where.password = "***";
    throw new Error(
      `cannot open the PostgreSQL store at DATABASE_URL=${where.toString()}: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
}
