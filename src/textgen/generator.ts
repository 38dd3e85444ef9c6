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

interface GenerationControls extends SamplingOptions {
  /** New tokens at most, prompt excluded. */
  maxTokens: number;
  stop: string[];
  /** Aborting stops generation; the result then holds what was generated so far. */
  signal?: AbortSignal;
  /** Called with each decoded piece of text as it is generated. */
  onText?: (piece: string) => void;
  /** Called as tokens are generated, with how many (for live metrics). */
  onTokens?: (count: number) => void;
}

/** Continue a raw text. */
export interface CompletionRequest extends GenerationControls {
  prompt: string;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** Answer a conversation, rendered with the model's own chat template. */
export interface ChatRequest extends GenerationControls {
  messages: ChatMessage[];
}

export type GenerationRequest = CompletionRequest | ChatRequest;

export function isChatRequest(request: GenerationRequest): request is ChatRequest {
  return "messages" in request;
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
  validate(request: GenerationRequest): Promise<number>;
  /** Generates for a raw prompt or a chat; the scheduler decides when this is called. */
  generate(request: GenerationRequest): Promise<CompletionResult>;
  close(): Promise<void>;
}
