/**
 * Child process of the SQLite SIGKILL tests (test/reliability/crash-segments.test.ts). Usage:
 *   node --import tsx test/helpers/sqlite-crash-writer.ts <dataDir> <operation> <kill>
 * <dataDir> holds the crash template (see `crashTemplate`); <operation> is `append` (a new segment,
 * documents, and the tombstones of a re-upserted document), `delete` (tombstones only) or `merge`
 * (three segments into one); `append-vectors` and `merge-vectors` are the same on an index whose
 * segments carry vectors (the segment's vector rows are part of the write). <kill> is `statement:<n>`: the process SIGKILLs itself right after the
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

/** The index with vectors the `*-vectors` operations write to, and its embedding space. */
export const CRASH_VECTOR_KEY: IndexKey = { tenantId: "crash", name: "vectors" };
const CRASH_SPACE = { model: "crash-model", dimension: 8, storage: "f32" } as const;

export type CrashOperation = "append" | "delete" | "merge" | "append-vectors" | "merge-vectors";
export const CRASH_OPERATIONS: readonly CrashOperation[] = [
  "append",
  "delete",
  "merge",
  "append-vectors",
  "merge-vectors",
];

/** The index an operation writes to. */
export const crashKeyOf = (operation: CrashOperation): IndexKey =>
  operation.endsWith("-vectors") ? CRASH_VECTOR_KEY : CRASH_KEY;

/** Short documents (one chunk each), so that an operation has few statements and every one is a kill point. */
const shortEntries = (count: number, prefix: string, seed: number) =>
  makeEntries(count, { prefix, length: 120, seed });

/**
 * The template's writes, in order, and the model after them: three segments, one of them with
 * tombstones. The parent writes them; a child replays them on a model only (they are deterministic)
 * to know the state it starts from.
 */
export function crashTemplate(): { model: IndexModel; vectorModel: IndexModel; writes: IndexWrite[] } {
  const writes: IndexWrite[] = [];
  const take = (prepared: Prepared<IndexWrite>) => {
    writes.push(prepared.change);
    prepared.apply();
  };
  const build = (key: IndexKey, withVectors: boolean) => {
    const model = new IndexModel();
    model.withVectors = withVectors;
    take(model.prepare(key, "create", shortEntries(6, "a-", 1), withVectors ? { vectors: CRASH_SPACE } : {}));
    take(model.prepare(key, "update", shortEntries(4, "b-", 2)));
    take(model.prepare(key, "update", shortEntries(3, "c-", 3), { deleteDocumentIds: ["a-2"] }));
    return model;
  };
  const model = build(CRASH_KEY, false);
  const vectorModel = build(CRASH_VECTOR_KEY, true);
  return { model, vectorModel, writes };
}

/** The operation as prepared from the template's state (`meta`: the stored meta of the index). */
export function crashChange(
  template: { model: IndexModel; vectorModel: IndexModel },
  operation: CrashOperation,
  meta: IndexMeta,
): Prepared<IndexWrite> | Prepared<MergeWrite> {
  const key = crashKeyOf(operation);
  const model = key === CRASH_KEY ? template.model : template.vectorModel;
  switch (operation) {
    case "append":
    case "append-vectors":
      return model.prepare(
        key,
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
    case "merge-vectors":
      return model.merge(key, [0, 1, 2], meta.version);
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
    throw new Error(
      `usage: sqlite-crash-writer.ts <dataDir> ${CRASH_OPERATIONS.join("|")} statement:<n>|none`,
    );
  }
  const killAt = /^statement:(\d+)$/.exec(kill);
  const store = SqliteIndexStore.open(dataDir);
  const key = crashKeyOf(operation as CrashOperation);
  const prepared = crashChange(crashTemplate(), operation as CrashOperation, (await store.getMeta(key))!);
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
