/**
 * One JSON POST to an embedding or rerank server, and what its failures mean to our clients: a server
 * that cannot be reached, does not answer in time, or fails (5xx) makes the retriever unavailable, a
 * 503 worth retrying ("embedder unavailable: …"); a 429 is its queue being full (429 with its
 * Retry-After); an input it refuses (400, 413, 422) is a 422 carrying its message; any other 4xx (a bad
 * key, an unknown model or path) is a 502, a configuration to fix.
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

/** Characters of an error body quoted in messages. */
const QUOTED = 300;

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

/** POSTs `body` as JSON and returns the parsed answer; every failure as a DomainError (see above). */
export async function postJson(
  target: UpstreamTarget,
  body: unknown,
  signal?: AbortSignal,
): Promise<unknown> {
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
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (timeout.aborted) throw late();
    throw retrieverUnavailable(role, `${url} broke off its answer (${describe(error)})`);
  }
  if (!response.ok) {
    const status = response.status;
    const message = `${url} answered HTTP ${status}: ${upstreamMessage(text) || response.statusText}`;
    if (status === 429)
      throw new DomainError("busy", `${role} busy: ${message}`, {
        code: "rate_limited",
        retryAfter: response.headers.get("retry-after") ?? "1",
      });
    if (status >= 500) throw retrieverUnavailable(role, message);
    if (status === 400 || status === 413 || status === 422)
      throw new DomainError("unprocessable", `${role} refused the input: ${message}`);
    throw new DomainError(
      "upstream",
      `${role} refused the request (check its URL, model and key): ${message}`,
    );
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw malformedAnswer(role, url, `not JSON: ${text.slice(0, 80)}`);
  }
}
