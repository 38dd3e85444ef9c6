import type { GbnfJsonSchema, LlamaModel } from "node-llama-cpp";
import type { StepTimings } from "./batcher.js";

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
  /** Called as tokens are generated, with how many (for live metrics). */
  onTokens?: (count: number) => void;
  /** Constrains the output: a JSON object, one matching a JSON schema, or a GBNF grammar. */
  constraint?: OutputConstraint;
  /** Report each generated token's log probability and this many alternatives (0…20). */
  logprobs?: number;
  /** Reuse KV cells of an earlier request sharing a prefix with this prompt (default true). */
  cachePrompt?: boolean;
  /** What the client asked to keep cached (OpenAI `prompt_cache_key`, Anthropic `cache_control`). */
  cacheHint?: CacheHint;
  /**
   * llama.cpp server's `lora`: this request's scale for each of the model's adapters named (ids as
   * `/lora-adapters` lists them); adapters not named get 0. Absent: the model's defaults (a LoRA
   * alias's scales, else each adapter's preset scale). An unknown id is a 400.
   */
  lora?: { id: number; scale: number }[];
  /** Speculative decoding for this request; absent: the model's setting (`SPECULATIVE`, presets). */
  speculative?: boolean;
  /**
   * "batch": a line of a batch (scheduler.ts): its prompt gets batch room after interactive ones', and
   * an interactive request waiting for a sequence preempts it (see Scheduler.run).
   */
  priority?: "interactive" | "batch";
  /** A prompt too long for the context loses tokens from its start instead of being refused. */
  truncate?: boolean;
  /**
   * A `maxTokens` the context cannot hold after the prompt is lowered to what it can hold, and the
   * answer ends with "length" there (llama.cpp server's behaviour, for the foreign dialects); without
   * it such a request is a 400 (the contract's /predict).
   */
  clampMaxTokens?: boolean;
  /** Names the field that sets `maxTokens` in the caller's API, for error messages (`max_length`). */
  maxTokensField?: string;
}

/**
 * A JSON schema as the grammar enforces it (json-schema.ts `toGrammarSchema`): node-llama-cpp's
 * schema, with `patterns` mapping the placeholder literals it holds to the GBNF of their regular
 * expressions (substituted into the grammar node-llama-cpp writes).
 */
export interface GrammarSchema {
  schema: GbnfJsonSchema;
  patterns: ReadonlyMap<string, string>;
}

/**
 * Hints of what to keep in the prompt cache. The engine reuses any shared prefix anyway; the hints
 * say which prefixes matter to the client, so they are saved to the RAM prefix cache as soon as they
 * are evaluated and kept there ahead of others.
 */
export interface CacheHint {
  /** OpenAI's `prompt_cache_key` (or a conversation's id): states of requests with a key are kept longer. */
  key?: string;
  /**
   * Anthropic's `cache_control` breakpoints: prefixes to keep. For a chat, message counts: the prompt
   * as the template renders the first N messages (0: the tools and nothing else); for a text prompt,
   * character offsets. At most 4 are used (Anthropic allows 4 breakpoints).
   */
  prefixes?: number[];
}

export type OutputConstraint =
  | { type: "json_object" }
  /** `schema`: the client's schema; `grammar`: what of it the grammar enforces (validation.ts). */
  | { type: "json_schema"; schema: unknown; grammar?: GrammarSchema }
  | { type: "grammar"; grammar: string };

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
  /** JSON schema of the arguments object, as the client sent it (shown to the model). */
  parameters?: unknown;
  /**
   * The arguments' schema as a forced call's grammar enforces it (validation.ts sets it when the call
   * is forced; with tool_choice auto/none the schema only describes and is never compiled).
   */
  grammar?: GrammarSchema;
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
  /** An assistant message's earlier thinking, shown to the model as the chat template renders it. */
  reasoning?: string;
}

/** Answer a conversation, rendered with the model's own chat template. */
export interface ChatRequest extends GenerationControls {
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  toolChoice?: ToolChoice;
  /** "split" (default): a reasoning model's `<think>` block goes to `reasoning`; "none": kept in the text. */
  reasoningFormat?: "split" | "none";
  /** false: thinking turned off, where the chat template reasons (an empty thought block is given). */
  thinking?: boolean;
  /**
   * Reasoning tokens at most (a dialect's effort or budget, validation.ts); past it the thought block
   * is closed and the answer follows, within maxTokens. Undefined: no budget but maxTokens.
   */
  thinkingBudget?: number;
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
  /**
   * Prompt tokens taken from the prompt cache (the sequence's own cells or the RAM prefix cache)
   * instead of being evaluated: exactly the KV cells reused. The rest, `promptTokens - cachedTokens`,
   * was evaluated (at least the last prompt token always is: its logits give the first new token).
   */
  cachedTokens?: number;
  /** Speculative decoding: guessed tokens checked against the model, and those it agreed with. */
  draftTokens?: { proposed: number; accepted: number };
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
  /** Throws a DomainError (invalid, a 400) for an id outside the vocabulary. */
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
   * Rejects a request that cannot fit before any work is queued (a DomainError, invalid: a 400).
   * Returns the prompt's token count.
   */
  validate(request: GenerationRequest): Promise<number>;
  /**
   * The loaded llama.cpp model, for embeddings from the same model (undefined for remote backends or
   * when loading failed). Resolves once loading has finished.
   */
  sharedModel?(): Promise<{ model: LlamaModel; name: string } | undefined>;
  /** The model's tokenizer (local models only); a DomainError (not_ready, a 503) while loading. */
  tokenizer?(): TextTokenizer;
  /**
   * Generates for a raw prompt or a chat; the scheduler decides when this is called. The answer's
   * parts go to `listener` as they are generated (events.ts; written through an EventWriter, so the
   * result is assembled from exactly those parts).
   */
  generate(request: GenerationRequest, listener?: EventListener): Promise<CompletionResult>;
  /** Where the decode loop's time went (local models, once loaded): batcher.ts StepTimings. */
  stepTimings?(): StepTimings | undefined;
  close(): Promise<void>;
}

// --- The answer as a stream of parts (events.ts writes them) ---------------------------------------

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens taken from the prompt cache instead of being evaluated. */
  cachedTokens: number;
}

export type GenerationEvent =
  /** The request holds a sequence; its prompt is `promptTokens` long (counted before the first token). */
  | { type: "start"; promptTokens: number }
  | { type: "reasoning-start" }
  | { type: "reasoning-delta"; delta: string }
  | { type: "reasoning-end" }
  | { type: "text-start" }
  /** `logprobs`: the tokens this delta's text came from (when the request asked for logprobs). */
  | { type: "text-delta"; delta: string; logprobs?: TokenLogprob[] }
  | { type: "text-end" }
  /** `index` counts the calls of this answer from 0. */
  | { type: "tool-call-start"; index: number; id: string; name: string }
  | { type: "tool-call-delta"; index: number; delta: string }
  /** `arguments`: the whole arguments text (the deltas joined). */
  | { type: "tool-call-end"; index: number; id: string; name: string; arguments: string }
  /**
   * The end: the assembled result, and `logprobs` of tokens that no text delta carried (text held back
   * as a possible tool call, or cut by a stop string).
   */
  | {
      type: "finish";
      finishReason: FinishReason;
      usage: Usage;
      result: CompletionResult;
      logprobs?: TokenLogprob[];
    };

export type EventListener = (event: GenerationEvent) => void;
