/**
 * Composing answers from search results, shared by /rag/query, /rag/chat and the OpenAI-compatible
 * chat route: the generative answer when a model is available, else the extractive one with the reason.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { AnswerWriter } from "./generative.js";
import type { LoadedIndex, QueryResult, RagService } from "../service.js";

export interface AnsweringDeps {
  service: RagService;
  answerWriter: AnswerWriter | null;
}

export const NO_MODEL_REASON =
  "no generation model: GENERATION_URL is not set and no model runs in this process";

/** Aborts when the client goes away before the response is done (stops generation). */
export function clientGoneSignal(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}

/**
 * A generative answer to `question`, or the extractive one (sentences matching `extractiveQuery`)
 * with the reason generation was skipped.
 */
export async function generativeAnswer(
  deps: AnsweringDeps,
  input: { question: string; extractiveQuery?: string; results: QueryResult[]; loaded: LoadedIndex },
  hooks: { signal: AbortSignal; onText?: (piece: string) => void; log?: FastifyRequest["log"] },
) {
  const { question, results, loaded } = input;
  const fallback = (reason: string) => ({
    answer: deps.service.extractive(input.extractiveQuery ?? question, results, loaded),
    answer_mode: "extractive" as const,
    generation_skipped_reason: reason,
  });
  if (!deps.answerWriter) return fallback(NO_MODEL_REASON);
  if (results.length === 0) return fallback("no results to answer from");
  try {
    const written = await deps.answerWriter.write(question, results, {
      signal: hooks.signal,
      onText: hooks.onText,
    });
    return {
      answer: written.answer,
      answer_mode: "generative" as const,
      citations: written.citations,
      generation: { model: written.model, tokens: written.tokens, elapsed_ms: written.elapsedMs },
    };
  } catch (error) {
    hooks.log?.warn({ err: error }, "generative answer failed; falling back to extractive");
    return fallback(`generation failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
