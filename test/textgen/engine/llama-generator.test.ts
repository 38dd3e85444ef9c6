import assert from "node:assert/strict";
import { statSync } from "node:fs";
import os from "node:os";
import { describe, it } from "node:test";
import { createGenerator } from "../../../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../../../src/textgen/engine/llama-generator.js";
import { testConfig, testModelName, testModelPath } from "../../helpers/env.js";

async function withGenerator<T>(overrides: Record<string, string>, use: (g: LlamaGenerator) => Promise<T>) {
  const generator = createGenerator(testConfig(overrides)) as LlamaGenerator;
  try {
    await generator.ready();
    assert.deepEqual(generator.status(), { state: "ready" });
    return await use(generator);
  } finally {
    await generator.close();
  }
}

const request = (prompt: string, seed?: number) => ({
  prompt,
  maxTokens: 24,
  temperature: seed === undefined ? 0 : 0.9,
  seed,
  stop: [],
});

describe("LlamaGenerator", () => {
  it("spreads sequences over several contexts and answers alike on each", async () => {
    await withGenerator({ LLAMA_CONTEXTS: "2", MAX_CONCURRENT: "4" }, async (generator) => {
      assert.equal(generator.contextCount, 2);
      const alone = await generator.generate(request("Once upon a time", 11));
      // Four at once fill both contexts; the same seeded request gives the same text on either.
      const together = await Promise.all(
        [0, 1, 2, 3].map(() => generator.generate(request("Once upon a time", 11))),
      );
      for (const result of together) {
        assert.equal(result.text, alone.text);
        assert.equal(result.tokensGenerated, alone.tokensGenerated);
      }
    });
  });

  it('picks contexts with LLAMA_CONTEXTS "auto": one per sequence for a cache-sized model on one thread, else one per LLAMA_THREADS cores', async () => {
    const cores = os.availableParallelism();
    await withGenerator(
      { LLAMA_CONTEXTS: "auto", LLAMA_THREADS: String(cores), MAX_CONCURRENT: "4" },
      async (g) => {
        assert.equal(g.contextCount, 1);
      },
    );
    const small = statSync(testModelPath).size <= 64 * 1024 ** 2;
    await withGenerator({ LLAMA_CONTEXTS: "auto", LLAMA_THREADS: "1", MAX_CONCURRENT: "4" }, async (g) => {
      assert.equal(g.contextCount, small && cores > 1 ? 4 : Math.min(cores, 4));
    });
  });

  it("counts the prompt as the model reads it: BOS, then the text's own tokens", async () => {
    await withGenerator({}, async (generator) => {
      const counted = await generator.validate(request("Once upon a time"));
      const result = await generator.generate(request("Once upon a time"));
      assert.equal(result.promptTokens, counted);
      // stories260K: BOS + "▁Once", "▁upon", "▁a", "▁time".
      if (testModelName === "stories260K") assert.equal(counted, 5);
    });
  });

  it("continues the prompt's text: generated_text carries its own leading space", async () => {
    await withGenerator({}, async (generator) => {
      const result = await generator.generate({ ...request("The cat"), maxTokens: 8 });
      if (testModelName === "stories260K") assert.match(result.text, /^ \S/);
      const chat = await generator.generate({
        messages: [{ role: "user", content: "Tell me a story" }],
        maxTokens: 8,
        temperature: 0,
        stop: [],
      });
      assert.doesNotMatch(chat.text, /^\s/, "a chat answer starts with its first word");
    });
  });
});
