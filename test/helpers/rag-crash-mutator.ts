/**
 * Child process of the append/delete crash tests (test/reliability/crash-append-delete.test.ts). Usage:
 *   node --import tsx test/helpers/rag-crash-mutator.ts <dataDir> <operation> [<kill>]
 * where <operation> is `append:<count>` (POST /rag/indices/{CRASH_INDEX}/documents with <count> new
 * documents), `delete-index` (DELETE /rag/indices/{CRASH_INDEX}) or `delete-document:<id>`.
 * Opens the RAG app on <dataDir>, prepares the request, prints "prepared" and waits for a line on
 * stdin. It then prints "ready" right before handing the request to the app, "writing" right before
 * the store's write or delete transaction, "written <ms> <statements in it>" after it, and "done <status>
 * <ms>" once the app answered. <kill> makes it SIGKILL itself, so the point is exact whatever the
 * machine's load: `statement:<n>` right after the n-th SQLite statement run inside the transaction
 * (COMMIT is the last one, so any n below the count leaves it uncommitted), `after-commit` right after
 * the transaction, before the app answers. Without <kill> the parent kills it.
 */
import { once } from "node:events";
import Database from "better-sqlite3";
import { buildRagApp } from "../../src/rag/app.js";
import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import type { IndexKey, IndexWrite } from "../../src/rag/store/types.js";
import { CRASH_INDEX, CRASH_TENANT, crashDocuments } from "./rag-crash-corpus.js";
import { testConfig } from "./env.js";

export type CrashOperation =
  { kind: "append"; count: number } | { kind: "delete-index" } | { kind: "delete-document"; id: string };

export function parseOperation(text: string): CrashOperation {
  if (text === "delete-index") return { kind: "delete-index" };
  const [kind, arg] = [text.slice(0, text.indexOf(":")), text.slice(text.indexOf(":") + 1)];
  if (kind === "append" && /^\d+$/.test(arg)) return { kind: "append", count: Number(arg) };
  if (kind === "delete-document" && arg) return { kind: "delete-document", id: arg };
  throw new Error(`unknown operation "${text}"`);
}

/** The HTTP request of an operation (deterministic: the same documents every time). */
export function operationRequest(operation: CrashOperation) {
  const base = `/rag/indices/${CRASH_INDEX}`;
  const tenant = `tenant_id=${CRASH_TENANT}`;
  switch (operation.kind) {
    case "append":
      return {
        method: "POST" as const,
        url: `${base}/documents`,
        payload: JSON.stringify({
          tenant_id: CRASH_TENANT,
          documents: crashDocuments(operation.count, "add-", 3),
        }),
        headers: { "content-type": "application/json" },
      };
    case "delete-index":
      return { method: "DELETE" as const, url: `${base}?${tenant}` };
    case "delete-document":
      return {
        method: "DELETE" as const,
        url: `${base}/documents/${encodeURIComponent(operation.id)}?${tenant}`,
      };
  }
}

/** The app's SQLite store on `dataDir`, reporting around its write and delete transactions. */
export function openReportingMutatorStore(dataDir: string, report: (line: string) => void): SqliteIndexStore {
  const store = SqliteIndexStore.open(dataDir);
  const write = store.write.bind(store);
  const deleteIndex = store.deleteIndex.bind(store);
  const around = async <T>(work: () => Promise<T>): Promise<T> => {
    report("writing");
    const started = performance.now();
    const result = await work();
    report(`written ${Math.round(performance.now() - started)}`);
    return result;
  };
  store.write = (change: IndexWrite) => around(() => write(change));
  store.deleteIndex = (key: IndexKey) => around(() => deleteIndex(key));
  return store;
}

/**
 * Counts SQLite statements run inside a transaction (any database of this process), by wrapping
 * better-sqlite3's Statement#run: it depends on no internals of the store. `onStatement` sees the
 * running count while armed.
 */
export function installStatementCounter(onStatement: (count: number) => void) {
  const probe = new Database(":memory:");
  const proto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as {
    run: (this: { database: { inTransaction: boolean } }, ...args: unknown[]) => unknown;
  };
  probe.close();
  const run = proto.run;
  const state = { armed: false, count: 0 };
  proto.run = function (this: { database: { inTransaction: boolean } }, ...args: unknown[]) {
    const result = run.apply(this, args);
    if (state.armed && this.database.inTransaction) onStatement(++state.count);
    return result;
  };
  return {
    arm: () => {
      state.count = 0;
      state.armed = true;
    },
    disarm: () => {
      state.armed = false;
      return state.count;
    },
    get count() {
      return state.count;
    },
  };
}

const isMain = process.argv[1]?.endsWith("rag-crash-mutator.ts");
if (isMain) {
  const [dataDir, operationText, kill = "none"] = process.argv.slice(2);
  if (dataDir === undefined || operationText === undefined) {
    throw new Error("usage: rag-crash-mutator.ts <dataDir> <operation> [statement:<n>|after-commit]");
  }
  const operation = parseOperation(operationText);
  const killAtStatement = /^statement:(\d+)$/.exec(kill);
  const die = () => process.kill(process.pid, "SIGKILL");
  const counter = installStatementCounter((count) => {
    if (killAtStatement && count === Number(killAtStatement[1])) {
      process.stdout.write(`killing at statement ${count}\n`);
      die();
    }
  });
  // Pipes are synchronous on Linux, so the parent reads "writing" before the transaction begins.
  const store = openReportingMutatorStore(dataDir, (line) => {
    if (line.startsWith("written")) {
      process.stdout.write(`${line} ${counter.disarm()}\n`);
      if (kill === "after-commit") die();
    } else {
      process.stdout.write(`${line}\n`);
      // Only the statements of the write (or delete) transaction count.
      if (line === "writing") counter.arm();
    }
  });
  const app = await buildRagApp({ config: testConfig({ DATA_DIR: dataDir }), store });
  const request = operationRequest(operation);
  // Load the index into the app's cache first, as a serving app would have it.
  await app.inject({
    method: "POST",
    url: "/rag/query",
    payload: { index_name: CRASH_INDEX, tenant_id: CRASH_TENANT, query: "warm up" },
  });

  process.stdout.write("prepared\n");
  await once(process.stdin, "data");
  process.stdin.destroy();

  process.stdout.write("ready\n");
  const started = performance.now();
  const res = await app.inject(request);
  process.stdout.write(`done ${res.statusCode} ${Math.round(performance.now() - started)}\n`);
  await app.close();
}
