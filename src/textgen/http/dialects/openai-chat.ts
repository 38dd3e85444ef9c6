/**
 * OpenAI chat completions (`POST /v1/chat/completions`), with llama.cpp's extensions: a decoder
 * (wire body → DecodedRequest), and an encoder (events → chunks, results → a completion).
 */
import { randomUUID } from "node:crypto";
import { Type, type Static } from "typebox";
import { badRequest } from "../../../core/errors.js";
import type { TypedApp } from "../../../core/http.js";
import type { GenerationEvent } from "../../engine/events.js";
import type { ChatMessage, CompletionResult, TokenLogprob, ToolChoice } from "../../engine/generator.js";
import type { TextgenService } from "../../engine/service.js";
import {
  validateRequest,
  type DecodedRequest,
  type DialectProfile,
  type ValidationLimits,
} from "../../engine/validation.js";
import { dialectPost, noEffect, noteIgnored, noteUnenforced } from "../../../core/dialect-plugin.js";
import { respond, unixSeconds, type StreamEncoder, type WireFrame } from "./run.js";
import {
  DEFAULT_CHAT_MAX_TOKENS,
  JsonSchemaObject,
  ReasoningFormat,
  ResponseFormat,
  chatLogprob,
  decodeResponseFormat,
  decodeSampling,
  effortOf,
  openAiChunk,
  openAiErrorBody,
  openAiFields,
  openAiStreamEnd,
  promptCacheFields,
  samplingFields,
  toolCallsOf,
  totalUsage,
  usageOf,
} from "./openai-shared.js";

const ContentPart = Type.Object({
  type: Type.String({ description: "text (refusal is read as text); images, audio and files are refused" }),
  text: Type.Optional(Type.String()),
  refusal: Type.Optional(Type.String()),
  image_url: Type.Optional(Type.Unknown()),
  input_audio: Type.Optional(Type.Unknown()),
  file: Type.Optional(Type.Unknown()),
});
const ToolCallSchema = Type.Object({
  id: Type.String(),
  type: Type.Optional(Type.String()),
  function: Type.Optional(Type.Object({ name: Type.String(), arguments: Type.String() })),
  custom: Type.Optional(Type.Object({ name: Type.String(), input: Type.String() })),
});
const Message = Type.Object({
  role: Type.Union(
    ["system", "developer", "user", "assistant", "tool", "function"].map((role) => Type.Literal(role)),
  ),
  content: Type.Optional(
    Type.Union([Type.String(), Type.Array(ContentPart)], {
      description: "text, or text parts; null for an assistant message that only calls tools",
    }),
  ),
  name: Type.Optional(Type.String(noEffect("a participant's name"))),
  tool_calls: Type.Optional(Type.Array(ToolCallSchema, { description: "calls an assistant message made" })),
  tool_call_id: Type.Optional(Type.String({ description: "the call a tool message answers" })),
  function_call: Type.Optional(Type.Object({ name: Type.String(), arguments: Type.String() })),
  refusal: Type.Optional(Type.String(noEffect("an earlier refusal"))),
  audio: Type.Optional(Type.Unknown(noEffect("earlier audio"))),
  reasoning_content: Type.Optional(Type.String({ description: "earlier reasoning; not shown to the model" })),
});
const FunctionDefinition = Type.Object({
  name: Type.String(),
  description: Type.Optional(Type.String()),
  parameters: Type.Optional(JsonSchemaObject),
  strict: Type.Optional(Type.Boolean({ description: "true: a forced call refuses what cannot be enforced" })),
});
const Tool = Type.Object({
  type: Type.String({ description: "function; custom tools are accepted and not offered" }),
  function: Type.Optional(FunctionDefinition),
  custom: Type.Optional(Type.Unknown()),
});
const ToolChoiceSchema = Type.Union([
  Type.String({ description: "auto, none or required" }),
  Type.Object({
    type: Type.String(),
    function: Type.Optional(Type.Object({ name: Type.String() })),
    custom: Type.Optional(Type.Object({ name: Type.String() })),
    allowed_tools: Type.Optional(
      Type.Object({ mode: Type.String(), tools: Type.Array(Type.Record(Type.String(), Type.Unknown())) }),
    ),
  }),
]);

export const ChatRequestSchema = Type.Object({
  messages: Type.Array(Message),
  max_tokens: Type.Optional(Type.Integer({ description: "above MAX_NEW_TOKENS or the context: clamped" })),
  max_completion_tokens: Type.Optional(Type.Integer({ description: "as max_tokens (preferred)" })),
  response_format: Type.Optional(ResponseFormat),
  tools: Type.Optional(Type.Array(Tool)),
  tool_choice: Type.Optional(ToolChoiceSchema),
  functions: Type.Optional(Type.Array(FunctionDefinition, { description: "the older tools" })),
  function_call: Type.Optional(
    Type.Union([Type.String(), Type.Object({ name: Type.String() })], {
      description: "the older tool_choice",
    }),
  ),
  parallel_tool_calls: Type.Optional(
    Type.Boolean({ description: "a forced call is always one call; auto may return several" }),
  ),
  logprobs: Type.Optional(Type.Boolean()),
  top_logprobs: Type.Optional(Type.Integer({ description: "0…20; needs logprobs: true" })),
  reasoning_effort: Type.Optional(
    Type.String({ description: "none turns thinking off; minimal…high set a thinking budget" }),
  ),
  reasoning_format: ReasoningFormat,
  chat_template_kwargs: Type.Optional(
    Type.Object(
      { enable_thinking: Type.Optional(Type.Boolean()) },
      { description: "llama.cpp's: enable_thinking false turns thinking off" },
    ),
  ),
  prediction: Type.Optional(Type.Unknown(noEffect("predicted output"))),
  store: Type.Optional(Type.Boolean(noEffect("nothing is stored"))),
  metadata: Type.Optional(Type.Record(Type.String(), Type.String(), noEffect("metadata"))),
  modalities: Type.Optional(Type.Array(Type.String(), noEffect("output modalities (text only)"))),
  audio: Type.Optional(Type.Unknown(noEffect("audio output"))),
  verbosity: Type.Optional(Type.String(noEffect("verbosity"))),
  service_tier: Type.Optional(Type.String(noEffect("service tier"))),
  web_search_options: Type.Optional(Type.Unknown(noEffect("web search (no hosted tools here)"))),
  ...promptCacheFields,
  safety_identifier: Type.Optional(Type.String(noEffect("an end-user id"))),
  moderation: Type.Optional(Type.Unknown(noEffect("moderation"))),
  ...samplingFields,
});

export type ChatBody = Static<typeof ChatRequestSchema>;
type MessageValue = ChatBody["messages"][number];

/** The wire request as a DecodedRequest, and the fields read but not acted on (hosted tools). */
export function decodeChat(body: ChatBody): { decoded: DecodedRequest; ignored: string[] } {
  if (body.top_logprobs !== undefined && body.logprobs !== true)
    throw badRequest("top_logprobs needs logprobs: true", [{ path: "/top_logprobs" }]);
  const ignored: string[] = [];
  const { tools, toolChoice } = decodeTools(body, ignored);
  const thinkingOff = body.chat_template_kwargs?.enable_thinking === false;
  const effort = effortOf(body.reasoning_effort);
  return {
    decoded: {
      ...decodeSampling(body),
      messages: body.messages.map(decodeMessage),
      maxTokens: body.max_completion_tokens ?? body.max_tokens,
      outputs: [...decodeResponseFormat(body.response_format), ...(decodeSampling(body).outputs ?? [])],
      tools,
      toolChoice,
      logprobs: body.logprobs === true ? (body.top_logprobs ?? 0) : undefined,
      cacheHint: { key: body.prompt_cache_key },
      reasoning: {
        format: body.reasoning_format === "none" ? "none" : "split",
        ...(thinkingOff && { enabled: false }),
        ...(effort && { effort }),
      },
    },
    ignored,
  };
}

function decodeMessage(message: MessageValue, index: number): ChatMessage {
  const role = message.role === "developer" ? "system" : message.role === "function" ? "tool" : message.role;
  const converted: ChatMessage = {
    role: role as ChatMessage["role"],
    content: contentText(message.content, index),
  };
  const calls = (message.tool_calls ?? []).flatMap((call) => {
    if (call.function) return [{ id: call.id, name: call.function.name, arguments: call.function.arguments }];
    if (call.custom) return [{ id: call.id, name: call.custom.name, arguments: call.custom.input }];
    return [];
  });
  if (message.function_call)
    calls.push({
      id: `call_${index}`,
      name: message.function_call.name,
      arguments: message.function_call.arguments,
    });
  if (calls.length > 0) converted.toolCalls = calls;
  if (message.tool_call_id !== undefined) converted.toolCallId = message.tool_call_id;
  return converted;
}

function contentText(content: MessageValue["content"], index: number): string {
  if (content === undefined) return "";
  if (typeof content === "string") return content;
  return content
    .map((part, at) => {
      if (part.type === "text") return part.text ?? "";
      if (part.type === "refusal") return part.refusal ?? "";
      throw badRequest(`${part.type} content is not supported: the served model reads text only`, [
        { path: `/messages/${index}/content/${at}` },
      ]);
    })
    .join("");
}

/** Function tools are offered; others (custom) are named as ignored. `functions` is the older spelling. */
function decodeTools(body: ChatBody, ignored: string[]): Pick<DecodedRequest, "tools" | "toolChoice"> {
  let tools = (body.tools ?? []).flatMap((tool, index) => {
    if (tool.type === "function" && tool.function) return [tool.function];
    ignored.push(`tools.${index} (${tool.type})`);
    return [];
  });
  if (tools.length === 0 && body.functions) tools = body.functions;
  let toolChoice: ToolChoice | undefined;
  const choice = body.tool_choice ?? body.function_call;
  if (typeof choice === "string") toolChoice = choice === "any" ? "required" : (choice as ToolChoice);
  else if (choice && "name" in choice) toolChoice = { name: choice.name as string };
  else if (choice?.function) toolChoice = { name: choice.function.name };
  else if (choice?.custom) toolChoice = { name: choice.custom.name };
  else if (choice?.allowed_tools) {
    // Only the allowed tools are offered; "required" forces a call to one of them.
    const allowed = new Set(
      choice.allowed_tools.tools.map(
        (tool) => (tool.function as { name?: string } | undefined)?.name ?? tool.name,
      ),
    );
    tools = tools.filter((tool) => allowed.has(tool.name));
    toolChoice = choice.allowed_tools.mode === "required" ? "required" : "auto";
  }
  if (
    toolChoice !== undefined &&
    !["auto", "none", "required"].includes(toolChoice as string) &&
    typeof toolChoice !== "object"
  )
    throw badRequest(`tool_choice "${String(toolChoice)}" is not auto, none or required`, [
      { path: "/tool_choice" },
    ]);
  return {
    tools: tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters,
      strict: tool.strict,
    })),
    toolChoice,
  };
}

export function chatProfile(body: ChatBody): DialectProfile {
  return {
    defaultMaxTokens: (max) => Math.min(DEFAULT_CHAT_MAX_TOKENS, max),
    defaultTemperature: 1,
    clampMaxTokens: true,
    fields: {
      ...openAiFields,
      maxTokens: body.max_completion_tokens !== undefined ? "/max_completion_tokens" : "/max_tokens",
      output: body.response_format ? "/response_format" : body.grammar ? "/grammar" : "/json_schema",
    },
    toolParametersPath: (index) => `/tools/${index}/function/parameters`,
    schemaPath: body.response_format ? "/response_format/json_schema/schema" : "/json_schema",
  };
}

const logprobsOf = (entries: TokenLogprob[] | undefined) =>
  entries === undefined ? null : { content: entries.map(chatLogprob), refusal: null };

/** One finished answer as a choice. */
function choiceOf(result: CompletionResult, index: number) {
  return {
    index,
    message: {
      role: "assistant",
      content: result.toolCalls && result.text === "" ? null : result.text,
      refusal: null,
      ...(result.reasoning !== undefined && { reasoning_content: result.reasoning }),
      ...(result.toolCalls ? { tool_calls: toolCallsOf(result.toolCalls) } : {}),
    },
    finish_reason: result.finishReason,
    logprobs: logprobsOf(result.logprobs),
  };
}

export function chatCompletion(id: string, model: string, results: CompletionResult[]) {
  return {
    id,
    object: "chat.completion",
    created: unixSeconds(),
    model,
    choices: results.map(choiceOf),
    usage: usageOf(totalUsage(results)),
  };
}

/** OpenAI's chunk stream: role first, then deltas per choice, finish reasons, usage, [DONE]. */
export class ChatChunkEncoder implements StreamEncoder {
  private readonly head: { id: string; object: string; model: string };

  constructor(
    id: string,
    model: string,
    private readonly choices: number,
    private readonly includeUsage: boolean,
  ) {
    this.head = { id, object: "chat.completion.chunk", model };
  }

  private chunk(
    choice: number,
    delta: object,
    finishReason: string | null,
    logprobs?: TokenLogprob[],
  ): WireFrame {
    return openAiChunk(this.head, [
      { index: choice, delta, logprobs: logprobsOf(logprobs), finish_reason: finishReason },
    ]);
  }

  start(): WireFrame[] {
    return Array.from({ length: this.choices }, (_, choice) =>
      this.chunk(choice, { role: "assistant", content: "" }, null),
    );
  }

  event(event: GenerationEvent, choice: number): WireFrame[] {
    switch (event.type) {
      case "text-delta":
        return [this.chunk(choice, { content: event.delta }, null, event.logprobs)];
      case "reasoning-delta":
        return [this.chunk(choice, { reasoning_content: event.delta }, null)];
      case "tool-call-start":
        return [
          this.chunk(
            choice,
            {
              tool_calls: [
                {
                  index: event.index,
                  id: event.id,
                  type: "function",
                  function: { name: event.name, arguments: "" },
                },
              ],
            },
            null,
          ),
        ];
      case "tool-call-delta":
        return [
          this.chunk(
            choice,
            { tool_calls: [{ index: event.index, function: { arguments: event.delta } }] },
            null,
          ),
        ];
      case "finish":
        return [
          ...(event.logprobs ? [this.chunk(choice, {}, null, event.logprobs)] : []),
          this.chunk(choice, {}, event.finishReason),
        ];
      default:
        return [];
    }
  }

  end(results: CompletionResult[]): WireFrame[] {
    return openAiStreamEnd(this.head, this.includeUsage, results);
  }

  error(error: Parameters<StreamEncoder["error"]>[0]): WireFrame[] {
    return [{ data: openAiErrorBody(error) }];
  }
}

export function registerChatCompletions(
  app: TypedApp,
  service: TextgenService,
  limits: ValidationLimits,
): void {
  dialectPost(
    app,
    "/chat/completions",
    {
      tags: ["openai"],
      summary: "Chat, with the model's own chat template; JSON output, tool calls, logprobs, reasoning, n",
      body: ChatRequestSchema,
    },
    async (body, request, reply) => {
      const { decoded, ignored } = decodeChat(body);
      const validated = validateRequest(decoded, chatProfile(body), limits);
      noteIgnored(request, reply, ignored);
      noteUnenforced(reply, validated.unenforced);
      const id = `chatcmpl-${randomUUID()}`;
      const target = service.resolveModel(body.model, "generate", { keepAlive: body.keep_alive });
      return respond({
        request,
        reply,
        model: target,
        validated,
        stream: body.stream === true,
        encoder: () =>
          new ChatChunkEncoder(id, target.name, validated.n, body.stream_options?.include_usage === true),
        whole: (results) => chatCompletion(id, target.name, results),
      });
    },
  );
}
