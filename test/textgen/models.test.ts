/**
 * Many models in one server (#24): the test model as MODEL_PATH, and synthetic-weight GGUFs made at
 * test time in MODELS_DIR: a second chat model, an embedding model (llama with mean pooling) and a
 * reranker (qwen3 with a two-row rank head), plus the same reranker with its head's rows swapped.
 */
import { strict as assert } from "node:assert";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { syntheticModel, type SyntheticShape } from "../../scripts/lib/synthetic-gguf.js";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { createGenerator } from "../../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../../src/textgen/engine/llama-generator.js";
import { testConfig, testModelPath } from "../helpers/env.js";

type App = Awaited<ReturnType<typeof buildTextgenApp>>;

const TINY: SyntheticShape = { embedding: 64, feedForward: 128, layers: 2, heads: 4, kvHeads: 4 };
const cacheDir = path.join(os.tmpdir(), "lectern-test-models");

interface ModelFiles {
  chat: string;
  /** Bigger (34 MB): 1500 tokens of it take seconds, where loading the tiny models takes well under one. */
  slow: string;
  embed: string;
  rerank: string;
  rerankSwapped: string;
}

async function modelFiles(): Promise<ModelFiles> {
  return {
    chat: await syntheticModel(testModelPath, TINY, { dir: cacheDir, tag: "chat" }),
    slow: await syntheticModel(
      testModelPath,
      { embedding: 256, feedForward: 1024, layers: 8, heads: 4, kvHeads: 4 },
      { dir: cacheDir, tag: "slow" },
    ),
    embed: await syntheticModel(testModelPath, TINY, {
      dir: cacheDir,
      tag: "embed",
      metadata: { "llama.pooling_type": 1 },
    }),
    rerank: await syntheticModel(testModelPath, TINY, { dir: cacheDir, rankHead: {} }),
    rerankSwapped: await syntheticModel(testModelPath, TINY, { dir: cacheDir, rankHead: { swapped: true } }),
  };
}

/** A MODELS_DIR holding the given files under the given names. */
function modelsDir(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-models-"));
  for (const [name, file] of Object.entries(files)) copyFileSync(file, path.join(dir, `${name}.gguf`));
  return dir;
}

async function startApp(env: Record<string, string>): Promise<{ app: App; generator: LlamaGenerator }> {
  const config = testConfig({ MAX_CONCURRENT: "2", ...env });
  const generator = createGenerator(config) as LlamaGenerator;
  const app = await buildTextgenApp({ config, generator });
  await generator.ready();
  return { app, generator };
}

async function statuses(app: App): Promise<Record<string, string>> {
  const res = await app.inject({ method: "GET", url: "/v1/models" });
  assert.equal(res.statusCode, 200);
  return Object.fromEntries(
    (res.json().data as { id: string; status: string }[]).map((model) => [model.id, model.status]),
  );
}

/** Waits until `check` holds (the registry changes state in the background). */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  // Generous: a loaded 2-core CI machine; this bounds a hang, not a speed.
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const complete = (app: App, model: string, extra: object = {}) =>
  app.inject({
    method: "POST",
    url: "/v1/completions",
    payload: { model, prompt: "Once upon a time", max_tokens: 4, temperature: 0, ...extra },
  });

let files: ModelFiles;
before(async () => {
  files = await modelFiles();
});

describe("several models in one app", () => {
  let app: App;
  before(async () => {
    const dir = modelsDir({
      chat: files.chat,
      embed: files.embed,
      rerank: files.rerank,
      swapped: files.rerankSwapped,
    });
    ({ app } = await startApp({ MODELS_DIR: dir }));
  });
  after(async () => app?.close());

  it("serves a chat model, a second chat model and an embedding model at once", async () => {
    const chat = await app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      payload: { model: "stories260K", messages: [{ role: "user", content: "Hi" }], max_tokens: 3 },
    });
    assert.equal(chat.statusCode, 200, chat.body);
    assert.equal(chat.json().model, "stories260K");
    const second = await complete(app, "chat");
    assert.equal(second.statusCode, 200, second.body);
    assert.equal(second.json().model, "chat");
    const embeddings = await app.inject({
      method: "POST",
      url: "/v1/embeddings",
      payload: { model: "embed", input: ["a cat", "a dog"] },
    });
    assert.equal(embeddings.statusCode, 200, embeddings.body);
    assert.equal(embeddings.json().model, "embed");
    assert.equal(embeddings.json().data[0].embedding.length, TINY.embedding);
    const models = await statuses(app);
    assert.equal(models.stories260K, "loaded");
    assert.equal(models.chat, "loaded");
    assert.equal(models.embed, "loaded");
    const one = await app.inject({ method: "GET", url: "/v1/models/embed" });
    assert.equal(one.json().role, "embed");
    assert.ok(one.json().size_bytes > 0);
  });

  it("an unknown model is a 404 in each API's shape, listing the known names", async () => {
    const openai = await complete(app, "gpt-4o");
    assert.equal(openai.statusCode, 404);
    assert.equal(openai.json().error.type, "not_found_error");
    assert.match(openai.json().error.message, /stories260K.*chat.*embed/);
    const predict = await app.inject({
      method: "POST",
      url: "/predict",
      payload: { text: "Hi", model: "nope" },
    });
    assert.equal(predict.statusCode, 404);
    assert.equal(predict.json().error.code, "not_found");
    assert.match(predict.json().error.message, /known models: stories260K/);
  });

  it("a request a model cannot serve is a 400 that says so", async () => {
    const rerankOnChat = await app.inject({
      method: "POST",
      url: "/v1/rerank",
      payload: { model: "chat", query: "q", documents: ["d"] },
    });
    assert.equal(rerankOnChat.statusCode, 400);
    assert.match(rerankOnChat.json().error.message, /cannot rerank.*without a rank/);
    const chatOnEmbed = await complete(app, "embed");
    assert.equal(chatOnEmbed.statusCode, 400);
    assert.match(chatOnEmbed.json().error.message, /cannot generate text/);
  });

  it("a reranker answers /v1/rerank with scores that follow its head", async () => {
    const documents = ["the cat sat on the mat", "a dog ran far away", "once upon a time", "lily"];
    const rerank = async (model: string, url = "/v1/rerank", extra: object = {}) => {
      const res = await app.inject({
        method: "POST",
        url,
        payload: { model, query: "once upon a time there was a cat", documents, ...extra },
      });
      assert.equal(res.statusCode, 200, res.body);
      return res.json() as {
        model: string;
        results: { index: number; relevance_score: number; document?: { text: string } }[];
        usage: { prompt_tokens: number };
      };
    };
    const ranked = await rerank("rerank");
    assert.equal(ranked.model, "rerank");
    assert.equal(ranked.results.length, documents.length);
    assert.deepEqual(ranked.results.map((r) => r.index).sort(), [0, 1, 2, 3]);
    for (let i = 1; i < ranked.results.length; i++)
      assert.ok(ranked.results[i - 1]!.relevance_score >= ranked.results[i]!.relevance_score);
    for (const result of ranked.results) assert.ok(result.relevance_score > 0 && result.relevance_score < 1);
    assert.ok(ranked.usage.prompt_tokens > 0);
    // The score is softmax(head · hidden)[0] over the head's rows (yes, no): with the rows swapped
    // and every other weight the same, each document's score is exactly 1 minus the first one.
    const swapped = await rerank("swapped");
    const byIndex = new Map(swapped.results.map((r) => [r.index, r.relevance_score]));
    for (const result of ranked.results)
      assert.ok(Math.abs(result.relevance_score + byIndex.get(result.index)! - 1) < 1e-4);
    assert.deepEqual(
      swapped.results.map((r) => r.index),
      [...ranked.results].reverse().map((r) => r.index),
    );
    // Deterministic, same under the aliases, top_n and return_documents.
    const again = await rerank("rerank", "/rerank", { top_n: 2, return_documents: true });
    assert.deepEqual(
      again.results,
      ranked.results.slice(0, 2).map((r) => ({ ...r, document: { text: documents[r.index]! } })),
    );
    assert.deepEqual((await rerank("rerank", "/v1/reranking")).results, ranked.results);
  });

  it("the llama-server router endpoints load and unload a model", async () => {
    const unload = await app.inject({ method: "POST", url: "/models/unload", payload: { model: "chat" } });
    assert.equal(unload.statusCode, 200);
    assert.deepEqual(unload.json(), { success: true });
    await until(async () => (await statuses(app)).chat === "unloaded", "chat is unloaded");
    const list = await app.inject({ method: "GET", url: "/models" });
    const chat = (list.json().data as { id: string; status: { value: string } }[]).find(
      (m) => m.id === "chat",
    );
    assert.equal(chat?.status.value, "unloaded");
    const load = await app.inject({ method: "POST", url: "/models/load", payload: { model: "chat" } });
    assert.deepEqual(load.json(), { success: true });
    assert.equal((await statuses(app)).chat, "loaded");
  });
});

describe("loading and unloading on demand", () => {
  let app: App;
  before(async () => {
    const dir = modelsDir({ chat: files.chat, embed: files.embed, slow: files.slow });
    ({ app } = await startApp({ MODELS_DIR: dir, MODELS_MAX_LOADED: "1" }));
  });
  after(async () => app?.close());

  it("eight concurrent first requests cause one load", async () => {
    const loadsOf = async () => {
      const metrics = (await app.inject({ method: "GET", url: "/metrics" })).body;
      return Number(/lectern_model_loads\{[^}]*model="chat"[^}]*\} (\d+)/.exec(metrics)?.[1] ?? 0);
    };
    const before = await loadsOf();
    assert.equal((await statuses(app)).chat, "unloaded");
    const answers = await Promise.all(Array.from({ length: 8 }, () => complete(app, "chat")));
    for (const answer of answers) assert.equal(answer.statusCode, 200, answer.body);
    assert.equal((await loadsOf()) - before, 1);
  });

  it("MODELS_MAX_LOADED=1 unloads the least recently used model", async () => {
    assert.equal((await complete(app, "stories260K")).statusCode, 200);
    await until(async () => (await statuses(app)).chat === "unloaded", "chat is evicted");
    const embed = await app.inject({
      method: "POST",
      url: "/v1/embeddings",
      payload: { model: "embed", input: "x" },
    });
    assert.equal(embed.statusCode, 200);
    await until(async () => (await statuses(app)).stories260K === "unloaded", "the default model is evicted");
    const now = await statuses(app);
    assert.deepEqual(Object.values(now).filter((s) => s === "loaded").length, 1);
    assert.equal(now.embed, "loaded");
  });

  it("keep_alive 0 unloads the model after the answer", async () => {
    const res = await complete(app, "chat", { keep_alive: 0 });
    assert.equal(res.statusCode, 200);
    assert.equal((await statuses(app)).chat, "unloaded");
  });

  it("a model in use is not unloaded under its request", async () => {
    // A long streamed generation holds "slow"; meanwhile an embedding request needs the one slot
    // and an unload is asked for. The generation must run to its end on its model all the same.
    const address = await app.listen({ host: "127.0.0.1", port: 0 });
    const post = (url: string, body: object) =>
      fetch(`${address}${url}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const response = await post("/v1/completions", {
      model: "slow",
      prompt: "Once",
      max_tokens: 1500,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true },
    });
    assert.equal(response.status, 200, response.status === 200 ? "" : await response.text());
    const reader = response.body!.getReader();
    await reader.read(); // the stream is open: the request holds its model
    assert.equal((await post("/v1/embeddings", { model: "embed", input: "x" })).status, 200);
    assert.equal((await post("/models/unload", { model: "slow" })).status, 200);
    const metrics = (await app.inject({ method: "GET", url: "/metrics" })).body;
    const running = Number(
      /lectern_running_generations\{[^}]*model="slow"[^}]*\} (\d+)/.exec(metrics)?.[1] ?? 0,
    );
    // 1500 tokens of this model take seconds; loading the tiny embedding model, a fraction of one.
    assert.equal(running, 1, "the generation is still running while the other model loaded");
    const models = await statuses(app);
    assert.equal(models.slow, "loaded");
    let text = "";
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
      text += new TextDecoder().decode(chunk.value);
    assert.match(text, /"completion_tokens":1500/);
    assert.match(text, /\[DONE\]/);
    await until(async () => (await statuses(app)).slow === "unloaded", "slow unloads once idle");
  });
});

describe("MODELS_MEMORY_BUDGET", () => {
  it("unloads the least recently used idle model, not any, when the next load would not fit", async () => {
    const dir = modelsDir({ a: files.chat, b: files.chat, c: files.chat });
    // The registry's estimates (file + KV cache), read without loading, set a budget for three models.
    let estimates: Record<string, number>;
    {
      const { app } = await startApp({ MODELS_DIR: dir });
      const res = await app.inject({ method: "GET", url: "/v1/models" });
      estimates = Object.fromEntries(
        (res.json().data as { id: string; memory_bytes: number }[]).map((m) => [m.id, m.memory_bytes]),
      );
      await app.close();
    }
    const three = estimates.stories260K! + estimates.a! + estimates.b!;
    assert.ok(estimates.c! > 0 && estimates.c! === estimates.a!);
    const { app } = await startApp({
      MODELS_DIR: dir,
      MODELS_MEMORY_BUDGET: String(three + Math.floor(estimates.c! / 2)),
    });
    try {
      assert.equal((await complete(app, "a")).statusCode, 200);
      assert.equal((await complete(app, "b")).statusCode, 200);
      // Used since: the default model and a. Least recently used: b.
      assert.equal((await complete(app, "stories260K")).statusCode, 200);
      assert.equal((await complete(app, "a")).statusCode, 200);
      assert.deepEqual(await statuses(app), {
        stories260K: "loaded",
        a: "loaded",
        b: "loaded",
        c: "unloaded",
      });
      assert.equal((await complete(app, "c")).statusCode, 200);
      assert.deepEqual(await statuses(app), {
        stories260K: "loaded",
        a: "loaded",
        b: "unloaded",
        c: "loaded",
      });
    } finally {
      await app.close();
    }
  });
});

describe("a model whose file is still arriving", () => {
  it("a request to a loaded model completes while another model's load is in progress", async () => {
    // The second model is a URL in MODELS_PRESETS, fetched into MODELS_DIR on its first load from a
    // server this test holds open: its load is in progress until the test lets the file through.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let fetches = 0;
    const server = http.createServer((request, response) => {
      if (request.method === "HEAD" && request.url === "/") return response.end();
      fetches++;
      void released.then(() => {
        response.writeHead(200, { "content-type": "application/octet-stream" });
        response.end(readFileSync(files.chat));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-models-"));
    const presets = path.join(dir, "presets.ini");
    writeFileSync(presets, `[remote]\nmodel = http://127.0.0.1:${port}/remote.gguf\nrole = generate\n`);
    const { app } = await startApp({ MODELS_DIR: dir, MODELS_PRESETS: presets });
    try {
      const pending = complete(app, "remote");
      await until(async () => fetches > 0, "the download started");
      assert.equal((await statuses(app)).remote, "loading");
      const local = await complete(app, "stories260K");
      assert.equal(local.statusCode, 200);
      // The order that matters: the loaded model answered while the other was still loading.
      assert.equal((await statuses(app)).remote, "loading");
      release();
      const remote = await pending;
      assert.equal(remote.statusCode, 200, remote.body);
      assert.equal((await statuses(app)).remote, "loaded");
    } finally {
      release();
      await app.close();
      server.close();
    }
  });
});
