/**
 * Generative answers: the question and the numbered top results go to a chat model, which answers
 * citing results by number. The model is reached through a port (GenerationPort): in the same
 * process as the text generation app (`npm start`), or an OpenAI-compatible endpoint (GENERATION_URL).
 * The RAG app never depends on it: when there is none, or it fails, the caller falls back to the
 * extractive answer and says why.
 */
import type { Config } from "../../core/config.js";
import type { ChatMessage, Generator } from "../../textgen/engine/generator.js";
import { onTextDeltas } from "../../textgen/engine/events.js";
import { OpenAIUpstreamGenerator } from "../../textgen/engine/openai-upstream.js";

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

export interface PortRequest {
  messages: ChatMessage[];
  maxTokens: number;
  /** A GBNF grammar the output must match; only when the port says `grammar: true`. */
  grammar?: string;
  onText?: (piece: string) => void;
  signal?: AbortSignal;
}

/**
 * What RAG needs of a text model: one greedy chat completion. The text generation service implements
 * it in-process (local-generation.ts); upstreamGeneration() over HTTP.
 */
export interface GenerationPort {
  readonly modelName: string;
  /** How answers are written, for the start-up log line. */
  readonly description: string;
  /** Whether `grammar` is honoured (the in-process model); an upstream's API has no such field. */
  readonly grammar: boolean;
  chat(request: PortRequest): Promise<{ text: string; tokens: number }>;
  /** Releases what the port owns (an in-process port owns nothing: the text generation app does). */
  close(): Promise<void>;
}

/** The port over an OpenAI-compatible endpoint (GENERATION_URL). */
export function upstreamGeneration(
  config: Pick<Config["generation"], "generationModel" | "generationApiKey" | "generationTimeoutMs">,
  baseUrl: string,
): GenerationPort {
  const generator: Generator = new OpenAIUpstreamGenerator({
    baseUrl,
    model: config.generationModel,
    apiKey: config.generationApiKey,
    timeoutMs: config.generationTimeoutMs,
  });
  return {
    get modelName() {
      return generator.modelName;
    },
    description: `RAG: generative answers through GENERATION_URL=${baseUrl}`,
    grammar: false,
    async chat(request) {
      const result = await generator.generate(
        {
          messages: request.messages,
          maxTokens: request.maxTokens,
          temperature: 0,
          stop: [],
          signal: request.signal,
        },
        onTextDeltas(request.onText),
      );
      return { text: result.text, tokens: result.tokensGenerated };
    },
    close: () => generator.close(),
  };
}

const SYSTEM_PROMPT =
  "You answer questions using only the numbered sources you are given. After each statement, cite the " +
  "sources it rests on by number in square brackets, like [1] or [2][3]. If the sources do not contain " +
  "the answer, say that they do not. Be concise.";

/** Characters of each source sent to the model: enough for context, bounded for small windows. */
const MAX_SOURCE_CHARS = 1500;

export function buildAnswerMessages(question: string, sources: AnswerSource[]): ChatMessage[] {
  const numbered = sources
    .map((source, index) => {
      const title = source.title ? ` ${source.title}:` : "";
      return `[${index + 1}]${title} ${source.text.slice(0, MAX_SOURCE_CHARS).replace(/\s+/g, " ").trim()}`;
    })
    .join("\n");
  return [
    { role: "system", content: SYSTEM_PROMPT },
    { role: "user", content: `Sources:\n${numbered}\n\nQuestion: ${question}` },
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
    readonly port: GenerationPort,
    private readonly options: { maxTokens: number },
  ) {}

  get modelName(): string {
    return this.port.modelName;
  }

  async write(
    question: string,
    sources: AnswerSource[],
    hooks: { onText?: (piece: string) => void; signal?: AbortSignal } = {},
  ): Promise<GeneratedAnswer> {
    const started = performance.now();
    const result = await this.port.chat({
      messages: buildAnswerMessages(question, sources),
      maxTokens: this.options.maxTokens,
      onText: hooks.onText,
      signal: hooks.signal,
    });
    return {
      answer: result.text.trim(),
      citations: citedNumbers(result.text, sources.length),
      model: this.port.modelName,
      tokens: result.tokens,
      elapsedMs: Math.round(performance.now() - started),
    };
  }

  close(): Promise<void> {
    return this.port.close();
  }
}
