/**
 * One JSON POST to an embedding or rerank server, and what its failures mean to our clients: a server
 * that cannot be reached, does not answer in time, or fails (5xx) makes the retriever unavailable, a
 * 503 worth retrying ("embedder unavailable: …"); a 429 is its queue being full (429 with its
 * Retry-After); an input it refuses (400, 413, 422) is a 422 carrying its message; any other 4xx (a bad
 * key, an unknown model or path) is a 502, a configuration to fix.
 *
 * Bodies are read as they arrive and counted: an answer longer than what was asked for can take (a
 * BodyLimit, derived by the caller from the batch: texts × dimension for embeddings) is cut off there
 * and is a 502 naming the server and the limit, so a server answering 700 MB costs at most the limit.
 */
import { Agent, fetch } from "undici";
import { DomainError } from "../../core/errors.js";

export type RetrieverRole = "embedder" | "reranker";

/** 503: the retriever cannot be used now; nothing that needed it was done. */
export function retrieverUnavailable(role: RetrieverRole, why: string): DomainError {
  return new DomainError("not_ready", `${role} unavailable: ${why}`, {
    code: "upstream_error",
    retryAfter: "5",
  });
}

/**
 * What an in-process model's failure means to RAG: an input it cannot take (too many tokens) is the
 * document's or the candidates' problem (422), a model that is not ready is a 503 like an unreachable
 * server, other domain errors stand; anything else is the retriever being unavailable. A client that
 * left gets its own error back.
 */
export function localModelFailure(role: RetrieverRole, error: unknown, signal?: AbortSignal): unknown {
  if (signal?.aborted) return error;
  if (error instanceof DomainError) {
    if (error.kind === "invalid")
      return new DomainError("unprocessable", `${role} refused the input: ${error.message}`);
    if (error.kind === "not_ready") return retrieverUnavailable(role, error.message);
    return error;
  }
  return retrieverUnavailable(role, (error as Error).message ?? String(error));
}

/** 502: the retriever answered, but not with what its API promises. */
export function malformedAnswer(role: RetrieverRole, url: string, why: string): DomainError {
  return new DomainError("upstream", `${role} at ${url} answered malformed JSON: ${why}`);
}

export interface UpstreamTarget {
  role: RetrieverRole;
  url: string;
  apiKey: string | null;
  timeoutMs: number;
  agent: Agent;
}

export function newAgent(): Agent {
  return new Agent({ keepAliveTimeout: 30_000, connections: 32 });
}

/** The settings of a retriever server (EMBEDDING_* or RERANK_*). */
export interface UpstreamOptions {
  /** Base URL with /v1 (Cohere's rerank: /v2), as clients take it. */
  baseUrl: string;
  /** Model asked for; null: none is sent (the server's default) and the answer's `model` is recorded. */
  model: string | null;
  apiKey: string | null;
  timeoutMs: number;
}

/** The endpoint `path` under the server's base URL, with a connection pool of its own. */
export function upstreamTarget(role: RetrieverRole, options: UpstreamOptions, path: string): UpstreamTarget {
  return {
    role,
    url: `${options.baseUrl.replace(/\/+$/, "")}/${path}`,
    apiKey: options.apiKey,
    timeoutMs: options.timeoutMs,
    agent: newAgent(),
  };
}

/** Characters of an error body quoted in messages. */
const QUOTED = 300;
/** Bytes of an error answer read (its message is quoted from them). */
const ERROR_BODY_BYTES = 64 * 1024;
/** Bytes of any answer read, whatever the batch: past it, the batch is too large (lower its setting). */
export const UPSTREAM_MAX_BODY_BYTES = 64 * 1024 * 1024;

/** The most bytes an answer may have, and what they are for (named in the 502 past them). */
export interface BodyLimit {
  maxBytes: number;
  /** What the limit allows, e.g. "64 vectors of 1024 dimensions (EMBEDDING_BATCH_SIZE)". */
  allows: string;
}

/** 502: the answer went past its limit (read no further). */
function answerTooLong(role: RetrieverRole, url: string, limit: BodyLimit): DomainError {
  return new DomainError(
    "upstream",
    `${role} at ${url} answered more than ${limit.maxBytes} bytes, the most ${limit.allows} take; it was cut off there`,
    { details: [{ upstream: url, limit: limit.maxBytes }] },
  );
}

/**
 * The body, read piece by piece as it arrives, up to `maxBytes`: `over` when it had more (the rest is
 * not read: the stream is cancelled, which closes the connection), `bytes` what came before that.
 */
async function readAtMost(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
): Promise<{ bytes: Buffer; over: boolean }> {
  if (body === null) return { bytes: Buffer.alloc(0), over: false };
  const reader = body.getReader();
  const pieces: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (total + value.byteLength > maxBytes) {
      pieces.push(value.subarray(0, maxBytes - total));
      await reader.cancel().catch(() => undefined);
      return { bytes: Buffer.concat(pieces, maxBytes), over: true };
    }
    total += value.byteLength;
    pieces.push(value);
  }
  return { bytes: Buffer.concat(pieces, total), over: false };
}

function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message ?? String(error);
}

function upstreamMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as {
      error?: { message?: unknown } | string;
      message?: unknown;
      detail?: unknown;
    };
    const message =
      typeof parsed.error === "string"
        ? parsed.error
        : (parsed.error?.message ?? parsed.message ?? parsed.detail);
    if (typeof message === "string" && message !== "") return message.slice(0, QUOTED);
  } catch {
    // not JSON: quote the text
  }
  return body.trim().slice(0, QUOTED);
}

/**
 * POSTs `body` as JSON and returns the answer's bytes, at most `limit.maxBytes` (capped at
 * UPSTREAM_MAX_BODY_BYTES); every failure as a DomainError (see above).
 */
export async function postForBody(
  target: UpstreamTarget,
  body: unknown,
  limit: BodyLimit,
  signal?: AbortSignal,
): Promise<Buffer> {
  const { role, url } = target;
  signal?.throwIfAborted();
  const timeout = AbortSignal.timeout(target.timeoutMs);
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  const late = () => retrieverUnavailable(role, `${url} did not answer within ${target.timeoutMs} ms`);
  let response;
  try {
    response = await fetch(url, {
      method: "POST",
      dispatcher: target.agent,
      signal: combined,
      headers: {
        "content-type": "application/json",
        accept: "application/json",
        ...(target.apiKey ? { authorization: `Bearer ${target.apiKey}` } : {}),
      },
      body: JSON.stringify(body),
    });
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (timeout.aborted) throw late();
    throw retrieverUnavailable(role, `${url} is unreachable (${describe(error)})`);
  }
  // An error answer's first ERROR_BODY_BYTES are enough to quote its message.
  const cap = response.ok ? Math.min(limit.maxBytes, UPSTREAM_MAX_BODY_BYTES) : ERROR_BODY_BYTES;
  let read: { bytes: Buffer; over: boolean };
  try {
    read = await readAtMost(response.body, cap);
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (timeout.aborted) throw late();
    throw retrieverUnavailable(role, `${url} broke off its answer (${describe(error)})`);
  }
  if (response.ok) {
    if (read.over) throw answerTooLong(role, url, { ...limit, maxBytes: cap });
    return read.bytes;
  }
  const status = response.status;
  const message = `${url} answered HTTP ${status}: ${upstreamMessage(read.bytes.toString("utf8")) || response.statusText}`;
  if (status === 429)
    throw new DomainError("busy", `${role} busy: ${message}`, {
      code: "rate_limited",
      retryAfter: response.headers.get("retry-after") ?? "1",
    });
  if (status >= 500) throw retrieverUnavailable(role, message);
  if (status === 400 || status === 413 || status === 422)
    throw new DomainError("unprocessable", `${role} refused the input: ${message}`);
  throw new DomainError("upstream", `${role} refused the request (check its URL, model and key): ${message}`);
}

/** The answer's bytes parsed as JSON; a 502 when they are not JSON. */
export function parseAnswer(target: UpstreamTarget, bytes: Buffer): unknown {
  const text = bytes.toString("utf8");
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw malformedAnswer(target.role, target.url, `not JSON: ${text.slice(0, 80)}`);
  }
}

/** POSTs `body` as JSON and returns the parsed answer (at most `limit.maxBytes` of it; see postForBody). */
export async function postJson(
  target: UpstreamTarget,
  body: unknown,
  limit: BodyLimit,
  signal?: AbortSignal,
): Promise<unknown> {
  return parseAnswer(target, await postForBody(target, body, limit, signal));
}
