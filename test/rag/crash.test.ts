/**
 * Crash safety through the app: a child process runs the RAG app on a DATA_DIR holding an index (v1),
 * starts a big `replace` build and is SIGKILLed at various points: before the build, and at fractions
 * of its SQLite write transaction. Afterwards a new app on that DATA_DIR answers exactly as v1 did,
 * or — when the build had committed — exactly as the new version; never a mix, and the SQLite file
 * passes its integrity check.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { buildRagApp } from "../../src/rag/app.js";
import { repoRoot, testConfig } from "../helpers/env.js";
import {
  CRASH_INDEX,
  CRASH_QUERY,
  CRASH_TENANT,
  crashBuildRequest,
  crashDocuments,
  integrity,
  openReportingStore,
} from "../helpers/rag-crash-corpus.js";
import { prepareChild } from "../helpers/prepared-child.js";
import {
  assertStatus,
  makeTempDir,
  openRagApp,
  ragClient,
  removeTempDirs,
  withoutElapsed,
  withoutUpdatedAt,
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
function prepareBuilder(dataDir: string) {
  const child = prepareChild(CHILD, [dataDir, String(DOCUMENTS)]);
  let kill: Kill | undefined;
  let killScheduled = false;
  child.onOutput(() => {
    if (kill && !killScheduled && child.saw(kill.on)) {
      killScheduled = true;
      if (kill.afterMs === 0) child.kill();
      else setTimeout(() => child.kill(), kill.afterMs);
    }
  });
  return {
    async run(killAt: Kill): Promise<ChildRun> {
      // Its lines `ready` and `writing` come only after `run` lets it go.
      kill = killAt;
      const { done, signal, stderr } = await child.run();
      return { done, wrote: child.saw("writing"), signal, stderr };
    },
    /** Ends the child if it still runs (after a failure). */
    cancel: () => child.kill(),
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
    const children: Array<ReturnType<typeof prepareBuilder>> = [];
    const prepareUpTo = (last: number) => {
      while (children.length <= Math.min(last, dirs.length - 1)) {
        children.push(prepareBuilder(dirs[children.length]!));
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
