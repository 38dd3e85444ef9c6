/**
 * KV cache types (LLAMA_KV_CACHE_TYPE, a preset's cache-type-k/v; issue #36): q8_0 and q4_0 contexts
 * load and answer; the registry's memory estimate counts the KV cache at the type's size; and that
 * estimate matches what llama.cpp really holds (a sequence's saved cells shrink by the same ratio).
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { createGenerator } from "../../../src/textgen/engine/create-generator.js";
import { KV_BYTES_PER_VALUE } from "../../../src/textgen/engine/gguf-check.js";
import type { LlamaGenerator } from "../../../src/textgen/engine/llama-generator.js";
import { ModelRegistry, type ModelBackend } from "../../../src/textgen/engine/model-registry.js";
import { buildCatalogue } from "../../../src/textgen/engine/presets.js";
import { testConfig, testModelPath } from "../../helpers/env.js";
import { tinyModel } from "../../helpers/synthetic-models.js";

async function withGenerator<T>(
  env: Record<string, string>,
  use: (g: LlamaGenerator) => Promise<T>,
): Promise<T> {
  const generator = createGenerator(testConfig(env)) as LlamaGenerator;
  try {
    await generator.ready();
    assert.deepEqual(generator.status(), { state: "ready" });
    return await use(generator);
  } finally {
    await generator.close();
  }
}

const story = "Lily went to the park with a red ball and a big dog. They played in the sun all day. ".repeat(
  12,
);

describe("KV cache types", () => {
  it("q8_0 and q4_0 contexts load and answer; a sequence's cells take the type's size", async () => {
    // Heads of 32 values (llama.cpp quantizes in blocks of 32 along a head; the test model's are 8).
    const model = await tinyModel({ plainByteTokens: true });
    const savedBytes: Record<string, number> = {};
    for (const type of ["f16", "q8_0", "q4_0"]) {
      const env = {
        MODEL_PATH: model,
        LLAMA_KV_CACHE_TYPE: type,
        MAX_CONCURRENT: "1",
        LLAMA_CONTEXT_SIZE: "512",
      };
      await withGenerator(env, async (g) => {
        const result = await g.generate({
          prompt: story,
          maxTokens: 8,
          temperature: 0,
          stop: [],
          ignoreEos: true,
        });
        assert.equal(result.tokensGenerated, 8);
        // Evicting the story copies its cells to the RAM cache: their real size in this type.
        await g.generate({ prompt: "Tom saw a cat.", maxTokens: 1, temperature: 0, stop: [] });
        savedBytes[type] = g.prefixCacheStats()!.bytes;
      });
    }
    for (const type of ["q8_0", "q4_0"] as const) {
      const ratio = savedBytes[type]! / savedBytes.f16!;
      const expected = KV_BYTES_PER_VALUE[type] / KV_BYTES_PER_VALUE.f16;
      // The copy also holds positions and sequence ids per cell: a little more than the values.
      assert.ok(
        Math.abs(ratio - expected) < 0.08,
        `${type}: ${ratio.toFixed(3)} of f16's size, expected ~${expected}`,
      );
    }
  });

  it("the registry's memory estimate counts the KV cache at each model's type (presets)", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-kv-"));
    const presets = path.join(dir, "presets.ini");
    writeFileSync(
      presets,
      [
        "[plain]",
        `model = ${testModelPath}`,
        "[q8]",
        `model = ${testModelPath}`,
        "cache-type-k = q8_0",
        "cache-type-v = q8_0",
        "[q4]",
        `model = ${testModelPath}`,
        "kv-cache-type = q4_0",
      ].join("\n"),
    );
    const catalogue = buildCatalogue({
      modelPath: testModelPath,
      embeddingModelPath: null,
      modelsDir: dir,
      presetsFile: presets,
    });
    const registry = new ModelRegistry<ModelBackend>({
      entries: catalogue.entries,
      defaultId: catalogue.defaultId,
      resolveFile: (entry) => Promise.resolve(entry.reference),
      createBackend: () => Promise.reject(new Error("nothing is loaded in this test")),
      contextTokensOf: () => 4096,
      kvCacheTypeOf: (entry) => entry.settings.kvCacheType ?? "f16",
      maxLoaded: 0,
      memoryBudget: 0,
      defaultKeepAliveMs: -1,
    });
    await registry.inspectLocal();
    const kvBytes = (id: string) => registry.get(id)!.memoryBytes! - registry.get(id)!.sizeBytes!;
    assert.ok(kvBytes("plain") > 0);
    assert.ok(Math.abs(kvBytes("q8") / kvBytes("plain") - 34 / 64) < 0.001);
    assert.ok(Math.abs(kvBytes("q4") / kvBytes("plain") - 18 / 64) < 0.001);
    await registry.close();
  });

  it("a quantized KV cache is refused with the reason without flash attention, or with heads of 8", async () => {
    const refusal = async (env: Record<string, string>) => {
      const generator = createGenerator(
        testConfig({ LLAMA_KV_CACHE_TYPE: "q8_0", ...env }),
      ) as LlamaGenerator;
      await generator.ready();
      const status = generator.status();
      await generator.close();
      return status.state === "unhealthy" ? status.reason : "";
    };
    assert.match(
      await refusal({ MODEL_PATH: await tinyModel({ plainByteTokens: true }), LLAMA_FLASH_ATTENTION: "off" }),
      /flash attention/,
    );
    assert.match(await refusal({}), /multiple of 32 values; this model's have 8/);
  });
});
