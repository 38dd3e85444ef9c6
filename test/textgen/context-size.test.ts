/**
 * The context sized to the work (issue #33): without LLAMA_CONTEXT_SIZE each request gets 8,192
 * tokens (or the model's trained context when smaller), fewer requests run at once where memory
 * would not hold them, LLAMA_CONTEXT_SIZE still overrides, and a preset's `ctx-size` / `parallel`
 * apply to MODEL_PATH's model too. On a synthetic model trained for 32k (a real GGUF made here).
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { getLlama, LlamaLogLevel, type LlamaModel } from "node-llama-cpp";
import { syntheticModel } from "../../scripts/lib/synthetic-gguf.js";
import {
  DEFAULT_CONTEXT_PER_SEQUENCE,
  MEMORY_SHARE,
  planContext,
  type ContextMemoryEstimate,
} from "../../src/textgen/engine/context-plan.js";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { createGenerator } from "../../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../../src/textgen/engine/llama-generator.js";
import { testConfig, testModelPath } from "../helpers/env.js";
import { modelCacheDir, modelsDirOf, TINY } from "../helpers/retrieval-models.js";

const TRAINED = 32_768;
let model32k: string;

before(async () => {
  model32k = await syntheticModel(testModelPath, TINY, {
    dir: modelCacheDir,
    tag: "ctx32k",
    metadata: { "llama.context_length": TRAINED },
  });
});

/** The text generation app on `file` with the environment given (LLAMA_CONTEXT_SIZE unset unless given). */
async function appOn(file: string, env: Record<string, string> = {}) {
  // testConfig sets LLAMA_CONTEXT_SIZE for the other tests; "" is unset, as in a fresh environment.
  const config = testConfig({ MODEL_PATH: file, LLAMA_CONTEXT_SIZE: "", ...env });
  const generator = createGenerator(config) as LlamaGenerator;
  const app = await buildTextgenApp({ config, generator });
  await generator.ready();
  return { app, generator };
}

async function listed(app: Awaited<ReturnType<typeof appOn>>["app"]) {
  const res = await app.inject({ method: "GET", url: "/v1/models" });
  return (res.json() as { data: Array<{ id: string; max_model_len: number | null }> }).data[0]!;
}

describe("with the defaults (no LLAMA_CONTEXT_SIZE)", () => {
  let running: Awaited<ReturnType<typeof appOn>>;
  before(async () => {
    running = await appOn(model32k);
  });
  after(() => running.app.close());

  it("gives each request 8,192 tokens of a model trained for 32k, with MAX_CONCURRENT at once", async () => {
    assert.equal(running.generator.contextPerSequence(), DEFAULT_CONTEXT_PER_SEQUENCE);
    assert.equal(running.generator.parallelSequences, 4);
    assert.deepEqual(running.generator.contextPlan, {
      perSequence: DEFAULT_CONTEXT_PER_SEQUENCE,
      sequences: 4,
      source: "auto",
    });
    assert.equal((await listed(running.app)).max_model_len, DEFAULT_CONTEXT_PER_SEQUENCE);
  });

  it("serves a 3,000-token prompt with 256 new tokens, which 1,024 per request refused", async () => {
    const text = "the cat sat on the mat and ".repeat(400);
    const res = await running.app.inject({
      method: "POST",
      url: "/predict",
      payload: { text, max_length: 256, temperature: 0 },
    });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json() as { prompt_tokens: number; tokens_generated: number };
    assert.ok(body.prompt_tokens > 2_500, `prompt of ${body.prompt_tokens} tokens`);
    assert.ok(body.tokens_generated >= 1);
  });

  it("exposes the context per request to callers that budget prompts (ServedModel)", async () => {
    const served = running.app.textgenService.resolveModel(undefined, "generate");
    assert.equal(await served.contextPerSequence(), DEFAULT_CONTEXT_PER_SEQUENCE);
  });
});

describe("overrides", () => {
  it("LLAMA_CONTEXT_SIZE is still the total, shared by MAX_CONCURRENT", async () => {
    const { app, generator } = await appOn(model32k, { LLAMA_CONTEXT_SIZE: "4096", MAX_CONCURRENT: "4" });
    try {
      assert.equal(generator.contextPerSequence(), 1024);
      assert.equal(generator.contextPlan?.source, "configured");
      assert.equal((await listed(app)).max_model_len, 1024);
    } finally {
      await app.close();
    }
  });

  it("a model trained for less than 8,192 tokens gets its trained context", async () => {
    const small = await syntheticModel(testModelPath, TINY, {
      dir: modelCacheDir,
      tag: "ctx1k",
      metadata: { "llama.context_length": 1024 },
    });
    const { app, generator } = await appOn(small);
    try {
      assert.equal(generator.contextPerSequence(), 1024);
    } finally {
      await app.close();
    }
  });

  it("a preset's ctx-size and parallel apply to MODEL_PATH's model", async () => {
    const dir = modelsDirOf({ chat: model32k });
    const presets = path.join(dir, "presets.ini");
    writeFileSync(presets, "[chat]\nctx-size = 2048\nparallel = 2\n");
    const { app, generator } = await appOn(path.join(dir, "chat.gguf"), {
      MODELS_DIR: dir,
      MODELS_PRESETS: presets,
    });
    try {
      assert.equal(generator.contextPerSequence(), 1024);
      assert.equal(generator.parallelSequences, 2);
      const model = await listed(app);
      assert.equal(model.id, "chat");
      assert.equal(model.max_model_len, 1024);
    } finally {
      await app.close();
    }
  });
});

describe("planContext against node-llama-cpp's memory estimate", () => {
  let model: LlamaModel;
  let estimate: ContextMemoryEstimate;
  before(async () => {
    const llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
    model = await llama.loadModel({ modelPath: model32k });
    estimate = async (contextSize, sequences) =>
      (
        await model.fileInsights.estimateContextResourceRequirementsV2({
          contextSize,
          sequences,
          modelGpuLayers: 0,
          flashAttention: true,
        })
      ).cpuRam;
  });
  after(() => model.dispose());

  const request = { trainContextSize: TRAINED, configuredTotal: null, sequences: 8 };

  it("keeps every sequence when memory holds them", async () => {
    const need = await estimate(DEFAULT_CONTEXT_PER_SEQUENCE, 8);
    const plan = await planContext(request, estimate, need / MEMORY_SHARE + 1);
    assert.deepEqual(plan, { perSequence: DEFAULT_CONTEXT_PER_SEQUENCE, sequences: 8, source: "auto" });
  });

  it("lowers the parallel sequences, not the context, when memory holds fewer", async () => {
    const three = await estimate(DEFAULT_CONTEXT_PER_SEQUENCE, 3);
    const four = await estimate(DEFAULT_CONTEXT_PER_SEQUENCE, 4);
    assert.ok(four > three, "more sequences need more memory");
    // Room for three sequences and not four.
    const free = (three + (four - three) / 2) / MEMORY_SHARE;
    const plan = await planContext(request, estimate, free);
    assert.equal(plan.perSequence, DEFAULT_CONTEXT_PER_SEQUENCE);
    assert.equal(plan.sequences, 3);
    assert.match(plan.limitedBy ?? "", /^memory: 8 sequences of 8192 tokens need more than/);
  });

  it("shrinks the context only when not even one sequence fits", async () => {
    const one = await estimate(DEFAULT_CONTEXT_PER_SEQUENCE, 1);
    const plan = await planContext(request, estimate, (one * 0.6) / MEMORY_SHARE);
    assert.equal(plan.sequences, 1);
    assert.ok(plan.perSequence < DEFAULT_CONTEXT_PER_SEQUENCE && plan.perSequence >= 256);
    assert.ok((await estimate(plan.perSequence, 1)) <= one * 0.6);
  });

  it("a configured total is shared, never cut for memory (the operator chose it)", async () => {
    const plan = await planContext({ ...request, configuredTotal: 4096 }, estimate, 1);
    assert.deepEqual(plan, { perSequence: 512, sequences: 8, source: "configured" });
  });
});
