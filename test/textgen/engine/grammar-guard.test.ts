/**
 * The grammar's cost counted while sampling (issue #35), as a function: the guard follows the stacks
 * on each token's text and ends the response naming GRAMMAR_MAX_STACKS, or GRAMMAR_MAX_TOKEN_MS when
 * one token's sampling took longer than that, whatever the pre-check said.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DomainError } from "../../../src/core/errors.js";
import { checkAndCompileGrammar } from "../../../src/textgen/engine/grammar-budget.js";
import { GrammarGuard } from "../../../src/textgen/engine/grammar-guard.js";
import { DEFAULT_GRAMMAR_BUDGET } from "../../../src/textgen/engine/llama-generator.js";
import { horizonHiddenGrammar } from "../../helpers/grammar-fixtures.js";

/** Token ids standing for their text: 1 is "z" × 14, 2 is "x". */
const pieces: Record<number, string> = { 1: "z".repeat(14), 2: "x" };

function guard(maxTokenMs = 1000) {
  const { compiled } = checkAndCompileGrammar(horizonHiddenGrammar(), DEFAULT_GRAMMAR_BUDGET);
  return new GrammarGuard({
    compiled,
    maxStacks: DEFAULT_GRAMMAR_BUDGET.maxStacks,
    maxTokenMs,
    pieceBytes: (token) => Buffer.from(pieces[token]!),
  });
}

const limitOf = (error: unknown) =>
  error instanceof DomainError ? (error.details[0] as { limit?: string }).limit : undefined;

describe("GrammarGuard", () => {
  it("ends the response at the token whose stacks pass GRAMMAR_MAX_STACKS (422)", () => {
    const g = guard();
    g.afterToken(1, 1);
    for (let i = 0; i < 3; i++) g.afterToken(2, 1);
    assert.equal(g.mostStacks, 297);
    assert.throws(
      () => g.afterToken(2, 1),
      (error: unknown) =>
        error instanceof DomainError &&
        error.kind === "unprocessable" &&
        limitOf(error) === "GRAMMAR_MAX_STACKS" &&
        /GRAMMAR_MAX_STACKS \(512\)/.test(error.message),
    );
  });

  it("ends the response at a token whose sampling took longer than GRAMMAR_MAX_TOKEN_MS (422)", () => {
    const g = guard(50);
    g.afterToken(1, 49);
    assert.throws(
      () => g.afterToken(2, 51),
      (error: unknown) => limitOf(error) === "GRAMMAR_MAX_TOKEN_MS" && /took 51 ms/.test(String(error)),
    );
  });

  it("keeps only the time budget once the text leaves what it can follow", () => {
    const g = guard(50);
    g.afterToken(2, 1); // "x" first: not this grammar's text (the mirror stops following)
    for (let i = 0; i < 10; i++) g.afterToken(2, 1);
    assert.throws(
      () => g.afterToken(2, 60),
      (error: unknown) => limitOf(error) === "GRAMMAR_MAX_TOKEN_MS",
    );
  });
});
