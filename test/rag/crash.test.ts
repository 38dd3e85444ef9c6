/**
 * Crash safety through the app: a child process runs the RAG app on a DATA_DIR holding an index (v1),
 * starts a big `replace` build and is SIGKILLed at various points. Afterwards a new app on that
 * DATA_DIR answers exactly as v1 did, or — when the build had committed — exactly as the new version;
 * never a mix, and the SQLite file passes its integrity check.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import { repoRoot } from "../helpers/env.js";
import { CRASH_INDEX, CRASH_QUERY, CRASH_TENANT, crashDocuments } from "../helpers/rag-crash-corpus.js";
import {
  assertStatus,
  makeTempDir,
  openRagApp,
  ragClient,
  removeTempDirs,
  withoutElapsed,
} from "../helpers/rag-http.js";

const CHILD = path.join(repoRoot, "test", "helpers", "rag-crash-builder.ts");
const DOCUMENTS = 3000;

/** Kill the child `afterMs` after it printed `on`; null: let it finish. */
type Kill = { on: "ready" | "writing"; afterMs: number } | null;

interface ChildRun {
  /** "done <status> <ms>" when the child finished on its own. */
  done: { status: number; ms: number } | null;
  /** Milliseconds of the store's write transaction, when it finished. */
  writeMs: number | null;
  /** Whether the child said "writing" before it ended. */
  wrote: boolean;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/**
 * Starts a child on `dataDir` right away (imports and payload take a while), so the next run can
 * get ready while the current one builds; `run` then starts the build and applies `kill`.
 */
function prepareChild(dataDir: string) {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, dataDir, String(DOCUMENTS)], {
    cwd: repoRoot,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  let kill: Kill = null;
  let killScheduled = false;
  let onPrepared: () => void = () => {};
  const prepared = new Promise<void>((resolve) => (onPrepared = resolve));
  const lines = () => stdout.split("\n");
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
    if (lines().includes("prepared")) onPrepared();
    if (kill && !killScheduled && lines().includes(kill.on)) {
      killScheduled = true;
      if (kill.afterMs === 0) child.kill("SIGKILL");
      else setTimeout(() => child.kill("SIGKILL"), kill.afterMs);
    }
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const closed = new Promise<ChildRun>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (_code, signal) => {
      const done = /^done (\d+) (\d+)$/m.exec(stdout);
      const written = /^written (\d+)$/m.exec(stdout);
      resolve({
        done: done ? { status: Number(done[1]), ms: Number(done[2]) } : null,
        writeMs: written ? Number(written[1]) : null,
        wrote: lines().includes("writing"),
        signal,
        stderr,
      });
    });
  });
  return {
    async run(killAt: Kill): Promise<ChildRun> {
      await Promise.race([prepared, closed]);
      kill = killAt;
      child.stdin.end("go\n");
      return closed;
    },
    /** Ends a child that was never run. */
    cancel() {
      child.kill("SIGKILL");
    },
  };
}

/** What a client sees of the crash index: the query's answer and the index's info. */
async function observe(dataDir: string) {
  const { app } = await openRagApp({ DATA_DIR: dataDir });
  try {
    const rag = ragClient(app);
    const query = await rag.query(CRASH_QUERY);
    assertStatus(query, 200);
    const info = await rag.indexStats(CRASH_INDEX, CRASH_TENANT);
    assertStatus(info, 200);
    return { query: withoutElapsed(query.json()), info: info.json() as Record<string, unknown> };
  } finally {
    await app.close();
  }
}

function integrity(dataDir: string): string {
  const store = SqliteIndexStore.open(dataDir);
  try {
    return store.integrityCheck();
  } finally {
    void store.close();
  }
}

/** A copy of the v1 data folder for each run. */
function copyOf(template: string): string {
  const dir = makeTempDir("rag-crash-run");
  fs.cpSync(template, dir, { recursive: true });
  return dir;
}

const withoutUpdatedAt = ({ updated_at: _updated, ...rest }: Record<string, unknown>) => rest;

after(() => removeTempDirs());

describe("crash safety of builds through the app", () => {
  let template: string;
  let v1: Awaited<ReturnType<typeof observe>>;
  let copies: string[];

  before(async () => {
    template = makeTempDir("rag-crash-v1");
    const { app } = await openRagApp({ DATA_DIR: template });
    try {
      const res = await ragClient(app).build({
        index_name: CRASH_INDEX,
        tenant_id: CRASH_TENANT,
        scorer: "tfidf",
        chunk_size: 600,
        overlap: 60,
        documents: crashDocuments(60, "v1-", 1),
      });
      assertStatus(res, 201);
    } finally {
      await app.close();
    }
    v1 = await observe(template);
    assert.ok((v1.query as { count: number }).count > 5);
    copies = Array.from({ length: 8 }, () => copyOf(template));
  });

  it("a SIGKILL at any point leaves v1 or the whole new version, and an intact database", async (t) => {
    // The kill points; the first run is left to finish, for the new version's answers and timings.
    const kills: Kill[] = [null, { on: "ready", afterMs: 0 }, { on: "ready", afterMs: 150 }];
    const fractions = [0, 0.3, 0.6, 0.9, 1.5];
    const children = [prepareChild(copies[0]!)];
    let next = children[0]!;
    let v2: Awaited<ReturnType<typeof observe>> | undefined;
    let writeMs = 0;
    const outcomes: string[] = [];
    try {
      for (let i = 0; i < kills.length + fractions.length; i++) {
        const dir = copies[i]!;
        const current = next;
        // Let the next child import and prepare while this one builds.
        if (i + 1 < kills.length + fractions.length) {
          next = prepareChild(copies[i + 1]!);
          children.push(next);
        }
        const kill: Kill = i < kills.length ? kills[i]! : { on: "writing", afterMs: Math.round(fractions[i - kills.length]! * writeMs) };
        let tt = performance.now();
        const run = await current.run(kill);
        console.log("run", Math.round(performance.now() - tt)); tt = performance.now();
        const label = kill === null ? "no kill" : `kill ${kill.afterMs} ms after "${kill.on}"`;
        if (kill === null) {
          assert.ok(run.done && run.writeMs !== null, `the child did not finish: ${run.stderr}`);
          assert.equal(run.done.status, 201);
          writeMs = run.writeMs;
          v2 = await observe(dir);
          assert.equal(v2.info.documents_count, DOCUMENTS);
          assert.notDeepEqual(v2.query, v1.query);
          t.diagnostic(`uninterrupted: build ${run.done.ms} ms, of which the write transaction ${writeMs} ms`);
        }
        assert.equal(integrity(dir), "ok", `integrity after ${label}`);
        console.log("integrity", Math.round(performance.now() - tt)); tt = performance.now();
        const seen = await observe(dir);
        console.log("observe", Math.round(performance.now() - tt)); tt = performance.now();
        if (seen.info.documents_count === DOCUMENTS) {
          assert.ok(run.wrote);
          assert.deepEqual(seen.query, v2!.query, `${label}: the new version answers as it should`);
          assert.deepEqual(withoutUpdatedAt(seen.info), withoutUpdatedAt(v2!.info));
          outcomes.push(`${label}: new version${run.signal ? " (killed after the commit)" : ""}`);
        } else {
          assert.equal(run.done, null, `${label}: the build reported success but v1 is served`);
          assert.deepEqual(seen.query, v1.query, `${label}: v1 answers exactly as before`);
          assert.deepEqual(seen.info, v1.info);
          outcomes.push(`${label}: v1${run.wrote ? " (killed during the write)" : ""}`);
        }
      }
    } finally {
      for (const child of children) child.cancel();
    }
    t.diagnostic(outcomes.join("; "));
    assert.ok(outcomes[1]!.endsWith("v1"), "a kill right at the start leaves v1");
    assert.ok(
      outcomes.some((o) => o.includes("during the write")),
      "at least one kill landed inside the write transaction",
    );
  });
});
