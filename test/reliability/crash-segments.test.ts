/**
 * Crash safety of the SQLite store's segment writes, deletes and merges: a child process runs one
 * operation on a copy of a database holding an index of three segments (one with tombstones) and
 * SIGKILLs itself right after the n-th SQLite statement of it, for every n from BEGIN to COMMIT (the
 * kill points are exact whatever the machine's load). Afterwards the database passes
 * `PRAGMA integrity_check` and the store shows exactly the previous state (killed before COMMIT) or
 * exactly the operation's result (killed right after it), never a mix. The same for an append and a
 * merge on an index whose segments carry vectors: the vector rows come and go with their segment.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import { repoRoot } from "../helpers/env.js";
import {
  CRASH_KEY,
  CRASH_OPERATIONS,
  CRASH_VECTOR_KEY,
  crashKeyOf,
  crashChange,
  crashTemplate,
  installStatementCounter,
  runCrashChange,
  type CrashOperation,
} from "../helpers/sqlite-crash-writer.js";
import { observe } from "../helpers/store-fixtures.js";
import type { IndexKey } from "../../src/rag/store/types.js";

const CHILD = path.join(repoRoot, "test", "helpers", "sqlite-crash-writer.ts");
/** Children at once: each is mostly start-up (tsx), and the kill points do not depend on timing. */
const PARALLEL = 3;

const tempDirs: string[] = [];
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-crash-seg-"));
  tempDirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

type Observed = NonNullable<Awaited<ReturnType<typeof observe>>>;

/** What the store shows of the crash index, after checking the database's integrity. */
async function inspect(dataDir: string, key: IndexKey = CRASH_KEY): Promise<Observed> {
  const store = SqliteIndexStore.open(dataDir);
  try {
    assert.equal(store.integrityCheck(), "ok");
    const seen = await observe(store, key);
    assert.ok(seen, "the index exists");
    return seen;
  } finally {
    await store.close();
  }
}

const withoutUpdatedAt = (seen: Observed) => ({ ...seen, meta: { ...seen.meta, updatedAt: "" } });

/** Runs the child on `dataDir`; it kills itself after statement `n`. */
function runChild(dataDir: string, operation: CrashOperation, n: number) {
  return new Promise<{ stdout: string; stderr: string; signal: NodeJS.Signals | null }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, dataDir, operation, `statement:${n}`], {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (data: string) => (stdout += data));
    child.stderr.setEncoding("utf8").on("data", (data: string) => (stderr += data));
    child.on("error", reject);
    child.on("close", (_code, signal) => resolve({ stdout, stderr, signal }));
  });
}

/** Runs `work` on every item, at most `limit` at once. */
async function inParallel<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await work(items[next++]!);
  });
  await Promise.all(lanes);
}

describe("SIGKILL at every statement of a segment write, a delete and a merge (SQLite)", () => {
  let template: string;
  const previousOf = new Map<string, Observed>();

  before(async () => {
    template = tempDir();
    const store = SqliteIndexStore.open(template);
    for (const change of crashTemplate().writes) await store.write(change);
    await store.close();
    for (const key of [CRASH_KEY, CRASH_VECTOR_KEY]) {
      const previous = await inspect(template, key);
      assert.equal(previous.meta.segmentsCount, 3);
      assert.ok(previous.meta.deletedChunksCount > 0);
      previousOf.set(key.name, previous);
    }
    assert.ok(previousOf.get(CRASH_VECTOR_KEY.name)!.segments.every((s) => s.vectors != null));
  });

  const copyOfTemplate = () => {
    const dir = tempDir();
    fs.cpSync(template, dir, { recursive: true });
    return dir;
  };

  for (const operation of CRASH_OPERATIONS) {
    it(`${operation}: the previous state or the whole result, and an intact database`, async (t) => {
      const key = crashKeyOf(operation);
      const previous = previousOf.get(key.name)!;
      // The operation uninterrupted, in this process: its result and its statements.
      const dir = copyOfTemplate();
      const store = SqliteIndexStore.open(dir);
      const counter = installStatementCounter(() => undefined);
      const prepared = crashChange(crashTemplate(), operation, (await store.getMeta(key))!);
      counter.arm();
      await runCrashChange(store, prepared);
      const statements = counter.disarm();
      await store.close();
      const result = await inspect(dir, key);
      assert.notDeepEqual(
        withoutUpdatedAt(result),
        withoutUpdatedAt(previous),
        "the operation changes the index",
      );
      if (operation.startsWith("append")) assert.equal(result.meta.segmentsCount, 4);
      if (operation === "delete")
        assert.ok(result.meta.deletedChunksCount > previous.meta.deletedChunksCount);
      if (operation.startsWith("merge")) assert.equal(result.meta.segmentsCount, 1);
      if (key === CRASH_VECTOR_KEY) {
        assert.ok(
          result.segments.every((s) => s.vectors != null),
          "every segment keeps its vectors",
        );
        assert.deepEqual(result.meta.vectors, previous.meta.vectors);
      }
      assert.ok(statements >= 5, `${statements} statements`);

      const kills = Array.from({ length: statements }, (_, i) => i + 1);
      const outcomes: string[] = [];
      await inParallel(kills, PARALLEL, async (n) => {
        const killed = copyOfTemplate();
        const run = await runChild(killed, operation, n);
        assert.equal(run.signal, "SIGKILL", `statement ${n}: the child was not killed: ${run.stderr}`);
        assert.match(run.stdout, new RegExp(`^killing at statement ${n}$`, "m"));
        const seen = await inspect(killed, key);
        if (n < statements) {
          // Before COMMIT: exactly as before, updatedAt included.
          assert.deepEqual(seen, previous, `${operation}, killed after statement ${n}/${statements}`);
        } else {
          assert.deepEqual(
            withoutUpdatedAt(seen),
            withoutUpdatedAt(result),
            `${operation}, killed right after COMMIT (${n}/${statements})`,
          );
        }
        outcomes.push(n < statements ? "previous" : "result");
      });
      assert.equal(outcomes.filter((o) => o === "result").length, 1);
      t.diagnostic(`${operation}: killed after each of its ${statements} statements`);
    });
  }
});
