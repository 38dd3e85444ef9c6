/**
 * Generative answers: the question and the numbered top results (as many as fit the model's context
 * per request, prompt.ts) go to a chat model through the generation port, which answers citing
 * results by number. When there is no model, or it fails, the caller (compose.ts) answers
 * extractively and says why.
 */
import type { GenerationPort, PortResult } from "./generation-port.js";
import { citedNumbers, fitAnswerPrompt, type FittedPrompt, type HistoryTurn } from "./prompt.js";
import type { AnswerSource } from "./source.js";

export { citedNumbers };

/** New tokens a generative answer may take, at most (fewer where the context per request is small). */
export const ANSWER_MAX_TOKENS = 256;

export interface GeneratedAnswer {
  answer: string;
  /** Result numbers (1-based) the answer cites. */
  citations: number[];
  model: string;
  /** Results 1 … sourcesUsed were given to the model. */
  sourcesUsed: number;
  tokens: number;
  promptTokens: number;
  contextTokens: number;
  finishReason: PortResult["finishReason"];
  elapsedMs: number;
}

export interface WriteHooks {
  /** Called once the prompt is fitted, before the model writes. */
  onPrompt?: (prompt: FittedPrompt) => void;
  onText?: (piece: string) => void;
  signal?: AbortSignal;
}

export class AnswerWriter {
  constructor(
    readonly port: GenerationPort,
    private readonly options: { maxTokens: number },
  ) {}

  get modelName(): string {
    return this.port.modelName;
  }

  async write(
    input: { question: string; sources: readonly AnswerSource[]; history?: readonly HistoryTurn[] },
    hooks: WriteHooks = {},
  ): Promise<GeneratedAnswer> {
    const started = performance.now();
    const prompt = await fitAnswerPrompt(await this.port.contextWindow(), input, this.options.maxTokens);
    hooks.onPrompt?.(prompt);
    const result = await this.port.chat({
      messages: prompt.messages,
      maxTokens: prompt.maxTokens,
      onText: hooks.onText,
      signal: hooks.signal,
    });
    return {
      answer: result.text.trim(),
      citations: citedNumbers(result.text, prompt.sourcesUsed),
      model: this.port.modelName,
      sourcesUsed: prompt.sourcesUsed,
      tokens: result.tokens,
      // A remote server that does not report usage leaves the prompt's own count.
      promptTokens: result.promptTokens > 0 ? result.promptTokens : prompt.promptTokens,
      contextTokens: prompt.contextTokens,
      finishReason: result.finishReason,
      elapsedMs: Math.round(performance.now() - started),
    };
  }

  close(): Promise<void> {
    return this.port.close();
  }
}

/** The writer of answers through `port`, or null without one (answers are then extractive). */
export function answerWriterFor(port: GenerationPort | null): AnswerWriter | null {
  return port ? new AnswerWriter(port, { maxTokens: ANSWER_MAX_TOKENS }) : null;
}
