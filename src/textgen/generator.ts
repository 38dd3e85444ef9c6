/**
 * The boundary between the HTTP layer and whatever produces tokens. Routes and the scheduler only
 * know this interface; the llama.cpp backend implements it now, an OpenAI-compatible upstream later.
 */

export interface SamplingOptions {
  /** 0 = greedy and deterministic. */
  temperature: number;
  topP?: number;
  topK?: number;
  minP?: number;
  repeatPenalty?: number;
  seed?: number;
}

export interface CompletionRequest extends SamplingOptions {
  prompt: string;
  /** New tokens at most, prompt excluded. */
  maxTokens: number;
  stop: string[];
  /** Aborting stops generation; the result then holds what was generated so far. */
  signal?: AbortSignal;
  /** Called with each decoded piece of text as it is generated. */
  onText?: (piece: string) => void;
}

export type FinishReason = "length" | "stop";

export interface CompletionResult {
  /** The continuation only, without the prompt. */
  text: string;
  tokensGenerated: number;
  promptTokens: number;
  finishReason: FinishReason;
}

export type GeneratorStatus =
  { state: "loading" } | { state: "ready" } | { state: "unhealthy"; reason: string };

export interface Generator {
  /** `general.name` from the GGUF, or the file name; the upstream's model id for remote backends. */
  readonly modelName: string;
  status(): GeneratorStatus;
  /**
   * Rejects a request that cannot fit before any work is queued (throws an ApiError 400).
   * Returns the prompt's token count.
   */
  validate(request: CompletionRequest): Promise<number>;
  complete(request: CompletionRequest): Promise<CompletionResult>;
  close(): Promise<void>;
}
