/**
 * Issue #25: every dialect answers errors in its own shape, including those our auth (401), CSRF
 * check (403), rate limit and scheduler (429) and model state (503) raise before any dialect code
 * runs; over real HTTP, and the real clients read them. The dialects: OpenAI (chat, Responses)
 * `{error:{message,type,code}}`, Anthropic `{type:"error",error:{type,message}}`, Ollama
 * `{"error":"…"}` (ollama-js shows anything else as "[object Object]") and /predict's own
 * `{error:{code,message}}`.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const KEY = "test-key-for-dialects";

type Dialect = "openai" | "anthropic" | "ollama" | "ours";

/** One request per dialect, as JSON over fetch: [dialect, path, body]. */
const routes: [Dialect, string, object][] = [
  [
    "openai",
    "/v1/chat/completions",
    { model: "m", messages: [{ role: "user", content: "Hi" }], max_tokens: 2 },
  ],
  ["openai", "/v1/responses", { model: "m", input: "Hi", max_output_tokens: 2 }],
  ["anthropic", "/v1/messages", { model: "m", max_tokens: 2, messages: [{ role: "user", content: "Hi" }] }],
  ["ollama", "/api/chat", { model: "m", messages: [{ role: "user", content: "Hi" }], stream: false }],
  ["ollama", "/api/generate", { model: "m", prompt: "Hi", stream: false }],
  ["ours", "/predict", { text: "Hi", max_length: 2 }],
];

/** OpenAI's error type (Anthropic's too unless given), and our code. */
interface Expected {
  type: string;
  anthropicType?: string;
  code: string;
}

/**
 * Asserts a body is in the dialect's error shape, with OpenAI's and Anthropic's `type` for the
 * status (Anthropic has no 429/503 of its own kind: rate_limit_error, overloaded_error) and our
 * `code` where the shape has one, and returns its message.
 */
function messageOf(dialect: Dialect, body: unknown, expected: Expected): string {
  if (dialect === "openai") {
    const error = (body as { error: { type: string; message: string; code: string } }).error;
    assert.equal(error.type, expected.type);
    assert.equal(error.code, expected.code);
    return error.message;
  }
  if (dialect === "anthropic") {
    assert.deepEqual(Object.keys(body as object).sort(), ["error", "type"]);
    const { type: kind, error } = body as { type: string; error: { type: string; message: string } };
    assert.equal(kind, "error");
    assert.equal(error.type, expected.anthropicType ?? expected.type);
    return error.message;
  }
  if (dialect === "ollama") {
    assert.deepEqual(Object.keys(body as object), ["error"]);
    const error = (body as { error: unknown }).error;
    assert.equal(typeof error, "string", "Ollama's errors are strings");
    return error as string;
  }
  const error = (body as { error: { code: string; message: string } }).error;
  assert.equal(error.code, expected.code);
  return error.message;
}

const post = (url: string, body: object, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

/** Sends every route's request and checks status, shape and message. */
async function expectEverywhere(
  server: RunningTextgen,
  status: number,
  expected: Expected,
  message: RegExp,
  headers: Record<string, string> = {},
): Promise<void> {
  for (const [dialect, route, body] of routes) {
    const response = await post(`${server.url}${route}`, body, headers);
    assert.equal(response.status, status, route);
    assert.match(messageOf(dialect, await response.json(), expected), message, route);
    if (status === 429) assert.ok(Number(response.headers.get("retry-after")) >= 1, route);
  }
}

describe("errors in each dialect's shape", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lectern-dialect-errors-"));
    writeFileSync(path.join(dir, "keys"), `${KEY} tenant-a\n`);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  describe("with API keys and a rate limit", () => {
    let server: RunningTextgen;
    before(async () => {
      server = await startTextgen({ API_KEYS_FILE: path.join(dir, "keys"), RATE_LIMIT_PER_MINUTE: "12" });
    });
    after(async () => server.close());

    it("401 without a key, in every shape; the real clients see it; x-api-key is accepted", async () => {
      await expectEverywhere(server, 401, { type: "authentication_error", code: "unauthorized" }, /API key/);
      await assert.rejects(
        new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "wrong-key-123", maxRetries: 0 }).responses.create({
          model: "m",
          input: "Hi",
        }),
        (error: InstanceType<typeof OpenAI.AuthenticationError>) =>
          error instanceof OpenAI.AuthenticationError && error.message.includes("The API key is not valid"),
      );
      const anthropic = new Anthropic({ baseURL: server.url, apiKey: "wrong-key-123", maxRetries: 0 });
      await assert.rejects(
        anthropic.messages.countTokens({ model: "m", messages: [{ role: "user", content: "Hi" }] }),
        (error: Error) => error instanceof Anthropic.AuthenticationError && error.status === 401,
      );
      await assert.rejects(
        new Ollama({ host: server.url }).list(),
        (error: Error & { status_code?: number }) =>
          error.status_code === 401 &&
          error.message === "This route needs an API key: send Authorization: Bearer <key>",
      );
      // Anthropic's SDK sends the key as x-api-key.
      const counted = await new Anthropic({
        baseURL: server.url,
        apiKey: KEY,
        maxRetries: 0,
      }).messages.countTokens({
        model: "m",
        messages: [{ role: "user", content: "Hi" }],
      });
      assert.ok(counted.input_tokens > 0);
    });

    it("429 from the rate limit, in every shape", async () => {
      const auth = { authorization: `Bearer ${KEY}` };
      // Spend the minute's allowance on a cheap route, then every dialect is limited.
      for (let i = 0; i < 12; i++) await fetch(`${server.url}/api/version`, { headers: auth });
      await expectEverywhere(
        server,
        429,
        { type: "rate_limit_error", code: "rate_limited" },
        /Rate limit/,
        auth,
      );
      const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
      await assert.rejects(
        openai.responses.create({ model: "m", input: "Hi" }),
        (error: Error) => error instanceof OpenAI.RateLimitError && error.status === 429,
      );
    });
  });

  describe("with one generation slot and no queue", () => {
    let server: RunningTextgen;
    before(async () => {
      server = await startTextgen({ MAX_CONCURRENT: "1", MAX_QUEUE: "0" });
    });
    after(async () => server.close());

    it("403 for a POST from a foreign Origin (the CSRF check), in every shape and client", async () => {
      const origin = { origin: "https://elsewhere.example" };
      await expectEverywhere(
        server,
        403,
        { type: "permission_error", code: "forbidden" },
        /may not change/,
        origin,
      );
      await assert.rejects(
        new OpenAI({
          baseURL: `${server.url}/v1`,
          apiKey: "unused",
          maxRetries: 0,
          defaultHeaders: origin,
        }).chat.completions.create({ model: "m", messages: [{ role: "user", content: "Hi" }] }),
        (error: Error) => error instanceof OpenAI.PermissionDeniedError && error.status === 403,
      );
      await assert.rejects(
        new Anthropic({
          baseURL: server.url,
          apiKey: "unused",
          maxRetries: 0,
          defaultHeaders: origin,
        }).messages.create({ model: "m", max_tokens: 2, messages: [{ role: "user", content: "Hi" }] }),
        (error: Error) => error instanceof Anthropic.PermissionDeniedError && error.status === 403,
      );
      await assert.rejects(
        new Ollama({ host: server.url, headers: origin }).chat({
          model: "m",
          messages: [{ role: "user", content: "Hi" }],
        }),
        (error: Error & { status_code?: number }) =>
          error.status_code === 403 && error.message.startsWith('Origin "https://elsewhere.example" may not'),
      );
      // The app's own origin may.
      const own = await post(`${server.url}/api/generate`, routes[4]![2], { origin: server.url });
      assert.equal(own.status, 200);
    });

    it("429 from the scheduler while the one slot is held, in every shape and client", async () => {
      // The slot is held by a job the test releases, through the model's own scheduler: no race with
      // a generation that might finish before the requests arrive.
      const [, backend] = server.app.textgenService.models.loadedBackends()[0]!;
      let release!: () => void;
      const held = backend.scheduler.run(
        undefined,
        () => new Promise<void>((resolve) => (release = resolve)),
      );
      try {
        assert.equal(backend.scheduler.stats().running, 1);
        await expectEverywhere(
          server,
          429,
          { type: "rate_limit_error", code: "queue_full" },
          /server is busy/,
        );
        await assert.rejects(
          new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 }).messages.create({
            model: "m",
            max_tokens: 2,
            messages: [{ role: "user", content: "Hi" }],
          }),
          (error: Error) => error instanceof Anthropic.RateLimitError && /server is busy/.test(error.message),
        );
        await assert.rejects(
          new Ollama({ host: server.url }).generate({ model: "m", prompt: "Hi" }),
          (error: Error & { status_code?: number }) =>
            error.status_code === 429 && error.message.startsWith("The server is busy"),
        );
      } finally {
        release();
        await held;
      }
      // Free again: the same request is served.
      assert.equal((await post(`${server.url}/api/generate`, routes[4]![2])).status, 200);
    });
  });

  it("503 while the model cannot serve, in every shape", async () => {
    const server = await startTextgen({ MODEL_PATH: path.join(dir, "missing.gguf") });
    try {
      await expectEverywhere(
        server,
        503,
        { type: "server_error", anthropicType: "overloaded_error", code: "model_not_ready" },
        /failed to load|not ready/i,
      );
      await assert.rejects(
        new Ollama({ host: server.url }).chat({ model: "m", messages: [{ role: "user", content: "Hi" }] }),
        (error: Error & { status_code?: number }) =>
          error.status_code === 503 && /failed to load/.test(error.message),
      );
    } finally {
      await server.close();
    }
  });
});
