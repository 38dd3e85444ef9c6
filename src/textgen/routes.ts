/** Routes of the text generation API: health, root, /predict. Validation is the schemas' job. */
import type { FastifyReply, FastifyRequest } from "fastify";
import { rootMessage, type TypedApp } from "../core/http.js";
import type { CompletionRequest, Generator } from "./generator.js";
import type { Scheduler } from "./scheduler.js";
import {
  ErrorResponse,
  HealthResponse,
  PredictResponse,
  RootResponse,
  predictRequestSchema,
  stopList,
  type PredictRequest,
} from "./schemas.js";

export const SERVICE_NAME = "Text Generation";

export interface TextgenRouteDeps {
  generator: Generator;
  scheduler: Scheduler;
  maxNewTokens: number;
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

export function toCompletionRequest(body: PredictRequest): Omit<CompletionRequest, "signal" | "onText"> {
  return {
    prompt: body.text,
    maxTokens: body.max_length,
    temperature: body.temperature,
    topP: body.top_p,
    topK: body.top_k,
    minP: body.min_p,
    repeatPenalty: body.repeat_penalty,
    seed: body.seed,
    stop: stopList(body.stop),
  };
}

export function registerTextgenRoutes(app: TypedApp, deps: TextgenRouteDeps): void {
  const { generator, scheduler } = deps;

  app.get(
    "/health",
    {
      schema: {
        tags: ["service"],
        summary: "Readiness: 200 only once the model can generate",
        response: { 200: HealthResponse, 503: HealthResponse },
      },
    },
    async (_request, reply) => {
      const status = generator.status();
      if (status.state === "ready")
        return { status: "healthy" as const, model_name: generator.modelName, model_loaded: true };
      if (status.state === "loading")
        return reply.status(503).send({ status: "loading" as const, model_loaded: false });
      return reply
        .status(503)
        .send({ status: "unhealthy" as const, model_loaded: false, reason: status.reason });
    },
  );

  app.get(
    "/",
    { schema: { tags: ["service"], summary: "Service name and version", response: { 200: RootResponse } } },
    async () => rootMessage(SERVICE_NAME),
  );

  app.post(
    "/predict",
    {
      schema: {
        tags: ["generation"],
        summary: "Continue a text with the loaded model",
        body: predictRequestSchema(deps.maxNewTokens),
        response: { 200: PredictResponse, "4xx": ErrorResponse, "5xx": ErrorResponse },
      },
    },
    async (request, reply) => {
      const started = performance.now();
      const signal = clientGoneSignal(request, reply);
      const completion = toCompletionRequest(request.body);
      await generator.validate(completion);
      const result = await scheduler.run(signal, (jobSignal) =>
        generator.complete({ ...completion, signal: jobSignal }),
      );
      return {
        generated_text: result.text,
        model_name: generator.modelName,
        tokens_generated: result.tokensGenerated,
        finish_reason: result.finishReason,
        prompt_tokens: result.promptTokens,
        elapsed_ms: Math.round((performance.now() - started) * 100) / 100,
      };
    },
  );
}
