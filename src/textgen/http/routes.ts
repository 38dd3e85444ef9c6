/**
 * Routes of the text generation API: health, root, tokenizer, and /predict, the contract's own dialect
 * (a thin adapter over dialects/common.ts like the others). Validation is the schemas' job.
 */
import { rootMessage, type TypedApp } from "../../core/http.js";
import { openEventStream, type EventStream } from "../../core/sse.js";
import { badRequest } from "../../core/errors.js";
import type { CompletionRequest, OutputConstraint } from "../engine/generator.js";
import type { Config } from "../../core/config.js";
import type { TextgenService } from "../engine/service.js";
import { generateOnce, generateStream } from "./dialects/common.js";
import {
  DetokenizeRequest,
  DetokenizeResponse,
  TokenizeRequest,
  TokenizeResponse,
  ErrorResponse,
  HealthResponse,
  PredictResponse,
  RootResponse,
  parseLogitBias,
  predictRequestSchema,
  stopList,
  type PredictRequest,
} from "./schemas.js";

export const SERVICE_NAME = "Text Generation";

export interface TextgenRouteDeps {
  service: TextgenService;
  /** MAX_NEW_TOKENS. */
  limits: Pick<Config["limits"], "maxNewTokens">;
}

export { clientGoneSignal } from "./dialects/common.js";

export function toCompletionRequest(body: PredictRequest): CompletionRequest {
  return {
    prompt: body.text,
    maxTokens: body.max_length,
    temperature: body.temperature,
    topP: body.top_p,
    topK: body.top_k,
    minP: body.min_p,
    repeatPenalty: body.repeat_penalty,
    seed: body.seed,
    logitBias: parseLogitBias(body.logit_bias),
    ignoreEos: body.ignore_eos,
    stop: stopList(body.stop),
    constraint: predictConstraint(body),
    truncate: body.truncate,
    cachePrompt: body.cache_prompt,
  };
}

function predictConstraint(body: PredictRequest): OutputConstraint | undefined {
  if (body.json_schema !== undefined && body.grammar !== undefined)
    throw badRequest("Give only one of json_schema and grammar");
  if (body.grammar !== undefined) return { type: "grammar", grammar: body.grammar };
  if (body.json_schema !== undefined) return { type: "json_schema", schema: body.json_schema };
  return undefined;
}

export function registerTextgenRoutes(app: TypedApp, deps: TextgenRouteDeps): void {
  const { service } = deps;

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
      const { status, modelName, architecture, failed } = service.health();
      // Other models that failed to load are named with their reason; the default model decides.
      const models =
        failed.length > 0
          ? { failed_models: failed.map(({ id, reason }) => ({ id, reason: reason ?? "" })) }
          : {};
      if (status.state === "ready")
        return {
          status: "healthy" as const,
          model_name: modelName,
          ...(architecture !== undefined && { model_architecture: architecture }),
          model_loaded: true,
          ...models,
        };
      if (status.state === "loading")
        return reply.status(503).send({ status: "loading" as const, model_loaded: false, ...models });
      return reply
        .status(503)
        .send({ status: "unhealthy" as const, model_loaded: false, reason: status.reason, ...models });
    },
  );

  app.get(
    "/",
    { schema: { tags: ["service"], summary: "Service name and version", response: { 200: RootResponse } } },
    async () => rootMessage(SERVICE_NAME),
  );

  /** The default model's tokenizer, or a 400 where generation is remote. */
  const tokenizer = () => service.resolveModel(undefined, "generate").tokenizer();

  app.post(
    "/tokenize",
    {
      schema: {
        tags: ["generation"],
        summary: "Text to the model's tokens (llama.cpp server's shape)",
        body: TokenizeRequest,
        response: { 200: TokenizeResponse, "4xx": ErrorResponse, "5xx": ErrorResponse },
      },
    },
    async (request) => {
      const { content, add_special, with_pieces } = request.body;
      const model = await tokenizer();
      const tokens = model.tokenize(content, add_special);
      return { tokens: with_pieces ? tokens.map((id) => ({ id, piece: model.piece(id) })) : tokens };
    },
  );

  app.post(
    "/detokenize",
    {
      schema: {
        tags: ["generation"],
        summary: "The model's tokens to text (llama.cpp server's shape)",
        body: DetokenizeRequest,
        response: { 200: DetokenizeResponse, "4xx": ErrorResponse, "5xx": ErrorResponse },
      },
    },
    async (request) => ({ content: (await tokenizer()).detokenize(request.body.tokens) }),
  );

  app.post(
    "/predict",
    {
      schema: {
        tags: ["generation"],
        summary: "Continue a text with the loaded model",
        body: predictRequestSchema(deps.limits.maxNewTokens),
        response: { 200: PredictResponse, "4xx": ErrorResponse, "5xx": ErrorResponse },
      },
    },
    async (request, reply) => {
      const started = performance.now();
      const completion = toCompletionRequest(request.body);
      const target = service.resolveModel(request.body.model, "generate", {
        keepAlive: request.body.keep_alive,
      });
      const respond = (result: Awaited<ReturnType<TextgenService["run"]>>) => ({
        generated_text: result.text,
        model_name: target.name,
        tokens_generated: result.tokensGenerated,
        finish_reason: result.finishReason === "length" ? ("length" as const) : ("stop" as const),
        prompt_tokens: result.promptTokens,
        elapsed_ms: Math.round((performance.now() - started) * 100) / 100,
      });
      if (!request.body.stream) return respond(await generateOnce(target, completion, request, reply));

      // Stream: one event per token piece, then an event named "done" holding the whole response.
      let stream: EventStream | undefined;
      return generateStream(target, completion, request, reply, {
        open: () => {
          stream = openEventStream(request, reply);
        },
        event: (event) => {
          if (event.type === "text") stream?.send({ token: event.text });
        },
        finish: (result) => stream?.send(respond(result), "done"),
        fail: (error) => stream?.send(error.toBody(), "error"),
        close: () => stream?.end(),
      });
    },
  );
}
