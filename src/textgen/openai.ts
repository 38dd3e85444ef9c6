/**
 * OpenAI-compatible routes under /v1, for the official `openai` client and everything built on it.
 * This plugin is encapsulated so its error handler answers in OpenAI's error shape while the rest of
 * the app keeps the contract's shape.
 */
import { randomUUID } from "node:crypto";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type, type Static } from "typebox";
import { ApiError, badRequest } from "../core/errors.js";
import { toApiError } from "../core/http.js";
import { openEventStream, type EventStream } from "../core/sse.js";
import type { ChatMessage, CompletionResult, GenerationRequest } from "./generator.js";
import { clientGoneSignal } from "./routes.js";
import { StopSequences, stopList } from "./schemas.js";
import type { TextgenService } from "./service.js";
import { pathOf } from "../core/url-path.js";

export interface OpenAiRouteOptions {
  service: TextgenService;
  maxNewTokens: number;
}

const typeByStatus: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  409: "invalid_request_error",
  413: "invalid_request_error",
  429: "rate_limit_error",
};

export function openAiErrorBody(error: ApiError) {
  const details = error.details[0] as { path?: string } | undefined;
  return {
    error: {
      message: error.message,
      type:
        typeByStatus[error.statusCode] ??
        (error.statusCode >= 500 ? "server_error" : "invalid_request_error"),
      param: details?.path ? details.path.replace(/^\//, "").replace(/\//g, ".") : null,
      code: error.code,
    },
  };
}

const sampling = {
  model: Type.Optional(Type.String({ description: "accepted for compatibility; the loaded model answers" })),
  temperature: Type.Number({ minimum: 0, maximum: 2, default: 1 }),
  top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  seed: Type.Optional(Type.Integer({ minimum: 0, maximum: 4294967295 })),
  stop: Type.Optional(Type.Union([StopSequences, Type.Null()])),
  n: Type.Integer({ minimum: 1, maximum: 1, default: 1, description: "only 1 is supported" }),
  stream: Type.Boolean({ default: false }),
  stream_options: Type.Optional(
    Type.Union([Type.Object({ include_usage: Type.Optional(Type.Boolean()) }), Type.Null()]),
  ),
};

const ContentPart = Type.Object({ type: Type.Literal("text"), text: Type.String() });
const Message = Type.Object({
  role: Type.Union([
    Type.Literal("system"),
    Type.Literal("developer"),
    Type.Literal("user"),
    Type.Literal("assistant"),
  ]),
  content: Type.Union([Type.String(), Type.Array(ContentPart, { minItems: 1 })]),
  name: Type.Optional(Type.String()),
});

function chatRequestSchema(maxNewTokens: number) {
  return Type.Object({
    messages: Type.Array(Message, { minItems: 1, maxItems: 1000 }),
    max_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: maxNewTokens })),
    max_completion_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: maxNewTokens })),
    ...sampling,
  });
}

function completionRequestSchema(maxNewTokens: number) {
  return Type.Object({
    prompt: Type.Union([
      Type.String({ minLength: 1, maxLength: 32_768 }),
      Type.Array(Type.String({ minLength: 1, maxLength: 32_768 }), { minItems: 1, maxItems: 1 }),
    ]),
    max_tokens: Type.Integer({ minimum: 1, maximum: maxNewTokens, default: Math.min(16, maxNewTokens) }),
    ...sampling,
  });
}

type ChatBody = Static<ReturnType<typeof chatRequestSchema>>;
type CompletionBody = Static<ReturnType<typeof completionRequestSchema>>;

/** Chat answers default to 256 new tokens: OpenAI's "until done" would tie up a sequence too long. */
export const DEFAULT_CHAT_MAX_TOKENS = 256;

function toMessages(body: ChatBody): ChatMessage[] {
  return body.messages.map((message) => ({
    role: message.role === "developer" ? "system" : message.role,
    content:
      typeof message.content === "string" ? message.content : message.content.map((p) => p.text).join(""),
  }));
}

export const openAiRoutes: FastifyPluginAsync<OpenAiRouteOptions> = async (instance, options) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  const { service } = options;

  app.setErrorHandler((error, request, reply) => {
    const apiError = toApiError(error);
    if (apiError.statusCode >= 500) request.log.error({ err: error }, "request failed");
    for (const [name, value] of Object.entries(apiError.headers)) void reply.header(name, value);
    return reply.status(apiError.statusCode).send(openAiErrorBody(apiError));
  });

  app.setNotFoundHandler((request, reply) =>
    reply
      .status(404)
      .send(
        openAiErrorBody(
          new ApiError(404, "not_found", `No route ${request.method} ${pathOf(request.url)}; see /docs`),
        ),
      ),
  );

  const created = () => Math.floor(Date.now() / 1000);

  app.get("/models", { schema: { tags: ["openai"], summary: "The served model" } }, async () => ({
    object: "list",
    data: [{ id: service.generator.modelName, object: "model", created: created(), owned_by: "lectern" }],
  }));

  /**
   * Runs one generation, plain or streamed. `chunk` shapes a streamed piece, `final` the whole answer;
   * a stream ends with the finishing chunk, the usage chunk when asked, and `[DONE]`.
   */
  async function generate(
    request: FastifyRequest,
    reply: FastifyReply,
    generation: GenerationRequest,
    stream: { enabled: boolean; includeUsage: boolean },
    shape: {
      chunk: (piece: string | null, finishReason: string | null) => object;
      final: (result: CompletionResult) => object;
      usageChunk: (usage: object) => object;
      first?: () => object;
    },
  ) {
    const signal = clientGoneSignal(request, reply);
    if (!stream.enabled) return shape.final(await service.run(generation, signal));
    let events: EventStream | undefined;
    try {
      const result = await service.run(
        { ...generation, onText: (piece) => events?.send(shape.chunk(piece, null)) },
        signal,
        {
          onStart: () => {
            events = openEventStream(request, reply);
            if (shape.first) events.send(shape.first());
          },
        },
      );
      events?.send(shape.chunk(null, result.finishReason));
      if (stream.includeUsage) events?.send(shape.usageChunk(usage(result)));
      events?.send("[DONE]");
    } catch (error) {
      if (!events) throw error;
      events.send(openAiErrorBody(toApiError(error)));
    } finally {
      events?.end();
    }
    return reply;
  }

  const usage = (result: CompletionResult) => ({
    prompt_tokens: result.promptTokens,
    completion_tokens: result.tokensGenerated,
    total_tokens: result.promptTokens + result.tokensGenerated,
  });

  app.post(
    "/chat/completions",
    {
      schema: {
        tags: ["openai"],
        summary: "Chat, with the model's own chat template",
        body: chatRequestSchema(options.maxNewTokens),
      },
    },
    async (request, reply) => {
      const body = request.body;
      if (body.messages.every((m) => m.role === "assistant"))
        throw badRequest("messages need a user or system message");
      const id = `chatcmpl-${randomUUID()}`;
      const model = service.generator.modelName;
      const base = () => ({ id, object: "chat.completion.chunk", created: created(), model });
      return generate(
        request,
        reply,
        {
          messages: toMessages(body),
          maxTokens:
            body.max_completion_tokens ??
            body.max_tokens ??
            Math.min(DEFAULT_CHAT_MAX_TOKENS, options.maxNewTokens),
          temperature: body.temperature,
          topP: body.top_p,
          seed: body.seed,
          stop: stopList(body.stop ?? undefined),
        },
        { enabled: body.stream, includeUsage: body.stream_options?.include_usage === true },
        {
          first: () => ({
            ...base(),
            choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }],
          }),
          chunk: (piece, finishReason) => ({
            ...base(),
            choices: [
              { index: 0, delta: piece === null ? {} : { content: piece }, finish_reason: finishReason },
            ],
          }),
          usageChunk: (u) => ({ ...base(), choices: [], usage: u }),
          final: (result) => ({
            id,
            object: "chat.completion",
            created: created(),
            model,
            choices: [
              {
                index: 0,
                message: { role: "assistant", content: result.text },
                finish_reason: result.finishReason,
                logprobs: null,
              },
            ],
            usage: usage(result),
          }),
        },
      );
    },
  );

  app.post(
    "/completions",
    {
      schema: {
        tags: ["openai"],
        summary: "Continue a prompt",
        body: completionRequestSchema(options.maxNewTokens),
      },
    },
    async (request, reply) => {
      const body: CompletionBody = request.body;
      const id = `cmpl-${randomUUID()}`;
      const model = service.generator.modelName;
      const base = () => ({ id, object: "text_completion", created: created(), model });
      return generate(
        request,
        reply,
        {
          prompt: typeof body.prompt === "string" ? body.prompt : body.prompt[0]!,
          maxTokens: body.max_tokens,
          temperature: body.temperature,
          topP: body.top_p,
          seed: body.seed,
          stop: stopList(body.stop ?? undefined),
        },
        { enabled: body.stream, includeUsage: body.stream_options?.include_usage === true },
        {
          chunk: (piece, finishReason) => ({
            ...base(),
            choices: [{ index: 0, text: piece ?? "", logprobs: null, finish_reason: finishReason }],
          }),
          usageChunk: (u) => ({ ...base(), choices: [], usage: u }),
          final: (result) => ({
            ...base(),
            choices: [{ index: 0, text: result.text, logprobs: null, finish_reason: result.finishReason }],
            usage: usage(result),
          }),
        },
      );
    },
  );
};
