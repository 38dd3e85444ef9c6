/**
 * Speculative decoding inside the continuous batcher (issue #36), on crafted models whose answers
 * are known: a draft identical to the target has every guess accepted, a mismatched draft none, and
 * both answer exactly what plain decoding answers, token by token; prompt lookup (SPECULATIVE=ngram)
 * too. Sampled answers come from the same distribution: a "soft" chain model (its next chain token
 * only the most probable one) sampled with and without a draft, compared by a chi-square test; with
 * the same seed they are even identical, since every token is drawn by the request's own sampler.
 */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import type { CompletionRequest, TokenLogprob } from "../../../src/textgen/engine/generator.js";
import { createGenerator } from "../../../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../../../src/textgen/engine/llama-generator.js";
import { testConfig } from "../../helpers/env.js";
import { CHAIN_TEXT, OTHER_CHAIN_TEXT, tinyModel } from "../../helpers/synthetic-models.js";

async function withGenerator<T>(
  env: Record<string, string>,
  use: (g: LlamaGenerator) => Promise<T>,
): Promise<T> {
  const generator = createGenerator(testConfig({ MAX_CONCURRENT: "2", ...env })) as LlamaGenerator;
  try {
    await generator.ready();
    assert.deepEqual(generator.status(), { state: "ready" });
    return await use(generator);
  } finally {
    await generator.close();
  }
}

/** "Yes." ends in a token outside the chain, so the chain model writes its whole text after it. */
const greedy = (extra: Partial<CompletionRequest> = {}): CompletionRequest => ({
  prompt: "Yes.",
  maxTokens: 64,
  temperature: 0,
  stop: [],
  logprobs: 1,
  ...extra,
});

const tokensOf = (logprobs: TokenLogprob[] | undefined) => (logprobs ?? []).map((entry) => entry.text);

describe("speculative decoding", () => {
  let chain: string;
  let otherChain: string;

  before(async () => {
    chain = await tinyModel({ chain: CHAIN_TEXT });
    otherChain = await tinyModel({ chain: OTHER_CHAIN_TEXT });
  });

  it("a draft identical to the target: every guess accepted, the answer plain greedy's token by token", async () => {
    const plain = await withGenerator({ MODEL_PATH: chain, SPECULATIVE: "off" }, (g) => g.generate(greedy()));
    assert.equal(plain.text.trim(), CHAIN_TEXT.trim());
    assert.equal(plain.draftTokens, undefined);
    await withGenerator({ MODEL_PATH: chain, DRAFT_MODEL_PATH: chain }, async (g) => {
      const fast = await g.generate(greedy());
      assert.deepEqual(tokensOf(fast.logprobs), tokensOf(plain.logprobs));
      assert.equal(fast.text, plain.text);
      assert.equal(fast.finishReason, plain.finishReason);
      assert.ok(fast.draftTokens && fast.draftTokens.proposed > 0, JSON.stringify(fast.draftTokens));
      assert.equal(fast.draftTokens.accepted, fast.draftTokens.proposed);
      // Each guess the model agreed with saved a decode step: far fewer steps than tokens.
      assert.ok(fast.draftTokens.accepted >= fast.tokensGenerated - 2);
    });
  });

  it("a mismatched draft: guesses refused, the answer still plain greedy's token by token", async () => {
    const plain = await withGenerator({ MODEL_PATH: chain, SPECULATIVE: "off" }, (g) => g.generate(greedy()));
    await withGenerator(
      { MODEL_PATH: chain, DRAFT_MODEL_PATH: otherChain, SPECULATIVE: "draft" },
      async (g) => {
        const result = await g.generate(greedy());
        assert.deepEqual(tokensOf(result.logprobs), tokensOf(plain.logprobs));
        assert.ok(result.draftTokens && result.draftTokens.proposed > 0);
        assert.ok(
          result.draftTokens.accepted < result.draftTokens.proposed,
          JSON.stringify(result.draftTokens),
        );
        // Refused again and again, the guesses pause for longer and longer: 16 guesses, then one
        // now and then, not one every step (a 64-token answer: about 22 against 79).
        assert.ok(result.draftTokens.proposed <= 30, JSON.stringify(result.draftTokens));
        // Concurrent requests with guesses in one batch, and max_tokens cutting the answer.
        const [a, b] = await Promise.all([g.generate(greedy()), g.generate(greedy({ maxTokens: 7 }))]);
        assert.deepEqual(tokensOf(a.logprobs), tokensOf(plain.logprobs));
        assert.deepEqual(tokensOf(b.logprobs), tokensOf(plain.logprobs).slice(0, 7));
        assert.equal(b.finishReason, "length");
      },
    );
  });

  it("prompt lookup (SPECULATIVE=ngram): an answer that copies its prompt is guessed from it", async () => {
    const prompt = `Repeat:${CHAIN_TEXT}. Yes.`;
    const plain = await withGenerator({ MODEL_PATH: chain, SPECULATIVE: "off" }, (g) =>
      g.generate(greedy({ prompt })),
    );
    await withGenerator({ MODEL_PATH: chain, SPECULATIVE: "ngram" }, async (g) => {
      const result = await g.generate(greedy({ prompt }));
      assert.deepEqual(tokensOf(result.logprobs), tokensOf(plain.logprobs));
      assert.ok(result.draftTokens && result.draftTokens.accepted > 0, JSON.stringify(result.draftTokens));
      // A request may turn it off.
      const off = await g.generate(greedy({ prompt, speculative: false }));
      assert.equal(off.draftTokens, undefined);
      assert.equal(off.text, plain.text);
    });
  });

  it("sampled answers come from the same distribution (chi-square, soft chain model, top-k 4)", async () => {
    // The next chain token has logit 1 against 0 for every other token: with top-k 4, about 47 %.
    const soft = await tinyModel({ chain: CHAIN_TEXT, chainWeight: 1 / 8 });
    const N = 300;
    const sampled = (seed: number): CompletionRequest => ({
      prompt: "Yes.",
      maxTokens: 3,
      temperature: 1,
      topK: 4,
      topP: 1,
      seed,
      stop: [],
      ignoreEos: true,
      logprobs: 0,
    });
    const outcomes = async (env: Record<string, string>, firstSeed: number) =>
      withGenerator({ MODEL_PATH: soft, ...env }, async (g) => {
        const counts = new Map<string, number>();
        const draft = { proposed: 0, accepted: 0 };
        const texts: string[] = [];
        for (let i = 0; i < N; i++) {
          const result = await g.generate(sampled(firstSeed + i));
          const key = tokensOf(result.logprobs).join("|");
          texts.push(key);
          counts.set(key, (counts.get(key) ?? 0) + 1);
          draft.proposed += result.draftTokens?.proposed ?? 0;
          draft.accepted += result.draftTokens?.accepted ?? 0;
        }
        return { counts, draft, texts };
      });
    const plain = await outcomes({ SPECULATIVE: "off" }, 1);
    // The hard chain as the draft: sure of every guess, right about half the time.
    const withDraft = { SPECULATIVE: "draft", DRAFT_MODEL_PATH: chain };
    const speculative = await outcomes(withDraft, 100_001);
    assert.ok(speculative.draft.accepted > 0, JSON.stringify(speculative.draft));
    assert.ok(speculative.draft.accepted < speculative.draft.proposed, JSON.stringify(speculative.draft));
    const statistic = chiSquare(plain.counts, speculative.counts);
    // p = 0.001: a correct implementation fails this once in a thousand runs; accepting guesses the
    // model did not draw would put the chain's three tokens at ~100 % instead of ~10 % (χ² in the
    // hundreds).
    assert.ok(
      statistic.value < chiSquareCritical001(statistic.df),
      `χ² = ${statistic.value}, df ${statistic.df}`,
    );
    // With the same seeds, the very same answers: every token is drawn by the request's sampler.
    const sameSeeds = await outcomes(withDraft, 1);
    assert.deepEqual(sameSeeds.texts, plain.texts);
  });
});

/** Two-sample chi-square over outcome counts; outcomes seen fewer than 10 times in all are pooled. */
function chiSquare(a: Map<string, number>, b: Map<string, number>): { value: number; df: number } {
  const keys = new Set([...a.keys(), ...b.keys()]);
  const cells: [number, number][] = [];
  let pooled: [number, number] = [0, 0];
  for (const key of keys) {
    const cell: [number, number] = [a.get(key) ?? 0, b.get(key) ?? 0];
    if (cell[0] + cell[1] < 10) pooled = [pooled[0] + cell[0], pooled[1] + cell[1]];
    else cells.push(cell);
  }
  if (pooled[0] + pooled[1] > 0) cells.push(pooled);
  const totalA = cells.reduce((sum, [x]) => sum + x, 0);
  const totalB = cells.reduce((sum, [, y]) => sum + y, 0);
  let value = 0;
  for (const [x, y] of cells) {
    const expectedA = ((x + y) * totalA) / (totalA + totalB);
    const expectedB = ((x + y) * totalB) / (totalA + totalB);
    value += (x - expectedA) ** 2 / expectedA + (y - expectedB) ** 2 / expectedB;
  }
  return { value, df: Math.max(1, cells.length - 1) };
}

/** The chi-square distribution's 0.999 quantile (Wilson–Hilferty; within 1 % for df ≥ 3). */
function chiSquareCritical001(df: number): number {
  const z = 3.090232;
  return df * (1 - 2 / (9 * df) + z * Math.sqrt(2 / (9 * df))) ** 3;
}
