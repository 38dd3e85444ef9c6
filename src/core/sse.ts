/**
 * Server-sent events on a Fastify reply. The reply is hijacked, so errors after the stream has started
 * are sent as an `error` event rather than through the JSON error handler.
 *
 * Events are written at once when the stream has been quiet for a while (so the first token is not
 * delayed), and otherwise gathered for up to FLUSH_INTERVAL_MS into one socket write: a generation
 * makes thousands of events a second, and one write each cost more CPU than the tokens themselves.
 * Every event is still its own `data:` block; only the TCP writes are fewer.
 */
import type { ServerResponse } from "node:http";
import type { FastifyReply, FastifyRequest } from "fastify";

export interface EventStream {
  /** Writes one event; `data` is JSON-encoded unless it is a string. */
  send(data: unknown, event?: string): void;
  end(): void;
  readonly closed: boolean;
}

/** Longest time an event waits for others to share its write; short enough to look immediate. */
export const FLUSH_INTERVAL_MS = 10;

/**
 * Takes a reply over from Fastify for a stream (SSE here, NDJSON for Ollama): 200 with the headers
 * already set on the reply (CORS, rate limits), which must survive the hijack, none of them cached or
 * buffered by a proxy, sent at once so clients see the stream open before the first token.
 */
export function startStreamReply(
  request: FastifyRequest,
  reply: FastifyReply,
  headers: Record<string, string>,
): ServerResponse {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    ...(reply.getHeaders() as Record<string, string | string[] | number>),
    ...headers,
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
    "x-request-id": String(request.id),
  });
  raw.flushHeaders?.();
  return raw;
}

export function openEventStream(request: FastifyRequest, reply: FastifyReply): EventStream {
  const raw = startStreamReply(request, reply, {
    "content-type": "text/event-stream; charset=utf-8",
    connection: "keep-alive",
  });
  let closed = false;
  let pending = "";
  let timer: NodeJS.Timeout | undefined;
  let lastWrite = 0;
  const flush = () => {
    timer = undefined;
    if (pending === "" || closed || raw.writableEnded) return;
    raw.write(pending);
    pending = "";
    lastWrite = performance.now();
  };
  raw.on("close", () => {
    closed = true;
    clearTimeout(timer);
  });
  return {
    send(data, event) {
      if (closed || raw.writableEnded) return;
      const payload = typeof data === "string" ? data : JSON.stringify(data);
      pending += `${event ? `event: ${event}\n` : ""}data: ${payload}\n\n`;
      if (timer) return;
      if (performance.now() - lastWrite >= FLUSH_INTERVAL_MS) flush();
      else timer = setTimeout(flush, FLUSH_INTERVAL_MS);
    },
    end() {
      clearTimeout(timer);
      flush();
      if (!raw.writableEnded) raw.end();
      closed = true;
    },
    get closed() {
      return closed || raw.writableEnded;
    },
  };
}
