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
  let app: Awaited<ReturnType<typeof buildTextgenApp>>;
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
    app = await buildTextgenApp({ config, generator: createGenerator(config) });
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

  it("over HTTP: GET /lora-adapters lists them; a chat or completion's lora picks them; an unknown id is a 400", async () => {
    const listed = await app.inject({ method: "GET", url: "/lora-adapters?model=base" });
    assert.equal(listed.statusCode, 200, listed.body);
    const adapters = listed.json() as { id: number; path: string; scale: number }[];
    assert.deepEqual(
      adapters.map(({ id, scale }) => ({ id, scale })),
      [{ id: 0, scale: 0 }],
    );
    assert.match(adapters[0]!.path, /\.gguf$/);
    // The first token's top log probabilities, as /v1/completions reports them.
    const topOver = async (lora?: { id: number; scale: number }[]) => {
      const response = await app.inject({
        method: "POST",
        url: "/v1/completions",
        payload: {
          model: "base",
          prompt: "Once upon a time",
          max_tokens: 1,
          temperature: 0,
          logprobs: 8,
          lora,
        },
      });
      assert.equal(response.statusCode, 200, response.body);
      return (response.json() as { choices: { logprobs: { top_logprobs: Record<string, number>[] } }[] })
        .choices[0]!.logprobs.top_logprobs[0]!;
    };
    const adapted = await topOver([{ id: 0, scale: SCALE }]);
    for (const [text, logprob] of topOf(merged))
      assert.ok(Math.abs(adapted[text]! - logprob) < 1e-3, `${text}: ${adapted[text]} vs ${logprob}`);
    const plain = await topOver();
    assert.ok(
      Object.entries(plain).some(([text, logprob]) => Math.abs((adapted[text] ?? -99) - logprob) > 0.01),
      "the adapter changed nothing over HTTP",
    );
    const unknown = await app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      payload: {
        model: "base",
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 1,
        lora: [{ id: 5, scale: 1 }],
      },
    });
    assert.equal(unknown.statusCode, 400, unknown.body);
    assert.match(unknown.body, /no adapter 5/);
  });
});
