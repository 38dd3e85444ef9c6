/**
 * Fitting an answer's prompt to a context, counted by the estimate GENERATION_URL's port uses (its
 * real counting, deterministic): the answer's share, sources whole in rank order then one cut, history
 * within its share, the bound prompt + answer ≤ context, and a clear refusal when nothing fits.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DomainError } from "../../../src/core/errors.js";
import { estimatedWindow, estimateTokens } from "../../../src/rag/answering/generation-port.js";
import { buildAnswerMessages, fitAnswerPrompt } from "../../../src/rag/answering/prompt.js";

/** A source of `chars` characters of words, scored by rank. */
function sources(count: number, chars: number) {
  return Array.from({ length: count }, (_, i) => ({
    title: `Doc ${i + 1}`,
    text: `word${i} `.repeat(Math.ceil(chars / 6)).slice(0, chars),
    score: 1 - i / 10,
  }));
}

const QUESTION = "How do I rotate the API keys?";

describe("estimateTokens", () => {
  it("counts a byte in three, and a digit as a token of its own", () => {
    assert.equal(estimateTokens(""), 0);
    assert.equal(estimateTokens("abcdef"), 2);
    assert.equal(estimateTokens("2024"), 4);
    assert.equal(estimateTokens("é"), 1); // two bytes
    assert.equal(estimateTokens("東京"), 2); // six bytes
    // More than English needs at about four characters a token: the estimate errs on the safe side.
    const prose = "Rotate the keys every ninety days and revoke the old ones after the rollout.";
    assert.ok(estimateTokens(prose) >= prose.length / 4);
  });
});

describe("fitAnswerPrompt", () => {
  it("a large context takes every source whole, and the answer its full share", async () => {
    const window = estimatedWindow(32_768);
    const fitted = await fitAnswerPrompt(window, { question: QUESTION, sources: sources(5, 1000) }, 256);
    assert.equal(fitted.sourcesUsed, 5);
    assert.equal(fitted.lastSourceCut, false);
    assert.equal(fitted.maxTokens, 256);
    assert.deepEqual(fitted.messages, buildAnswerMessages(QUESTION, sources(5, 1000)));
    assert.equal(fitted.promptTokens, await window.countMessages(fitted.messages));
  });

  it("a small context: sources whole in rank order, the next one cut, the rest left out, all within it", async () => {
    const window = estimatedWindow(1024);
    const given = sources(5, 1000);
    const fitted = await fitAnswerPrompt(window, { question: QUESTION, sources: given }, 256);
    // About 340 estimated tokens a source: the first fits whole, the second is cut to the rest.
    assert.equal(fitted.sourcesUsed, 2);
    assert.equal(fitted.lastSourceCut, true);
    assert.equal(fitted.maxTokens, 256);
    assert.ok(fitted.promptTokens + fitted.maxTokens <= window.tokens);
    const user = fitted.messages.at(-1)!.content;
    // Numbered by rank: [n] names result n; the cut one ends with "…"; no later result is there.
    for (let n = 1; n <= fitted.sourcesUsed; n++) assert.ok(user.includes(`[${n}] Doc ${n}:`), `[${n}]`);
    assert.ok(!user.includes(`[${fitted.sourcesUsed + 1}]`));
    assert.match(user, /…\n\nQuestion:/);
  });

  it("a tiny context gives the answer a quarter of it and still one cut source", async () => {
    const window = estimatedWindow(256);
    const fitted = await fitAnswerPrompt(window, { question: QUESTION, sources: sources(5, 1000) }, 256);
    assert.equal(fitted.maxTokens, 64);
    assert.equal(fitted.sourcesUsed, 1);
    assert.equal(fitted.lastSourceCut, true);
    assert.ok(fitted.promptTokens + fitted.maxTokens <= 256);
  });

  it("history takes at most a quarter of the room, newest turns first, before the sources", async () => {
    const window = estimatedWindow(2048);
    const history = Array.from({ length: 20 }, (_, i) => ({
      role: i % 2 === 0 ? ("user" as const) : ("assistant" as const),
      content: `turn ${i} `.repeat(40),
    }));
    const fitted = await fitAnswerPrompt(
      window,
      { question: QUESTION, sources: sources(5, 1000), history },
      256,
    );
    const user = fitted.messages.at(-1)!.content;
    assert.match(user, /^Conversation so far:\n/);
    assert.ok(user.includes("turn 19"), "the newest turn is kept");
    assert.ok(!user.includes("turn 0 "), "the oldest is left out");
    const recalled = user.slice(0, user.indexOf("Sources:"));
    assert.ok(estimateTokens(recalled) <= (2048 - 256) / 4);
    assert.ok(fitted.sourcesUsed >= 1);
    assert.ok(fitted.promptTokens + fitted.maxTokens <= window.tokens);
  });

  it("a question that leaves no room is refused (unprocessable), saying the numbers", async () => {
    const window = estimatedWindow(256);
    const question = "why ".repeat(200);
    await assert.rejects(
      fitAnswerPrompt(window, { question, sources: sources(1, 100) }, 256),
      (error: unknown) =>
        error instanceof DomainError &&
        error.kind === "unprocessable" &&
        /tokens of the 256 the context holds per request/.test(error.message),
    );
  });
});
