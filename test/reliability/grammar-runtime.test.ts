/**
 * Issue #35: grammars bounded while sampling, against the real server (the CLI as a child process).
 * The attack is a blow-up the pre-check cannot see: a bracket decoy fills the pre-check's horizon
 * (5,000 stack sets) before the exploration follows the hidden path (14 "z", then nested optionals
 * 12 deep), which a logit bias steers the model into. The test first proves the pre-check accepts it;
 * at run time the batcher follows the stacks token by token and ends each such response with a 422
 * naming GRAMMAR_MAX_STACKS, four at once, while another user's /predict keeps its pace, /health
 * answers within 1 s throughout, RSS stays bounded and SIGTERM still ends the process in time.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { checkGrammarBudget } from "../../src/textgen/engine/grammar-budget.js";
import { DEFAULT_GRAMMAR_BUDGET } from "../../src/textgen/engine/llama-generator.js";
import { horizonHiddenGrammar } from "../helpers/grammar-fixtures.js";
import { rssOf } from "../helpers/process-memory.js";
import { request, startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";
import { whileProbing } from "../helpers/health-probe.js";

/** Liveness bound for /health while the attack runs: generous (a loaded 2-core CI machine). */
const HEALTH_BOUND_MS = 1000;
const RSS_GROWTH_BOUND = 300 * 1024 * 1024;
const SHUTDOWN_GRACE_MS = 1000;
/** The test model's tokens "z" and "x", pushed to the top so the answer takes the hidden path. */
const STEER = { "451": 100, "444": 100 };

const attack = {
  text: "Once",
  max_length: 200,
  ignore_eos: true,
  temperature: 0,
  grammar: horizonHiddenGrammar(),
  logit_bias: STEER,
};

/** Runs `work` while probing /health; its result and the longest the server's loop was held (ms). */
async function withHealthProbe<T>(served: ServedProcess, work: Promise<T>): Promise<[T, number]> {
  const { result, slowest } = await whileProbing(served, work);
  return [result, slowest];
}

async function timedPredict(served: ServedProcess, body: unknown) {
  const started = performance.now();
  const res = await request(served.port, { method: "POST", path: "/predict", body });
  return { ...res, ms: performance.now() - started };
}

describe("grammars bounded while sampling (issue #35)", () => {
  let served: ServedProcess;
  let baseRss = 0;

  before(async () => {
    served = await startServe("textgen", {
      MAX_CONCURRENT: "5",
      // One context: every sequence shares each decode step, the case where one costly sampler
      // would hold the others back.
      LLAMA_CONTEXTS: "1",
      LLAMA_CONTEXT_SIZE: "2560",
      REQUEST_TIMEOUT_MS: "120000",
      SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS),
    });
    await waitHealthy(served);
    baseRss = rssOf(served.child.pid!);
  });
  after(() => {
    if (served.child.exitCode === null) served.child.kill("SIGKILL");
  });

  it("the attack grammar passes the pre-check (a blow-up past its horizon)", () => {
    const stacks = checkGrammarBudget(attack.grammar, DEFAULT_GRAMMAR_BUDGET);
    assert.ok(stacks <= DEFAULT_GRAMMAR_BUDGET.maxStacks);
  });

  it("four attackers get 422 naming GRAMMAR_MAX_STACKS; another user's /predict keeps its pace", async () => {
    const plain = { text: "Once upon a time", max_length: 48, ignore_eos: true, temperature: 0 };
    const alone = await timedPredict(served, plain);
    assert.equal(alone.status, 200, alone.body);
    const [results, slowestHealth] = await withHealthProbe(
      served,
      Promise.all([
        ...Array.from({ length: 4 }, () => timedPredict(served, attack)),
        sleep(100).then(() => timedPredict(served, plain)),
      ]),
    );
    const during = results.at(-1)!;
    for (const res of results.slice(0, 4)) {
      assert.equal(res.status, 422, res.body);
      assert.match(res.body, /GRAMMAR_MAX_STACKS/);
    }
    assert.equal(during.status, 200, during.body);
    // The issue measured 22 s for this /predict behind four such clients. Each attacker now ends
    // at the token its stacks passed 512 (a few tokens in); the bound is generous for a loaded
    // machine and only catches a sampler holding the batch for seconds.
    assert.ok(
      during.ms < alone.ms + 5000,
      `/predict took ${during.ms} ms during the attack (${alone.ms} alone)`,
    );
    assert.ok(slowestHealth < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowestHealth)} ms`);
  });

  it("the server's RSS grew less than 300 MB", () => {
    const growth = rssOf(served.child.pid!) - baseRss;
    assert.ok(growth < RSS_GROWTH_BOUND, `RSS grew ${Math.round(growth / 1024 / 1024)} MB`);
  });

  it("SIGTERM during the attack ends the process within SHUTDOWN_GRACE_MS + 5 s", async () => {
    const running = Array.from({ length: 4 }, () => timedPredict(served, attack).catch(() => undefined));
    await sleep(200);
    const sent = performance.now();
    served.child.kill("SIGTERM");
    // run-servers.ts forces an exit 5 s after the grace; a little more for a loaded machine.
    const exited = await Promise.race([served.exited, sleep(30_000).then(() => undefined)]);
    assert.ok(exited, "the process did not exit within 30 s of SIGTERM");
    assert.ok(exited.at - sent < SHUTDOWN_GRACE_MS + 5000 + 2000, `exit took ${exited.at - sent} ms`);
    await Promise.all(running);
  });
});
