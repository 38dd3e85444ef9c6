/**
 * Composing the answer from search results, as asked: none, extractive, or generative when a model is
 * there and works, else the extractive answer with the reason (`generation_skipped_reason`). Length is
 * never such a reason: the prompt is fitted to the model's context (prompt.ts); only a missing or
 * failing model, no results, or a question that alone fills the context leads to the fallback.
 */
import type { Analyzer } from "../search/index.js";
import type { AnswerMode, QueryResult } from "../service.js";
import { composeExtractive } from "./extractive.js";
import type { AnswerWriter, WriteHooks } from "./generative.js";
import type { HistoryTurn } from "./prompt.js";
import type { AnswerFields } from "./schemas.js";

export const NO_MODEL_REASON =
  "no generation model: GENERATION_URL is not set and no model runs in this process";

/** Where a failed generation is logged (a request's logger). */
export interface AnsweringLog {
  warn(details: object, message: string): void;
}

export interface ComposeInput {
  mode: AnswerMode;
  /** What the model answers. */
  question: string;
  /** What an extractive answer's sentences are matched against (default: `question`). */
  extractiveQuery?: string;
  results: QueryResult[];
  /** The index's analyzer, for the extractive answer's terms. */
  analyze: Analyzer;
  /** The turns before the question, in a conversation. */
  history?: readonly HistoryTurn[];
}

function extractive(input: ComposeInput): AnswerFields & { answer_mode: "extractive" } {
  const composed = composeExtractive(input.extractiveQuery ?? input.question, input.results, input.analyze);
  return {
    answer: composed?.text ?? null,
    answer_mode: "extractive",
    sources_used: composed?.sources.length ?? 0,
  };
}

export async function composeAnswer(
  answerWriter: AnswerWriter | null,
  input: ComposeInput,
  hooks: WriteHooks & { log?: AnsweringLog } = {},
): Promise<AnswerFields> {
  if (input.mode === "none") return { answer: null, answer_mode: "none" };
  if (input.mode === "extractive") return extractive(input);
  const fallback = (reason: string) => ({ ...extractive(input), generation_skipped_reason: reason });
  if (!answerWriter) return fallback(NO_MODEL_REASON);
  if (input.results.length === 0) return fallback("no results to answer from");
  try {
    const written = await answerWriter.write(
      { question: input.question, sources: input.results, history: input.history },
      hooks,
    );
    return {
      answer: written.answer,
      answer_mode: "generative",
      sources_used: written.sourcesUsed,
      citations: written.citations,
      generation: {
        model: written.model,
        tokens: written.tokens,
        prompt_tokens: written.promptTokens,
        context_tokens: written.contextTokens,
        finish_reason: written.finishReason,
        elapsed_ms: written.elapsedMs,
      },
    };
  } catch (error) {
    hooks.log?.warn({ err: error }, "generative answer failed; falling back to extractive");
    return fallback(`generation failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
