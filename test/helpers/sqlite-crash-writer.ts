/**
 * Child process of the SQLite crash test. Usage:
 *   node --import tsx test/helpers/sqlite-crash-writer.ts <dataDir> <tenant> <name> <documents> <seed>
 * Prepares a big `replace` of the index, prints "ready" right before the write starts and
 * "done <version>" once it committed. The parent kills it with SIGKILL somewhere in between.
 */
import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import { makeEntries, makeWrite } from "./store-fixtures.js";

const [dataDir, tenantId, name, documents, seed] = process.argv.slice(2);
if (dataDir === undefined || tenantId === undefined || name === undefined) {
  throw new Error("usage: sqlite-crash-writer.ts <dataDir> <tenant> <name> <documents> <seed>");
}
const key = { tenantId, name };
const store = SqliteIndexStore.open(dataDir);
const meta = await store.getMeta(key);
const entries = makeEntries(Number(documents), {
  prefix: `crash-${seed}-`,
  length: 1500,
  seed: Number(seed),
});
const change = makeWrite(key, "replace", entries, { expectedVersion: meta?.version ?? 0 });

// Pipes are synchronous on Linux: the parent may see "ready" before the transaction even begins,
// but nothing else happens in between.
process.stdout.write("ready\n");
const written = await store.write(change);
process.stdout.write(`done ${written.version}\n`);
await store.close();
