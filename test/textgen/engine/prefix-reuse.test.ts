/**
 * Prefix reuse across requests (issue #36), on the test model: a request lands on the sequence whose
 * cells share its longest prefix, whichever request left them; cells a request evicts are copied to
 * the RAM prefix cache and restored for a later request; cache hints save a prefix as soon as it is
 * evaluated. `cachedTokens` is exactly the cells reused, and greedy answers are the same with reuse
 * on and off.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Token } from "node-llama-cpp";
import { createGenerator } from "../../../src/textgen/engine/create-generator.js";
import type { CompletionRequest } from "../../../src/textgen/engine/generator.js";
import type { LlamaGenerator } from "../../../src/textgen/engine/llama-generator.js";
import { commonPrefixLength } from "../../../src/textgen/engine/prefix-cache.js";
import { testConfig } from "../../helpers/env.js";

async function withGenerator<T>(
  env: Record<string, string>,
  use: (g: LlamaGenerator) => Promise<T>,
): Promise<T> {
  const generator = createGenerator(testConfig({ LLAMA_CONTEXTS: "1", ...env })) as LlamaGenerator;
  try {
    await generator.ready();
    assert.deepEqual(generator.status(), { state: "ready" });
    return await use(generator);
  } finally {
    await generator.close();
  }
}

const request = (prompt: string, extra: Partial<CompletionRequest> = {}): CompletionRequest => ({
  prompt,
  maxTokens: 1,
  temperature: 0,
  stop: [],
  ...extra,
});

/** ~25 tokens a sentence in the test model's vocabulary (12: ~300), distinct per `name`. */
function longStory(name: string, sentences = 12): string {
  const sentence = `${name} went to the park with a red ball and a big dog. They played in the sun all day. `;
  return sentence.repeat(sentences);
}

/**
 * The cells a request leaves: its prompt and every generated token but the last (sampled, never
 * decoded). With max 1 token: the prompt itself.
 */
const promptTokens = (g: LlamaGenerator, prompt: string) => g.tokenizer().tokenize(prompt, true) as Token[];

/** What a request with `next` reuses from cells holding `cached`: the shared prefix, last token excluded. */
const expectedReuse = (cached: Token[], next: Token[]) =>
  Math.min(commonPrefixLength(cached, next), next.length - 1);

describe("prefix reuse across requests", () => {
  it("a request lands on the sequence sharing its longest prefix, whoever left it; cachedTokens is exact", async () => {
    await withGenerator({ MAX_CONCURRENT: "4" }, async (g) => {
      const names = ["Lily", "Tom", "Sue", "Ben"];
      // Four requests at once fill the four sequences.
      await Promise.all(
        names.map((name) => g.generate(request(`${name} had a little boat. ${name} sailed it.`))),
      );
      // A new request extending Sue's prompt is placed on Sue's sequence, whichever sequence that is.
      const extended = "Sue had a little boat. Sue sailed it. The wind was strong";
      const warm = await g.generate(request(extended, { maxTokens: 12 }));
      const expected = expectedReuse(
        promptTokens(g, "Sue had a little boat. Sue sailed it."),
        promptTokens(g, extended),
      );
      assert.ok(expected > 8);
      assert.equal(warm.cachedTokens, expected);
      const cold = await g.generate(request(extended, { maxTokens: 12, cachePrompt: false }));
      assert.equal(cold.cachedTokens, 0);
      assert.equal(warm.text, cold.text);
    });
  });

  it("cells a request evicts go to the RAM prefix cache and come back for a later request", async () => {
    await withGenerator({ MAX_CONCURRENT: "1", LLAMA_CONTEXT_SIZE: "512" }, async (g) => {
      const story = longStory("Lily");
      const storyTokens = promptTokens(g, story);
      assert.ok(storyTokens.length > 300 && storyTokens.length < 400, `${storyTokens.length} tokens`);
      await g.generate(request(story));
      // One sequence: an unrelated request takes it and evicts the story's cells (copied first).
      await g.generate(request("Tom saw a cat."));
      assert.equal(g.prefixCacheStats()?.saves, 1);
      const question = `${story}What did Lily take to the park?`;
      const warm = await g.generate(request(question, { maxTokens: 16 }));
      assert.equal(g.prefixCacheStats()?.restores, 1);
      assert.equal(warm.cachedTokens, expectedReuse(storyTokens, promptTokens(g, question)));
      const cold = await g.generate(request(question, { maxTokens: 16, cachePrompt: false }));
      assert.equal(cold.cachedTokens, 0);
      assert.equal(warm.text, cold.text);
    });
  });

  it("PROMPT_CACHE_RAM_MB=0 turns the RAM cache off: the evicted prefix is evaluated again", async () => {
    await withGenerator(
      { MAX_CONCURRENT: "1", LLAMA_CONTEXT_SIZE: "512", PROMPT_CACHE_RAM_MB: "0" },
      async (g) => {
        const story = longStory("Ben");
        await g.generate(request(story));
        await g.generate(request("Tom saw a cat."));
        const again = await g.generate(request(`${story}And then?`));
        assert.equal(g.prefixCacheStats(), undefined);
        assert.ok((again.cachedTokens ?? 0) <= 2, `${again.cachedTokens} cached`);
      },
    );
  });

  it("a cache hint saves its prefix once evaluated; a request sharing only that prefix restores it", async () => {
    await withGenerator({ MAX_CONCURRENT: "1", LLAMA_CONTEXT_SIZE: "512" }, async (g) => {
      // Short enough that evicting it alone would not copy it (under 256 tokens): only the hint does.
      const system = longStory("Max", 6);
      const first = `${system}Question one: where did Max go?`;
      assert.ok(promptTokens(g, first).length < 256);
      await g.generate(request(first, { cacheHint: { key: "session-1", prefixes: [system.length] } }));
      assert.equal(g.prefixCacheStats()?.saves, 1, "the hinted prefix was saved as it was evaluated");
      // Another request takes the only sequence (its cells share nothing with the system text).
      await g.generate(request("Tom saw a cat."));
      assert.equal(g.prefixCacheStats()?.saves, 1);
      const second = `${system}Question two: what did Max play with?`;
      const warm = await g.generate(request(second, { maxTokens: 8 }));
      assert.equal(g.prefixCacheStats()?.restores, 1);
      // The saved cells: the first prompt up to where the system text, tokenized alone, stops agreeing.
      const saved = promptTokens(g, first).slice(
        0,
        commonPrefixLength(promptTokens(g, system), promptTokens(g, first)),
      );
      assert.equal(warm.cachedTokens, expectedReuse(saved, promptTokens(g, second)));
      assert.ok((warm.cachedTokens ?? 0) > 100);
      const cold = await g.generate(request(second, { maxTokens: 8, cachePrompt: false }));
      assert.equal(warm.text, cold.text);
    });
  });
});
