import type { LlamaModel } from "node-llama-cpp";

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
  /** OpenAI's presence and frequency penalties (-2…2), over the last 64 generated tokens. */
  presencePenalty?: number;
  frequencyPenalty?: number;
  seed?: number;
  /** Added to these tokens' logits before sampling (OpenAI's `logit_bias`: token id → -100…100). */
  logitBias?: ReadonlyMap<number, number>;
  /** Keep generating past end-of-generation tokens until maxTokens (llama.cpp's `ignore_eos`). */
  ignoreEos?: boolean;
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
  /** Constrains the output: a JSON object, one matching a JSON schema, or a GBNF grammar. */
  constraint?: OutputConstraint;
  /** Report each generated token's log probability and this many alternatives (0…20). */
  logprobs?: number;
  /** Called with each generated token's log probabilities, before its text (when `logprobs` is set). */
  onLogprob?: (entry: TokenLogprob) => void;
  /** Reuse KV cells of an earlier request sharing a prefix with this prompt (default true). */
  cachePrompt?: boolean;
  /** A prompt too long for the context loses tokens from its start instead of being refused. */
  truncate?: boolean;
  /** Names the field that sets `maxTokens` in the caller's API, for error messages (`max_length`). */
  maxTokensField?: string;
}

export type OutputConstraint =
  { type: "json_object" } | { type: "json_schema"; schema: unknown } | { type: "grammar"; grammar: string };

export interface TokenLogprob {
  /** The token's text, as the tokenizer would write it alone. */
  text: string;
  bytes: number[];
  logprob: number;
  /** The most probable tokens at this step, best first. */
  top: { text: string; bytes: number[]; logprob: number }[];
}

export interface ToolDefinition {
  name: string;
  description?: string;
  /** JSON schema of the arguments object. */
  parameters?: unknown;
}

/** `auto`: the model decides; `required`: a call to any tool; `{ name }`: a call to that tool. */
export type ToolChoice = "auto" | "none" | "required" | { name: string };

export interface ToolCall {
  id: string;
  name: string;
  /** The arguments object as a JSON string, as OpenAI's API carries it. */
  arguments: string;
}

/** Continue a raw text. */
export interface CompletionRequest extends GenerationControls {
  prompt: string;
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
  /** Calls an assistant message made (history). */
  toolCalls?: ToolCall[];
  /** The call a `tool` message answers. */
  toolCallId?: string;
}

/** Answer a conversation, rendered with the model's own chat template. */
export interface ChatRequest extends GenerationControls {
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  toolChoice?: ToolChoice;
  /** Called as a forced tool call is generated: first its id and name, then pieces of its arguments. */
  onToolCall?: (delta: { index: number; id?: string; name?: string; arguments: string }) => void;
  /** "split" (default): a reasoning model's `<think>` block goes to `reasoning`; "none": kept in the text. */
  reasoningFormat?: "split" | "none";
  /** false: thinking turned off, where the chat template reasons (an empty thought block is given). */
  thinking?: boolean;
  /** Called with each piece of reasoning as it is generated (when it is split off). */
  onReasoning?: (piece: string) => void;
}

export type GenerationRequest = CompletionRequest | ChatRequest;

export function isChatRequest(request: GenerationRequest): request is ChatRequest {
  return "messages" in request;
}

export type FinishReason = "length" | "stop" | "tool_calls";

export interface CompletionResult {
  /** The continuation only, without the prompt (empty when the answer is tool calls). */
  text: string;
  tokensGenerated: number;
  promptTokens: number;
  finishReason: FinishReason;
  /** Prompt tokens taken from the prompt cache instead of being evaluated. */
  cachedTokens?: number;
  /** Prompt tokens dropped from the start because the request allowed truncation. */
  truncatedTokens?: number;
  toolCalls?: ToolCall[];
  /** The reasoning a thinking model wrote before its answer, split off the text. */
  reasoning?: string;
  /** One entry per generated token, when the request asked for `logprobs`. */
  logprobs?: TokenLogprob[];
}

export interface TextTokenizer {
  /** `addSpecial`: BOS first when the model wants one. Special-token text is read as special tokens. */
  tokenize(text: string, addSpecial: boolean): number[];
  /** Throws an ApiError 400 for an id outside the vocabulary. */
  detokenize(tokens: readonly number[]): string;
  /** One token's text, as it reads alone. */
  piece(token: number): string;
}

export type GeneratorStatus =
  { state: "loading" } | { state: "ready" } | { state: "unhealthy"; reason: string };

export interface Generator {
  /**
   * The name the model is served under: its registry id (the file name without `.gguf`, or the
   * preset's section name); the upstream's model id for remote backends.
   */
  readonly modelName: string;
  status(): GeneratorStatus;
  /**
   * Tokens one request may hold, prompt and answer together (what `validate` checks against);
   * undefined until the model has loaded, and for remote backends, whose context is not known here.
   */
  contextPerSequence?(): number | undefined;
  /**
   * Rejects a request that cannot fit before any work is queued (throws an ApiError 400).
   * Returns the prompt's token count.
   */
  validate(request: GenerationRequest): Promise<number>;
  /**
   * The loaded llama.cpp model, for embeddings from the same model (undefined for remote backends or
   * when loading failed). Resolves once loading has finished.
   */
  sharedModel?(): Promise<{ model: LlamaModel; name: string } | undefined>;
  /** The model's tokenizer (local models only); throws an ApiError 503 while loading. */
  tokenizer?(): TextTokenizer;
  /** Generates for a raw prompt or a chat; the scheduler decides when this is called. */
  generate(request: GenerationRequest): Promise<CompletionResult>;
  close(): Promise<void>;
}
