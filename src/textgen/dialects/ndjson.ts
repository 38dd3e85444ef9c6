/** Newline-delimited JSON on a hijacked reply: Ollama's streaming format, one object per line. */
import type { FastifyReply, FastifyRequest } from "fastify";

export interface LineStream {
  send(value: object): void;
  end(): void;
}

export function openLineStream(request: FastifyRequest, reply: FastifyReply): LineStream {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    // Headers already set on the reply (CORS, rate limits) must survive the hijack.
    ...(reply.getHeaders() as Record<string, string | string[] | number>),
    "content-type": "application/x-ndjson",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
    "x-request-id": String(request.id),
  });
  raw.flushHeaders?.();
  return {
    send(value) {
      if (!raw.writableEnded && !raw.destroyed) raw.write(`${JSON.stringify(value)}\n`);
    },
    end() {
      if (!raw.writableEnded) raw.end();
    },
  };
}
