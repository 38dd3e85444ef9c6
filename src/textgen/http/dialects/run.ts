/**
 * Runs a validated request and hands its events to the dialect's encoder: the only place that knows
 * how a generation meets a reply. Non-streamed, the encoder's `whole` shapes the results; streamed,
 * each event becomes the encoder's wire frames, written as server-sent events or NDJSON. The stream
 * opens only once a sequence is held (the `start` event), so a request refused before that (queue
 * full, deadline) is still a plain error response in the dialect's shape.
 *
 * `n` answers to one prompt are n sequences run side by side, each its own request to the scheduler:
 * the batcher cannot fork a sequence's KV cells (llama-native.ts exposes no llama_memory_seq_cp), so
 * the prompt is evaluated for each (the prompt cache shares it once one has finished).
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ApiError } from "../../../core/errors.js";
import { toApiError } from "../../../core/http.js";
import { openEventStream, startStreamReply } from "../../../core/sse.js";
import type { GenerationEvent } from "../../engine/events.js";
import type { CompletionResult, GenerationRequest } from "../../engine/generator.js";
import { priorityOf } from "../../../core/internal-call.js";
import type { ServedModel } from "../../engine/service.js";
import type { Config } from "../../../core/config.js";
import type { ValidatedRequest, ValidationLimits } from "../../engine/validation.js";
import { schemaBudgetOf } from "../../engine/json-schema.js";

/** One wire message: an SSE event (with its name when the dialect names them) or an NDJSON line. */
export interface WireFrame {
  event?: string;
  data: unknown;
}

/** A dialect's streaming encoder: events in, wire frames out. Pure: no I/O. */
export interface StreamEncoder {
  /** The stream opens: a sequence is held and the prompt is counted. */
  start(promptTokens: number): WireFrame[];
  /** One event of answer `choice`. */
  event(event: GenerationEvent, choice: number): WireFrame[];
  /** Every answer has finished. */
  end(results: CompletionResult[]): WireFrame[];
  /** A failure after the stream opened. */
  error(error: ApiError): WireFrame[];
}

export interface Respond<Body> {
  request: FastifyRequest;
  reply: FastifyReply;
  model: Pick<ServedModel, "run">;
  validated: ValidatedRequest;
  stream: boolean;
  transport?: "sse" | "ndjson";
  /** The streaming encoder (made per request: encoders keep the stream's state). */
  encoder: () => StreamEncoder;
  /** The non-streamed body of the results (one per choice). */
  whole: (results: CompletionResult[]) => Body;
}

/** Aborts when the client goes away before the response is written. */
export function clientGoneSignal(request: FastifyRequest, reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) controller.abort(new Error("client disconnected"));
  });
  request.raw.on("aborted", () => controller.abort(new Error("client disconnected")));
  return controller.signal;
}

export async function respond<Body>(options: Respond<Body>): Promise<Body | FastifyReply> {
  const { request, reply, model, validated } = options;
  const clientSignal = clientGoneSignal(request, reply);
  // One answer failing ends the others (their stream is ending anyway).
  const failed = new AbortController();
  const signal = AbortSignal.any([clientSignal, failed.signal]);
  const choices = Array.from({ length: validated.n }, (_, i) => i);
  const generation = withPriority(request, validated.request);
  if (!options.stream) {
    const results = await Promise.all(
      choices.map(() =>
        model.run(generation, signal).catch((error: unknown) => {
          failed.abort();
          throw error;
        }),
      ),
    );
    return options.whole(results);
  }
  const encoder = options.encoder();
  let writer: { send(frame: WireFrame): void; end(): void } | undefined;
  const write = (frames: WireFrame[]) => {
    for (const frame of frames) writer?.send(frame);
  };
  const listener = (choice: number) => (event: GenerationEvent) => {
    if (event.type === "start") {
      if (writer) return;
      writer = openWriter(request, reply, options.transport ?? "sse");
      write(encoder.start(event.promptTokens));
      return;
    }
    write(encoder.event(event, choice));
  };
  try {
    const results = await Promise.all(
      choices.map((choice) =>
        model.run(generation, signal, listener(choice)).catch((error: unknown) => {
          failed.abort();
          throw error;
        }),
      ),
    );
    write(encoder.end(results));
  } catch (error) {
    if (!writer) throw error;
    write(encoder.error(toApiError(error)));
  } finally {
    writer?.end();
  }
  return reply;
}

/** A batch line's generation runs at batch priority (core/internal-call.ts). */
export function withPriority(request: FastifyRequest, generation: GenerationRequest): GenerationRequest {
  const priority = priorityOf(request);
  return priority === "interactive" ? generation : { ...generation, priority };
}

function openWriter(request: FastifyRequest, reply: FastifyReply, transport: "sse" | "ndjson") {
  if (transport === "sse") {
    const events = openEventStream(request, reply);
    return { send: (frame: WireFrame) => events.send(frame.data, frame.event), end: () => events.end() };
  }
  const raw = startStreamReply(request, reply, { "content-type": "application/x-ndjson" });
  return {
    send: (frame: WireFrame) => {
      if (!raw.writableEnded && !raw.destroyed) raw.write(`${JSON.stringify(frame.data)}\n`);
    },
    end: () => {
      if (!raw.writableEnded) raw.end();
    },
  };
}

export { unixSeconds } from "../../../core/time.js";

/** The limits validation reads, from the configuration's. */
export type LimitsConfig = Pick<
  Config["limits"],
  | "maxNewTokens"
  | "schemaMaxDepth"
  | "schemaMaxProperties"
  | "schemaMaxEnum"
  | "schemaMaxEnumBytes"
  | "schemaMaxAlternatives"
>;

export function validationLimits(limits: LimitsConfig): ValidationLimits {
  return {
    maxNewTokens: limits.maxNewTokens,
    schemaBudget: schemaBudgetOf(limits),
  };
}
