/**
 * Bounds of one request, issue #35, against the real text generation app (the CLI as a child
 * process, keys on, TRUST_PROXY=127.0.0.1) and the RAG app:
 *
 * - 5,000-deep JSON in Anthropic `tool_use.input`, Ollama `tool_calls[].function.arguments` (as JSON
 *   and as Ollama's text/plain), an OpenAI schema, `/predict` and `/rag/build`: a 400 in each API's
 *   error shape naming MAX_JSON_DEPTH (it was a 500, a stack overflow in JSON.stringify); 200 levels
 *   still pass;
 * - 1 MiB prompts to `count_tokens` and `/tokenize` (tokenized synchronously by llama.cpp): a 413
 *   naming MAX_TOKENIZE_CHARS, /health answering within HEALTH_BOUND_MS throughout;
 * - failed keys: limited per client address (X-Forwarded-For's behind TRUST_PROXY, ignored
 *   without it), on by default, and a valid key is never limited.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { loadConfig } from "../../src/core/config.js";
import { HEALTH_BOUND_MS, whileProbing } from "../helpers/health-probe.js";
import { memoryOf, resetPeak } from "../helpers/process-memory.js";
import { openRagApp, type RagApp } from "../helpers/rag-http.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";

const KEY = "request-bounds-key-0123456789abcdef01";
const ADMIN = "request-bounds-admin-0123456789abcdef";
const MIB = 1024 * 1024;

/** `{"x": [[[…]]]}` nested `depth` levels below the object. */
const deepValue = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;

describe("request bounds (#35)", () => {
  let dir: string;
  let served: ServedProcess;
  let rag: RagApp;

  const send = async (route: string, body: string, headers: Record<string, string> = {}) => {
    const response = await fetch(`${served.url}${route}`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", ...headers },
      body,
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lectern-bounds-"));
    const keys = path.join(dir, "keys.txt");
    writeFileSync(keys, `${KEY} acme\n${ADMIN} ops admin\n`);
    served = await startServe("textgen", {
      API_KEYS_FILE: keys,
      TRUST_PROXY: "127.0.0.1",
      AUTH_FAILURES_PER_MINUTE: "5",
    });
    await waitHealthy(served);
    ({ app: rag } = await openRagApp({ API_KEYS_FILE: keys, AUTH_FAILURES_PER_MINUTE: "3" }));
  });

  after(async () => {
    if (served && served.child.exitCode === null) served.child.kill("SIGKILL");
    await rag?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("5,000-deep JSON is a 400 in each API's error shape, naming MAX_JSON_DEPTH", async () => {
    const deep = deepValue(5000);
    const anthropic = await send(
      "/v1/messages/count_tokens",
      `{"model":"stories260K","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"x":${deep}}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`,
    );
    assert.equal(anthropic.status, 400, JSON.stringify(anthropic.body));
    const anthropicError = anthropic.body.error as { type: string; message: string };
    assert.equal(anthropic.body.type, "error");
    assert.equal(anthropicError.type, "invalid_request_error");
    assert.match(anthropicError.message, /deeper than 256 levels.*MAX_JSON_DEPTH/);

    const ollamaBody = `{"model":"stories260K","stream":false,"messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"x":${deep}}}}]},{"role":"user","content":"Hi"}]}`;
    for (const contentType of ["application/json", "text/plain"]) {
      const ollama = await send("/api/chat", ollamaBody, { "content-type": contentType });
      assert.equal(ollama.status, 400, contentType);
      assert.match(String(ollama.body.error), /MAX_JSON_DEPTH/, contentType);
    }

    const openai = await send(
      "/v1/chat/completions",
      `{"model":"stories260K","messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","default":${deep}}}}}`,
    );
    assert.equal(openai.status, 400);
    assert.match((openai.body.error as { message: string }).message, /MAX_JSON_DEPTH/);
    assert.equal((openai.body.error as { type: string }).type, "invalid_request_error");

    const predict = await send("/predict", `{"text":"Once","extra":${deep}}`);
    assert.equal(predict.status, 400);
    assert.equal((predict.body.error as { code: string }).code, "invalid_request");

    const build = await rag.inject({
      method: "POST",
      url: "/rag/build",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      payload: `{"index_name":"deep","documents":[{"text":"x","metadata":{"x":${deep}}}]}`,
    });
    assert.equal(build.statusCode, 400);
    assert.match(build.json().error.message, /MAX_JSON_DEPTH/);

    // 200 levels are within the limit: counted as usual.
    const fine = await send(
      "/v1/messages/count_tokens",
      `{"model":"stories260K","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{"x":${deepValue(200)}}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}`,
    );
    assert.equal(fine.status, 200, JSON.stringify(fine.body));
    assert.ok((fine.body.input_tokens as number) > 0);
  });

  it("1 MiB prompts to count_tokens and /tokenize are a 413 naming MAX_TOKENIZE_CHARS; /health answers", async () => {
    const text = "Once upon a time there was a little girl named Lily. ".repeat(MIB / 64);
    const pid = served.child.pid!;
    const before = memoryOf(pid).rss;
    resetPeak(pid);
    const attacks = Promise.all([
      send(
        "/v1/messages/count_tokens",
        JSON.stringify({ model: "stories260K", messages: [{ role: "user", content: text }] }),
      ),
      send("/tokenize", JSON.stringify({ content: text.slice(0, 900_000) })),
      send(
        "/v1/chat/completions",
        JSON.stringify({ model: "stories260K", max_tokens: 1, messages: [{ role: "user", content: text }] }),
      ),
    ]);
    const { result, slowest } = await whileProbing(served, attacks);
    const [count, tokenize, chat] = result;
    assert.equal(count.status, 413, JSON.stringify(count.body));
    assert.equal((count.body.error as { type: string }).type, "request_too_large");
    assert.match((count.body.error as { message: string }).message, /MAX_TOKENIZE_CHARS/);
    // /tokenize's schema bound is the same number: its 400 names the limit too.
    assert.ok([400, 413].includes(tokenize.status), JSON.stringify(tokenize.body));
    assert.equal(chat.status, 413, JSON.stringify(chat.body));
    assert.match((chat.body.error as { message: string }).message, /MAX_TOKENIZE_CHARS/);
    assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
    const growth = memoryOf(pid).peak - before;
    assert.ok(growth < 300 * 1024 * 1024, `peak RSS grew ${Math.round(growth / 1024 / 1024)} MB`);
  });

  it("failed keys are limited per client (X-Forwarded-For behind TRUST_PROXY); a valid key never is", async () => {
    const models = (key: string, client?: string) =>
      fetch(`${served.url}/v1/models`, {
        headers: { authorization: `Bearer ${key}`, ...(client ? { "x-forwarded-for": client } : {}) },
      }).then((response) => response.status);
    const guesses: number[] = [];
    for (let i = 0; i < 8; i++) guesses.push(await models(`wrong-${i}`, "203.0.113.7"));
    assert.deepEqual(guesses, [401, 401, 401, 401, 401, 429, 429, 429]);
    // The same address with a valid key: served.
    assert.equal(await models(KEY, "203.0.113.7"), 200);
    // Another client behind the same proxy, and the proxy's own address: not limited by that one.
    assert.equal(await models("wrong", "203.0.113.8"), 401);
    assert.equal(await models("wrong"), 401);
  });

  it("without TRUST_PROXY X-Forwarded-For is not believed; the limit is on by default", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const reply = await rag.inject({
        method: "GET",
        url: "/rag/indices",
        headers: { authorization: `Bearer wrong-${i}`, "x-forwarded-for": `198.51.100.${i}` },
      });
      statuses.push(reply.statusCode);
    }
    assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
    const valid = await rag.inject({
      method: "GET",
      url: "/rag/indices",
      headers: { authorization: `Bearer ${KEY}` },
    });
    assert.equal(valid.statusCode, 200);
    assert.equal(loadConfig({}).auth.authFailuresPerMinute, 30);
    assert.equal(loadConfig({ RATE_LIMIT_PER_MINUTE: "7" }).auth.authFailuresPerMinute, 7);
  });
});
