/**
 * Crash safety of appends and deletes through the app. A child process runs the RAG app on a copy of
 * a DATA_DIR holding a big index ("v1") and a small bystander index, starts one operation and is
 * SIGKILLed at points of the store's transaction:
 *   - an append of many documents (POST /rag/indices/{name}/documents),
 *   - the delete of the big index (DELETE /rag/indices/{name}),
 *   - the delete of one document (DELETE /rag/indices/{name}/documents/{id}).
 * The child kills itself at exact points whatever the machine's load: after the first statement of
 * the store's transaction, half-way, right before COMMIT, and right after the commit (before the app
 * answered). A new app on that DATA_DIR must then answer exactly as v1 did (uncommitted) or exactly as
 * the operation's result (committed; taken from the same operation run uninterrupted), never a mix; the
 * bystander index is untouched; and the SQLite file passes `PRAGMA integrity_check`.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { buildRagApp } from "../../src/rag/app.js";
import { repoRoot, testConfig } from "../helpers/env.js";
import { prepareChild } from "../helpers/prepared-child.js";
import {
  CRASH_INDEX,
  CRASH_QUERY,
  CRASH_TENANT,
  crashDocuments,
  integrity,
} from "../helpers/rag-crash-corpus.js";
import {
  installStatementCounter,
  openReportingMutatorStore,
  operationRequest,
  parseOperation,
  type CrashOperation,
} from "../helpers/rag-crash-mutator.js";
import {
  SMALL_CORPUS,
  assertStatus,
  makeTempDir,
  openRagApp,
  ragClient,
  removeTempDirs,
  withoutElapsed,
  withoutUpdatedAt,
} from "../helpers/rag-http.js";

const CHILD = path.join(repoRoot, "test", "helpers", "rag-crash-mutator.ts");
// Small: the kills are exact (by statement), so a big transaction would add time and no coverage.
const V1_DOCUMENTS = 200;
const APPENDED = 150;
const BYSTANDER = { index_name: "bystander", tenant_id: CRASH_TENANT };

/** Where the child kills itself: after the n-th statement of the transaction, or right after its commit. */
type Kill = { statement: number } | "after-commit";

interface ChildRun {
  done: { status: number; ms: number } | null;
  /** The statement it killed itself at, if it did inside the transaction. */
  killedAtStatement: number | null;
  written: boolean;
  stderr: string;
}

/** Spawns the child at once (it imports and warms up while others run); `run` lets it go. */
function prepareMutator(dataDir: string, operation: string, kill: Kill) {
  const killArg = kill === "after-commit" ? kill : `statement:${kill.statement}`;
  const child = prepareChild(CHILD, [dataDir, operation, killArg]);
  return {
    async run(): Promise<ChildRun> {
      const { stdout, stderr, done } = await child.run();
      const killed = /^killing at statement (\d+)$/m.exec(stdout);
      return {
        done,
        killedAtStatement: killed ? Number(killed[1]) : null,
        written: /^written \d+ \d+$/m.test(stdout),
        stderr,
      };
    },
    cancel: () => child.kill(),
  };
}

/** What a client sees: the crash index (query and info, or null when absent) and the bystander. */
async function observe(dataDir: string) {
  const { app } = await openRagApp({ DATA_DIR: dataDir });
  try {
    const rag = ragClient(app);
    const info = await rag.indexStats(CRASH_INDEX, CRASH_TENANT);
    let crash: { query: Record<string, unknown>; info: Record<string, unknown> } | null = null;
    if (info.statusCode === 404) {
      assertStatus(await rag.query(CRASH_QUERY), 404);
    } else {
      assertStatus(info, 200);
      const query = await rag.query(CRASH_QUERY);
      assertStatus(query, 200);
      crash = { query: withoutElapsed(query.json()), info: info.json() as Record<string, unknown> };
    }
    const bystanderQuery = await rag.query({ ...BYSTANDER, query: "largest planet ocean", top_k: 10 });
    assertStatus(bystanderQuery, 200);
    const bystanderInfo = await rag.indexStats(BYSTANDER.index_name, BYSTANDER.tenant_id);
    assertStatus(bystanderInfo, 200);
    return { crash, bystander: { query: withoutElapsed(bystanderQuery.json()), info: bystanderInfo.json() } };
  } finally {
    await app.close();
  }
}
type Observed = Awaited<ReturnType<typeof observe>>;

after(() => removeTempDirs());

/** Statements of the uninterrupted operations' transactions (COMMIT included). */
const counter = installStatementCounter(() => {});

describe("crash safety of appends and deletes through the app", () => {
  let template: string;
  let v1: Observed;

  const copyOfV1 = () => {
    const dir = makeTempDir("rag-crash-ad");
    fs.cpSync(template, dir, { recursive: true });
    return dir;
  };

  before(async () => {
    template = makeTempDir("rag-crash-ad-v1");
    const { app } = await openRagApp({ DATA_DIR: template });
    try {
      const rag = ragClient(app);
      const res = await rag.build({
        index_name: CRASH_INDEX,
        tenant_id: CRASH_TENANT,
        scorer: "bm25",
        chunk_size: 400,
        overlap: 40,
        documents: crashDocuments(V1_DOCUMENTS, "v1-", 1),
      });
      assertStatus(res, 201);
      assertStatus(await rag.build({ ...BYSTANDER, documents: SMALL_CORPUS }), 201);
    } finally {
      await app.close();
    }
    v1 = await observe(template);
    assert.ok(v1.crash && (v1.crash.query as { count: number }).count > 5);
  });

  /** The operation run in this process, uninterrupted: what "after" looks like, and how long its transaction takes. */
  async function uninterrupted(operation: CrashOperation) {
    const dir = copyOfV1();
    let writeMs = 0;
    let statements = 0;
    const store = openReportingMutatorStore(dir, (line) => {
      if (line === "writing") counter.arm();
      const written = /^written (\d+)$/.exec(line);
      if (written) {
        writeMs = Number(written[1]);
        statements = counter.disarm();
      }
    });
    const app = await buildRagApp({ config: testConfig({ DATA_DIR: dir }), store });
    try {
      const res = await app.inject(operationRequest(operation));
      assert.equal(res.statusCode, 200, res.body);
    } finally {
      await app.close();
    }
    return { after: await observe(dir), writeMs, statements };
  }

  const cases = [
    { label: "append", operation: `append:${APPENDED}` },
    { label: "delete of the whole index", operation: "delete-index" },
    { label: "delete of one document", operation: "delete-document:v1-7" },
  ];
  for (const { label, operation } of cases) {
    it(`a SIGKILL during the ${label} leaves v1 or the whole result, and an intact database`, async (t) => {
      const op = parseOperation(operation);
      const { after: result, writeMs, statements } = await uninterrupted(op);
      if (op.kind === "delete-index") assert.equal(result.crash, null);
      else {
        assert.ok(result.crash);
        assert.notDeepEqual(result.crash.query, v1.crash!.query, "the operation changes the answers");
        const expected = op.kind === "append" ? V1_DOCUMENTS + APPENDED : V1_DOCUMENTS - 1;
        assert.equal(result.crash.info.documents_count, expected);
      }
      assert.ok(statements >= 2, `the transaction ran ${statements} statements`);
      t.diagnostic(`uninterrupted ${label}: a transaction of ${statements} statements, ${writeMs} ms`);

      // Inside the transaction (after its first statement, and right before COMMIT), and right after
      // the commit but before the app answered.
      const kills: Kill[] = [
        ...[...new Set([1, statements - 1])].map((statement) => ({ statement })),
        "after-commit",
      ];
      const dirs = kills.map(copyOfV1);
      const children = kills.map((kill, i) => prepareMutator(dirs[i]!, operation, kill));
      try {
        const outcomes: string[] = [];
        for (const [i, kill] of kills.entries()) {
          const run = await children[i]!.run();
          const dir = dirs[i]!;
          const what =
            kill === "after-commit"
              ? "kill right after the commit"
              : `kill after statement ${kill.statement}/${statements}`;
          assert.equal(run.done, null, `${what}: the child was not killed: ${run.stderr}`);
          if (kill === "after-commit")
            assert.ok(run.written, `${what}: it did not get to the commit: ${run.stderr}`);
          else assert.equal(run.killedAtStatement, kill.statement, `${what}: ${run.stderr}`);
          assert.equal(integrity(dir), "ok", `integrity after a ${what}`);
          const seen = await observe(dir);
          assert.deepEqual(seen.bystander, v1.bystander, `${what}: the bystander index is untouched`);
          const isV1 = seen.crash !== null && isDeepEqual(seen.crash, v1.crash);
          const isResult =
            op.kind === "delete-index"
              ? seen.crash === null
              : seen.crash !== null &&
                isDeepEqual(seen.crash.query, result.crash!.query) &&
                isDeepEqual(withoutUpdatedAt(seen.crash.info), withoutUpdatedAt(result.crash!.info));
          assert.ok(
            isV1 || isResult,
            `${what}: neither v1 nor the result: ${JSON.stringify(seen.crash?.info ?? null)}`,
          );
          // Uncommitted: exactly v1. Committed (even unanswered): exactly the result.
          if (kill === "after-commit") assert.ok(isResult, `${what}: the committed ${label} is not there`);
          else assert.ok(isV1, `${what}: an uncommitted ${label} left changes`);
          outcomes.push(`${what}: ${isResult ? "result" : "v1"}`);
        }
        t.diagnostic(outcomes.join("; "));
      } finally {
        for (const child of children) child.cancel();
      }
    });
  }
});

function isDeepEqual(a: unknown, b: unknown): boolean {
  try {
    assert.deepEqual(a, b);
    return true;
  } catch {
    return false;
  }
}
