/**
 * Issue #25: every dialect answers errors in its own shape, including those our auth (401), rate
 * limit (429) and model state (503) raise before any dialect code runs; the real clients read them.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { ApiError } from "../../../src/core/errors.js";
import { anthropicErrorBody } from "../../../src/textgen/dialects/anthropic.js";
import { ollamaErrorBody } from "../../../src/textgen/dialects/ollama.js";
import { openAiErrorBody } from "../../../src/textgen/dialects/openai-shared.js";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const KEY = "test-key-for-dialects";

/** One request per dialect, as JSON over fetch: [name, path, body]. */
const routes: [string, string, object][] = [
  [
    "openai",
    "/v1/chat/completions",
    { model: "m", messages: [{ role: "user", content: "Hi" }], max_tokens: 2 },
  ],
  ["openai", "/v1/responses", { model: "m", input: "Hi", max_output_tokens: 2 }],
  ["anthropic", "/v1/messages", { model: "m", max_tokens: 2, messages: [{ role: "user", content: "Hi" }] }],
  ["ollama", "/api/chat", { model: "m", messages: [{ role: "user", content: "Hi" }], stream: false }],
];

/** Asserts a body is in the dialect's error shape and returns its message. */
function shapeOf(dialect: string, body: unknown, type?: string): string {
  if (dialect === "openai") {
    const error = (body as { error: { type: string; message: string } }).error;
    if (type) assert.equal(error.type, type);
    return error.message;
  }
  if (dialect === "anthropic") {
    const { type: kind, error } = body as { type: string; error: { type: string; message: string } };
    assert.equal(kind, "error");
    if (type) assert.equal(error.type, type);
    return error.message;
  }
  const error = (body as { error: unknown }).error;
  assert.equal(typeof error, "string", "Ollama's errors are strings");
  return error as string;
}

const post = (url: string, body: object, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

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
      const types: Record<string, string> = {
        openai: "authentication_error",
        anthropic: "authentication_error",
      };
      for (const [dialect, route, body] of routes) {
        const response = await post(`${server.url}${route}`, body);
        assert.equal(response.status, 401, route);
        assert.match(shapeOf(dialect, await response.json(), types[dialect]), /API key/);
      }
      const anthropic = new Anthropic({ baseURL: server.url, apiKey: "wrong-key-123", maxRetries: 0 });
      await assert.rejects(
        anthropic.messages.countTokens({ model: "m", messages: [{ role: "user", content: "Hi" }] }),
        (error: InstanceType<typeof Anthropic.AuthenticationError>) => error.status === 401,
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
      const types: Record<string, string> = { openai: "rate_limit_error", anthropic: "rate_limit_error" };
      for (const [dialect, route, body] of routes) {
        const response = await post(`${server.url}${route}`, body, auth);
        assert.equal(response.status, 429, route);
        assert.ok(Number(response.headers.get("retry-after")) >= 1);
        assert.match(shapeOf(dialect, await response.json(), types[dialect]), /Rate limit/);
      }
      const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
      await assert.rejects(
        openai.responses.create({ model: "m", input: "Hi" }),
        (error: InstanceType<typeof OpenAI.RateLimitError>) => error.status === 429,
      );
    });
  });

  it("503 while the model cannot serve, in every shape", async () => {
    const server = await startTextgen({ MODEL_PATH: path.join(dir, "missing.gguf") });
    try {
      const types: Record<string, string> = { openai: "server_error", anthropic: "overloaded_error" };
      for (const [dialect, route, body] of routes) {
        const response = await post(`${server.url}${route}`, body);
        assert.equal(response.status, 503, route);
        assert.match(shapeOf(dialect, await response.json(), types[dialect]), /failed to load|not ready/i);
      }
    } finally {
      await server.close();
    }
  });

  it("403 maps to each dialect's permission error (no textgen route raises one today)", () => {
    const forbidden = new ApiError(403, "forbidden", "no");
    assert.equal(openAiErrorBody(forbidden).error.type, "permission_error");
    assert.equal(anthropicErrorBody(forbidden).error.type, "permission_error");
    assert.deepEqual(ollamaErrorBody(forbidden), { error: "no" });
  });
});
