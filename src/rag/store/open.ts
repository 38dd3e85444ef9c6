/** Opens the store the configuration names: PostgreSQL with DATABASE_URL, else SQLite under DATA_DIR. */
import type { Config } from "../../core/config.js";
import { PostgresIndexStore } from "./postgres-store.js";
import { SqliteIndexStore } from "./sqlite-store.js";
import type { IndexStore } from "./types.js";

export async function openIndexStore(
  config: {
    server: Pick<Config["server"], "dataDir">;
    rag: Pick<Config["rag"], "databaseUrl"> & Partial<Pick<Config["rag"], "diskReserveBytes">>;
  },
  log: { warn: (object: object, message: string) => void } = { warn: () => undefined },
): Promise<IndexStore> {
  if (!config.rag.databaseUrl)
    return SqliteIndexStore.open(config.server.dataDir, config.rag.diskReserveBytes ?? 0);
  try {
    return await PostgresIndexStore.open(config.rag.databaseUrl, {
      onError: (error, context) => log.warn({ err: error }, `PostgreSQL store: ${context}`),
    });
  } catch (error) {
    const where = new URL(config.rag.databaseUrl);
    if (where.password) where.password = "***";
    throw new Error(
      `cannot open the PostgreSQL store at DATABASE_URL=${where.toString()}: ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
}
