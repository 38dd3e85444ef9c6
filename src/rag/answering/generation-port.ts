/**
 * What RAG needs of a text model, as a port: greedy chat completions, and the size of the context one
 * request may use with a way to count text against it, so that prompts are fitted to it (prompt.ts).
 * The text generation service of this process implements it (src/rag/local-models.ts), and so does
 * any OpenAI-compatible server over HTTP (upstream-generation.ts). RAG depends on this port only; the
 * composition root (src/server.ts, src/rag/app.ts) picks the adapter.
 */

/** One message of a chat, as the port takes it. */
export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface PortRequest {
  messages: ChatMessage[];
  maxTokens: number;
  /** A GBNF grammar the output must match; only when the port says `grammar: true`. */
  grammar?: string;
  onText?: (piece: string) => void;
  signal?: AbortSignal;
}

export interface PortResult {
  text: string;
  /** Tokens generated. */
  tokens: number;
  /** Tokens of the prompt as the model read it (0 where a remote server did not say). */
  promptTokens: number;
  /** "length": the answer was cut at `maxTokens`. */
  finishReason: "stop" | "length";
}

/** A generator's result (textgen's CompletionResult) as the port's: any reason but "length" is a stop. */
export function portResultOf(result: {
  text: string;
  tokensGenerated: number;
  promptTokens: number;
  finishReason: string;
}): PortResult {
  return {
    text: result.text,
    tokens: result.tokensGenerated,
    promptTokens: result.promptTokens,
    finishReason: result.finishReason === "length" ? "length" : "stop",
  };
}

/** What one request to the model may hold, and how text is counted against it. */
export interface ContextWindow {
  /** Tokens one request holds: the prompt and the answer together. */
  readonly tokens: number;
  /**
   * "tokenizer": counts are the model's own (its tokenizer, its chat template); "estimate": counted
   * from characters (estimateTokens), where the model is on another server.
   */
  readonly counting: "tokenizer" | "estimate";
  /**
   * Tokens of a prompt made of these messages, the chat template's own included. May fail with a
   * DomainError (invalid) when the messages alone exceed the context: the caller reads that as "too long".
   */
  countMessages(messages: readonly ChatMessage[]): Promise<number>;
  /** Tokens of a text inside a message. */
  countText(text: string): number;
}

export interface GenerationPort {
  readonly modelName: string;
  /** How answers are written, for the start-up log line. */
  readonly description: string;
  /** Whether `grammar` is honoured (the in-process model); an upstream's API has no such field. */
  readonly grammar: boolean;
  /** The context of one request (loading the model when it must); fails as `chat` would when it cannot serve. */
  contextWindow(): Promise<ContextWindow>;
  chat(request: PortRequest): Promise<PortResult>;
  /** Releases what the port owns (an in-process port owns nothing: the text generation app does). */
  close(): Promise<void>;
}

/** Tokens a chat template adds around each message, and around the whole prompt, at most (estimates). */
const MESSAGE_OVERHEAD_TOKENS = 8;

const DIGITS = /\p{Nd}/gu;

/**
 * Tokens of a text, estimated from its characters for a model whose tokenizer is on another server:
 * a UTF-8 byte in three, and each digit one token. Conservative for the tokenizers in use (BPE models
 * such as Llama 3, Qwen 2.5, Mistral and Gemma write English at about four characters a token,
 * accented and CJK text at about one character, three bytes, a token), and for numbers too: Qwen and
 * Llama 2 give every digit a token of its own. Counting characters needs no round trip per request,
 * works with every OpenAI-compatible server (llama.cpp's /tokenize is one server's; vLLM's, TGI's and
 * Ollama's differ or are missing), and the remote chat template, which no tokenize endpoint counts, is
 * covered by MESSAGE_OVERHEAD_TOKENS.
 */
export function estimateTokens(text: string): number {
  const digits = text.match(DIGITS)?.length ?? 0;
  return digits + Math.ceil((Buffer.byteLength(text, "utf8") - digits) / 3);
}

/** A context of `tokens` per request whose text is counted by estimateTokens. */
export function estimatedWindow(tokens: number): ContextWindow {
  return {
    tokens,
    counting: "estimate",
    countMessages: async (messages) =>
      messages.reduce(
        (sum, message) => sum + estimateTokens(message.content) + MESSAGE_OVERHEAD_TOKENS,
        MESSAGE_OVERHEAD_TOKENS,
      ),
    countText: estimateTokens,
  };
}
