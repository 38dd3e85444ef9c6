/** OpenAI chat completions (`POST /v1/chat/completions`), with llama.cpp's extensions. */
import { randomUUID } from "node:crypto";
import { Type, type Static } from "typebox";
import type { TypedApp } from "../../../core/http.js";
import { badRequest } from "../../../core/errors.js";
import { openEventStream, type EventStream } from "../../../core/sse.js";
import type { ChatMessage, ChatRequest, CompletionResult, TokenLogprob } from "../../engine/generator.js";
import { constraintFields } from "../schemas.js";
import type { TextgenService } from "../../engine/service.js";
import { generateOnce, generateStream, resolveModel, strict, unixSeconds } from "./common.js";
import {
  ChatToolChoice,
  DEFAULT_CHAT_MAX_TOKENS,
  JsonSchemaObject,
  ReasoningFormat,
  ResponseFormat,
  openAiErrorBody,
  sampling,
  samplingOf,
  toConstraint,
  toToolChoice,
  toolCallsOf,
  usageOf,
} from "./openai-shared.js";

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
  reasoning_content: Type.Optional(
    Type.Union([Type.String(), Type.Null()], { description: "earlier reasoning; not shown to the model" }),
  ),
});
const Tool = Type.Object({
  type: Type.Literal("function"),
  function: Type.Object({
    name: Type.String({ pattern: "^[a-zA-Z0-9_-]{1,64}$" }),
    description: Type.Optional(Type.String()),
    parameters: Type.Optional(JsonSchemaObject),
    strict: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
  }),
});

function chatRequestSchema(maxNewTokens: number) {
  return Type.Object(
    {
      messages: Type.Array(Message, { minItems: 1, maxItems: 1000 }),
      max_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: maxNewTokens })),
      max_completion_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: maxNewTokens })),
      response_format: Type.Optional(ResponseFormat),
      ...constraintFields,
      tools: Type.Optional(Type.Array(Tool, { maxItems: 128 })),
      tool_choice: Type.Optional(ChatToolChoice),
      parallel_tool_calls: Type.Optional(
        Type.Boolean({ description: "a forced call is always one call; auto may return several" }),
      ),
      logprobs: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
      top_logprobs: Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: 20 }), Type.Null()])),
      reasoning_format: ReasoningFormat,
      chat_template_kwargs: Type.Optional(
        Type.Object(
          { enable_thinking: Type.Optional(Type.Boolean()) },
          { ...strict, description: "llama.cpp's: enable_thinking false turns thinking off" },
        ),
      ),
      ...sampling,
    },
    strict,
  );
}

type ChatBody = Static<ReturnType<typeof chatRequestSchema>>;

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

/** OpenAI's chat logprobs entry. */
function chatLogprob(entry: TokenLogprob) {
  return {
    token: entry.text,
    logprob: entry.logprob,
    bytes: entry.bytes,
    top_logprobs: entry.top.map((top) => ({ token: top.text, logprob: top.logprob, bytes: top.bytes })),
  };
}

function toChatRequest(body: ChatBody, maxNewTokens: number): ChatRequest {
  if (body.messages.every((m) => m.role === "assistant"))
    throw badRequest("messages need a user or system message");
  if (body.top_logprobs != null && body.logprobs !== true)
    throw badRequest("top_logprobs needs logprobs: true", [{ path: "/top_logprobs" }]);
  return {
    messages: toMessages(body),
    maxTokens:
      body.max_completion_tokens ?? body.max_tokens ?? Math.min(DEFAULT_CHAT_MAX_TOKENS, maxNewTokens),
    ...samplingOf(body),
    constraint: toConstraint(body.response_format, body.json_schema, body.grammar),
    tools: body.tools?.map((tool) => ({
      name: tool.function.name,
      description: tool.function.description,
      parameters: tool.function.parameters,
    })),
    toolChoice: toToolChoice(body.tool_choice),
    logprobs: body.logprobs === true ? (body.top_logprobs ?? 0) : undefined,
    reasoningFormat: body.reasoning_format === "none" ? "none" : "split",
    thinking: body.chat_template_kwargs?.enable_thinking,
  };
}

export function registerChatCompletions(app: TypedApp, service: TextgenService, maxNewTokens: number): void {
  app.post(
    "/chat/completions",
    {
      schema: {
        tags: ["openai"],
        summary: "Chat, with the model's own chat template; JSON output, tool calls, logprobs, reasoning",
        body: chatRequestSchema(maxNewTokens),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const generation = toChatRequest(body, maxNewTokens);
      const id = `chatcmpl-${randomUUID()}`;
      const target = resolveModel(service, body.model, body.keep_alive);
      const model = target.name;
      const logprobsOf = (entries: TokenLogprob[] | undefined) =>
        entries === undefined ? null : { content: entries.map(chatLogprob), refusal: null };
      if (!body.stream) {
        const result = await generateOnce(target, generation, request, reply);
        return {
          id,
          object: "chat.completion",
          created: unixSeconds(),
          model,
          choices: [
            {
              index: 0,
              message: {
                role: "assistant",
                content: result.toolCalls && result.text === "" ? null : result.text,
                ...(result.reasoning !== undefined && { reasoning_content: result.reasoning }),
                ...(result.toolCalls ? { tool_calls: toolCallsOf(result.toolCalls) } : {}),
              },
              finish_reason: result.finishReason,
              logprobs: logprobsOf(result.logprobs),
            },
          ],
          usage: usageOf(result),
        };
      }
      const chunkOf = (delta: object, finishReason: string | null, logprobs?: TokenLogprob[]) => ({
        id,
        object: "chat.completion.chunk",
        created: unixSeconds(),
        model,
        choices: [{ index: 0, delta, logprobs: logprobsOf(logprobs), finish_reason: finishReason }],
      });
      const toolsActive = (body.tools?.length ?? 0) > 0 && body.tool_choice !== "none";
      let events: EventStream | undefined;
      let streamedText = "";
      let streamedCalls = false;
      /** The last chunks: text held back while it might have been a call, calls not yet sent, finish. */
      const finish = (result: CompletionResult, held: TokenLogprob[] | undefined) => {
        const rest =
          toolsActive && result.text.startsWith(streamedText) ? result.text.slice(streamedText.length) : "";
        if (rest !== "") events?.send(chunkOf({ content: rest }, null, held));
        else if (held && held.length > 0) events?.send(chunkOf({}, null, held));
        if (result.toolCalls && !streamedCalls)
          events?.send(
            chunkOf(
              { tool_calls: toolCallsOf(result.toolCalls).map((call, index) => ({ index, ...call })) },
              null,
            ),
          );
        events?.send(chunkOf({}, result.finishReason));
        if (body.stream_options?.include_usage === true)
          events?.send({ ...chunkOf({}, null), choices: [], usage: usageOf(result) });
        events?.send("[DONE]");
      };
      return generateStream(target, generation, request, reply, {
        open: () => {
          events = openEventStream(request, reply);
          events.send(chunkOf({ role: "assistant", content: "" }, null));
        },
        event: (event) => {
          if (event.type === "text") {
            streamedText += event.text;
            events?.send(chunkOf({ content: event.text }, null, event.logprobs));
          } else if (event.type === "reasoning")
            events?.send(chunkOf({ reasoning_content: event.text }, null));
          else {
            streamedCalls = true;
            const { delta } = event;
            events?.send(
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
              ),
            );
          }
        },
        finish,
        fail: (error) => events?.send(openAiErrorBody(error)),
        close: () => events?.end(),
      });
    },
  );
}
