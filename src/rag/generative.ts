/**
 * Generative answers: the question and the numbered top results go to an OpenAI-compatible chat
 * endpoint (GENERATION_URL), which answers citing results by number. The RAG app never depends on it:
 * when it is unset, down or slow, the caller falls back to the extractive answer and says why.
 */
import type { Generator } from "../textgen/generator.js";

export interface AnswerSource {
  text: string;
  title: string | null;
}

export interface GeneratedAnswer {
  answer: string;
  /** Result numbers (1-based) the answer cites. */
  citations: number[];
  model: string;
  tokens: number;
  elapsedMs: number;
}

const SYSTEM_PROMPT =
  "You answer questions using only the numbered sources you are given. After each statement, cite the " +
  "sources it rests on by number in square brackets, like [1] or [2][3]. If the sources do not contain " +
  "the answer, say that they do not. Be concise.";

/** Characters of each source sent to the model: enough for context, bounded for small windows. */
const MAX_SOURCE_CHARS = 1500;

export function buildAnswerMessages(question: string, sources: AnswerSource[]) {
  const numbered = sources
    .map((source, index) => {
      const title = source.title ? ` ${source.title}:` : "";
      return `[${index + 1}]${title} ${source.text.slice(0, MAX_SOURCE_CHARS).replace(/\s+/g, " ").trim()}`;
    })
    .join("\n");
  return [
    { role: "system" as const, content: SYSTEM_PROMPT },
    { role: "user" as const, content: `Sources:\n${numbered}\n\nQuestion: ${question}` },
  ];
}

export function citedNumbers(answer: string, sourceCount: number): number[] {
  const cited = new Set<number>();
  for (const match of answer.matchAll(/\[(\d+(?:\s*[,;]\s*\d+)*)\]/g)) {
    for (const part of match[1]!.split(/[,;]/)) {
      const n = Number(part.trim());
      if (Number.isInteger(n) && n >= 1 && n <= sourceCount) cited.add(n);
    }
  }
  return [...cited].sort((a, b) => a - b);
}

export class AnswerWriter {
  constructor(
    private readonly generator: Generator,
    private readonly options: { maxTokens: number },
  ) {}

  get modelName(): string {
    return this.generator.modelName;
  }

  async write(
    question: string,
    sources: AnswerSource[],
    hooks: { onText?: (piece: string) => void; signal?: AbortSignal } = {},
  ): Promise<GeneratedAnswer> {
    const started = performance.now();
    const result = await this.generator.generate({
      messages: buildAnswerMessages(question, sources),
      maxTokens: this.options.maxTokens,
      temperature: 0,
      stop: [],
      onText: hooks.onText,
      signal: hooks.signal,
    });
    return {
      answer: result.text.trim(),
      citations: citedNumbers(result.text, sources.length),
      model: this.generator.modelName,
      tokens: result.tokensGenerated,
      elapsedMs: Math.round(performance.now() - started),
    };
  }

  close(): Promise<void> {
    return this.generator.close();
  }
}
