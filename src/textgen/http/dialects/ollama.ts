/**
 * The Ollama API on the text generation port (`/api/*`), for ollama-js, Open WebUI, Continue,
 * LangChain's ChatOllama and the rest. Streams NDJSON by default; errors are `{"error":"…"}` strings.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type, type Static } from "typebox";
import { badRequest, type ApiError } from "../../../core/errors.js";
import type { TypedApp } from "../../../core/http.js";
import { VERSION } from "../../../core/version.js";
import type { Config } from "../../../core/config.js";
import { parseJsonText } from "../../../core/json-body.js";
import type { ChatMessage, CompletionResult, GenerationRequest } from "../../engine/generator.js";
import type { ModelRole } from "../../engine/gguf-check.js";
import type { ServedModel, TextgenService } from "../../engine/service.js";
import { newToolCallId } from "../../engine/tool-calls.js";
import {
  clientGoneSignal,
  generateOnce,
  generateStream,
  resolveModel,
  strict,
  useErrorShape,
} from "./common.js";
import { parseArgumentsObject } from "./json-partial.js";
import type { CatalogModel, ModelCatalog } from "./model-catalog.js";
import { modelNameFields, namedModel, registerOllamaModelManagement } from "./ollama-models.js";
import { openLineStream, type LineStream } from "./ndjson.js";
import { DEFAULT_CHAT_MAX_TOKENS, JsonSchemaObject } from "./openai-shared.js";

export const ollamaErrorBody = (error: ApiError) => ({ error: error.message });

const Options = Type.Object(
  {
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2 })),
    top_k: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    min_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    seed: Type.Optional(Type.Integer({ minimum: -1, maximum: 4294967295 })),
    stop: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 512 }), { maxItems: 16 })),
    num_predict: Type.Optional(Type.Integer({ minimum: -2, description: "-1/-2: up to the server's limit" })),
    repeat_penalty: Type.Optional(Type.Number({ minimum: 0, maximum: 10 })),
    presence_penalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2 })),
    frequency_penalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2 })),
    num_ctx: Type.Optional(
      Type.Integer({ minimum: 1, description: "accepted; the server's context size per request applies" }),
    ),
  },
  strict,
);
const keepAlive = Type.Optional(
  Type.Union([Type.String(), Type.Number()], {
    description:
      "how long the model stays loaded after this request: a duration or seconds; 0 unloads, -1 keeps",
  }),
);
const Format = Type.Optional(Type.Union([Type.Literal("json"), Type.Literal(""), JsonSchemaObject]));
const Think = Type.Optional(
  Type.Union([Type.Boolean(), Type.Literal("low"), Type.Literal("medium"), Type.Literal("high")]),
);
const ToolCall = Type.Object(
  {
    id: Type.Optional(Type.String()),
    type: Type.Optional(Type.Literal("function")),
    function: Type.Object(
      {
        name: Type.String(),
        arguments: Type.Record(Type.String(), Type.Unknown()),
        index: Type.Optional(Type.Integer()),
      },
      strict,
    ),
  },
  strict,
);
const Message = Type.Object(
  {
    role: Type.Union([
      Type.Literal("system"),
      Type.Literal("user"),
      Type.Literal("assistant"),
      Type.Literal("tool"),
    ]),
    content: Type.String(),
    thinking: Type.Optional(Type.String({ description: "earlier reasoning; not shown to the model" })),
    images: Type.Optional(Type.Array(Type.String(), { maxItems: 0, description: "not supported" })),
    tool_calls: Type.Optional(Type.Array(ToolCall)),
    tool_name: Type.Optional(Type.String()),
    tool_call_id: Type.Optional(Type.String()),
  },
  strict,
);
const Tool = Type.Object(
  {
    type: Type.Literal("function"),
    function: Type.Object(
      {
        name: Type.String({ pattern: "^[a-zA-Z0-9_-]{1,64}$" }),
        description: Type.Optional(Type.String()),
        parameters: Type.Optional(JsonSchemaObject),
      },
      strict,
    ),
  },
  strict,
);
const generationFields = {
  model: Type.String({ minLength: 1 }),
  format: Format,
  options: Type.Optional(Options),
  stream: Type.Optional(Type.Boolean({ default: true })),
  keep_alive: keepAlive,
  think: Think,
};
const ChatBody = Type.Object(
  {
    ...generationFields,
    messages: Type.Array(Message, { maxItems: 1000 }),
    tools: Type.Optional(Type.Array(Tool, { maxItems: 128 })),
  },
  strict,
);
const GenerateBody = Type.Object(
  {
    ...generationFields,
    prompt: Type.Optional(Type.String({ maxLength: 32_768 })),
    system: Type.Optional(Type.String()),
    raw: Type.Optional(Type.Boolean({ description: "the prompt as it stands, without the chat template" })),
    suffix: Type.Optional(Type.String({ maxLength: 0, description: "fill-in-the-middle is not supported" })),
    images: Type.Optional(Type.Array(Type.String(), { maxItems: 0, description: "not supported" })),
  },
  strict,
);
/** The model a request names; `name:latest` is `name`, as in Ollama (its clients add the tag). */
function ollamaModel(
  service: TextgenService,
  name: string,
  keepAlive: string | number | undefined,
  role?: ModelRole,
): ServedModel {
  const known = service.models.find(name) !== undefined || !name.endsWith(":latest");
  return resolveModel(service, known ? name : name.slice(0, -":latest".length), keepAlive, role);
}

type OptionsValue = Static<typeof Options> | undefined;

export interface OllamaRouteOptions {
  service: TextgenService;
  catalog: ModelCatalog;
  /** MAX_NEW_TOKENS and EMBEDDING_MAX_INPUTS. */
  limits: Pick<Config["limits"], "maxNewTokens" | "embeddingMaxInputs" | "maxJsonDepth">;
}

/** Ollama's `options` and `format` in the generator's terms. */
function controlsOf(options: OptionsValue, format: Static<typeof Format> | undefined, maxNewTokens: number) {
  const predict = options?.num_predict;
  return {
    maxTokens:
      predict === undefined
        ? Math.min(DEFAULT_CHAT_MAX_TOKENS, maxNewTokens)
        : predict < 0
          ? maxNewTokens
          : Math.min(Math.max(predict, 1), maxNewTokens),
    temperature: options?.temperature ?? 0.8,
    topK: options?.top_k,
    topP: options?.top_p,
    minP: options?.min_p,
    seed: options?.seed === undefined || options.seed === -1 ? undefined : options.seed,
    stop: options?.stop ?? [],
    repeatPenalty: options?.repeat_penalty,
    presencePenalty: options?.presence_penalty,
    frequencyPenalty: options?.frequency_penalty,
    maxTokensField: "options.num_predict",
    constraint:
      format === undefined || format === ""
        ? undefined
        : format === "json"
          ? ({ type: "json_object" } as const)
          : ({ type: "json_schema", schema: format } as const),
  };
}

/** Ollama's history has no call ids: each tool message answers the next unanswered call (by name first). */
function toMessages(messages: Static<typeof Message>[]): ChatMessage[] {
  const unanswered: { id: string; name: string }[] = [];
  return messages.map((message): ChatMessage => {
    if (message.role === "assistant") {
      const calls = (message.tool_calls ?? []).map((call) => ({
        id: call.id ?? newToolCallId(),
        name: call.function.name,
        arguments: JSON.stringify(call.function.arguments),
      }));
      unanswered.push(...calls);
      return { role: "assistant", content: message.content, ...(calls.length > 0 && { toolCalls: calls }) };
    }
    if (message.role === "tool") {
      let at = unanswered.findIndex(
        (call) =>
          call.id === message.tool_call_id ||
          (message.tool_name !== undefined && call.name === message.tool_name),
      );
      if (at === -1 && unanswered.length > 0) at = 0;
      const call = at === -1 ? undefined : unanswered.splice(at, 1)[0];
      return { role: "tool", content: message.content, toolCallId: call?.id };
    }
    return { role: message.role, content: message.content };
  });
}

const nanoseconds = (ms: number) => Math.round(ms * 1e6);

/** Ollama's closing statistics (durations in nanoseconds). */
function statsOf(result: CompletionResult, started: number) {
  const total = performance.now() - started;
  return {
    done_reason: result.finishReason === "length" ? "length" : "stop",
    total_duration: nanoseconds(total),
    load_duration: 0,
    prompt_eval_count: result.promptTokens,
    prompt_eval_duration: 0,
    eval_count: result.tokensGenerated,
    eval_duration: nanoseconds(total),
  };
}

function toolCallsOf(result: CompletionResult) {
  return result.toolCalls?.map((call, index) => ({
    id: call.id,
    function: { index, name: call.name, arguments: parseArgumentsObject(call.arguments) },
  }));
}

function modelEntry(model: CatalogModel) {
  return {
    name: model.name,
    model: model.name,
    modified_at: model.modifiedAt.toISOString(),
    size: model.size,
    digest: model.digest,
  };
}

/** One generation, as one JSON object or NDJSON lines (`line` shapes a piece, `last` the end). */
async function respond(
  target: Pick<ServedModel, "run">,
  request: FastifyRequest,
  reply: FastifyReply,
  generation: GenerationRequest,
  stream: boolean,
  shape: {
    piece: (text: string, thinking: boolean) => object;
    calls: (result: CompletionResult) => object | undefined;
    last: (result: CompletionResult, streamed: string) => object;
    whole: (result: CompletionResult) => object;
  },
) {
  if (!stream) return shape.whole(await generateOnce(target, generation, request, reply));
  let lines: LineStream | undefined;
  let streamed = "";
  return generateStream(target, generation, request, reply, {
    open: () => {
      lines = openLineStream(request, reply);
    },
    event: (event) => {
      if (event.type === "text") {
        streamed += event.text;
        lines?.send(shape.piece(event.text, false));
      } else if (event.type === "reasoning") lines?.send(shape.piece(event.text, true));
    },
    finish: (result) => {
      const calls = shape.calls(result);
      if (calls) lines?.send(calls);
      lines?.send(shape.last(result, streamed));
    },
    fail: (error) => lines?.send(ollamaErrorBody(error)),
    close: () => lines?.end(),
  });
}

/** Ollama's `details` of a model. */
async function detailsOf(catalog: ModelCatalog, model: CatalogModel) {
  const details = await catalog.details(model);
  return {
    parent_model: "",
    format: "gguf",
    family: details.architecture,
    families: [details.architecture],
    parameter_size: details.parameterSize,
    quantization_level: details.quantization,
  };
}

export const ollamaRoutes: FastifyPluginAsync<OllamaRouteOptions> = async (instance, options) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  const { service, catalog } = options;
  const { maxNewTokens, embeddingMaxInputs } = options.limits;
  useErrorShape(app, ollamaErrorBody);
  // Ollama reads every body as JSON, and its documented curl examples send none of a content type
  // (curl then says form-urlencoded): read those as JSON here too.
  app.addContentTypeParser(
    ["application/x-www-form-urlencoded", "text/plain"],
    { parseAs: "string" },
    (_request, body, done) => {
      try {
        done(null, parseJsonText(body as string, options.limits.maxJsonDepth));
      } catch (error) {
        done(error as Error, undefined);
      }
    },
  );

  registerGeneration(app, service, maxNewTokens);
  registerEmbeddings(app, service, embeddingMaxInputs);
  registerModels(app, catalog);
  registerOllamaModelManagement(app, catalog);
};

function registerGeneration(app: TypedApp, service: TextgenService, maxNewTokens: number): void {
  app.post(
    "/chat",
    { schema: { tags: ["ollama"], summary: "Ollama's chat: NDJSON stream by default", body: ChatBody } },
    async (request, reply) => {
      const body = request.body;
      const target = ollamaModel(service, body.model, body.keep_alive);
      const model = target.name;
      const started = performance.now();
      const at = () => new Date().toISOString();
      // No messages: only load the model (or unload it, keep_alive 0), as Ollama does.
      if (body.messages.length === 0)
        return {
          model,
          created_at: at(),
          message: { role: "assistant", content: "" },
          done: true,
          done_reason: await target.preload(),
        };
      const generation: GenerationRequest = {
        messages: toMessages(body.messages),
        tools: body.tools?.map((tool) => tool.function),
        ...controlsOf(body.options, body.format, maxNewTokens),
        thinking: body.think === false ? false : undefined,
      };
      const base = () => ({ model, created_at: at() });
      const thinkingOf = (result: CompletionResult) =>
        result.reasoning !== undefined ? { thinking: result.reasoning } : {};
      return respond(target, request, reply, generation, body.stream !== false, {
        piece: (text, thinking) => ({
          ...base(),
          message: { role: "assistant", content: thinking ? "" : text, ...(thinking && { thinking: text }) },
          done: false,
        }),
        calls: (result) =>
          result.toolCalls
            ? {
                ...base(),
                message: { role: "assistant", content: "", tool_calls: toolCallsOf(result) },
                done: false,
              }
            : undefined,
        last: (result, streamed) => ({
          ...base(),
          message: {
            role: "assistant",
            content: result.text.startsWith(streamed) ? result.text.slice(streamed.length) : "",
          },
          done: true,
          ...statsOf(result, started),
        }),
        whole: (result) => ({
          ...base(),
          message: {
            role: "assistant",
            content: result.text,
            ...thinkingOf(result),
            ...(result.toolCalls && { tool_calls: toolCallsOf(result) }),
          },
          done: true,
          ...statsOf(result, started),
        }),
      });
    },
  );

  app.post(
    "/generate",
    {
      schema: {
        tags: ["ollama"],
        summary: "Ollama's generate: NDJSON stream by default",
        body: GenerateBody,
      },
    },
    async (request, reply) => {
      const body = request.body;
      const target = ollamaModel(service, body.model, body.keep_alive);
      const model = target.name;
      const started = performance.now();
      const base = () => ({ model, created_at: new Date().toISOString() });
      // No prompt: only load the model (or unload it, keep_alive 0), as Ollama does.
      if (!body.prompt) return { ...base(), response: "", done: true, done_reason: await target.preload() };
      const controls = controlsOf(body.options, body.format, maxNewTokens);
      const generation: GenerationRequest = body.raw
        ? { prompt: body.prompt, ...controls }
        : {
            messages: [
              ...(body.system ? [{ role: "system" as const, content: body.system }] : []),
              { role: "user", content: body.prompt },
            ],
            ...controls,
            thinking: body.think === false ? false : undefined,
          };
      return respond(target, request, reply, generation, body.stream !== false, {
        piece: (text, thinking) => ({
          ...base(),
          response: thinking ? "" : text,
          ...(thinking && { thinking: text }),
          done: false,
        }),
        calls: () => undefined,
        last: (result, streamed) => ({
          ...base(),
          response: result.text.startsWith(streamed) ? result.text.slice(streamed.length) : "",
          done: true,
          ...statsOf(result, started),
        }),
        whole: (result) => ({
          ...base(),
          response: result.text,
          ...(result.reasoning !== undefined && { thinking: result.reasoning }),
          done: true,
          ...statsOf(result, started),
        }),
      });
    },
  );
}

function registerEmbeddings(app: TypedApp, service: TextgenService, maxEmbeddingInputs: number): void {
  app.post(
    "/embed",
    {
      schema: {
        tags: ["ollama"],
        summary: "Embed texts with the model named (an embedding model, or EMBEDDING_MODEL_PATH's)",
        body: Type.Object(
          {
            model: Type.String({ minLength: 1 }),
            input: Type.Union([
              Type.String({ minLength: 1 }),
              Type.Array(Type.String({ minLength: 1 }), {
                minItems: 1,
                maxItems: maxEmbeddingInputs,
              }),
            ]),
            truncate: Type.Optional(Type.Boolean()),
            dimensions: Type.Optional(Type.Integer({ minimum: 1 })),
            options: Type.Optional(Options),
            keep_alive: keepAlive,
          },
          strict,
        ),
      },
    },
    async (request, reply) => {
      const started = performance.now();
      const body = request.body;
      const inputs = typeof body.input === "string" ? [body.input] : body.input;
      const target = ollamaModel(service, body.model, body.keep_alive, "embed");
      const { vectors, promptTokens } = await target.embed(inputs, clientGoneSignal(request, reply));
      const size = vectors[0]?.length ?? 0;
      if (body.dimensions !== undefined && body.dimensions !== size)
        throw badRequest(
          `dimensions ${body.dimensions} is not supported: this model's embeddings have ${size}`,
        );
      return {
        model: target.name,
        embeddings: vectors.map((vector) => Array.from(vector)),
        total_duration: nanoseconds(performance.now() - started),
        load_duration: 0,
        prompt_eval_count: promptTokens,
      };
    },
  );

  app.post(
    "/embeddings",
    {
      schema: {
        tags: ["ollama"],
        summary: "Ollama's older embedding route: one text",
        body: Type.Object(
          {
            model: Type.String({ minLength: 1 }),
            prompt: Type.String({ minLength: 1 }),
            options: Type.Optional(Options),
            keep_alive: keepAlive,
          },
          strict,
        ),
      },
    },
    async (request, reply) => {
      const { model, prompt, keep_alive } = request.body;
      const target = ollamaModel(service, model, keep_alive, "embed");
      const { vectors } = await target.embed([prompt], clientGoneSignal(request, reply));
      return { embedding: Array.from(vectors[0] ?? []) };
    },
  );
}

function registerModels(app: TypedApp, catalog: ModelCatalog): void {
  app.get("/version", { schema: { tags: ["ollama"], summary: "This server's version" } }, async () => ({
    version: VERSION,
  }));

  app.get("/tags", { schema: { tags: ["ollama"], summary: "The models that can be served" } }, async () => ({
    models: await Promise.all(
      (await catalog.list()).map(async (model) => ({
        ...modelEntry(model),
        details: await detailsOf(catalog, model),
      })),
    ),
  }));

  app.get("/ps", { schema: { tags: ["ollama"], summary: "The models in memory" } }, async () => ({
    models: await Promise.all(
      (await catalog.loaded()).map(async (model) => {
        const details = await catalog.details(model);
        return {
          ...modelEntry(model),
          // In memory: weights and KV cache, as Ollama's ps reports.
          size: model.memoryBytes,
          details: await detailsOf(catalog, model),
          // When its keep_alive ends; a model kept for ever (-1, the default model) never expires.
          expires_at: model.expiresAt?.toISOString() ?? "9999-12-31T23:59:59Z",
          size_vram: 0,
          ...(details.contextLength !== undefined && { context_length: details.contextLength }),
        };
      }),
    ),
  }));

  app.post(
    "/show",
    {
      schema: {
        tags: ["ollama"],
        summary: "A model's details, GGUF metadata and capabilities",
        body: Type.Object(
          {
            ...modelNameFields,
            verbose: Type.Optional(Type.Boolean()),
          },
          strict,
        ),
      },
    },
    async (request) => {
      const name = namedModel(request.body);
      const model = await catalog.find(name);
      const details = await catalog.details(model);
      const reasons = details.chatTemplate?.includes("<think>") === true;
      const generates = model.roles.includes("generate");
      const capabilities = generates
        ? ["completion", "tools", ...(reasons ? ["thinking"] : [])]
        : model.roles.includes("embed")
          ? ["embedding"]
          : [];
      return {
        modelfile: "",
        parameters: "",
        template: details.chatTemplate ?? "",
        details: await detailsOf(catalog, model),
        model_info: details.info,
        capabilities,
        modified_at: model.modifiedAt.toISOString(),
      };
    },
  );
}
