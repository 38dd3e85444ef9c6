import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { buildRagApp } from "../../src/rag/app.js";
import { startTextgen } from "../helpers/servers.js";
import { testConfig } from "../helpers/env.js";

const dataDir = () => mkdtempSync(path.join(os.tmpdir(), "lectern-obs-"));

function promtool(text: string): { status: number | null; output: string } {
  const result = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
  if (result.error) throw result.error;
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe("metrics", () => {
  it("the text generation app's /metrics counts requests, tokens and queue depth, and passes promtool", async () => {
    const server = await startTextgen();
    try {
      await fetch(`${server.url}/predict`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ text: "Once", max_length: 3 }),
      });
      const text = await (await fetch(`${server.url}/metrics`)).text();
      for (const name of [
        "lectern_http_requests_total",
        "lectern_http_request_duration_seconds_bucket",
        "lectern_generated_tokens_total",
        "lectern_tokens_per_second",
        "lectern_queue_depth",
        "lectern_running_generations",
        "lectern_generation_duration_seconds_bucket",
      ]) {
        assert.match(text, new RegExp(`^${name}`, "m"), name);
      }
      assert.match(
        text,
        /lectern_http_requests_total\{method="POST",route="\/predict",status="200",service="textgen"\} 1/,
      );
      const check = promtool(text);
      assert.equal(check.status, 0, check.output);
    } finally {
      await server.close();
    }
  });

  it("the decode loop's steps and their time by phase are in /metrics, as many steps as the answer's tokens", async () => {
    const server = await startTextgen();
    try {
      const started = performance.now();
      const response = await fetch(`${server.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 5, temperature: 0, ignore_eos: true }),
      });
      const body = (await response.json()) as { usage: { completion_tokens: number } };
      const wallSeconds = (performance.now() - started) / 1000;
      assert.equal(body.usage.completion_tokens, 5);
      const text = await (await fetch(`${server.url}/metrics`)).text();
      const value = (pattern: string) => {
        const match = new RegExp(`^${pattern} (\\S+)$`, "m").exec(text);
        assert.ok(match, `${pattern} in /metrics`);
        return Number(match[1]);
      };
      // One step decodes the prompt and samples the first token; each further token is a step of its own.
      assert.equal(value('lectern_decode_steps_total\\{model="[^"]+"[^}]*\\}'), 5);
      assert.equal(value('lectern_decode_step_sequences_total\\{model="[^"]+"[^}]*\\}'), 5);
      const phases = ["plan", "decode", "sample", "accept"].map((phase) =>
        value(`lectern_decode_step_seconds_total\\{model="[^"]+",phase="${phase}"[^}]*\\}`),
      );
      for (const seconds of phases) assert.ok(seconds >= 0);
      assert.ok(phases[1]! > 0, "llama_decode took some time");
      // The steps ran within the request: their phases cannot add up to more than its wall time.
      assert.ok(phases.reduce((a, b) => a + b, 0) <= wallSeconds, `${phases} within ${wallSeconds} s`);
      const check = promtool(text);
      assert.equal(check.status, 0, check.output);
    } finally {
      await server.close();
    }
  });

  it("the RAG app's /metrics has index counts and build/query durations, and passes promtool", async () => {
    const app = await buildRagApp({ config: testConfig({ DATA_DIR: dataDir() }) });
    try {
      await app.inject({
        method: "POST",
        url: "/rag/build",
        payload: { index_name: "m", documents: ["one doc", "two docs"] },
      });
      await app.inject({ method: "POST", url: "/rag/query", payload: { index_name: "m", query: "doc" } });
      const res = await app.inject({ method: "GET", url: "/metrics" });
      assert.equal(res.statusCode, 200);
      assert.match(res.headers["content-type"] as string, /text\/plain/);
      assert.match(res.body, /^lectern_rag_indices\{service="rag"\} 1$/m);
      assert.match(res.body, /^lectern_rag_documents\{service="rag"\} 2$/m);
      assert.match(res.body, /^lectern_rag_chunks\{service="rag"\} 2$/m);
      // The build's one segment; nothing deleted, merged or read back from the store yet.
      assert.match(res.body, /^lectern_rag_segments\{service="rag"\} 1$/m);
      assert.match(res.body, /^lectern_rag_deleted_chunks\{service="rag"\} 0$/m);
      assert.match(res.body, /^lectern_rag_merges_total\{service="rag"\} 0$/m);
      assert.match(res.body, /^lectern_rag_segments_loaded_total\{service="rag"\} 0$/m);
      assert.match(res.body, /^lectern_rag_segment_bytes_loaded_total\{service="rag"\} 0$/m);
      assert.match(res.body, /^lectern_rag_queries_total\{answer_mode="extractive",service="rag"\} 1$/m);
      assert.match(res.body, /^lectern_rag_write_duration_seconds_count\{service="rag",kind="build"\} 1$/m);
      const check = promtool(res.body);
      assert.equal(check.status, 0, check.output);
    } finally {
      await app.close();
    }
  });

  it("liveness (/livez) is separate from readiness (/health)", async () => {
    const app = await buildRagApp({ config: testConfig({ DATA_DIR: dataDir() }) });
    try {
      assert.deepEqual((await app.inject({ method: "GET", url: "/livez" })).json(), { status: "alive" });
      assert.equal((await app.inject({ method: "GET", url: "/health" })).json().status, "healthy");
    } finally {
      await app.close();
    }
  });
});

describe("limits", () => {
  it("MAX_BUILD_DOCUMENTS and MAX_BUILD_CHARS answer 413 and change nothing", async () => {
    const app = await buildRagApp({
      config: testConfig({ DATA_DIR: dataDir(), MAX_BUILD_DOCUMENTS: "3", MAX_BUILD_CHARS: "100" }),
    });
    try {
      const ok = await app.inject({
        method: "POST",
        url: "/rag/build",
        payload: { index_name: "l", documents: ["a b", "c d", "e f"] },
      });
      assert.equal(ok.statusCode, 201);
      const tooMany = await app.inject({
        method: "POST",
        url: "/rag/build",
        payload: { index_name: "l", mode: "replace", documents: ["1", "2", "3", "4"] },
      });
      assert.equal(tooMany.statusCode, 413);
      assert.match(tooMany.json().error.message, /MAX_BUILD_DOCUMENTS/);
      const tooLong = await app.inject({
        method: "POST",
        url: "/rag/indices/l/documents",
        payload: { documents: ["x".repeat(101)] },
      });
      assert.equal(tooLong.statusCode, 413);
      assert.match(tooLong.json().error.message, /MAX_BUILD_CHARS/);
      const stats = (await app.inject({ method: "GET", url: "/rag/stats/l" })).json();
      assert.equal(stats.documents_count, 3);
    } finally {
      await app.close();
    }
  });

  it("RATE_LIMIT_PER_MINUTE answers 429 with Retry-After, never on /health", async () => {
    const app = await buildRagApp({
      config: testConfig({ DATA_DIR: dataDir(), RATE_LIMIT_PER_MINUTE: "3" }),
    });
    try {
      const statuses = [];
      for (let i = 0; i < 5; i++)
        statuses.push((await app.inject({ method: "GET", url: "/rag/indices" })).statusCode);
      assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
      const limited = await app.inject({ method: "GET", url: "/rag/indices" });
      assert.equal(limited.json().error.code, "rate_limited");
      assert.ok(Number(limited.headers["retry-after"]) >= 1);
      for (let i = 0; i < 5; i++)
        assert.equal((await app.inject({ method: "GET", url: "/health" })).statusCode, 200);
    } finally {
      await app.close();
    }
  });

  it("CORS is off by default and allows only the configured origins", async () => {
    const off = await buildRagApp({ config: testConfig({ DATA_DIR: dataDir() }) });
    const on = await buildRagApp({
      config: testConfig({ DATA_DIR: dataDir(), CORS_ORIGINS: "https://app.example" }),
    });
    try {
      const plain = await off.inject({
        method: "GET",
        url: "/rag/indices",
        headers: { origin: "https://evil.example" },
      });
      assert.equal(plain.headers["access-control-allow-origin"], undefined);
      const allowed = await on.inject({
        method: "GET",
        url: "/rag/indices",
        headers: { origin: "https://app.example" },
      });
      assert.equal(allowed.headers["access-control-allow-origin"], "https://app.example");
      const other = await on.inject({
        method: "GET",
        url: "/rag/indices",
        headers: { origin: "https://evil.example" },
      });
      assert.notEqual(other.headers["access-control-allow-origin"], "https://evil.example");
    } finally {
      await off.close();
      await on.close();
    }
  });
});
