/**
 * Property-based fuzzing of every route of the text generation API with the real test model
 * (fast-check, FUZZ_RUNS requests per route, 5,000 by default): valid, boundary, wrong types, huge,
 * deeply nested, invalid UTF-8, random bytes, random content types and query strings, streamed and
 * not. Every reply must be below 500 (the model is loaded, so not even 503), a 4xx must be the
 * contract's JSON error (OpenAI's shape on /v1), an event stream must end properly, and no body may
 * carry a stack frame or a server path. Afterwards /health answers 200 and a fixed greedy
 * generation is the same as before.
 *
 * MAX_NEW_TOKENS=4 keeps valid generations short. FUZZ_SEED=<int>|random reproduces or varies a run.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { createGenerator } from "../../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../../src/textgen/engine/llama-generator.js";
import { testConfig } from "../helpers/env.js";
import {
  FUZZ_RUNS,
  FUZZ_SEED,
  RequestCounter,
  KindTimer,
  StatusTally,
  anyString,
  checkReply,
  fuzzParameters,
  injectRequest,
  requestArbitrary,
  weirdString,
  hitsRoute,
  shapesFor,
  type FuzzReply,
  type RouteSpec,
} from "../helpers/fuzz-http.js";
import {
  assertEveryRouteFuzzed,
  fuzzTargets,
  routeRecorder,
  runsPerRoute,
  type OpenApiDocument,
  type RouteOverride,
} from "../helpers/fuzz-routes.js";

type App = Awaited<ReturnType<typeof buildTextgenApp>>;

const MAX_NEW_TOKENS = 4;
/** Small, so that huge bodies reach 413 without tokenizing a megabyte each. */
const BODY_LIMIT = 256 * 1024;
const REFERENCE = { text: "Once upon a time", max_length: MAX_NEW_TOKENS, temperature: 0 };

const STORY_WORDS = (
  "Once upon a time there was a little girl named Lily she liked to play in the park with her dog " +
  "one day sun happy big tree"
).split(" ");
const prompt = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .array(fc.constantFrom(...STORY_WORDS), { minLength: 1, maxLength: 12 })
      .map((w) => w.join(" ")),
  },
  { weight: 2, arbitrary: anyString(120, 1) },
  { weight: 1, arbitrary: weirdString.filter((s) => s.length > 0 && s.length <= 4096) },
);
// Mostly one token: the suite is about the HTTP layer, and generation time adds up over thousands.
const maxTokens = fc.oneof(
  { weight: 9, arbitrary: fc.constant(1) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: MAX_NEW_TOKENS }) },
);
const temperature = fc.oneof(fc.constantFrom(0, 0.8, 2), fc.double({ min: 0, max: 2, noNaN: true }));
const unit = fc.oneof(fc.constantFrom(0, 1), fc.double({ min: 0, max: 1, noNaN: true }));
const seed = fc.oneof(fc.constantFrom(0, 42, 4294967295), fc.integer({ min: 0, max: 4294967295 }));
const stop = fc.oneof(
  fc.string({ minLength: 1, maxLength: 8 }),
  fc.array(fc.string({ minLength: 1, maxLength: 8 }), { maxLength: 4 }),
  fc.constantFrom(".", "\n", ["the", "a"]),
);

const predictBody = fc.record(
  {
    text: prompt,
    max_length: maxTokens,
    temperature,
    top_p: unit,
    top_k: fc.oneof(fc.constantFrom(0, 1, 40, 1000), fc.integer({ min: 0, max: 1000 })),
    min_p: unit,
    repeat_penalty: fc.oneof(fc.constantFrom(0, 1, 1.1, 10), fc.double({ min: 0, max: 10, noNaN: true })),
    seed,
    stop,
    stream: fc.boolean(),
  },
  // max_length always (its absence is one of the mutations): generations stay at one token mostly.
  { requiredKeys: ["text", "max_length"] },
);

const openAiSampling = {
  model: fc.oneof(fc.constantFrom("llama", "gpt-4o", ""), anyString(20)),
  temperature,
  top_p: unit,
  seed,
  stop: fc.oneof(stop, fc.constant(null)),
  n: fc.constant(1),
  stream: fc.boolean(),
  stream_options: fc.oneof(
    fc.record({ include_usage: fc.boolean() }, { requiredKeys: [] }),
    fc.constant(null),
  ),
};

const completionBody = fc.record(
  {
    prompt: fc.oneof(
      prompt,
      prompt.map((p) => [p]),
    ),
    max_tokens: maxTokens,
    ...openAiSampling,
  },
  { requiredKeys: ["prompt", "max_tokens"] },
);

const message = fc.record(
  {
    role: fc.constantFrom("system", "developer", "user", "assistant"),
    content: fc.oneof(
      prompt,
      fc.array(fc.record({ type: fc.constant("text"), text: prompt }), { minLength: 1, maxLength: 3 }),
    ),
    name: fc.string({ maxLength: 10 }),
  },
  { requiredKeys: ["role", "content"] },
);
const chatBody = fc
  .record(
    {
      messages: fc.array(message, { minLength: 1, maxLength: 2 }),
      max_tokens: maxTokens,
      max_completion_tokens: maxTokens,
      ...openAiSampling,
    },
    { requiredKeys: ["messages", "max_tokens"] },
  )
  // Mostly a user turn last, as real chats have.
  .chain((body) =>
    fc
      .boolean()
      .map((userLast) =>
        userLast
          ? { ...body, messages: [...body.messages, { role: "user", content: "Tell me a story" }] }
          : body,
      ),
  );

const SAMPLING_FIELDS = [
  ["temperature"],
  ["top_p"],
  ["seed"],
  ["stop"],
  ["stream"],
  ["model"],
  ["n"],
  ["stream_options"],
];
const noQuery = fc.constant("");

/**
 * Better targets than the schemas give for the main generation routes: prompts of the model's words
 * and mostly one token, so that valid requests generate and stay short. Every other route's target
 * is made from its OpenAPI operation.
 */
const OVERRIDES: Record<string, RouteOverride> = {
  "POST /predict": {
    body: predictBody,
    fields: [
      ["text"],
      ["max_length"],
      ["temperature"],
      ["top_p"],
      ["top_k"],
      ["min_p"],
      ["repeat_penalty"],
      ["seed"],
      ["stop"],
      ["stop", 0],
      ["stream"],
    ],
    validWeight: 10,
  },
  "POST /v1/completions": {
    body: completionBody,
    fields: [["prompt"], ["prompt", 0], ["max_tokens"], ...SAMPLING_FIELDS],
    validWeight: 10,
  },
  "POST /v1/chat/completions": {
    body: chatBody,
    fields: [
      ["messages"],
      ["messages", 0],
      ["messages", 0, "role"],
      ["messages", 0, "content"],
      ["messages", 0, "content", 0],
      ["messages", 0, "content", 0, "text"],
      ["messages", 0, "name"],
      ["max_tokens"],
      ["max_completion_tokens"],
      ...SAMPLING_FIELDS,
    ],
    validWeight: 3,
  },
  "GET /v1/models": { query: noQuery },
  // Batch API input files (batches/): the form's purpose field, mostly the one served.
  "POST /v1/files": { multipart: { purpose: fc.constantFrom("batch", "batch", "assistants", "") } },
  "GET /health": { query: noQuery },
  "GET /": { query: noQuery },
};

/**
 * The fuzzer is a client on another machine: loading, unloading, pulling and deleting models and a
 * keep_alive of 0 are a model administrator's (model-access.ts), so they are fuzzed as the 403 that
 * such a client gets, instead of unloading the model the other routes generate with.
 */
const REMOTE_CLIENT = "192.0.2.7";

/**
 * Requests shared among however many routes there are: the CPU time of the old six-route suite
 * (5,000 each), now that most routes generate, embed or read a store.
 */
const BUDGET = 12_000;

/**
 * GET /models answers in llama-server's router shape, whose `path` is the model's reference as
 * configured (MODEL_PATH, a file path here): by design, so it is not counted as a leak.
 */
function scrubModelPath(spec: RouteSpec, reply: FuzzReply): FuzzReply {
  if (spec.name !== "GET /models" || reply.statusCode !== 200) return reply;
  return {
    ...reply,
    body: reply.body.split(JSON.stringify(fuzzConfig.textgen.modelPath)).join('"<MODEL_PATH>"'),
  };
}
// Every route the app registers, seen while it is built; the targets are its OpenAPI operations.
const registered = routeRecorder();
const fuzzConfig = testConfig({
  MAX_NEW_TOKENS: String(MAX_NEW_TOKENS),
  MAX_CONCURRENT: "2",
  MAX_QUEUE: "10000",
  MAX_BODY_BYTES: String(BODY_LIMIT),
  LOG_LEVEL: process.env.FUZZ_LOG_LEVEL ?? "silent",
});
const generator = createGenerator(fuzzConfig) as LlamaGenerator;
const app: App = await buildTextgenApp({ config: fuzzConfig, generator, onRoute: registered.onRoute });
await app.ready();
const ROUTES = fuzzTargets(app.swagger() as OpenApiDocument, {
  // Each dialect's routes answer in its own error shape; the rest in the contract's.
  shape: (tags) =>
    tags.includes("openai")
      ? "openai"
      : tags.includes("anthropic")
        ? "anthropic"
        : tags.includes("ollama")
          ? "ollama"
          : "contract",
  overrides: OVERRIDES,
  bodyLimit: BODY_LIMIT,
});
const RUNS = runsPerRoute(ROUTES.length, BUDGET, FUZZ_RUNS);

describe(`fuzzing the text generation API (seed ${FUZZ_SEED}, ${ROUTES.length} routes, ${RUNS} requests each)`, () => {
  let reference: unknown;
  const counter = new RequestCounter();
  const tally = new StatusTally();
  /** Requests to a /v1 path that missed its route (wrong method) and got the contract's shape. */
  let v1ContractShaped = 0;

  const generateReference = async () => {
    const res = await app.inject({ method: "POST", url: "/predict", payload: REFERENCE });
    assert.equal(res.statusCode, 200, res.body);
    const { elapsed_ms: _elapsed, ...rest } = res.json() as Record<string, unknown>;
    return rest;
  };

  before(async () => {
    await generator.ready();
    reference = await generateReference();
  });
  after(async () => app.close());

  it("every registered route is fuzzed (but static files, docs, HEAD twins and the preflight)", (t) => {
    t.diagnostic(assertEveryRouteFuzzed(registered.routes, ROUTES));
  });

  // The routes are fuzzed at once: the model generates on its own thread while this one makes and
  // checks requests, which on two cores halves the suite's time. Nothing here depends on their order.
  describe("every route, concurrently", { concurrency: true }, () => {
    for (const [index, spec] of ROUTES.entries()) {
      it(`${spec.name}: never a 5xx, errors in the ${spec.shape} shape, no leaks`, async (t) => {
        const timer = new KindTimer();
        // Requests go in pairs, sent at once: two generations share a batch (MAX_CONCURRENT=2), and the
        // scheduler sees concurrent work.
        const pair = fc.array(requestArbitrary(spec), { minLength: 2, maxLength: 2 });
        await fc.assert(
          fc.asyncProperty(pair, async (requests) => {
            const replies = await Promise.all(
              requests.map(async (request) => {
                counter.add(spec.name);
                const started = performance.now();
                const reply = await injectRequest(app, request, REMOTE_CLIENT);
                timer.add(request.kind, performance.now() - started);
                return reply;
              }),
            );
            for (const [i, request] of requests.entries()) {
              const reply = replies[i]!;
              tally.add(spec.name, reply.statusCode);
              const onRoute = hitsRoute(spec, request);
              if (!onRoute && spec.shape === "openai" && reply.body.includes('"details"')) v1ContractShaped++;
              checkReply(request, scrubModelPath(spec, reply), { shape: shapesFor(spec, request) });
            }
          }),
          fuzzParameters(100 + index, Math.ceil(RUNS / 2)),
        );
        t.diagnostic(`${counter.get(spec.name)} requests; statuses ${tally.line(spec.name)}`);
        t.diagnostic(`time in the app by payload kind: ${timer.line()}`);
        assert.ok(counter.get(spec.name) >= RUNS, `only ${counter.get(spec.name)} requests to ${spec.name}`);
      });
    }
  });

  it("afterwards: /health answers 200 and a greedy generation is unchanged", async (t) => {
    const health = await app.inject({ method: "GET", url: "/health" });
    assert.equal(health.statusCode, 200, health.body);
    assert.equal((health.json() as { model_loaded: boolean }).model_loaded, true);
    assert.deepEqual(await generateReference(), reference);
    if (v1ContractShaped > 0) {
      t.diagnostic(
        `${v1ContractShaped} requests to /v1 paths with another method got the contract's 404 shape, not OpenAI's`,
      );
    }
  });

  // Found by this suite (the defaults, 128 and 16, were validated against MAX_NEW_TOKENS=4 → 400).
  it("regression: a request without max_length / max_tokens is served when MAX_NEW_TOKENS is below their defaults", async () => {
    const predict = await app.inject({ method: "POST", url: "/predict", payload: { text: "Once" } });
    assert.equal(predict.statusCode, 200, predict.body);
    const completion = await app.inject({
      method: "POST",
      url: "/v1/completions",
      payload: { prompt: "Once" },
    });
    assert.equal(completion.statusCode, 200, completion.body);
  });
});

// ---------------------------------------------------------------------------------------------
// Grammars and schemas (#23): random and adversarial ones are accepted and sampled within the
// budget, or refused with a 400; none stalls /health.
// ---------------------------------------------------------------------------------------------

/** Grammar and schema requests per kind (each one samples a few tokens or is refused). */
const CONSTRAINT_RUNS = Number(process.env.FUZZ_CONSTRAINT_RUNS ?? 40);
/** Short, so that a request the budget let through and that cannot finish fails the property fast. */
const CONSTRAINT_TIMEOUT_MS = 15_000;
/** Liveness bound for /health during each request: generous for a loaded 2-core CI machine. */
const CONSTRAINT_HEALTH_BOUND_MS = 1000;

const literal = fc.string({
  unit: fc.constantFrom("a", "b", "x", " ", "1", "é"),
  minLength: 1,
  maxLength: 4,
});
const charClass = fc.constantFrom("[a-z]", "[abx]", "[^x]", ".", "[0-9]", "[a-c0-1]");
const quantifier = fc.constantFrom("", "", "", "?", "*", "+", "{0,3}", "{2}", "{1,}");

/** A random GBNF of `rules` rules: references go to later rules, or anywhere after a first item. */
const randomGrammar = fc.integer({ min: 1, max: 6 }).chain((rules) => {
  const item = (rule: number, first: boolean): fc.Arbitrary<string> =>
    fc.oneof(
      literal.map((text) => JSON.stringify(text)),
      charClass,
      ...(rule + 1 < rules ? [fc.integer({ min: rule + 1, max: rules - 1 }).map((r) => `r${r}`)] : []),
      ...(first ? [] : [fc.integer({ min: 0, max: rules - 1 }).map((r) => `r${r}`)]),
    );
  const sequence = (rule: number) =>
    fc
      .array(fc.tuple(fc.boolean(), quantifier), { minLength: 1, maxLength: 4 })
      .chain((parts) =>
        fc.tuple(
          ...parts.map(([group, q], i) =>
            (group ? groupOf(rule, i === 0) : item(rule, i === 0)).map((x) => x + q),
          ),
        ),
      )
      .map((parts) => parts.join(" "));
  const groupOf = (rule: number, first: boolean): fc.Arbitrary<string> =>
    fc.array(item(rule, first), { minLength: 1, maxLength: 3 }).map((alts) => `(${alts.join(" | ")})`);
  return fc
    .tuple(
      ...Array.from({ length: rules }, (_, rule) => fc.array(sequence(rule), { minLength: 1, maxLength: 4 })),
    )
    .map((bodies) => bodies.map((alts, rule) => `r${rule} ::= ${alts.join(" | ")}`).join("\n"))
    .map((body) => `root ::= r0\n${body}`);
});

/** The shapes that have stalled llama.cpp: nested optionals, wide alternations, deep groups, big counts. */
const adversarialGrammar = fc.oneof(
  fc
    .tuple(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 20 }), fc.boolean())
    .map(([levels, leaf, both]) => {
      const lines = ["root ::= a0"];
      for (let i = 0; i < levels; i++)
        lines.push(`a${i} ::= ${both ? `a${i + 1}?` : `a${i + 1}`} a${i + 1}?`);
      lines.push(`a${levels} ::= "${"x".repeat(leaf)}"`);
      return lines.join("\n");
    }),
  fc
    .integer({ min: 2, max: 3000 })
    .map((n) => `root ::= ${Array.from({ length: n }, (_, i) => `"v${i}"`).join(" | ")}`),
  fc.integer({ min: 1, max: 300 }).map((n) => `root ::= ${"(".repeat(n)}"x"${")".repeat(n)}`),
  fc
    .tuple(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 0, max: 40 }))
    .map(([m, n]) => `root ::= ("ab"{0,${n}}){0,${m}}`),
  fc.integer({ min: 1, max: 40 }).map((n) => `root ::= ${'"x"? '.repeat(n)}"y"`),
);

type Schema = Record<string, unknown>;
const randomSchema: fc.Arbitrary<Schema> = fc.letrec<{ schema: Schema }>((tie) => ({
  schema: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom<Schema>({ type: "string" }, { type: "number" }, { type: "boolean" }, { type: "null" }),
    fc
      .tuple(fc.integer({ min: -5, max: 5 }), fc.integer({ min: 0, max: 400 }))
      .map(([low, span]): Schema => ({ type: "integer", minimum: low, maximum: low + span })),
    fc
      .array(fc.oneof(fc.string({ maxLength: 6 }), fc.integer(), fc.boolean()), {
        minLength: 1,
        maxLength: 8,
      })
      .map((values): Schema => ({ enum: values })),
    fc
      .dictionary(fc.string({ minLength: 1, maxLength: 6 }), tie("schema"), { maxKeys: 4 })
      .map((properties): Schema => ({ type: "object", properties, required: Object.keys(properties) })),
    tie("schema").map((items): Schema => ({ type: "array", items, maxItems: 3 })),
    fc.array(tie("schema"), { minLength: 2, maxLength: 3 }).map((anyOf): Schema => ({ anyOf })),
  ),
})).schema;

const adversarialSchema = fc.oneof(
  fc.integer({ min: 1, max: 4000 }).map((depth) => {
    let schema: Schema = { type: "string" };
    for (let i = 0; i < depth; i++) schema = { type: "array", items: schema };
    return schema;
  }),
  fc
    .integer({ min: 1, max: 60_000 })
    .map((n): Schema => ({ enum: Array.from({ length: n }, (_, i) => `value-${i}`) })),
  fc
    .integer({ min: 1, max: 400 })
    .map((n): Schema => ({ anyOf: Array.from({ length: n }, (_, i) => ({ const: `c${i}` })) })),
  fc.integer({ min: 1, max: 1500 }).map((n): Schema => ({
    type: "object",
    properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: "boolean" }])),
  })),
);

describe(`fuzzing grammars and schemas (seed ${FUZZ_SEED}, ${CONSTRAINT_RUNS} per kind)`, () => {
  let app: App;
  before(async () => {
    const config = testConfig({
      MAX_NEW_TOKENS: "8",
      MAX_CONCURRENT: "2",
      REQUEST_TIMEOUT_MS: String(CONSTRAINT_TIMEOUT_MS),
      LOG_LEVEL: process.env.FUZZ_LOG_LEVEL ?? "silent",
    });
    const generator = createGenerator(config) as LlamaGenerator;
    app = await buildTextgenApp({ config, generator });
    // Booted before the first request, as listen() does: otherwise the first inject boots the app
    // (fastify compiles every route's validators, ~0.4 s on the loop) and the /health probe of the
    // first request measured that (1.2 s on a loaded machine), not the request.
    await app.ready();
    await generator.ready();
  });
  after(async () => app?.close());

  /** Sends one constrained request while probing /health; checks the reply and the probe. */
  const send = async (url: string, body: unknown, kind: string) => {
    const request = {
      method: "POST" as const,
      url,
      headers: { "content-type": "application/json" },
      payload: JSON.stringify(body),
      kind,
    };
    let done = false;
    let slowest = 0;
    const probe = (async () => {
      while (!done) {
        const started = performance.now();
        const health = await app.inject({ method: "GET", url: "/health" });
        assert.equal(health.statusCode, 200);
        slowest = Math.max(slowest, performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();
    const reply = await injectRequest(app, request).finally(() => (done = true));
    await probe;
    checkReply(request, reply, { shape: url.startsWith("/v1") ? "openai" : "contract" });
    assert.ok(
      reply.statusCode === 200 || reply.statusCode === 400,
      `${kind}: ${reply.statusCode} ${reply.body.slice(0, 300)}\n${request.payload.slice(0, 300)}`,
    );
    assert.ok(slowest < CONSTRAINT_HEALTH_BOUND_MS, `/health took ${Math.round(slowest)} ms during ${kind}`);
    return reply.statusCode;
  };

  it("grammars, random and adversarial: 200 within the timeout or 400", async (t) => {
    const statuses: number[] = [];
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(randomGrammar, adversarialGrammar),
        fc.boolean(),
        async (grammar, predict) => {
          statuses.push(
            predict
              ? await send("/predict", { text: "Once", max_length: 8, grammar }, "grammar")
              : await send("/v1/completions", { prompt: "Once", max_tokens: 8, grammar }, "grammar"),
          );
        },
      ),
      fuzzParameters(900, CONSTRAINT_RUNS),
    );
    t.diagnostic(
      `${statuses.filter((s) => s === 200).length} served, ${statuses.filter((s) => s === 400).length} refused`,
    );
  });

  it("schemas, random and adversarial: 200 within the timeout or 400", async (t) => {
    const statuses: number[] = [];
    await fc.assert(
      fc.asyncProperty(fc.oneof(randomSchema, adversarialSchema), fc.boolean(), async (schema, predict) => {
        statuses.push(
          predict
            ? await send("/predict", { text: "Once", max_length: 8, json_schema: schema }, "schema")
            : await send(
                "/v1/chat/completions",
                {
                  messages: [{ role: "user", content: "Hi" }],
                  max_tokens: 8,
                  response_format: { type: "json_schema", json_schema: { name: "fuzz", schema } },
                },
                "schema",
              ),
        );
      }),
      fuzzParameters(901, CONSTRAINT_RUNS),
    );
    t.diagnostic(
      `${statuses.filter((s) => s === 200).length} served, ${statuses.filter((s) => s === 400).length} refused`,
    );
  });
});
