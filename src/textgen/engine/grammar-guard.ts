/**
 * A grammar's cost, counted while its response is sampled (issue #35): the pre-check
 * (grammar-budget.ts) explores inputs up to a horizon, and a grammar can still grow past it. After
 * every token the batcher hands the guard the token and the time its sampling took; the guard
 * follows llama.cpp's parse stacks on the token's text (GrammarStackMirror, bounded work) and ends the
 * response when they pass GRAMMAR_MAX_STACKS, or when one token's constrained sampling took longer
 * than GRAMMAR_MAX_TOKEN_MS (what the stacks alone do not show: many stacks each checked against the
 * whole vocabulary). The native sampling of one token cannot be interrupted, so the bound is: a
 * response ends at the token where its grammar's cost passed the budget, and the other sequences of
 * its batch lose at most that token's time.
 */
import { DomainError } from "../../core/errors.js";
import { GrammarBudgetError, GrammarStackMirror, type CompiledGrammar } from "./grammar-budget.js";

export interface GrammarGuardOptions {
  compiled?: CompiledGrammar;
  maxStacks: number;
  maxTokenMs: number;
  /** The bytes llama.cpp's grammar reads for a token (its piece, UTF-8). */
  pieceBytes: (token: number) => Uint8Array;
}

export class GrammarGuard {
  private mirror?: GrammarStackMirror;
  private tokens = 0;
  /** Largest stack count seen, for diagnostics and tests. */
  mostStacks = 0;

  constructor(private readonly options: GrammarGuardOptions) {
    // A grammar that names tokens is followed by llama.cpp only; the time budget still holds.
    if (options.compiled && !options.compiled.hasTokens) {
      try {
        this.mirror = new GrammarStackMirror(options.compiled, options.maxStacks);
        this.mostStacks = this.mirror.size;
      } catch {
        // Its first stacks are over budget: the pre-check refuses such grammars before this.
        this.mirror = undefined;
      }
    }
  }

  /** After a sampled token: throws a DomainError (422) naming the budget its grammar passed. */
  afterToken(token: number, sampleMs: number): void {
    this.tokens++;
    if (this.mirror) {
      try {
        const stacks = this.mirror.accept(this.options.pieceBytes(token));
        if (stacks < 0) this.mirror = undefined;
        else this.mostStacks = Math.max(this.mostStacks, stacks);
      } catch (error) {
        if (!(error instanceof GrammarBudgetError)) throw error;
        throw new DomainError(
          "unprocessable",
          `The grammar became too costly while sampling: after ${this.tokens} tokens llama.cpp's parse stacks passed GRAMMAR_MAX_STACKS (${this.options.maxStacks}), and its work per token grows with them. Nested optional items and overlapping alternatives multiply them.`,
          { details: [{ path: "/grammar", limit: "GRAMMAR_MAX_STACKS", tokens: this.tokens }] },
        );
      }
    }
    if (sampleMs > this.options.maxTokenMs)
      throw new DomainError(
        "unprocessable",
        `The grammar became too costly while sampling: token ${this.tokens} took ${Math.round(sampleMs)} ms to sample under it; GRAMMAR_MAX_TOKEN_MS allows ${this.options.maxTokenMs}. Simplify nested optional items and overlapping alternatives.`,
        { details: [{ path: "/grammar", limit: "GRAMMAR_MAX_TOKEN_MS", tokens: this.tokens }] },
      );
  }
}
