/**
 * Ollama's `/api/chat` and `/api/generate`: decoders (wire body → DecodedRequest) and encoders (events
 * → NDJSON lines, results → one object). Fields are read as Ollama reads them: unknown top-level
 * fields and unknown `options` are ignored (and named in the ignored-fields header).
 */
import { Type, type Static } from "typebox";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { TypedApp } from "../../../core/http.js";
import type { GenerationEvent } from "../../engine/events.js";
import type { ChatMessage, CompletionResult } from "../../engine/generator.js";
import type { ServedModel, TextgenService } from "../../engine/service.js";
import { newToolCallId } from "../../engine/tool-calls.js";
import {
  validateRequest,
  type DecodedRequest,
  type DialectProfile,
  type ReasoningEffort,
  type ValidationLimits,
} from "../../engine/validation.js";
import type { ApiError } from "../../../core/errors.js";
import { parseArgumentsObject } from "./json-partial.js";
import { DEFAULT_CHAT_MAX_TOKENS, JsonSchemaObject } from "./openai-shared.js";
import { dialectPost, noEffect, noteUnenforced } from "../../../core/dialect-plugin.js";
import { respond, type StreamEncoder, type WireFrame } from "./run.js";

export const ollamaErrorBody = (error: ApiError) => ({ error: error.message });

/** Every option Ollama's API reference lists: those llama.cpp sampling has act, the rest are accepted. */
export const Options = Type.Object({
  temperature: Type.Optional(Type.Number({ description: "default 0.8" })),
  top_k: Type.Optional(Type.Integer()),
  top_p: Type.Optional(Type.Number()),
  min_p: Type.Optional(Type.Number()),
  seed: Type.Optional(Type.Integer({ description: "-1 = random" })),
  stop: Type.Optional(Type.Array(Type.String())),
  num_predict: Type.Optional(
    Type.Integer({ description: "-1/-2: up to MAX_NEW_TOKENS; above it or the context: clamped" }),
  ),
  repeat_penalty: Type.Optional(Type.Number()),
  presence_penalty: Type.Optional(Type.Number()),
  frequency_penalty: Type.Optional(Type.Number()),
  num_ctx: Type.Optional(Type.Integer(noEffect("the server's context size per request applies"))),
  num_keep: Type.Optional(Type.Integer(noEffect("num_keep"))),
  typical_p: Type.Optional(Type.Number(noEffect("typical sampling"))),
  repeat_last_n: Type.Optional(Type.Integer(noEffect("penalties look at the last 64 tokens"))),
  penalize_newline: Type.Optional(Type.Boolean(noEffect("newlines are never penalised"))),
  tfs_z: Type.Optional(Type.Number(noEffect("tail-free sampling"))),
  mirostat: Type.Optional(Type.Integer(noEffect("mirostat"))),
  mirostat_tau: Type.Optional(Type.Number(noEffect("mirostat"))),
  mirostat_eta: Type.Optional(Type.Number(noEffect("mirostat"))),
  numa: Type.Optional(Type.Boolean(noEffect("NUMA"))),
  num_batch: Type.Optional(Type.Integer(noEffect("batch size"))),
  num_gpu: Type.Optional(Type.Integer(noEffect("LLAMA_GPU applies"))),
  main_gpu: Type.Optional(Type.Integer(noEffect("LLAMA_GPU applies"))),
  low_vram: Type.Optional(Type.Boolean(noEffect("low VRAM"))),
  f16_kv: Type.Optional(Type.Boolean(noEffect("KV type"))),
  vocab_only: Type.Optional(Type.Boolean(noEffect("vocab only"))),
  use_mmap: Type.Optional(Type.Boolean(noEffect("mmap"))),
  use_mlock: Type.Optional(Type.Boolean(noEffect("mlock"))),
  num_thread: Type.Optional(Type.Integer(noEffect("LLAMA_THREADS applies"))),
});
type OptionsValue = Static<typeof Options>;

export const keepAlive = Type.Optional(
  Type.Union([Type.String(), Type.Number()], {
    description:
      "how long the model stays loaded after this request: a duration or seconds; 0 unloads, -1 keeps",
  }),
);
const Format = Type.Optional(
  Type.Union([Type.String({ description: '"json" or ""' }), JsonSchemaObject], {
    description: '"json", or a JSON schema the answer follows',
  }),
);
const Think = Type.Optional(
  Type.Union([Type.Boolean(), Type.String({ description: "low, medium or high: a thinking budget" })]),
);
const ToolCall = Type.Object({
  id: Type.Optional(Type.String()),
  type: Type.Optional(Type.String()),
  function: Type.Object({
    name: Type.String(),
    arguments: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.String()]),
    index: Type.Optional(Type.Integer()),
  }),
});
const Message = Type.Object({
  role: Type.Union(["system", "user", "assistant", "tool"].map((role) => Type.Literal(role))),
  content: Type.Optional(Type.String()),
  thinking: Type.Optional(Type.String({ description: "earlier reasoning; not shown to the model" })),
  images: Type.Optional(Type.Array(Type.String(), { maxItems: 0, description: "not supported" })),
  tool_calls: Type.Optional(Type.Array(ToolCall)),
  tool_name: Type.Optional(Type.String()),
  tool_call_id: Type.Optional(Type.String()),
});
const Tool = Type.Object({
  type: Type.Optional(Type.String()),
  function: Type.Object({
    name: Type.String(),
    description: Type.Optional(Type.String()),
    parameters: Type.Optional(JsonSchemaObject),
  }),
});
const generationFields = {
  model: Type.String({ minLength: 1 }),
  format: Format,
  options: Type.Optional(Options),
  stream: Type.Optional(Type.Boolean({ default: true })),
  keep_alive: keepAlive,
  think: Think,
  logprobs: Type.Optional(Type.Boolean(noEffect("logprobs on Ollama's API"))),
  top_logprobs: Type.Optional(Type.Integer(noEffect("logprobs on Ollama's API"))),
  // The AI SDK's Ollama provider (ollama-ai-provider-v2) sends these beside `options`, not in it.
  temperature: Type.Optional(Type.Number({ description: "options.temperature, when options has none" })),
  top_p: Type.Optional(Type.Number({ description: "options.top_p, when options has none" })),
  top_k: Type.Optional(Type.Integer({ description: "options.top_k, when options has none" })),
  seed: Type.Optional(Type.Integer({ description: "options.seed, when options has none" })),
  max_output_tokens: Type.Optional(
    Type.Integer({ description: "options.num_predict, when options has none" }),
  ),
};
/** The sampling fields ollama-ai-provider-v2 sends at the top level. */
interface TopLevelControls {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  seed?: number;
  max_output_tokens?: number;
}
export const ChatBody = Type.Object({
  ...generationFields,
  messages: Type.Array(Message, { maxItems: 1000 }),
  tools: Type.Optional(Type.Array(Tool)),
});
export const GenerateBody = Type.Object({
  ...generationFields,
  // Bounded by the body's size, MAX_TOKENIZE_CHARS and the context, as chat is (Ollama has no limit).
  prompt: Type.Optional(Type.String()),
  system: Type.Optional(Type.String()),
  template: Type.Optional(Type.String(noEffect("the model's own chat template applies"))),
  context: Type.Optional(Type.Array(Type.Integer(), noEffect("the prompt cache keeps context"))),
  raw: Type.Optional(Type.Boolean({ description: "the prompt as it stands, without the chat template" })),
  suffix: Type.Optional(Type.String({ maxLength: 0, description: "fill-in-the-middle is not supported" })),
  images: Type.Optional(Type.Array(Type.String(), { maxItems: 0, description: "not supported" })),
});
type ChatBodyValue = Static<typeof ChatBody>;
type GenerateBodyValue = Static<typeof GenerateBody>;

/** Ollama's `options`, `format` and `think` in canonical names (`options` ahead of `top`). */
function decodeControls(
  options: OptionsValue | undefined,
  format: unknown,
  think: boolean | string | undefined,
  top: TopLevelControls = {},
): DecodedRequest {
  const predict = options?.num_predict ?? top.max_output_tokens;
  const effort =
    typeof think === "string" && ["low", "medium", "high"].includes(think)
      ? (think as ReasoningEffort)
      : undefined;
  return {
    // -1 (infinite) and -2 (fill the context) mean "as much as allowed": the limit then clamps it.
    maxTokens:
      predict === undefined ? undefined : predict < 0 ? Number.MAX_SAFE_INTEGER : Math.max(predict, 1),
    temperature: options?.temperature ?? top.temperature,
    topK: options?.top_k ?? top.top_k,
    topP: options?.top_p ?? top.top_p,
    minP: options?.min_p,
    seed: options?.seed ?? top.seed,
    stop: options?.stop,
    repeatPenalty: options?.repeat_penalty,
    presencePenalty: options?.presence_penalty,
    frequencyPenalty: options?.frequency_penalty,
    outputs:
      format === undefined || format === ""
        ? []
        : format === "json"
          ? [{ type: "json_object" }]
          : typeof format === "object"
            ? [{ type: "json_schema", schema: format }]
            : [],
    reasoning: think === false ? { enabled: false } : effort ? { effort } : undefined,
  };
}

/** Ollama's history has no call ids: each tool message answers the next unanswered call (by name first). */
function decodeMessages(messages: ChatBodyValue["messages"]): ChatMessage[] {
  const unanswered: { id: string; name: string }[] = [];
  return messages.map((message): ChatMessage => {
    const content = message.content ?? "";
    if (message.role === "assistant") {
      const calls = (message.tool_calls ?? []).map((call) => ({
        id: call.id ?? newToolCallId(),
        name: call.function.name,
        arguments:
          typeof call.function.arguments === "string"
            ? call.function.arguments
            : JSON.stringify(call.function.arguments),
      }));
      unanswered.push(...calls);
      return { role: "assistant", content, ...(calls.length > 0 && { toolCalls: calls }) };
    }
    if (message.role === "tool") {
      let at = unanswered.findIndex(
        (call) =>
          call.id === message.tool_call_id ||
          (message.tool_name !== undefined && call.name === message.tool_name),
      );
      if (at === -1 && unanswered.length > 0) at = 0;
      const call = at === -1 ? undefined : unanswered.splice(at, 1)[0];
      return { role: "tool", content, toolCallId: call?.id };
    }
    return { role: message.role as "system" | "user", content };
  });
}

export function decodeChat(body: ChatBodyValue): DecodedRequest {
  return {
    ...decodeControls(body.options, body.format, body.think, body),
    messages: decodeMessages(body.messages),
    tools: body.tools?.map((tool) => tool.function),
  };
}

export function decodeGenerate(body: GenerateBodyValue): DecodedRequest {
  const controls = decodeControls(body.options, body.format, body.think, body);
  if (body.raw) return { ...controls, prompt: body.prompt, reasoning: undefined };
  return {
    ...controls,
    messages: [
      ...(body.system ? [{ role: "system" as const, content: body.system }] : []),
      { role: "user", content: body.prompt ?? "" },
    ],
  };
}

const profile: DialectProfile = {
  defaultMaxTokens: (max) => Math.min(DEFAULT_CHAT_MAX_TOKENS, max),
  defaultTemperature: 0.8,
  clampMaxTokens: true,
  fields: {
    maxTokens: "/options/num_predict",
    temperature: "/options/temperature",
    topK: "/options/top_k",
    topP: "/options/top_p",
    minP: "/options/min_p",
    seed: "/options/seed",
    stop: "/options/stop",
    repeatPenalty: "/options/repeat_penalty",
    presencePenalty: "/options/presence_penalty",
    frequencyPenalty: "/options/frequency_penalty",
    output: "/format",
    tools: "/tools",
    messages: "/messages",
    prompt: "/prompt",
  },
  toolParametersPath: (index) => `/tools/${index}/function/parameters`,
  schemaPath: "/format",
};

const nanoseconds = (ms: number) => Math.round(ms * 1e6);

/** Ollama's closing statistics (durations in nanoseconds). */
export function statsOf(result: CompletionResult, started: number) {
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

const toolCallOf = (call: { id: string; name: string; arguments: string }, index: number) => ({
  id: call.id,
  function: { index, name: call.name, arguments: parseArgumentsObject(call.arguments) },
});

/** NDJSON lines: a line per piece (content or thinking), a line per call, a last line with the stats. */
class OllamaEncoder implements StreamEncoder {
  constructor(
    private readonly kind: "chat" | "generate",
    private readonly model: string,
    private readonly started: number,
  ) {}

  private line(fields: object, done = false): WireFrame {
    return { data: { model: this.model, created_at: new Date().toISOString(), ...fields, done } };
  }

  private piece(text: string, thinking: boolean): WireFrame {
    if (this.kind === "generate")
      return this.line(thinking ? { response: "", thinking: text } : { response: text });
    return this.line({
      message: { role: "assistant", content: thinking ? "" : text, ...(thinking && { thinking: text }) },
    });
  }

  start(): WireFrame[] {
    return [];
  }

  event(event: GenerationEvent): WireFrame[] {
    switch (event.type) {
      case "text-delta":
        return [this.piece(event.delta, false)];
      case "reasoning-delta":
        return [this.piece(event.delta, true)];
      case "tool-call-end":
        if (this.kind === "generate") return [];
        return [
          this.line({
            message: { role: "assistant", content: "", tool_calls: [toolCallOf(event, event.index)] },
          }),
        ];
      case "finish": {
        const last =
          this.kind === "generate" ? { response: "" } : { message: { role: "assistant", content: "" } };
        return [this.line({ ...last, ...statsOf(event.result, this.started) }, true)];
      }
      default:
        return [];
    }
  }

  end(): WireFrame[] {
    return [];
  }

  error(error: ApiError): WireFrame[] {
    return [{ data: ollamaErrorBody(error) }];
  }
}

function wholeChat(model: string, result: CompletionResult, started: number) {
  return {
    model,
    created_at: new Date().toISOString(),
    message: {
      role: "assistant",
      content: result.text,
      ...(result.reasoning !== undefined && { thinking: result.reasoning }),
      ...(result.toolCalls && { tool_calls: result.toolCalls.map(toolCallOf) }),
    },
    done: true,
    ...statsOf(result, started),
  };
}

function wholeGenerate(model: string, result: CompletionResult, started: number) {
  return {
    model,
    created_at: new Date().toISOString(),
    response: result.text,
    ...(result.reasoning !== undefined && { thinking: result.reasoning }),
    done: true,
    ...statsOf(result, started),
  };
}

/** A decoded request validated and answered: an NDJSON stream unless `stream` is false, as Ollama's. */
function answer(
  call: {
    request: FastifyRequest;
    reply: FastifyReply;
    target: ServedModel;
    limits: ValidationLimits;
    started: number;
  },
  kind: "chat" | "generate",
  decoded: DecodedRequest,
  stream: boolean | undefined,
) {
  const { request, reply, target, started } = call;
  const validated = validateRequest(decoded, profile, call.limits);
  noteUnenforced(reply, validated.unenforced);
  const whole = kind === "chat" ? wholeChat : wholeGenerate;
  return respond({
    request,
    reply,
    model: target,
    validated,
    stream: stream !== false,
    transport: "ndjson",
    encoder: () => new OllamaEncoder(kind, target.name, started),
    whole: ([result]) => whole(target.name, result!, started),
  });
}

export function registerGeneration(
  app: TypedApp,
  service: TextgenService,
  limits: ValidationLimits,
  resolve: (name: string, keepAlive: string | number | undefined) => ServedModel,
): void {
  app.post(
    "/chat",
    { schema: { tags: ["ollama"], summary: "Ollama's chat: NDJSON stream by default", body: ChatBody } },
    async (request, reply) => {
      const body = request.body;
      const target = resolve(body.model, body.keep_alive);
      const started = performance.now();
      // No messages: only load the model (or unload it, keep_alive 0), as Ollama does.
      if (body.messages.length === 0)
        return {
          model: target.name,
          created_at: new Date().toISOString(),
          message: { role: "assistant", content: "" },
          done: true,
          done_reason: await target.preload(),
        };
      return answer({ request, reply, target, limits, started }, "chat", decodeChat(body), body.stream);
    },
  );

  dialectPost(
    app,
    "/generate",
    {
      tags: ["ollama"],
      summary: "Ollama's generate: NDJSON stream by default",
      body: GenerateBody,
    },
    async (body, request, reply) => {
      const target = resolve(body.model, body.keep_alive);
      const started = performance.now();
      // No prompt: only load the model (or unload it, keep_alive 0), as Ollama does.
      if (!body.prompt)
        return {
          model: target.name,
          created_at: new Date().toISOString(),
          response: "",
          done: true,
          done_reason: await target.preload(),
        };
      return answer(
        { request, reply, target, limits, started },
        "generate",
        decodeGenerate(body),
        body.stream,
      );
    },
  );
}
