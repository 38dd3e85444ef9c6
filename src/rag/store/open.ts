/**
 * Opens the store the configuration names: PostgreSQL with DATABASE_URL, else SQLite under DATA_DIR.
 * Each store's module is imported only when it is the one opened: the PostgreSQL client alone costs
 * a quarter of a second of CPU to import, which every `lectern index …` command paid.
 */
import type { Config } from "../../core/config.js";
import type { IndexStore } from "./types.js";

export async function openIndexStore(
  config: Pick<Config["rag"], "databaseUrl" | "dataDir"> & Partial<Pick<Config["rag"], "diskReserveBytes">>,
  log: { warn: (object: object, message: string) => void } = { warn: () => undefined },
): Promise<IndexStore> {
  if (!config.databaseUrl) {
    const { SqliteIndexStore } = await import("./sqlite-store.js");
    return SqliteIndexStore.open(config.dataDir, config.diskReserveBytes ?? 0);
  }
  const { PostgresIndexStore } = await import("./postgres-store.js");
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
