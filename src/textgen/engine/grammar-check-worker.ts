/**
 * The grammar budget check's thread (see grammar-check.ts): one check per message, the answer being
 * the stacks seen and the parsed grammar (for GrammarStackMirror), or the refusal with the limit it names.
 */
import { parentPort } from "node:worker_threads";
import {
  checkAndCompileGrammar,
  GrammarBudgetError,
  type CompiledGrammar,
  type GrammarBudget,
} from "./grammar-budget.js";

export interface CheckRequest {
  id: number;
  grammar: string;
  budget: GrammarBudget;
}

export type CheckAnswer =
  | { id: number; stacks: number; compiled: CompiledGrammar }
  | { id: number; error: string; limit?: GrammarBudgetError["limit"] };

parentPort?.on("message", ({ id, grammar, budget }: CheckRequest) => {
  let answer: CheckAnswer;
  try {
    answer = { id, ...checkAndCompileGrammar(grammar, budget) };
  } catch (error) {
    answer =
      error instanceof GrammarBudgetError
        ? { id, error: error.message, limit: error.limit }
        : { id, error: error instanceof Error ? error.message : String(error) };
  }
  parentPort?.postMessage(answer);
});
