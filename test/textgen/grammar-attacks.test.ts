/**
 * Issue #23's hostile grammars and schemas against the real server (the CLI as a child process, the
 * test model): each is answered 400 naming its limit, or accepted and completed within
 * REQUEST_TIMEOUT_MS; /health answers meanwhile; the server's RSS stays bounded; clients that leave
 * free every slot whatever the phase; SIGTERM still ends the process while such a request runs.
 */
import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { request, startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";
import { nestedOptionalGrammar } from "../helpers/grammar-fixtures.js";
import { rssOf } from "../helpers/process-memory.js";
import { whileProbing } from "../helpers/health-probe.js";

const MAX_CONCURRENT = 2;
/** Liveness bound for /health while an attack runs: generous (a loaded 2-core CI machine), not a speed figure. */
const HEALTH_BOUND_MS = 1000;
/** The bound on the server's memory growth over all the attacks. */
const RSS_GROWTH_BOUND = 300 * 1024 * 1024;
/** An accepted grammar that still costs: 7 levels of nested optionals (about 120 parse stacks). */
const COSTLY_GRAMMAR = nestedOptionalGrammar(7);

/** Arrays of arrays, `depth` deep (JSON.stringify of the body recurses once per level). */
function deepArraySchema(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < depth; i++) schema = { type: "array", items: schema };
  return schema;
}

/** Runs `attack` while probing /health; its result and the longest the server's loop was held (ms). */
async function withHealthProbe<T>(served: ServedProcess, attack: Promise<T>): Promise<[T, number]> {
  const { result, slowest } = await whileProbing(served, attack);
  return [result, slowest];
}

/** A request whose client goes away after `afterMs`. */
function abandoned(port: number, path: string, body: unknown, afterMs: number): Promise<void> {
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path,
        agent: false,
        headers: { "content-type": "application/json" },
      },
      (res) => res.resume(),
    );
    req.on("error", () => resolve());
    req.end(JSON.stringify(body));
    setTimeout(() => {
      req.destroy();
      resolve();
    }, afterMs);
  });
}

async function metric(served: ServedProcess, name: string): Promise<number> {
  const res = await request(served.port, { method: "GET", path: "/metrics" });
  const line = res.body.split("\n").find((l) => l.startsWith(`${name} `));
  return Number(line?.split(" ")[1]);
}

describe("hostile grammars and schemas against the server", () => {
  let served: ServedProcess;
  let baseRss = 0;

  before(async () => {
    served = await startServe("textgen", {
      MAX_CONCURRENT: String(MAX_CONCURRENT),
      MAX_QUEUE: "16",
      REQUEST_TIMEOUT_MS: "60000",
      LLAMA_CONTEXT_SIZE: "1024",
      SHUTDOWN_GRACE_MS: "1000",
    });
    await waitHealthy(served);
    baseRss = rssOf(served.child.pid!);
  });
  after(() => {
    if (served.child.exitCode === null) served.child.kill("SIGKILL");
  });

  const refusals: [string, string, unknown, RegExp][] = [
    [
      "issue #23's 40-level nested-optional grammar (765 bytes)",
      "/predict",
      { text: "Once", max_length: 8, grammar: nestedOptionalGrammar(40, `"${"x".repeat(22)}"`) },
      /GRAMMAR_MAX_STACKS/,
    ],
    [
      "the 12-level one (its requests held slots for 10 minutes)",
      "/v1/completions",
      { prompt: "Once", max_tokens: 8, grammar: nestedOptionalGrammar(12) },
      /GRAMMAR_MAX_STACKS/,
    ],
    [
      // Within MAX_JSON_DEPTH (256) as JSON, past SCHEMA_MAX_DEPTH (32) as a schema.
      "a JSON schema nested 100 deep",
      "/v1/chat/completions",
      {
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 8,
        response_format: {
          type: "json_schema",
          json_schema: { name: "deep", schema: deepArraySchema(100) },
        },
      },
      /SCHEMA_MAX_DEPTH/,
    ],
    [
      "a JSON schema nested 3,000 deep (refused while the body is read)",
      "/v1/chat/completions",
      {
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 8,
        response_format: {
          type: "json_schema",
          json_schema: { name: "deep", schema: deepArraySchema(3000) },
        },
      },
      /MAX_JSON_DEPTH/,
    ],
    [
      "a 60 KB grammar of undefined names (the syntax pre-check was quadratic: 34 s at 190 KB)",
      "/predict",
      {
        text: "Once",
        max_length: 8,
        grammar: `root ::= r0\n${Array.from({ length: 1250 }, (_, i) => `r${i} ::= a b c d e f g h i j k l m n o p r${i + 1}`).join("\n")}`,
      },
      /used but not defined/,
    ],
    [
      "a 50,000-value enum",
      "/predict",
      {
        text: "Once",
        max_length: 8,
        json_schema: { enum: Array.from({ length: 50_000 }, (_, i) => `v${i}`) },
      },
      /SCHEMA_MAX_ENUM/,
    ],
  ];

  for (const [name, path, body, limit] of refusals) {
    it(`${name}: 400 naming the limit, /health alive meanwhile`, async () => {
      const [res, slowestHealth] = await withHealthProbe(
        served,
        request(served.port, { method: "POST", path, body }),
      );
      assert.equal(res.status, 400, res.body);
      const error = (JSON.parse(res.body) as { error: { message: string } }).error;
      assert.match(error.message, limit);
      if (path.startsWith("/v1")) assert.equal((error as { type?: string }).type, "invalid_request_error");
      assert.ok(slowestHealth < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowestHealth)} ms`);
    });
  }

  const realistic: [string, unknown][] = [
    [
      "OpenAI's structured-output example (steps of a math answer)",
      {
        type: "object",
        properties: {
          steps: {
            type: "array",
            items: {
              type: "object",
              properties: { explanation: { type: "string" }, output: { type: "string" } },
              required: ["explanation", "output"],
              additionalProperties: false,
            },
          },
          final_answer: { type: "string" },
        },
        required: ["steps", "final_answer"],
        additionalProperties: false,
      },
    ],
    [
      "a recursive tree through $ref",
      {
        $defs: {
          node: {
            type: "object",
            properties: {
              value: { type: "string" },
              children: { type: "array", items: { $ref: "#/$defs/node" } },
            },
            required: ["value", "children"],
          },
        },
        $ref: "#/$defs/node",
      },
    ],
    [
      "20 tagged alternatives",
      {
        anyOf: Array.from({ length: 20 }, (_, i) => ({
          type: "object",
          properties: { kind: { const: `k${i}` }, data: { type: "string" } },
          required: ["kind", "data"],
        })),
      },
    ],
    [
      "zod's bounded and safe integers",
      {
        type: "object",
        properties: {
          age: { type: "integer", minimum: 0, maximum: 150 },
          id: { type: "integer", minimum: -9007199254740991, maximum: 9007199254740991 },
        },
      },
    ],
    ["a 500-value enum", { enum: Array.from({ length: 500 }, (_, i) => `country-${i}`) }],
  ];
  for (const [name, schema] of realistic) {
    it(`accepts ${name} with the default budget`, async () => {
      const res = await request(served.port, {
        method: "POST",
        path: "/v1/chat/completions",
        body: {
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 8,
          response_format: { type: "json_schema", json_schema: { name: "realistic", schema } },
        },
      });
      assert.equal(res.status, 200, res.body);
    });
  }

  it("an accepted but costly grammar completes within the timeout, /health alive meanwhile", async () => {
    const body = { text: "Once", max_length: 200, ignore_eos: true, grammar: COSTLY_GRAMMAR, temperature: 0 };
    const [res, slowestHealth] = await withHealthProbe(
      served,
      request(served.port, { method: "POST", path: "/predict", body }),
    );
    assert.equal(res.status, 200, res.body);
    assert.match((JSON.parse(res.body) as { generated_text: string }).generated_text, /^x+$/);
    assert.ok(slowestHealth < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowestHealth)} ms`);
  });

  it("clients that leave free every slot, queued or running, and a plain request is then served", async () => {
    const body = { text: "Once upon a time", max_length: 400, ignore_eos: true, grammar: COSTLY_GRAMMAR };
    await Promise.all(
      Array.from({ length: MAX_CONCURRENT * 2 }, (_, i) =>
        abandoned(served.port, "/predict", body, 200 + 50 * i),
      ),
    );
    // Generous: each abandoned request stops within one decode step; the bound only catches a leak.
    const deadline = performance.now() + 30_000;
    while (
      (await metric(served, "lectern_running_generations")) + (await metric(served, "lectern_queue_depth")) >
      0
    ) {
      assert.ok(performance.now() < deadline, "slots still held 30 s after their clients left");
      await sleep(100);
    }
    const plain = await request(served.port, {
      method: "POST",
      path: "/predict",
      body: { text: "Once", max_length: 4 },
    });
    assert.equal(plain.status, 200, plain.body);
  });

  it("the server's RSS grew less than 300 MB over all of it", () => {
    const growth = rssOf(served.child.pid!) - baseRss;
    assert.ok(growth < RSS_GROWTH_BOUND, `RSS grew ${Math.round(growth / 1024 / 1024)} MB`);
  });

  it("SIGTERM ends the process while a costly grammar request runs", async () => {
    const body = { text: "Once", max_length: 400, ignore_eos: true, grammar: COSTLY_GRAMMAR };
    const running = request(served.port, { method: "POST", path: "/predict", body }).catch(() => undefined);
    await sleep(300);
    served.child.kill("SIGTERM");
    // Generous: SHUTDOWN_GRACE_MS is 1 s, and run-servers.ts forces an exit 5 s after it.
    const exited = await Promise.race([served.exited, sleep(30_000).then(() => undefined)]);
    assert.ok(exited, "the process did not exit within 30 s of SIGTERM");
    await running;
  });
});
