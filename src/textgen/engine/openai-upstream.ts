/**
 * A Generator that forwards to another OpenAI-compatible server (vLLM, TGI, the llama.cpp server,
 * Ollama, or another Lectern). The text generation app serves from it when GENERATION_UPSTREAM_URL is
 * set, and the RAG app writes generative answers through it. Requests always stream upstream, so
 * pieces reach our clients as they arrive and an abort stops the upstream generation too.
 */
import { Agent, fetch, type Response } from "undici";
import { badRequest, DomainError } from "../../core/errors.js";
import { EventWriter, type EventListener } from "./events.js";
import {
  isChatRequest,
  type ChatMessage,
  type CompletionResult,
  type GenerationRequest,
  type Generator,
  type GeneratorStatus,
} from "./generator.js";

export interface UpstreamOptions {
  /** Base URL including /v1, as OpenAI clients take it. */
  baseUrl: string;
  /** Model id to request; discovered from GET /models when not given. */
  model?: string | null;
  /** Limit for one whole generation, including the wait for the first byte. */
  timeoutMs?: number;
  /** How often to retry discovery while the upstream is unreachable. */
  retryMs?: number;
  apiKey?: string | null;
}

interface StreamChunk {
  choices?: Array<{ text?: string; delta?: { content?: string | null }; finish_reason?: string | null }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  error?: { message?: string };
}

export class OpenAIUpstreamGenerator implements Generator {
  modelName: string;
  private state: GeneratorStatus = { state: "loading" };
  private readonly agent = new Agent({ keepAliveTimeout: 30_000, connections: 128 });
  private retryTimer?: NodeJS.Timeout;
  private closed = false;
  private keepRetrying = false;
  private discovery?: Promise<void>;

  constructor(private readonly options: UpstreamOptions) {
    this.modelName = options.model ?? "upstream";
  }

  /** Starts discovery in the background and keeps retrying while the upstream is down. */
  start(): this {
    this.keepRetrying = true;
    void this.discover();
    return this;
  }

  status(): GeneratorStatus {
    return this.state;
  }

  /** Resolves when the first discovery attempt has finished, well or not. */
  ready(): Promise<void> {
    return this.discovery ?? this.discover();
  }

  private discover(): Promise<void> {
    this.discovery = (async () => {
      try {
        const limit = Math.min(10_000, this.options.timeoutMs ?? 10_000);
        const response = await this.request("GET", "/models", undefined, AbortSignal.timeout(limit));
        const body = (await response.json()) as { data?: Array<{ id?: string }> };
        const first = body.data?.[0]?.id;
        if (!this.options.model && first) this.modelName = first;
        this.state = { state: "ready" };
      } catch (error) {
        const reason =
          error instanceof DomainError
            ? error.message
            : `upstream ${this.options.baseUrl}: ${describe(error)}`;
        this.state = { state: "unhealthy", reason };
        if (!this.closed && this.keepRetrying) {
          this.retryTimer = setTimeout(() => void this.discover(), this.options.retryMs ?? 5000);
          this.retryTimer.unref();
        }
      }
    })();
    return this.discovery;
  }

  /**
   * The upstream checks its own context limits; nothing to count here. Features that run inside our
   * own batcher are refused rather than dropped on the way.
   */
  async validate(request: GenerationRequest): Promise<number> {
    const unsupported = [
      request.constraint && "response_format / json_schema / grammar",
      isChatRequest(request) && request.tools?.length && "tools",
      request.logprobs !== undefined && "logprobs",
      request.truncate && "truncate",
    ].filter(Boolean);
    if (unsupported.length > 0)
      throw badRequest(
        `${unsupported.join(", ")}: not supported when generation is forwarded to GENERATION_UPSTREAM_URL`,
      );
    return 0;
  }

  async generate(request: GenerationRequest, listener?: EventListener): Promise<CompletionResult> {
    // The model id is needed only when none was configured; then discovery must have worked.
    if (!this.options.model && this.state.state !== "ready") {
      await this.discover();
      if (this.state.state === "unhealthy") throw new DomainError("upstream", this.state.reason);
    }
    const timeout = AbortSignal.timeout(this.options.timeoutMs ?? 120_000);
    const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
    const common = {
      model: this.modelName,
      max_tokens: request.maxTokens,
      temperature: request.temperature,
      top_p: request.topP,
      // Not in OpenAI's API, but vLLM, TGI's, llama.cpp's and our own servers read or ignore them.
      top_k: request.topK,
      min_p: request.minP,
      repeat_penalty: request.repeatPenalty,
      seed: request.seed,
      logit_bias: request.logitBias ? Object.fromEntries(request.logitBias) : undefined,
      ignore_eos: request.ignoreEos,
      stop: request.stop.length > 0 ? request.stop : undefined,
      stream: true,
      stream_options: { include_usage: true },
    };
    const chat = isChatRequest(request);
    const body = chat
      ? { ...common, messages: request.messages.map(toOpenAiMessage) }
      : { ...common, prompt: request.prompt };

    const writer = new EventWriter(listener);
    let pieces = 0;
    let finishReason: string | null = null;
    let usage: StreamChunk["usage"] = null;
    try {
      const response = await this.request("POST", chat ? "/chat/completions" : "/completions", body, signal);
      for await (const data of readEvents(response)) {
        if (data === "[DONE]") break;
        const chunk = JSON.parse(data) as StreamChunk;
        if (chunk.error)
          throw new DomainError("upstream", `Upstream error: ${chunk.error.message ?? "unknown"}`);
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices?.[0];
        const piece = (chat ? choice?.delta?.content : choice?.text) ?? "";
        if (piece) {
          pieces++;
          request.onTokens?.(1);
          writer.text(piece);
        }
        if (choice?.finish_reason) finishReason = choice.finish_reason;
      }
    } catch (error) {
      if (request.signal?.aborted) finishReason = "length";
      else if (timeout.aborted) {
        throw new DomainError(
          "timeout",
          `Upstream ${this.options.baseUrl} did not finish within ${this.options.timeoutMs ?? 120_000} ms`,
        );
      } else throw error;
    }
    return writer.finish({
      finishReason: finishReason === "length" ? "length" : "stop",
      tokensGenerated: usage?.completion_tokens ?? pieces,
      promptTokens: usage?.prompt_tokens ?? 0,
    });
  }

  private async request(method: string, path: string, body: unknown, signal: AbortSignal): Promise<Response> {
    let response: Response;
    try {
      response = await fetch(`${this.options.baseUrl}${path}`, {
        method,
        dispatcher: this.agent,
        signal,
        headers: {
          "content-type": "application/json",
          accept: method === "GET" ? "application/json" : "text/event-stream",
          ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      if (signal.aborted) throw error;
      throw new DomainError("upstream", `Upstream ${this.options.baseUrl} unreachable: ${describe(error)}`);
    }
    if (!response.ok) {
      const detail = await response.text().catch(() => "");
      const message = extractMessage(detail) ?? `HTTP ${response.status}`;
      const retryAfter = response.headers.get("retry-after") ?? "1";
      if (response.status === 429) {
        throw new DomainError("busy", `Upstream busy: ${message}`, { code: "rate_limited", retryAfter });
      }
      // 503 is "not ready" (a model still loading, or failed to load), not "busy": say which.
      if (response.status === 503) {
        throw new DomainError("not_ready", `Upstream model not ready: ${message}`, {
          code: "model_not_ready",
          retryAfter,
        });
      }
      if (response.status >= 400 && response.status < 500) {
        throw badRequest(`Upstream rejected the request: ${message}`);
      }
      throw new DomainError("upstream", `Upstream failed: ${message}`);
    }
    return response;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    await this.agent.close();
  }
}

/** Our chat message in OpenAI's wire shape (tool calls and tool results included). */
function toOpenAiMessage(message: ChatMessage) {
  return {
    role: message.role,
    content: message.toolCalls?.length && message.content === "" ? null : message.content,
    ...(message.toolCalls?.length
      ? {
          tool_calls: message.toolCalls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          })),
        }
      : {}),
    ...(message.toolCallId !== undefined ? { tool_call_id: message.toolCallId } : {}),
  };
}

/** Yields the `data:` payloads of a server-sent event stream. */
async function* readEvents(response: Response): AsyncGenerator<string> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes as Uint8Array, { stream: true });
    let boundary: number;
    while ((boundary = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const event = buffer.slice(0, boundary);
      buffer = buffer.slice(boundary).replace(/^\r?\n\r?\n/, "");
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data) yield data;
    }
  }
}

function extractMessage(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: string } | string; message?: string };
    if (typeof parsed.error === "string") return parsed.error;
    return parsed.error?.message ?? parsed.message;
  } catch {
    return body.slice(0, 300) || undefined;
  }
}

function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
}
