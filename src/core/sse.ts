/**
 * Server-sent events on a Fastify reply. The reply is hijacked, so errors after the stream has started
 * are sent as an `error` event rather than through the JSON error handler.
 */
import type { FastifyReply, FastifyRequest } from "fastify";

export interface EventStream {
  /** Writes one event; `data` is JSON-encoded unless it is a string. */
  send(data: unknown, event?: string): void;
  end(): void;
  readonly closed: boolean;
}

export function openEventStream(request: FastifyRequest, reply: FastifyReply): EventStream {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    // Headers already set on the reply (CORS, rate limits) must survive the hijack.
    ...(reply.getHeaders() as Record<string, string | string[] | number>),
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    connection: "keep-alive",
    "x-accel-buffering": "no",
    "x-request-id": String(request.id),
  });
  // Flush headers now so clients see the stream open before the first token.
  raw.flushHeaders?.();
  let closed = false;
  raw.on("close", () => {
    closed = true;
  });
  return {
    send(data, event) {
      if (closed || raw.writableEnded) return;
      const payload = typeof data === "string" ? data : JSON.stringify(data);
      raw.write(`${event ? `event: ${event}\n` : ""}data: ${payload}\n\n`);
    },
    end() {
      if (!raw.writableEnded) raw.end();
      closed = true;
    },
    get closed() {
      return closed || raw.writableEnded;
    },
  };
}
