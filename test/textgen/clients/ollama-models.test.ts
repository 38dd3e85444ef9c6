/**
 * The Ollama model routes over the model registry (#24), through ollama-js against a real app: the
 * test model as MODEL_PATH and synthetic-weight GGUFs made at test time in MODELS_DIR (a second chat
 * model and an embedding model). /api/tags lists every model, /api/ps exactly the loaded ones.
 */
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdtempSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Ollama } from "ollama";
import { syntheticModel, type SyntheticShape } from "../../../scripts/lib/synthetic-gguf.js";
import { testModelPath } from "../../helpers/env.js";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const TINY: SyntheticShape = { embedding: 64, feedForward: 128, layers: 2, heads: 4, kvHeads: 4 };
const cacheDir = path.join(os.tmpdir(), "lectern-test-models");

type OllamaError = Error & { status_code?: number };

/** Waits until `check` holds (the registry loads and unloads in the background). */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  // Generous: a loaded 2-core CI machine; this bounds a hang, not a speed.
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("Ollama model routes over the registry: ollama-js against three real GGUFs", () => {
  let server: RunningTextgen;
  let ollama: Ollama;
  let dir: string;

  const running = async () => (await ollama.ps()).models.map((model) => model.name).sort();
  const listed = async () => (await ollama.list()).models.map((model) => model.name).sort();

  before(async () => {
    const chatFile = await syntheticModel(testModelPath, TINY, { dir: cacheDir, tag: "chat" });
    const embedFile = await syntheticModel(testModelPath, TINY, {
      dir: cacheDir,
      tag: "embed",
      metadata: { "llama.pooling_type": 1 },
    });
    dir = mkdtempSync(path.join(os.tmpdir(), "lectern-models-"));
    copyFileSync(chatFile, path.join(dir, "chat.gguf"));
    copyFileSync(embedFile, path.join(dir, "embed.gguf"));
    server = await startTextgen({ MODELS_DIR: dir });
    ollama = new Ollama({ host: server.url });
    await until(async () => (await running()).includes("stories260K"), "the default model is loaded");
  });
  after(async () => server?.close());

  it("list shows every model with its size, time and details; ps only the loaded default", async () => {
    const { models } = await ollama.list();
    assert.deepEqual(models.map((model) => model.name).sort(), ["chat", "embed", "stories260K"]);
    const files: Record<string, string> = {
      chat: path.join(dir, "chat.gguf"),
      embed: path.join(dir, "embed.gguf"),
      stories260K: testModelPath,
    };
    for (const model of models) {
      const stats = statSync(files[model.name]!);
      assert.equal(model.size, stats.size, model.name);
      assert.equal(new Date(model.modified_at).getTime(), stats.mtime.getTime(), model.name);
      assert.equal(model.details.format, "gguf");
      assert.equal(model.details.family, "llama");
      assert.match(model.digest, /^[0-9a-f]{64}$/);
    }
    assert.deepEqual(await running(), ["stories260K"]);
    const [served] = (await ollama.ps()).models;
    // The default model is kept loaded: no keep_alive runs out for it.
    assert.equal(new Date(served!.expires_at).getUTCFullYear(), 9999);
    assert.ok(served!.size >= statSync(testModelPath).size, "size in memory: the weights and more");
  });

  it("ps follows a load (its keep_alive's end) and a keep_alive 0 unload", async () => {
    const before = Date.now();
    const loaded = await ollama.generate({ model: "chat", prompt: "", keep_alive: "10m" });
    assert.equal(loaded.done_reason, "load");
    assert.deepEqual(await running(), ["chat", "stories260K"]);
    const chat = (await ollama.ps()).models.find((model) => model.name === "chat")!;
    const expires = new Date(chat.expires_at).getTime();
    assert.ok(
      expires >= before + 9 * 60_000 && expires <= Date.now() + 10 * 60_000,
      chat.expires_at as never,
    );
    // The embedding model cannot generate: a 400, and nothing loads.
    const refused = await ollama
      .generate({
        model: "embed",
        prompt: "x",
        keep_alive: 0,
        options: { num_predict: 2 },
      })
      .catch((error: OllamaError) => error);
    assert.equal((refused as OllamaError).status_code, 400);
    assert.deepEqual(await running(), ["chat", "stories260K"]);
    // An embedding with keep_alive 0: loaded for the answer, unloaded right after it.
    const embedded = await ollama.embed({ model: "embed", input: "x", keep_alive: 0 });
    assert.equal(embedded.embeddings.length, 1);
    assert.deepEqual(await running(), ["chat", "stories260K"]);
    const unloaded = await ollama.generate({ model: "chat", prompt: "", keep_alive: 0 });
    assert.equal(unloaded.done_reason, "unload");
    assert.deepEqual(await running(), ["stories260K"]);
    // Unloaded models are still listed.
    assert.deepEqual(await listed(), ["chat", "embed", "stories260K"]);
  });

  it("a chat request loads its model into ps; show describes each model by its role", async () => {
    const answer = await ollama.chat({
      model: "chat:latest",
      messages: [{ role: "user", content: "Hi" }],
      options: { num_predict: 2 },
      keep_alive: "5m",
    });
    assert.equal(answer.model, "chat");
    assert.deepEqual(await running(), ["chat", "stories260K"]);
    const chat = await ollama.show({ model: "chat" });
    assert.ok(chat.capabilities.includes("completion"));
    const embed = await ollama.show({ model: "embed" });
    assert.deepEqual(embed.capabilities, ["embedding"]);
    const info = embed.model_info as unknown as Record<string, unknown>;
    assert.equal(info["llama.pooling_type"], 1);
    await ollama.generate({ model: "chat", prompt: "", keep_alive: 0 });
    assert.deepEqual(await running(), ["stories260K"]);
  });

  it("the default model unloaded by keep_alive 0 is kept loaded again after its next load", async () => {
    await ollama.generate({
      model: "stories260K",
      prompt: "Once",
      keep_alive: 0,
      options: { num_predict: 2 },
    });
    assert.deepEqual(await running(), []);
    // The next request says nothing of keep_alive: the default model's own (kept) applies again.
    await ollama.generate({ model: "stories260K", prompt: "Once", options: { num_predict: 2 } });
    await ollama.generate({ model: "stories260K", prompt: "Once", options: { num_predict: 2 } });
    assert.deepEqual(await running(), ["stories260K"]);
    const [served] = (await ollama.ps()).models;
    assert.equal(new Date(served!.expires_at).getUTCFullYear(), 9999);
  });

  it("delete removes a model of MODELS_DIR not in use (pulls: test/reliability/model-management.test.ts)", async () => {
    const answer = await ollama.generate({ model: "chat", prompt: "Once", options: { num_predict: 2 } });
    assert.equal(answer.model, "chat");
    assert.ok((await running()).includes("chat"));
    // Loaded: refused. Unloaded: its file goes, and so does the model.
    await assert.rejects(ollama.delete({ model: "chat" }), (error: OllamaError) => error.status_code === 409);
    await ollama.generate({ model: "chat", prompt: "", keep_alive: 0 });
    await ollama.delete({ model: "chat" });
    assert.equal(existsSync(path.join(dir, "chat.gguf")), false);
    assert.ok(!(await listed()).includes("chat"));
    await assert.rejects(
      ollama.generate({ model: "chat", prompt: "Once" }),
      (error: OllamaError) => error.status_code === 404,
    );
    await ollama.delete({ model: "embed" });
    assert.equal(existsSync(path.join(dir, "embed.gguf")), false);
    assert.deepEqual(await listed(), ["stories260K"]);
    // The default model's file is not in MODELS_DIR: never deleted from here.
    await assert.rejects(
      ollama.delete({ model: "stories260K" }),
      (error: OllamaError) => error.status_code === 409,
    );
  });
});
