/** Newline-delimited JSON on a hijacked reply: Ollama's streaming format, one object per line. */
import type { FastifyReply, FastifyRequest } from "fastify";
import { startStreamReply } from "../../../core/sse.js";

export interface LineStream {
  send(value: object): void;
  end(): void;
}

export function openLineStream(request: FastifyRequest, reply: FastifyReply): LineStream {
  const raw = startStreamReply(request, reply, { "content-type": "application/x-ndjson" });
  return {
    send(value) {
      if (!raw.writableEnded && !raw.destroyed) raw.write(`${JSON.stringify(value)}\n`);
    },
    end() {
      if (!raw.writableEnded) raw.end();
    },
  };
}
