/**
 * The one internal model every dialect maps onto: a generation request (the generator's
 * `GenerationRequest`) in, and out either one result or a stream of events (text, reasoning, tool
 * call pieces, then the result with usage and finish reason). Each dialect module maps its request in
 * and these events out, and answers errors in its own shape.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { badRequest, notFound as routeNotFound, type ApiError } from "../../../core/errors.js";
import { toApiError } from "../../../core/http.js";
import { pathOf } from "../../../core/url-path.js";
import type { CompletionResult, GenerationRequest, TokenLogprob } from "../../engine/generator.js";
import type { ServedModel, TextgenService } from "../../engine/service.js";
import type { ModelRole } from "../../engine/gguf-check.js";
import type { ToolCallDelta } from "../../engine/tool-calls.js";

export type GenerationEvent =
  | { type: "text"; text: string; logprobs?: TokenLogprob[] }
  | { type: "reasoning"; text: string }
  | { type: "tool_call"; delta: ToolCallDelta };

export interface EventSink {
  /** The request holds a sequence: open the stream (until then errors are plain error responses). */
  open(): void;
  event(event: GenerationEvent): void;
  /** The whole result, after the last event, with the logprobs of text not yet sent (held back). */
  finish(result: CompletionResult, heldLogprobs: TokenLogprob[] | undefined): void;
  /** An error after `open()`, to be written into the stream. */
  fail(error: ApiError): void;
  /** Close the stream, whatever happened. */
  close(): void;
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

/**
 * The model a request names, from the registry (with one model and no registry, any name is that
 * model, as llama-server's single-model mode). Ollama's `keep_alive` says how long it stays loaded.
 */
export function resolveModel(
  service: TextgenService,
  requested?: string,
  keepAlive?: string | number,
  role: ModelRole = "generate",
): ServedModel {
  return service.resolveModel(requested, role, keepAlive === undefined ? {} : { keepAlive });
}

/** Runs one generation to its end. */
export function generateOnce(
  model: Pick<ServedModel, "run">,
  generation: GenerationRequest,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<CompletionResult> {
  return model.run(generation, clientGoneSignal(request, reply));
}

/** Runs one generation, handing its pieces to `sink` as they come. */
export async function generateStream(
  model: Pick<ServedModel, "run">,
  generation: GenerationRequest,
  request: FastifyRequest,
  reply: FastifyReply,
  sink: EventSink,
): Promise<FastifyReply> {
  const signal = clientGoneSignal(request, reply);
  let opened = false;
  const wantLogprobs = generation.logprobs !== undefined;
  let pending: TokenLogprob[] = [];
  const takeLogprobs = () => {
    if (!wantLogprobs) return undefined;
    const taken = pending;
    pending = [];
    return taken;
  };
  try {
    const result = await model.run(
      {
        ...generation,
        onLogprob: (entry) => pending.push(entry),
        onText: (text) => sink.event({ type: "text", text, logprobs: takeLogprobs() }),
        onToolCall: (delta) => sink.event({ type: "tool_call", delta }),
        onReasoning: (text) => sink.event({ type: "reasoning", text }),
      },
      signal,
      {
        onStart: () => {
          opened = true;
          sink.open();
        },
      },
    );
    sink.finish(result, takeLogprobs());
  } catch (error) {
    if (!opened) throw error;
    sink.fail(toApiError(error));
  } finally {
    if (opened) sink.close();
  }
  return reply;
}

/** A validation error for a field a dialect does not declare names the field. */
export function unknownFieldError(error: unknown): ApiError | undefined {
  const validation = (
    error as {
      validation?: { keyword?: string; instancePath?: string; params?: { additionalProperty?: string } }[];
    }
  ).validation;
  const first = validation?.[0];
  if (first?.keyword !== "additionalProperties" || !first.params?.additionalProperty) return undefined;
  const field = first.params.additionalProperty;
  const at = first.instancePath ?? "";
  const where = at === "" ? field : `${at.slice(1).replace(/\//g, ".")}.${field}`;
  return toApiError(
    badRequest(`Unsupported field "${where}": this server does not implement it (see /docs)`, [
      { path: `${at}/${field}` },
    ]),
  );
}

/**
 * Every route of a dialect's plugin answers errors (validation, auth, scheduler, unknown routes) in
 * that dialect's own shape.
 */
export function useErrorShape(
  app: FastifyInstance,
  shape: (error: ApiError) => object,
  { notFound = true }: { notFound?: boolean } = {},
): void {
  app.setErrorHandler((error, request, reply) => {
    const apiError = unknownFieldError(error) ?? toApiError(error);
    if (apiError.statusCode >= 500) request.log.error({ err: error }, "request failed");
    for (const [name, value] of Object.entries(apiError.headers)) void reply.header(name, value);
    return reply.status(apiError.statusCode).send(shape(apiError));
  });
  // One not-found handler per prefix: a dialect sharing /v1 with another leaves it to that one.
  if (!notFound) return;
  app.setNotFoundHandler((request, reply) =>
    reply
      .status(404)
      .send(shape(toApiError(routeNotFound(`No route ${request.method} ${pathOf(request.url)}; see /docs`)))),
  );
}

/** Every field is declared: one a dialect does not know is a 400 naming it, never silently ignored. */
export const strict = { additionalProperties: false } as const;

export const unixSeconds = () => Math.floor(Date.now() / 1000);
