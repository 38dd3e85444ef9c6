/**
 * Generative answers over real documents with the model's own context (#33): both apps in one
 * process as `npm start` runs them (src/server.ts), a synthetic model trained for 32k tokens (a real
 * GGUF with random weights, made here: its words mean nothing, so this checks protocol and bounds),
 * an index of the project's README.md and docs/*.md, three questions with `answer: "generative"` and
 * a three-turn /rag/chat. Every answer is written by the model, says how many results it was written
 * from, and its prompt and answer fit the context per request: with the defaults (no context
 * variable set) and with LLAMA_CONTEXT_SIZE=1024, where the sources are cut to fit.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { freePort } from "../../../scripts/lib/free-port.js";
import { syntheticModel } from "../../../scripts/lib/synthetic-gguf.js";
import { loadConfig } from "../../../src/core/config.js";
import { serve, type Listening } from "../../../src/server.js";
import { repoRoot, testModelPath } from "../../helpers/env.js";
import { modelCacheDir, TINY } from "../../helpers/retrieval-models.js";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const QUESTIONS = [
  "How do I set the API keys file?",
  "How does folder sync decide which files changed?",
  "What do the benchmarks measure for query latency?",
];
const TURNS = [
  "How do I start both apps?",
  "Which port does the second one listen on?",
  "And how do I change it?",
];
/** The per-request context every sequence gets by default: 8,192 tokens (or the trained context). */
const DEFAULT_SEQUENCE_CONTEXT = 8192;

/** README.md and docs/*.md as documents, as `lectern index build` would read them. */
function projectDocuments(): Array<{ id: string; title: string; text: string }> {
  const files = [
    "README.md",
    ...readdirSync(path.join(repoRoot, "docs"))
      .filter((name) => name.endsWith(".md"))
      .map((name) => `docs/${name}`),
  ];
  return files.map((file) => ({
    id: file,
    title: file,
    text: readFileSync(path.join(repoRoot, file), "utf8"),
  }));
}

/** Both apps on free ports with the 32k model and `env` (nothing else about context). */
async function startBoth(model: string, env: Record<string, string>) {
  const [textgenPort, ragPort] = [await freePort(), await freePort()];
  const config = loadConfig({
    MODEL_PATH: model,
    // One thread: on a 2-core machine two threads make a small model far slower under load.
    LLAMA_THREADS: "1",
    LLAMA_GPU: "false",
    LOG_LEVEL: "silent",
    HOST: "127.0.0.1",
    TEXTGEN_PORT: String(textgenPort),
    RAG_PORT: String(ragPort),
    DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-fitted-")),
    DISK_RESERVE_BYTES: "65536",
    ...env,
  });
  const listening: Listening[] = await serve("all", config);
  const textgen = `http://127.0.0.1:${textgenPort}`;
  // Generous: the model loads in the background on a loaded 2-core machine; a real hang still fails.
  const deadline = performance.now() + 180_000;
  while ((await fetch(`${textgen}/health`).catch(() => null))?.status !== 200) {
    assert.ok(performance.now() < deadline, "the model did not load");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    rag: `http://127.0.0.1:${ragPort}`,
    close: () => Promise.allSettled(listening.map((app) => app.close())),
  };
}

async function post(url: string, body: unknown): Promise<Json> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as Json;
  assert.ok(response.status < 300, `${url} ${response.status}: ${JSON.stringify(json)}`);
  return json;
}

/** What every answer here must be: the model's, saying its sources, within the context per request. */
function assertFitted(body: Json, what: string): void {
  assert.equal(body.answer_mode, "generative", `${what}: ${body.generation_skipped_reason}`);
  assert.equal(body.generation_skipped_reason, undefined, what);
  assert.equal(typeof body.answer, "string", what);
  assert.ok(body.count >= 1, `${what}: no results`);
  assert.ok(Number.isInteger(body.sources_used), `${what}: sources_used ${body.sources_used}`);
  assert.ok(body.sources_used >= 1 && body.sources_used <= body.count, `${what}: ${body.sources_used}`);
  const { prompt_tokens: prompt, tokens, context_tokens: context } = body.generation;
  assert.ok(prompt > 0 && tokens >= 0, what);
  assert.ok(prompt + tokens <= context, `${what}: ${prompt} + ${tokens} > ${context}`);
  assert.ok(
    body.citations.every((n: number) => n >= 1 && n <= body.sources_used),
    what,
  );
}

/** Three questions and a three-turn chat, every answer checked by assertFitted; the bodies returned. */
async function askAndChat(rag: string): Promise<Json[]> {
  const bodies: Json[] = [];
  for (const query of QUESTIONS) {
    const body = await post(`${rag}/rag/query`, { index: "project", query, answer: "generative" });
    assertFitted(body, query);
    bodies.push(body);
  }
  const messages: Json[] = [];
  for (const turn of TURNS) {
    messages.push({ role: "user", content: turn });
    const body = await post(`${rag}/rag/chat`, { index: "project", messages });
    assertFitted(body, `chat: ${turn}`);
    bodies.push(body);
    messages.push({ role: "assistant", content: body.answer });
  }
  return bodies;
}

describe("generative answers fitted to the model's context (32k trained)", () => {
  let model: string;
  before(async () => {
    model = await syntheticModel(testModelPath, TINY, {
      dir: modelCacheDir,
      tag: "ctx32k",
      metadata: { "llama.context_length": 32_768 },
    });
  });

  describe("with the defaults (no context variable set)", () => {
    let apps: Awaited<ReturnType<typeof startBoth>>;
    let bodies: Json[] = [];
    before(async () => {
      apps = await startBoth(model, {});
      await post(`${apps.rag}/rag/build`, { index_name: "project", documents: projectDocuments() });
    });
    after(() => apps.close());

    it("three questions and a three-turn chat are answered by the model, each saying its sources", async () => {
      bodies = await askAndChat(apps.rag);
    });

    it(`each request gets ${DEFAULT_SEQUENCE_CONTEXT} tokens of context or more, so every result fits`, () => {
      assert.equal(bodies.length, QUESTIONS.length + TURNS.length);
      for (const body of bodies) {
        assert.ok(
          body.generation.context_tokens >= DEFAULT_SEQUENCE_CONTEXT,
          `${body.generation.context_tokens}`,
        );
        assert.equal(body.sources_used, body.count, body.query);
      }
    });
  });

  describe("with LLAMA_CONTEXT_SIZE=1024", () => {
    let apps: Awaited<ReturnType<typeof startBoth>>;
    before(async () => {
      apps = await startBoth(model, { LLAMA_CONTEXT_SIZE: "1024" });
      await post(`${apps.rag}/rag/build`, { index_name: "project", documents: projectDocuments() });
    });
    after(() => apps.close());

    it("the sources are cut to fit, and every answer is still the model's", async () => {
      const bodies = await askAndChat(apps.rag);
      for (const body of bodies) {
        assert.ok(body.generation.context_tokens <= 1024, `${body.generation.context_tokens}`);
        // Five results of up to 1,000 characters do not fit whole in 1,024 tokens with the question.
        assert.equal(body.count, 5, body.query);
        assert.ok(body.sources_used < body.count, `${body.sources_used} of ${body.count}`);
      }
    });
  });
});
