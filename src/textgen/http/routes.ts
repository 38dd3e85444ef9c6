/**
 * Routes of the text generation API: health, root, tokenizer, and /predict, the contract's own dialect:
 * strict (an undeclared field is a 400; a max_length past MAX_NEW_TOKENS or the context is refused),
 * and otherwise a decoder and an encoder like the foreign ones.
 */
import { rootMessage, type TypedApp } from "../../core/http.js";
import type { GenerationEvent } from "../engine/events.js";
import type { CompletionResult } from "../engine/generator.js";
import type { TextgenService } from "../engine/service.js";
import { validateRequest, type DecodedRequest, type DialectProfile } from "../engine/validation.js";
import { noteUnenforced } from "../../core/dialect-plugin.js";
import { decodeLlamaFields } from "./dialects/llama-fields.js";
import {
  respond,
  validationLimits,
  type LimitsConfig,
  type StreamEncoder,
  type WireFrame,
} from "./dialects/run.js";
import {
  DetokenizeRequest,
  DetokenizeResponse,
  TokenizeRequest,
  TokenizeResponse,
  ErrorResponse,
  HealthResponse,
  PredictResponse,
  RootResponse,
  predictRequestSchema,
  type PredictRequest,
} from "./schemas.js";

export const SERVICE_NAME = "Text Generation";

export interface TextgenRouteDeps {
  service: TextgenService;
  /** MAX_NEW_TOKENS and SCHEMA_MAX_*. */
  limits: LimitsConfig;
}

export { clientGoneSignal } from "./dialects/run.js";

/** /predict's body in canonical names. */
export function decodePredict(body: PredictRequest): DecodedRequest {
  return { prompt: body.text, maxTokens: body.max_length, ...decodeLlamaFields(body) };
}

const predictProfile: DialectProfile = {
  defaultMaxTokens: (max) => Math.min(128, max),
  defaultTemperature: 0.8,
  clampMaxTokens: false,
  fields: { maxTokens: "/max_length", prompt: "/text", output: "/json_schema", stop: "/stop" },
  schemaPath: "/json_schema",
};

type PredictBody = ReturnType<typeof predictBody>;

function predictBody(model: string, result: CompletionResult, started: number) {
  return {
    generated_text: result.text,
    model_name: model,
    tokens_generated: result.tokensGenerated,
    finish_reason: result.finishReason === "length" ? ("length" as const) : ("stop" as const),
    prompt_tokens: result.promptTokens,
    elapsed_ms: Math.round((performance.now() - started) * 100) / 100,
  };
}

/** One event per token piece, then an event named "done" holding the whole response. */
class PredictEncoder implements StreamEncoder {
  constructor(private readonly done: (result: CompletionResult) => PredictBody) {}

  start(): WireFrame[] {
    return [];
  }

  event(event: GenerationEvent): WireFrame[] {
    if (event.type === "text-delta") return [{ data: { token: event.delta } }];
    if (event.type === "finish") return [{ event: "done", data: this.done(event.result) }];
    return [];
  }

  end(): WireFrame[] {
    return [];
  }

  error(error: Parameters<StreamEncoder["error"]>[0]): WireFrame[] {
    return [{ event: "error", data: error.toBody() }];
  }
}

export function registerTextgenRoutes(app: TypedApp, deps: TextgenRouteDeps): void {
  registerServiceRoutes(app, deps.service);
  registerTokenizerRoutes(app, deps.service);
  registerPredict(app, deps);
}

/** GET /health (readiness) and GET /. */
function registerServiceRoutes(app: TypedApp, service: TextgenService): void {
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
}

/** POST /tokenize and /detokenize on the default model. */
function registerTokenizerRoutes(app: TypedApp, service: TextgenService): void {
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
      service.checkTokenizable(content.length, "The content");
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
}

/** POST /predict: the contract's own dialect. */
function registerPredict(app: TypedApp, deps: TextgenRouteDeps): void {
  const { service } = deps;
  const limits = validationLimits(deps.limits);
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
      const validated = validateRequest(decodePredict(request.body), predictProfile, limits);
      noteUnenforced(reply, validated.unenforced);
      const target = service.resolveModel(request.body.model, "generate", {
        keepAlive: request.body.keep_alive,
      });
      const done = (result: CompletionResult) => predictBody(target.name, result, started);
      return respond({
        request,
        reply,
        model: target,
        validated,
        stream: request.body.stream === true,
        encoder: () => new PredictEncoder(done),
        whole: ([result]) => done(result!),
      });
    },
  );
}
