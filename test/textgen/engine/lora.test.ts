/**
 * LoRA adapters (issue #36): a synthetic adapter GGUF made here changes the logits exactly as applying
 * it to the weights by hand does (a model written with W + scale·alpha/rank·B·A); a request picks it
 * with llama.cpp server's `lora: [{id, scale}]`, or by a preset's alias that maps to base + adapter;
 * requests with different adapters share one context, taking turns by step.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { createGenerator } from "../../../src/textgen/engine/create-generator.js";
import type { CompletionRequest, CompletionResult } from "../../../src/textgen/engine/generator.js";
import type { LlamaGenerator } from "../../../src/textgen/engine/llama-generator.js";
import type { TextgenService } from "../../../src/textgen/engine/service.js";
import { buildTextgenApp } from "../../../src/textgen/app.js";
import { testConfig } from "../../helpers/env.js";
import { tinyLora, tinyModel } from "../../helpers/synthetic-models.js";

const ADAPTER = { rank: 4, alpha: 8, seed: 7 };
const SCALE = 0.5;

const request = (extra: Partial<CompletionRequest> = {}): CompletionRequest => ({
  prompt: "Once upon a time",
  maxTokens: 1,
  temperature: 0,
  stop: [],
  logprobs: 8,
  ...extra,
});

/** The first token's top alternatives: text → log probability. */
const topOf = (result: CompletionResult) =>
  new Map(result.logprobs![0]!.top.map((entry) => [entry.text, entry.logprob] as const));

function assertSameLogits(a: CompletionResult, b: CompletionResult): void {
  const [left, right] = [topOf(a), topOf(b)];
  assert.deepEqual([...left.keys()], [...right.keys()]);
  for (const [text, logprob] of left)
    assert.ok(Math.abs(logprob - right.get(text)!) < 1e-3, `${text}: ${logprob} vs ${right.get(text)}`);
}

describe("LoRA adapters", () => {
  let service: TextgenService;
  let close: () => Promise<void>;
  let merged: CompletionResult;

  before(async () => {
    const base = await tinyModel({ plainByteTokens: true });
    const adapter = await tinyLora(ADAPTER);
    // By hand: the same model with the adapter's change written into its output matrix.
    const mergedModel = await tinyModel({
      plainByteTokens: true,
      mergeLora: { adapter: ADAPTER, scale: SCALE },
    });
    const byHand = createGenerator(testConfig({ MODEL_PATH: mergedModel })) as LlamaGenerator;
    await byHand.ready();
    merged = await byHand.generate(request());
    await byHand.close();
    const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-lora-"));
    const presets = path.join(dir, "presets.ini");
    writeFileSync(
      presets,
      [
        "[base]",
        `model = ${base}`,
        `lora = ${adapter}:${SCALE}`,
        "lora-init-without-apply = true",
        "[tuned]",
        "base = base",
        `lora = 0:${SCALE}`,
        "alias = base-tuned",
      ].join("\n"),
    );
    const config = testConfig({
      MODEL_PATH: base,
      MODELS_PRESETS: presets,
      MODELS_DIR: dir,
      MAX_CONCURRENT: "2",
    });
    const app = await buildTextgenApp({ config, generator: createGenerator(config) });
    service = app.textgenService;
    close = () => app.close();
  });
  after(() => close());

  const run = (model: string, extra: Partial<CompletionRequest> = {}) =>
    service.resolveModel(model, "generate").run(request(extra), new AbortController().signal);

  it("lists the adapters (loaded, not applied) with their ids, and the alias", () => {
    const adapters = service.loraAdapters("base");
    assert.equal(adapters.length, 1);
    assert.equal(adapters[0]!.id, 0);
    assert.equal(adapters[0]!.scale, 0);
    assert.deepEqual(service.loraAdapters("tuned"), adapters);
    const info = service.models.get("base")!;
    assert.deepEqual(info.loraAliases, [
      { name: "tuned", lora: [{ id: 0, scale: SCALE }] },
      { name: "base-tuned", lora: [{ id: 0, scale: SCALE }] },
    ]);
  });

  it("a request's lora changes the logits as applying the adapter by hand does", async () => {
    const plain = await run("base");
    const adapted = await run("base", { lora: [{ id: 0, scale: SCALE }] });
    assertSameLogits(adapted, merged);
    // And it is a change: the base model's distribution differs.
    const baseTop = topOf(plain);
    const changed = [...topOf(adapted)].some(
      ([text, logprob]) => Math.abs((baseTop.get(text) ?? -99) - logprob) > 0.01,
    );
    assert.ok(changed, "the adapter changed nothing");
  });

  it("an alias maps to base + adapter; a request's own lora overrides it; an unknown id is a 400", async () => {
    assertSameLogits(await run("tuned"), merged);
    assertSameLogits(await run("base-tuned"), merged);
    assertSameLogits(await run("tuned", { lora: [] }), await run("base"));
    await assert.rejects(run("base", { lora: [{ id: 3, scale: 1 }] }), /no adapter 3/);
  });

  it("requests with and without the adapter run together, each with its own logits", async () => {
    const plain = await run("base");
    const results = await Promise.all([
      run("tuned"),
      run("base"),
      run("tuned", { maxTokens: 4 }),
      run("base"),
    ]);
    assertSameLogits(results[0]!, merged);
    assertSameLogits(results[1]!, plain);
    assertSameLogits(results[2]!, merged);
    assertSameLogits(results[3]!, plain);
  });
});
