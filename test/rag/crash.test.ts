/**
 * Crash safety through the app: a child process runs the RAG app on a DATA_DIR holding an index (v1),
 * starts a big `replace` build and is SIGKILLed at various points: before the build, and at fractions
 * of its SQLite write transaction. Afterwards a new app on that DATA_DIR answers exactly as v1 did,
 * or — when the build had committed — exactly as the new version; never a mix, and the SQLite file
 * passes its integrity check.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { buildRagApp } from "../../src/rag/app.js";
import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import { repoRoot, testConfig } from "../helpers/env.js";
import {
  CRASH_INDEX,
  CRASH_QUERY,
  CRASH_TENANT,
  crashBuildRequest,
  crashDocuments,
  openReportingStore,
} from "../helpers/rag-crash-corpus.js";
import {
  assertStatus,
  makeTempDir,
  openRagApp,
  ragClient,
  removeTempDirs,
  withoutElapsed,
} from "../helpers/rag-http.js";

const CHILD = path.join(repoRoot, "test", "helpers", "rag-crash-builder.ts");
const DOCUMENTS = 2000;

/** Kill the child `afterMs` after it printed `on`. */
interface Kill {
  on: "ready" | "writing";
  afterMs: number;
}

interface ChildRun {
  /** Set when the child finished on its own. */
  done: { status: number; ms: number } | null;
  /** Whether the child said "writing" (its write transaction began) before it ended. */
  wrote: boolean;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/**
 * Spawns a child on `dataDir` at once, so that it imports and prepares while an earlier one builds;
 * `run` starts its build and kills it as asked.
 */
function prepareChild(dataDir: string) {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, dataDir, String(DOCUMENTS)], {
    cwd: repoRoot,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  let kill: Kill | undefined;
  let killScheduled = false;
  let onPrepared: () => void = () => {};
  const prepared = new Promise<void>((resolve) => (onPrepared = resolve));
  const saw = (line: string) => stdout.split("\n").includes(line);
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
    if (saw("prepared")) onPrepared();
    if (kill && !killScheduled && saw(kill.on)) {
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
      resolve({
        done: done ? { status: Number(done[1]), ms: Number(done[2]) } : null,
        wrote: saw("writing"),
        signal,
        stderr,
      });
    });
  });
  return {
    async run(killAt: Kill): Promise<ChildRun> {
      await Promise.race([prepared, closed]);
      assert.ok(saw("prepared"), `the child ended before it was prepared: ${stderr}`);
      kill = killAt;
      child.stdin.end("go\n");
      return closed;
    },
    /** Ends the child if it still runs (after a failure). */
    cancel: () => child.kill("SIGKILL"),
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

const withoutUpdatedAt = ({ updated_at: _updated, ...rest }: Record<string, unknown>) => rest;

after(() => removeTempDirs());

describe("crash safety of builds through the app", () => {
  let template: string;
  let v1: Awaited<ReturnType<typeof observe>>;

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
  });

  it("a SIGKILL at any point leaves v1 or the whole new version, and an intact database", async (t) => {
    const copyOfV1 = () => {
      const dir = makeTempDir("rag-crash-run");
      fs.cpSync(template, dir, { recursive: true });
      return dir;
    };
    // First the same build in this process, uninterrupted and alone: the new version, and how long
    // its write transaction takes. The children build while others prepare, so theirs take longer.
    const v2Dir = copyOfV1();
    let writeMs = 0;
    const store = openReportingStore(v2Dir, (line) => {
      const written = /^written (\d+)$/.exec(line);
      if (written) writeMs = Number(written[1]);
    });
    const app = await buildRagApp({ config: testConfig({ DATA_DIR: v2Dir }), store });
    try {
      assertStatus(await ragClient(app).build(crashBuildRequest(DOCUMENTS)), 201);
    } finally {
      await app.close();
    }
    const v2 = await observe(v2Dir);
    assert.equal(v2.info.documents_count, DOCUMENTS);
    assert.notDeepEqual(v2.query, v1.query);
    assert.ok(writeMs > 0);
    t.diagnostic(`write transaction of the uninterrupted build: ${writeMs} ms`);

    // Kill points: right at the start, then at fractions of the write transaction (the last one after it).
    const fractions = [0, 0.4, 0.8, 3];
    const dirs = Array.from({ length: 1 + fractions.length }, copyOfV1);
    // Children import and prepare two runs ahead of the one that builds.
    const children: Array<ReturnType<typeof prepareChild>> = [];
    const prepareUpTo = (last: number) => {
      while (children.length <= Math.min(last, dirs.length - 1)) {
        children.push(prepareChild(dirs[children.length]!));
      }
    };
    try {
      const kills: Kill[] = [
        { on: "ready", afterMs: 0 },
        ...fractions.map((f) => ({ on: "writing" as const, afterMs: Math.round(f * writeMs) })),
      ];
      const outcomes: string[] = [];
      for (const [i, kill] of kills.entries()) {
        prepareUpTo(i + 2);
        const dir = dirs[i]!;
        const run = await children[i]!.run(kill);
        const label = `kill ${kill.afterMs} ms after "${kill.on}"`;
        assert.equal(integrity(dir), "ok", `integrity after a ${label}`);
        const seen = await observe(dir);
        if (seen.info.documents_count === DOCUMENTS) {
          assert.ok(run.wrote);
          assert.deepEqual(seen.query, v2.query, `${label}: the new version answers as it should`);
          assert.deepEqual(withoutUpdatedAt(seen.info), withoutUpdatedAt(v2.info));
          outcomes.push(`${label}: new version${run.done ? "" : " (killed after the commit)"}`);
        } else {
          assert.equal(run.done, null, `${label}: the build reported success but v1 is served`);
          assert.deepEqual(seen.query, v1.query, `${label}: v1 answers exactly as before`);
          assert.deepEqual(seen.info, v1.info);
          outcomes.push(`${label}: v1${run.wrote ? " (killed during the write)" : ""}`);
        }
      }
      t.diagnostic(outcomes.join("; "));
      assert.ok(outcomes[0]!.endsWith(": v1"), "a kill right at the start leaves v1");
      assert.ok(
        outcomes.some((o) => o.includes("during the write")),
        "at least one kill landed inside the write transaction",
      );
    } finally {
      for (const child of children) child.cancel();
    }
  });
});
