/**
 * Anthropic's Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`), for @anthropic-ai/sdk
 * and the tools built on it. Errors in Anthropic's shape: `{type:"error", error:{type, message}}`.
 */
import { randomBytes } from "node:crypto";
import type { FastifyPluginAsync } from "fastify";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type, type Static } from "typebox";
import { badRequest, type ApiError } from "../../../core/errors.js";
import { openEventStream, type EventStream } from "../../../core/sse.js";
import type { ChatMessage, ChatRequest, CompletionResult, ToolChoice } from "../../engine/generator.js";
import type { Config } from "../../../core/config.js";
import type { TextgenService } from "../../engine/service.js";
import { generateOnce, generateStream, resolveModel, strict, useErrorShape } from "./common.js";
import { parseArgumentsObject } from "./json-partial.js";
import { JsonSchemaObject } from "./openai-shared.js";
import { LogitBias, parseLogitBias } from "../schemas.js";

const errorTypeByStatus: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  503: "overloaded_error",
  504: "timeout_error",
};

export function anthropicErrorBody(error: ApiError) {
  return {
    type: "error",
    error: {
      type:
        errorTypeByStatus[error.statusCode] ??
        (error.statusCode >= 500 ? "api_error" : "invalid_request_error"),
      message: error.message,
    },
  };
}

const cacheControl = { cache_control: Type.Optional(Type.Unknown({ description: "accepted; no effect" })) };
const TextBlock = Type.Object(
  {
    type: Type.Literal("text"),
    text: Type.String(),
    citations: Type.Optional(Type.Unknown()),
    ...cacheControl,
  },
  strict,
);
const ToolUseBlock = Type.Object(
  {
    type: Type.Literal("tool_use"),
    id: Type.String(),
    name: Type.String(),
    input: Type.Record(Type.String(), Type.Unknown()),
    ...cacheControl,
  },
  strict,
);
const ToolResultBlock = Type.Object(
  {
    type: Type.Literal("tool_result"),
    tool_use_id: Type.String(),
    content: Type.Optional(Type.Union([Type.String(), Type.Array(TextBlock)])),
    is_error: Type.Optional(Type.Boolean()),
    ...cacheControl,
  },
  strict,
);
/** Earlier thinking sent back: accepted, not shown to the model again (as chat templates do). */
const ThinkingBlock = Type.Object(
  { type: Type.Literal("thinking"), thinking: Type.String(), signature: Type.Optional(Type.String()) },
  strict,
);
const RedactedThinkingBlock = Type.Object(
  { type: Type.Literal("redacted_thinking"), data: Type.String() },
  strict,
);
/** Images and documents are read only to say they are not supported. */
const MediaBlock = Type.Object({
  type: Type.Union([Type.Literal("image"), Type.Literal("document")]),
});
const Block = Type.Union([
  TextBlock,
  ToolUseBlock,
  ToolResultBlock,
  ThinkingBlock,
  RedactedThinkingBlock,
  MediaBlock,
]);
const Message = Type.Object(
  {
    role: Type.Union([Type.Literal("user"), Type.Literal("assistant")]),
    content: Type.Union([Type.String(), Type.Array(Block, { minItems: 1 })]),
  },
  strict,
);
const Tool = Type.Object(
  {
    name: Type.String({ pattern: "^[a-zA-Z0-9_-]{1,64}$" }),
    description: Type.Optional(Type.String()),
    input_schema: JsonSchemaObject,
    type: Type.Optional(Type.Literal("custom")),
    ...cacheControl,
  },
  strict,
);
const parallel = { disable_parallel_tool_use: Type.Optional(Type.Boolean()) };
const ToolChoiceSchema = Type.Union([
  Type.Object({ type: Type.Literal("auto"), ...parallel }, strict),
  Type.Object({ type: Type.Literal("any"), ...parallel }, strict),
  Type.Object({ type: Type.Literal("tool"), name: Type.String(), ...parallel }, strict),
  Type.Object({ type: Type.Literal("none") }, strict),
]);
const Thinking = Type.Union([
  Type.Object(
    {
      type: Type.Literal("enabled"),
      budget_tokens: Type.Integer({
        minimum: 1,
        description: "accepted; max_tokens bounds the whole answer",
      }),
    },
    strict,
  ),
  Type.Object({ type: Type.Literal("disabled") }, strict),
]);

const promptFields = {
  model: Type.String({ description: "the model to answer (today the loaded model answers any name)" }),
  messages: Type.Array(Message, { minItems: 1, maxItems: 1000 }),
  system: Type.Optional(Type.Union([Type.String(), Type.Array(TextBlock)])),
  tools: Type.Optional(Type.Array(Tool, { maxItems: 128 })),
  tool_choice: Type.Optional(ToolChoiceSchema),
  thinking: Type.Optional(Thinking),
};

function messagesRequestSchema(maxNewTokens: number) {
  return Type.Object(
    {
      ...promptFields,
      max_tokens: Type.Integer({ minimum: 1, maximum: maxNewTokens }),
      stop_sequences: Type.Optional(
        Type.Array(Type.String({ minLength: 1, maxLength: 512 }), { maxItems: 16 }),
      ),
      temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
      top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
      top_k: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
      stream: Type.Optional(Type.Boolean()),
      metadata: Type.Optional(
        Type.Object({ user_id: Type.Optional(Type.Union([Type.String(), Type.Null()])) }, strict),
      ),
      // llama.cpp's extensions, as its server accepts them here too.
      min_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
      seed: Type.Optional(Type.Integer({ minimum: 0, maximum: 4294967295 })),
      logit_bias: Type.Optional(LogitBias),
    },
    strict,
  );
}

const CountTokensRequest = Type.Object(promptFields, strict);
type PromptBody = Static<typeof CountTokensRequest>;

const shortId = (prefix: string) => `${prefix}_${randomBytes(12).toString("base64url")}`;

type BlockValue = Static<typeof Block>;

function textOf(content: string | { text: string }[] | undefined): string {
  if (content === undefined) return "";
  return typeof content === "string" ? content : content.map((block) => block.text).join("");
}

/** Messages with content blocks as chat messages: tool results answer the calls of the turn before. */
function toMessages(body: PromptBody): ChatMessage[] {
  const messages: ChatMessage[] = [];
  const system = body.system === undefined ? "" : textOf(body.system);
  if (system !== "") messages.push({ role: "system", content: system });
  body.messages.forEach((message, index) => {
    if (typeof message.content === "string") {
      messages.push({ role: message.role, content: message.content });
      return;
    }
    let text = "";
    const calls: NonNullable<ChatMessage["toolCalls"]> = [];
    message.content.forEach((block: BlockValue, at) => {
      if (block.type === "image" || block.type === "document")
        throw badRequest(`${block.type} blocks are not supported: the served model reads text only`, [
          { path: `/messages/${index}/content/${at}` },
        ]);
      if (block.type === "text") text += block.text;
      else if (block.type === "tool_use")
        calls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input) });
      else if (block.type === "tool_result")
        messages.push({ role: "tool", content: textOf(block.content), toolCallId: block.tool_use_id });
    });
    if (message.role === "assistant")
      messages.push({ role: "assistant", content: text, ...(calls.length > 0 && { toolCalls: calls }) });
    else if (text !== "") messages.push({ role: "user", content: text });
  });
  if (messages.every((message) => message.role === "assistant"))
    throw badRequest("messages need a user message", [{ path: "/messages" }]);
  return messages;
}

function toolChoiceOf(choice: PromptBody["tool_choice"]): ToolChoice | undefined {
  if (choice === undefined) return undefined;
  if (choice.type === "any") return "required";
  if (choice.type === "tool") return { name: choice.name };
  return choice.type;
}

function promptOf(body: PromptBody): Omit<ChatRequest, "maxTokens" | "temperature" | "stop"> {
  return {
    messages: toMessages(body),
    tools: body.tools?.map((tool) => ({
      name: tool.name,
      description: tool.description,
      parameters: tool.input_schema,
    })),
    toolChoice: toolChoiceOf(body.tool_choice),
    thinking: body.thinking?.type === "disabled" ? false : undefined,
  };
}

function stopReasonOf(result: CompletionResult): string {
  if (result.finishReason === "length") return "max_tokens";
  return result.finishReason === "tool_calls" ? "tool_use" : "end_turn";
}

function usageOf(result: CompletionResult) {
  const cached = result.cachedTokens ?? 0;
  return {
    input_tokens: result.promptTokens - cached,
    output_tokens: result.tokensGenerated,
    cache_read_input_tokens: cached,
    cache_creation_input_tokens: 0,
  };
}

/** The content blocks of a finished answer: thinking, text, tool uses. */
function contentOf(result: CompletionResult): object[] {
  const blocks: object[] = [];
  if (result.reasoning !== undefined)
    blocks.push({ type: "thinking", thinking: result.reasoning, signature: "" });
  if (result.text !== "" || !result.toolCalls) blocks.push({ type: "text", text: result.text });
  for (const call of result.toolCalls ?? [])
    blocks.push({
      type: "tool_use",
      id: call.id,
      name: call.name,
      input: parseArgumentsObject(call.arguments),
    });
  return blocks;
}

export interface AnthropicRouteOptions {
  service: TextgenService;
  /** MAX_NEW_TOKENS. */
  limits: Pick<Config["limits"], "maxNewTokens">;
}

/** Registered under /v1 beside the OpenAI routes; unknown /v1 paths answer in OpenAI's shape. */
export const anthropicRoutes: FastifyPluginAsync<AnthropicRouteOptions> = async (instance, options) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  const { service } = options;
  const { maxNewTokens } = options.limits;
  useErrorShape(app, anthropicErrorBody, { notFound: false });

  app.post(
    "/messages",
    {
      schema: {
        tags: ["anthropic"],
        summary: "Anthropic's Messages API: text, tool use, thinking blocks",
        body: messagesRequestSchema(maxNewTokens),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const generation: ChatRequest = {
        ...promptOf(body),
        maxTokens: body.max_tokens,
        temperature: body.temperature ?? 1,
        topP: body.top_p,
        topK: body.top_k,
        minP: body.min_p,
        seed: body.seed,
        logitBias: parseLogitBias(body.logit_bias),
        stop: body.stop_sequences ?? [],
      };
      const id = shortId("msg");
      const target = resolveModel(service, body.model);
      const model = target.name;
      const message = (content: object[], result?: CompletionResult) => ({
        id,
        type: "message",
        role: "assistant",
        model,
        content,
        stop_reason: result ? stopReasonOf(result) : null,
        stop_sequence: null,
        usage: result ? usageOf(result) : { input_tokens: 0, output_tokens: 0 },
      });
      if (!body.stream) {
        const result = await generateOnce(target, generation, request, reply);
        return message(contentOf(result), result);
      }
      const writer = new MessagesEventWriter();
      return generateStream(target, generation, request, reply, {
        open: () => {
          writer.events = openEventStream(request, reply);
          writer.emit("message_start", { message: message([]) });
          writer.emit("ping", {});
        },
        event: (event) => {
          if (event.type === "reasoning") writer.delta("thinking", event.text);
          else if (event.type === "text") writer.delta("text", event.text);
          else writer.toolCall(event.delta);
        },
        finish: (result) => {
          writer.finish(result);
          writer.emit("message_delta", {
            delta: { stop_reason: stopReasonOf(result), stop_sequence: null },
            usage: { output_tokens: result.tokensGenerated },
          });
          writer.emit("message_stop", {});
        },
        fail: (error) => writer.emit("error", anthropicErrorBody(error)),
        close: () => writer.events?.end(),
      });
    },
  );

  app.post(
    "/messages/count_tokens",
    {
      schema: {
        tags: ["anthropic"],
        summary: "How many tokens a Messages request's input is, rendered by the model's chat template",
        body: CountTokensRequest,
      },
    },
    async (request) => ({
      input_tokens: await resolveModel(service, request.body.model).countTokens({
        ...promptOf(request.body),
        maxTokens: 1,
        temperature: 0,
        stop: [],
      }),
    }),
  );
};

/** Anthropic's streaming events: one content block at a time, each started, added to, stopped. */
class MessagesEventWriter {
  events?: EventStream;
  private index = -1;
  private open?: "thinking" | "text" | "tool_use";
  private streamedText = "";
  private streamedCalls = 0;

  emit(type: string, payload: object): void {
    this.events?.send({ type, ...payload }, type);
  }

  private start(kind: "thinking" | "text" | "tool_use", block: object): void {
    this.stop();
    this.open = kind;
    this.index++;
    this.emit("content_block_start", { index: this.index, content_block: block });
  }

  private stop(): void {
    if (this.open === undefined) return;
    if (this.open === "thinking")
      this.emit("content_block_delta", {
        index: this.index,
        delta: { type: "signature_delta", signature: "" },
      });
    this.emit("content_block_stop", { index: this.index });
    this.open = undefined;
  }

  delta(kind: "thinking" | "text", piece: string): void {
    if (this.open !== kind)
      this.start(
        kind,
        kind === "text" ? { type: "text", text: "" } : { type: "thinking", thinking: "", signature: "" },
      );
    if (kind === "text") this.streamedText += piece;
    if (piece === "") return;
    this.emit("content_block_delta", {
      index: this.index,
      delta:
        kind === "text" ? { type: "text_delta", text: piece } : { type: "thinking_delta", thinking: piece },
    });
  }

  toolCall(delta: { id?: string; name?: string; arguments: string }): void {
    if (delta.id !== undefined) {
      this.streamedCalls++;
      this.start("tool_use", { type: "tool_use", id: delta.id, name: delta.name ?? "", input: {} });
    }
    if (delta.arguments !== "")
      this.emit("content_block_delta", {
        index: this.index,
        delta: { type: "input_json_delta", partial_json: delta.arguments },
      });
  }

  /** Sends what was held back (text that might have been a call, calls found at the end) and stops. */
  finish(result: CompletionResult): void {
    const rest = result.text.startsWith(this.streamedText) ? result.text.slice(this.streamedText.length) : "";
    if (
      rest !== "" ||
      (this.index === -1 && !result.toolCalls) ||
      (this.open === "thinking" && !result.toolCalls)
    )
      this.delta("text", rest);
    for (const call of (result.toolCalls ?? []).slice(this.streamedCalls))
      this.toolCall({ id: call.id, name: call.name, arguments: call.arguments });
    this.stop();
  }
}
