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
import type {
  ChatMessage,
  CompletionResult,
  GenerationRequest,
  OutputConstraint,
  TokenLogprob,
  ToolCall,
  ToolChoice,
} from "./generator.js";
import { clientGoneSignal } from "./routes.js";
import { LogitBias, StopSequences, constraintFields, parseLogitBias, stopList } from "./schemas.js";
import type { ServedModel, TextgenService } from "./service.js";
import { findModelObject, modelList } from "./models-routes.js";
import type { ToolCallDelta } from "./tool-calls.js";
import { pathOf } from "../core/url-path.js";

export interface OpenAiRouteOptions {
  service: TextgenService;
  maxNewTokens: number;
  maxEmbeddingInputs: number;
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
  model: Type.Optional(
    Type.String({ description: "the model to use (GET /v1/models); the default when absent" }),
  ),
  keep_alive: Type.Optional(
    Type.Union([Type.String(), Type.Number()], {
      description: "how long the model stays loaded after this request (Ollama's)",
    }),
  ),
  temperature: Type.Number({ minimum: 0, maximum: 2, default: 1 }),
  top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  top_k: Type.Optional(
    Type.Integer({ minimum: 0, maximum: 1000, description: "0 = all tokens (llama.cpp)" }),
  ),
  min_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: "llama.cpp's min-p sampling" })),
  repeat_penalty: Type.Optional(Type.Number({ minimum: 0, maximum: 10, description: "1 = off (llama.cpp)" })),
  presence_penalty: Type.Optional(
    Type.Number({ minimum: -2, maximum: 2, description: "over the last 64 generated tokens" }),
  ),
  frequency_penalty: Type.Optional(
    Type.Number({ minimum: -2, maximum: 2, description: "over the last 64 generated tokens" }),
  ),
  seed: Type.Optional(
    Type.Integer({ minimum: -1, maximum: 4294967295, description: "-1 = random (llama.cpp's convention)" }),
  ),
  logit_bias: Type.Optional(Type.Union([LogitBias, Type.Null()])),
  ignore_eos: Type.Optional(
    Type.Boolean({
      description:
        "never draw an end-of-generation token: generate until max_tokens (llama.cpp's and vLLM's name)",
    }),
  ),
  stop: Type.Optional(Type.Union([StopSequences, Type.Null()])),
  n: Type.Integer({ minimum: 1, maximum: 1, default: 1, description: "only 1 is supported" }),
  stream: Type.Boolean({ default: false }),
  stream_options: Type.Optional(
    Type.Union([Type.Object({ include_usage: Type.Optional(Type.Boolean()) }), Type.Null()]),
  ),
  truncate: Type.Optional(
    Type.Boolean({ description: "drop tokens from the start of a prompt too long for the context" }),
  ),
  user: Type.Optional(Type.String({ description: "an end-user id, for the caller's own logs; no effect" })),
  cache_prompt: Type.Optional(
    Type.Boolean({
      description: "reuse the cached prefix of an earlier request (llama.cpp's name; default true)",
    }),
  ),
};

const ContentPart = Type.Object({ type: Type.Literal("text"), text: Type.String() });
const ToolCallSchema = Type.Object({
  id: Type.String(),
  type: Type.Optional(Type.Literal("function")),
  function: Type.Object({ name: Type.String(), arguments: Type.String() }),
});
const Message = Type.Object({
  role: Type.Union([
    Type.Literal("system"),
    Type.Literal("developer"),
    Type.Literal("user"),
    Type.Literal("assistant"),
    Type.Literal("tool"),
  ]),
  content: Type.Optional(
    Type.Union([Type.String(), Type.Array(ContentPart, { minItems: 1 }), Type.Null()], {
      description: "text, or text parts; null for an assistant message that only calls tools",
    }),
  ),
  name: Type.Optional(Type.String()),
  tool_calls: Type.Optional(Type.Array(ToolCallSchema, { description: "calls an assistant message made" })),
  tool_call_id: Type.Optional(Type.String({ description: "the call a tool message answers" })),
});

const JsonSchemaObject = Type.Record(Type.String(), Type.Unknown(), { description: "a JSON Schema" });
const ResponseFormat = Type.Union([
  Type.Object({ type: Type.Literal("text") }),
  Type.Object({ type: Type.Literal("json_object") }),
  Type.Object({
    type: Type.Literal("json_schema"),
    json_schema: Type.Object({
      name: Type.String({ maxLength: 64 }),
      description: Type.Optional(Type.String()),
      schema: Type.Optional(JsonSchemaObject),
      strict: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    }),
  }),
]);
const Tool = Type.Object({
  type: Type.Literal("function"),
  function: Type.Object({
    name: Type.String({ pattern: "^[a-zA-Z0-9_-]{1,64}$" }),
    description: Type.Optional(Type.String()),
    parameters: Type.Optional(JsonSchemaObject),
    strict: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
  }),
});
const ToolChoiceSchema = Type.Union([
  Type.Literal("auto"),
  Type.Literal("none"),
  Type.Literal("required"),
  Type.Object({ type: Type.Literal("function"), function: Type.Object({ name: Type.String() }) }),
]);

/** Every field is declared: one we do not know is a 400 naming it, never silently ignored. */
const strict = { additionalProperties: false } as const;

function chatRequestSchema(maxNewTokens: number) {
  return Type.Object(
    {
      messages: Type.Array(Message, { minItems: 1, maxItems: 1000 }),
      max_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: maxNewTokens })),
      max_completion_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: maxNewTokens })),
      response_format: Type.Optional(ResponseFormat),
      tools: Type.Optional(Type.Array(Tool, { maxItems: 128 })),
      tool_choice: Type.Optional(ToolChoiceSchema),
      parallel_tool_calls: Type.Optional(
        Type.Boolean({ description: "a forced call is always one call; auto may return several" }),
      ),
      logprobs: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
      top_logprobs: Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: 20 }), Type.Null()])),
      ...sampling,
    },
    strict,
  );
}

function completionRequestSchema(maxNewTokens: number) {
  return Type.Object(
    {
      prompt: Type.Union([
        Type.String({ minLength: 1, maxLength: 32_768 }),
        Type.Array(Type.String({ minLength: 1, maxLength: 32_768 }), { minItems: 1, maxItems: 16 }),
      ]),
      max_tokens: Type.Integer({ minimum: 1, maximum: maxNewTokens, default: Math.min(16, maxNewTokens) }),
      echo: Type.Optional(Type.Boolean({ description: "prepend the prompt to the text" })),
      logprobs: Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: 20 }), Type.Null()])),
      ...constraintFields,
      response_format: Type.Optional(ResponseFormat),
      ...sampling,
    },
    strict,
  );
}

type ChatBody = Static<ReturnType<typeof chatRequestSchema>>;
type CompletionBody = Static<ReturnType<typeof completionRequestSchema>>;

/** Chat answers default to 256 new tokens: OpenAI's "until done" would tie up a sequence too long. */
export const DEFAULT_CHAT_MAX_TOKENS = 256;

function contentText(content: ChatBody["messages"][number]["content"]): string {
  if (content === undefined || content === null) return "";
  return typeof content === "string" ? content : content.map((part) => part.text).join("");
}

function toMessages(body: ChatBody): ChatMessage[] {
  return body.messages.map((message): ChatMessage => {
    const role = message.role === "developer" ? "system" : message.role;
    const converted: ChatMessage = { role, content: contentText(message.content) };
    if (message.tool_calls?.length)
      converted.toolCalls = message.tool_calls.map((call) => ({
        id: call.id,
        name: call.function.name,
        arguments: call.function.arguments,
      }));
    if (message.tool_call_id !== undefined) converted.toolCallId = message.tool_call_id;
    return converted;
  });
}

function toConstraint(
  format: ChatBody["response_format"],
  jsonSchema?: Record<string, unknown>,
  grammar?: string,
): OutputConstraint | undefined {
  const given = [format && format.type !== "text", jsonSchema !== undefined, grammar !== undefined].filter(
    Boolean,
  );
  if (given.length > 1) throw badRequest("Give only one of response_format, json_schema and grammar");
  if (grammar !== undefined) return { type: "grammar", grammar };
  if (jsonSchema !== undefined) return { type: "json_schema", schema: jsonSchema };
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return { type: "json_object" };
  return format.json_schema.schema === undefined
    ? { type: "json_object" }
    : { type: "json_schema", schema: format.json_schema.schema };
}

function toToolChoice(choice: ChatBody["tool_choice"]): ToolChoice | undefined {
  if (choice === undefined || typeof choice === "string") return choice;
  return { name: choice.function.name };
}

/** The sampling fields both routes share, in the generator's terms. */
function samplingOf(body: ChatBody | CompletionBody) {
  return {
    temperature: body.temperature,
    topP: body.top_p,
    topK: body.top_k,
    minP: body.min_p,
    repeatPenalty: body.repeat_penalty,
    presencePenalty: body.presence_penalty,
    frequencyPenalty: body.frequency_penalty,
    // llama.cpp's convention: -1 draws a random seed.
    seed: body.seed === -1 ? undefined : body.seed,
    logitBias: parseLogitBias(body.logit_bias),
    ignoreEos: body.ignore_eos,
    stop: stopList(body.stop ?? undefined),
    truncate: body.truncate,
    cachePrompt: body.cache_prompt,
    maxTokensField: "max_tokens",
  };
}

/** OpenAI's chat logprobs entry. */
function chatLogprob(entry: TokenLogprob) {
  return {
    token: entry.text,
    logprob: entry.logprob,
    bytes: entry.bytes,
    top_logprobs: entry.top.map((top) => ({ token: top.text, logprob: top.logprob, bytes: top.bytes })),
  };
}

/** OpenAI's legacy completions logprobs object. */
function completionLogprobs(entries: TokenLogprob[], textOffset: number) {
  let offset = textOffset;
  const textOffsets: number[] = [];
  for (const entry of entries) {
    textOffsets.push(offset);
    offset += entry.text.length;
  }
  return {
    tokens: entries.map((entry) => entry.text),
    token_logprobs: entries.map((entry) => entry.logprob),
    top_logprobs: entries.map((entry) => Object.fromEntries(entry.top.map((top) => [top.text, top.logprob]))),
    text_offset: textOffsets,
  };
}

function toolCallsOf(calls: ToolCall[]) {
  return calls.map((call) => ({
    id: call.id,
    type: "function" as const,
    function: { name: call.name, arguments: call.arguments },
  }));
}

/** A validation error for a field we do not declare names the field. */
function unknownFieldError(error: unknown): ApiError | undefined {
  const validation = (
    error as { validation?: { keyword?: string; params?: { additionalProperty?: string } }[] }
  ).validation;
  const first = validation?.[0];
  if (first?.keyword !== "additionalProperties" || !first.params?.additionalProperty) return undefined;
  const field = first.params.additionalProperty;
  return badRequest(`Unsupported field "${field}": this server does not implement it (see /docs)`, [
    { path: `/${field}` },
  ]);
}

export const openAiRoutes: FastifyPluginAsync<OpenAiRouteOptions> = async (instance, options) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  const { service } = options;

  app.setErrorHandler((error, request, reply) => {
    const apiError = unknownFieldError(error) ?? toApiError(error);
    if (apiError.statusCode >= 500) request.log.error({ err: error }, "request failed");
    for (const [name, value] of Object.entries(apiError.headers)) void reply.header(name, value);
    return reply.status(apiError.statusCode).send(openAiErrorBody(apiError));
  });

  // A field sent as null means "not set" to OpenAI's API, and some clients send every field that way:
  // an undeclared null field is dropped before validation; with a value it is still a 400 naming it.
  app.addHook("preValidation", async (request) => {
    const body = request.body;
    const declared = (
      request.routeOptions.schema?.body as { properties?: Record<string, unknown> } | undefined
    )?.properties;
    if (!declared || typeof body !== "object" || body === null || Array.isArray(body)) return;
    for (const [key, value] of Object.entries(body))
      if (value === null && !(key in declared)) delete (body as Record<string, unknown>)[key];
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

  app.get("/models", { schema: { tags: ["openai"], summary: "Every model: status, role, size" } }, async () =>
    modelList(service),
  );

  app.get<{ Params: { id: string } }>(
    "/models/:id",
    {
      schema: {
        tags: ["openai"],
        summary: "One model, by id or alias",
        params: Type.Object({ id: Type.String() }),
      },
    },
    async (request) => {
      const model = findModelObject(service, request.params.id);
      if (!model)
        throw new ApiError(
          404,
          "not_found",
          `The model "${request.params.id}" does not exist; known models: ${modelList(service)
            .data.map((m) => m.id)
            .join(", ")}`,
        );
      return model;
    },
  );

  /**
   * Runs one generation, plain or streamed. `chunk` shapes a streamed piece (with the logprobs of
   * the tokens since the last one), `final` the whole answer; a stream ends with `last` (the finishing
   * chunks), the usage chunk when asked, and `[DONE]`.
   */
  async function generate(
    target: ServedModel,
    request: FastifyRequest,
    reply: FastifyReply,
    generation: GenerationRequest,
    stream: { enabled: boolean; includeUsage: boolean },
    shape: {
      chunk: (piece: string, logprobs: TokenLogprob[] | undefined) => object;
      /** `streamed`: the text and whether the calls already went out in chunks. */
      last: (
        result: CompletionResult,
        logprobs: TokenLogprob[] | undefined,
        streamed: { text: string; toolCalls: boolean },
      ) => object[];
      toolCallChunk?: (delta: ToolCallDelta) => object;
      final: (result: CompletionResult) => object;
      usageChunk: (usage: object) => object;
      first?: () => object;
    },
  ) {
    const signal = clientGoneSignal(request, reply);
    if (!stream.enabled) return shape.final(await target.run(generation, signal));
    let events: EventStream | undefined;
    const wantLogprobs = generation.logprobs !== undefined;
    let pending: TokenLogprob[] = [];
    const takePending = () => {
      if (!wantLogprobs) return undefined;
      const taken = pending;
      pending = [];
      return taken;
    };
    const streamed = { text: "", toolCalls: false };
    const toolCallChunk = shape.toolCallChunk;
    try {
      const result = await target.run(
        {
          ...generation,
          onLogprob: (entry) => pending.push(entry),
          onText: (piece) => {
            streamed.text += piece;
            events?.send(shape.chunk(piece, takePending()));
          },
          ...(toolCallChunk && {
            onToolCall: (delta: ToolCallDelta) => {
              streamed.toolCalls = true;
              events?.send(toolCallChunk(delta));
            },
          }),
        },
        signal,
        {
          onStart: () => {
            events = openEventStream(request, reply);
            if (shape.first) events.send(shape.first());
          },
        },
      );
      for (const chunk of shape.last(result, takePending(), streamed)) events?.send(chunk);
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
    prompt_tokens_details: { cached_tokens: result.cachedTokens ?? 0 },
  });

  app.post(
    "/chat/completions",
    {
      schema: {
        tags: ["openai"],
        summary: "Chat, with the model's own chat template; JSON output, tool calls, logprobs",
        body: chatRequestSchema(options.maxNewTokens),
      },
    },
    async (request, reply) => {
      const body = request.body;
      if (body.messages.every((m) => m.role === "assistant"))
        throw badRequest("messages need a user or system message");
      if (body.top_logprobs != null && body.logprobs !== true)
        throw badRequest("top_logprobs needs logprobs: true", [{ path: "/top_logprobs" }]);
      const id = `chatcmpl-${randomUUID()}`;
      const target = service.resolveModel(body.model, "generate", { keepAlive: body.keep_alive });
      const model = target.name;
      const base = () => ({ id, object: "chat.completion.chunk", created: created(), model });
      const toolsActive = (body.tools?.length ?? 0) > 0 && body.tool_choice !== "none";
      const logprobsOf = (entries: TokenLogprob[] | undefined) =>
        entries === undefined ? null : { content: entries.map(chatLogprob), refusal: null };
      const chunkOf = (delta: object, finishReason: string | null, logprobs: TokenLogprob[] | undefined) => ({
        ...base(),
        choices: [{ index: 0, delta, logprobs: logprobsOf(logprobs), finish_reason: finishReason }],
      });
      return generate(
        target,
        request,
        reply,
        {
          messages: toMessages(body),
          maxTokens:
            body.max_completion_tokens ??
            body.max_tokens ??
            Math.min(DEFAULT_CHAT_MAX_TOKENS, options.maxNewTokens),
          ...samplingOf(body),
          constraint: toConstraint(body.response_format),
          tools: body.tools?.map((tool) => ({
            name: tool.function.name,
            description: tool.function.description,
            parameters: tool.function.parameters,
          })),
          toolChoice: toToolChoice(body.tool_choice),
          logprobs: body.logprobs === true ? (body.top_logprobs ?? 0) : undefined,
        },
        { enabled: body.stream, includeUsage: body.stream_options?.include_usage === true },
        {
          first: () => chunkOf({ role: "assistant", content: "" }, null, undefined),
          chunk: (piece, logprobs) => chunkOf({ content: piece }, null, logprobs),
          toolCallChunk: (delta) =>
            chunkOf(
              {
                tool_calls: [
                  {
                    index: delta.index,
                    ...(delta.id !== undefined && { id: delta.id, type: "function" }),
                    function: {
                      ...(delta.name !== undefined && { name: delta.name }),
                      arguments: delta.arguments,
                    },
                  },
                ],
              },
              null,
              undefined,
            ),
          last: (result, logprobs, streamed) => {
            const chunks: object[] = [];
            // With tools on, text held back while it might have been a call goes out now.
            const rest =
              toolsActive && result.text.startsWith(streamed.text)
                ? result.text.slice(streamed.text.length)
                : "";
            if (rest !== "") chunks.push(chunkOf({ content: rest }, null, logprobs));
            else if (logprobs && logprobs.length > 0) chunks.push(chunkOf({}, null, logprobs));
            if (result.toolCalls && !streamed.toolCalls)
              chunks.push(
                chunkOf(
                  {
                    tool_calls: toolCallsOf(result.toolCalls).map((call, index) => ({ index, ...call })),
                  },
                  null,
                  undefined,
                ),
              );
            chunks.push(chunkOf({}, result.finishReason, undefined));
            return chunks;
          },
          usageChunk: (u) => ({ ...base(), choices: [], usage: u }),
          final: (result) => ({
            id,
            object: "chat.completion",
            created: created(),
            model,
            choices: [
              {
                index: 0,
                message: {
                  role: "assistant",
                  content: result.toolCalls && result.text === "" ? null : result.text,
                  ...(result.toolCalls ? { tool_calls: toolCallsOf(result.toolCalls) } : {}),
                },
                finish_reason: result.finishReason,
                logprobs: logprobsOf(result.logprobs),
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
        summary: "Continue a prompt (a list of prompts gives one choice each); JSON schema, GBNF, logprobs",
        body: completionRequestSchema(options.maxNewTokens),
      },
    },
    async (request, reply) => {
      const body: CompletionBody = request.body;
      const id = `cmpl-${randomUUID()}`;
      const target = service.resolveModel(body.model, "generate", { keepAlive: body.keep_alive });
      const model = target.name;
      const base = () => ({ id, object: "text_completion", created: created(), model });
      const prompts = typeof body.prompt === "string" ? [body.prompt] : body.prompt;
      const echo = body.echo === true;
      if (echo && body.logprobs != null)
        throw badRequest("echo with logprobs is not supported: the prompt's own logprobs are not computed", [
          { path: "/echo" },
        ]);
      const generation = (prompt: string): GenerationRequest => ({
        prompt,
        maxTokens: body.max_tokens,
        ...samplingOf(body),
        constraint: toConstraint(body.response_format, body.json_schema, body.grammar),
        logprobs: body.logprobs ?? undefined,
      });
      const choice = (index: number, prompt: string, result: CompletionResult) => ({
        index,
        text: echo ? prompt + result.text : result.text,
        logprobs: result.logprobs ? completionLogprobs(result.logprobs, echo ? prompt.length : 0) : null,
        finish_reason: result.finishReason,
      });
      if (prompts.length > 1) {
        if (body.stream) throw badRequest("stream needs a single prompt", [{ path: "/prompt" }]);
        const signal = clientGoneSignal(request, reply);
        // Each prompt is its own request: the scheduler runs them side by side like any others.
        const results = await Promise.all(prompts.map((prompt) => target.run(generation(prompt), signal)));
        const total = results.reduce(
          (sum, result) => ({
            promptTokens: sum.promptTokens + result.promptTokens,
            tokensGenerated: sum.tokensGenerated + result.tokensGenerated,
            cachedTokens: (sum.cachedTokens ?? 0) + (result.cachedTokens ?? 0),
          }),
          { promptTokens: 0, tokensGenerated: 0, cachedTokens: 0 },
        );
        return {
          ...base(),
          choices: results.map((result, index) => choice(index, prompts[index]!, result)),
          usage: usage({ ...total, text: "", finishReason: "stop" }),
        };
      }
      const prompt = prompts[0]!;
      let textOffset = echo ? prompt.length : 0;
      const streamLogprobs = (entries: TokenLogprob[] | undefined) => {
        if (!entries) return null;
        const converted = completionLogprobs(entries, textOffset);
        for (const entry of entries) textOffset += entry.text.length;
        return converted;
      };
      const streamChunk = (
        text: string,
        logprobs: TokenLogprob[] | undefined,
        finishReason: string | null,
      ) => ({
        ...base(),
        choices: [{ index: 0, text, logprobs: streamLogprobs(logprobs), finish_reason: finishReason }],
      });
      return generate(
        target,
        request,
        reply,
        generation(prompt),
        { enabled: body.stream, includeUsage: body.stream_options?.include_usage === true },
        {
          first: echo ? () => streamChunk(prompt, undefined, null) : undefined,
          chunk: (piece, logprobs) => streamChunk(piece, logprobs, null),
          last: (result, logprobs) => [streamChunk("", logprobs, result.finishReason)],
          usageChunk: (u) => ({ ...base(), choices: [], usage: u }),
          final: (result) => ({ ...base(), choices: [choice(0, prompt, result)], usage: usage(result) }),
        },
      );
    },
  );

  app.post(
    "/embeddings",
    {
      schema: {
        tags: ["openai"],
        summary: "Embed texts (EMBEDDING_MODEL_PATH's model, else the served model); vectors L2-normalised",
        body: Type.Object(
          {
            input: Type.Union([
              Type.String({ minLength: 1 }),
              Type.Array(Type.String({ minLength: 1 }), {
                minItems: 1,
                maxItems: options.maxEmbeddingInputs,
              }),
            ]),
            model: Type.Optional(
              Type.String({ description: "the embedding model (GET /v1/models); the default when absent" }),
            ),
            keep_alive: Type.Optional(Type.Union([Type.String(), Type.Number()])),
            encoding_format: Type.Optional(Type.Union([Type.Literal("float"), Type.Literal("base64")])),
            dimensions: Type.Optional(
              Type.Integer({ minimum: 1, description: "only the model's own size is supported" }),
            ),
            user: Type.Optional(
              Type.String({ description: "an end-user id, for the caller's own logs; no effect" }),
            ),
          },
          strict,
        ),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const inputs = typeof body.input === "string" ? [body.input] : body.input;
      const signal = clientGoneSignal(request, reply);
      const target = service.resolveModel(body.model, "embed", { keepAlive: body.keep_alive });
      const { vectors, promptTokens } = await target.embed(inputs, signal);
      const size = vectors[0]?.length ?? 0;
      if (body.dimensions !== undefined && body.dimensions !== size)
        throw badRequest(
          `dimensions ${body.dimensions} is not supported: this model's embeddings have ${size} dimensions and are not shortened`,
          [{ path: "/dimensions" }],
        );
      return {
        object: "list",
        data: vectors.map((vector, index) => ({
          object: "embedding",
          index,
          embedding:
            body.encoding_format === "base64"
              ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString("base64")
              : Array.from(vector),
        })),
        model: target.name,
        usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
      };
    },
  );
};
