/**
 * Child process of the SQLite SIGKILL tests (test/reliability/crash-segments.test.ts). Usage:
 *   node --import tsx test/helpers/sqlite-crash-writer.ts <dataDir> <operation> <kill>
 * <dataDir> holds the crash template (see `crashTemplate`); <operation> is `append` (a new segment,
 * documents, and the tombstones of a re-upserted document), `delete` (tombstones only) or `merge`
 * (three segments into one). <kill> is `statement:<n>`: the process SIGKILLs itself right after the
 * n-th SQLite statement of the operation (BEGIN is the first, COMMIT the last), printing
 * "killing at statement <n>" first; or `none`: it runs the operation and prints
 * "done <version> <statements>".
 */
import Database from "better-sqlite3";

import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import type { IndexKey, IndexMeta, IndexStore, IndexWrite, MergeWrite } from "../../src/rag/store/types.js";
import { IndexModel, entry, makeDocument, makeEntries, type Prepared } from "./store-fixtures.js";

/** The index the SIGKILL tests write to. */
export const CRASH_KEY: IndexKey = { tenantId: "crash", name: "segments" };

export type CrashOperation = "append" | "delete" | "merge";
export const CRASH_OPERATIONS: readonly CrashOperation[] = ["append", "delete", "merge"];

/** Short documents (one chunk each), so that an operation has few statements and every one is a kill point. */
const shortEntries = (count: number, prefix: string, seed: number) =>
  makeEntries(count, { prefix, length: 120, seed });

/**
 * The template's writes, in order, and the model after them: three segments, one of them with
 * tombstones. The parent writes them; a child replays them on a model only (they are deterministic)
 * to know the state it starts from.
 */
export function crashTemplate(): { model: IndexModel; writes: IndexWrite[] } {
  const model = new IndexModel();
  const writes: IndexWrite[] = [];
  const take = (prepared: Prepared<IndexWrite>) => {
    writes.push(prepared.change);
    prepared.apply();
  };
  take(model.prepare(CRASH_KEY, "create", shortEntries(6, "a-", 1)));
  take(model.prepare(CRASH_KEY, "update", shortEntries(4, "b-", 2)));
  take(model.prepare(CRASH_KEY, "update", shortEntries(3, "c-", 3), { deleteDocumentIds: ["a-2"] }));
  return { model, writes };
}

/** The operation as prepared from the template's state (`meta`: the stored meta of the index). */
export function crashChange(
  model: IndexModel,
  operation: CrashOperation,
  meta: IndexMeta,
): Prepared<IndexWrite> | Prepared<MergeWrite> {
  switch (operation) {
    case "append":
      return model.prepare(
        CRASH_KEY,
        "update",
        [entry(makeDocument("a-1", "A new version of a-1.")), ...shortEntries(3, "d-", 4)],
        { expectedVersion: meta.version },
      );
    case "delete":
      return model.prepare(CRASH_KEY, "update", [], {
        deleteDocumentIds: ["a-4", "b-1"],
        expectedVersion: meta.version,
      });
    case "merge":
      return model.merge(CRASH_KEY, [0, 1, 2], meta.version);
  }
}

/** Runs the prepared operation against the store. */
export function runCrashChange(store: IndexStore, prepared: Prepared<IndexWrite> | Prepared<MergeWrite>) {
  const { change } = prepared;
  return "removedSegmentIds" in change ? store.commitMerge(change) : store.write(change);
}

/**
 * Counts the SQLite statements this process runs (run, get and all of every prepared statement,
 * BEGIN and COMMIT included) by wrapping better-sqlite3's Statement methods: it depends on no
 * internals of the store. `onStatement` sees the running count while armed.
 */
export function installStatementCounter(onStatement: (count: number) => void) {
  const probe = new Database(":memory:");
  const proto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<
    "run" | "get" | "all",
    (...args: unknown[]) => unknown
  >;
  probe.close();
  const state = { armed: false, count: 0 };
  for (const method of ["run", "get", "all"] as const) {
    const original = proto[method];
    proto[method] = function (this: unknown, ...args: unknown[]) {
      const result = original.apply(this, args);
      if (state.armed) onStatement(++state.count);
      return result;
    };
  }
  return {
    arm: () => {
      state.count = 0;
      state.armed = true;
    },
    disarm: () => {
      state.armed = false;
      return state.count;
    },
  };
}

const isMain = process.argv[1]?.endsWith("sqlite-crash-writer.ts");
if (isMain) {
  const [dataDir, operation, kill] = process.argv.slice(2);
  if (
    dataDir === undefined ||
    !CRASH_OPERATIONS.includes(operation as CrashOperation) ||
    kill === undefined
  ) {
    throw new Error("usage: sqlite-crash-writer.ts <dataDir> append|delete|merge statement:<n>|none");
  }
  const killAt = /^statement:(\d+)$/.exec(kill);
  const store = SqliteIndexStore.open(dataDir);
  const { model } = crashTemplate();
  const prepared = crashChange(model, operation as CrashOperation, (await store.getMeta(CRASH_KEY))!);
  const counter = installStatementCounter((count) => {
    if (killAt && count === Number(killAt[1])) {
      // A synchronous write to a pipe, then the signal: the parent reads the line before the exit.
      process.stdout.write(`killing at statement ${count}\n`);
      process.kill(process.pid, "SIGKILL");
    }
  });
  counter.arm();
  const meta = await runCrashChange(store, prepared);
  const statements = counter.disarm();
  process.stdout.write(`done ${meta.version} ${statements}\n`);
  await store.close();
}
