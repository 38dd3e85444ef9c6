/**
 * The grammar budget check's thread (see grammar-check.ts): one check per message, the answer being
 * the stacks seen, or the refusal with the limit it names.
 */
import { parentPort } from "node:worker_threads";
import { checkGrammarBudget, GrammarBudgetError, type GrammarBudget } from "./grammar-budget.js";

export interface CheckRequest {
  id: number;
  grammar: string;
  budget: GrammarBudget;
}

export type CheckAnswer =
  { id: number; stacks: number } | { id: number; error: string; limit?: GrammarBudgetError["limit"] };

parentPort?.on("message", ({ id, grammar, budget }: CheckRequest) => {
  let answer: CheckAnswer;
  try {
    answer = { id, stacks: checkGrammarBudget(grammar, budget) };
  } catch (error) {
    answer =
      error instanceof GrammarBudgetError
        ? { id, error: error.message, limit: error.limit }
        : { id, error: error instanceof Error ? error.message : String(error) };
  }
  parentPort?.postMessage(answer);
});
