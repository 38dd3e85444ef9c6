/**
 * OpenAI's Responses API (`POST /v1/responses`, `/v1/responses/input_tokens`), translated into a chat
 * the way the llama.cpp server does it. Stateless, as llama.cpp's and Ollama's are: nothing is stored,
 * so `previous_response_id` and `store: true` are 400s that say so.
 */
import { randomBytes } from "node:crypto";
import { Type, type Static } from "typebox";
import type { TypedApp } from "../../../core/http.js";
import { badRequest } from "../../../core/errors.js";
import { openEventStream, type EventStream } from "../../../core/sse.js";
import type { ChatMessage, ChatRequest, CompletionResult, ToolChoice } from "../../engine/generator.js";
import type { TextgenService } from "../../engine/service.js";
import { generateOnce, generateStream, resolveModel, strict, unixSeconds } from "./common.js";
import {
  DEFAULT_CHAT_MAX_TOKENS,
  JsonSchemaObject,
  baseSampling,
  openAiErrorBody,
  samplingOf,
  toConstraint,
} from "./openai-shared.js";

const InputText = Type.Object({ type: Type.Literal("input_text"), text: Type.String() }, strict);
const OutputText = Type.Object(
  {
    type: Type.Literal("output_text"),
    text: Type.String(),
    annotations: Type.Optional(Type.Array(Type.Unknown())),
    logprobs: Type.Optional(Type.Array(Type.Unknown())),
  },
  strict,
);
const itemMeta = { id: Type.Optional(Type.String()), status: Type.Optional(Type.String()) };
const MessageItem = Type.Object(
  {
    type: Type.Optional(Type.Literal("message")),
    role: Type.Union([
      Type.Literal("user"),
      Type.Literal("system"),
      Type.Literal("developer"),
      Type.Literal("assistant"),
    ]),
    content: Type.Union([Type.String(), Type.Array(Type.Union([InputText, OutputText]))]),
    ...itemMeta,
  },
  strict,
);
const FunctionCallItem = Type.Object(
  {
    type: Type.Literal("function_call"),
    call_id: Type.String(),
    name: Type.String(),
    arguments: Type.String(),
    ...itemMeta,
  },
  strict,
);
const FunctionCallOutputItem = Type.Object(
  {
    type: Type.Literal("function_call_output"),
    call_id: Type.String(),
    output: Type.Union([Type.String(), Type.Array(InputText)]),
    ...itemMeta,
  },
  strict,
);
/** Earlier reasoning, sent back by clients: accepted, not shown to the model (as chat templates do). */
const ReasoningItem = Type.Object(
  {
    type: Type.Literal("reasoning"),
    summary: Type.Optional(Type.Array(Type.Unknown())),
    content: Type.Optional(Type.Array(Type.Unknown())),
    encrypted_content: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    ...itemMeta,
  },
  strict,
);
const InputItem = Type.Union([MessageItem, FunctionCallItem, FunctionCallOutputItem, ReasoningItem]);

const ResponsesTool = Type.Object(
  {
    type: Type.Literal("function"),
    name: Type.String({ pattern: "^[a-zA-Z0-9_-]{1,64}$" }),
    description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    parameters: Type.Optional(Type.Union([JsonSchemaObject, Type.Null()])),
    strict: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
  },
  strict,
);
const ResponsesToolChoice = Type.Union([
  Type.Literal("auto"),
  Type.Literal("none"),
  Type.Literal("required"),
  Type.Object({ type: Type.Literal("function"), name: Type.String() }, strict),
]);
const TextFormat = Type.Union([
  Type.Object({ type: Type.Literal("text") }, strict),
  Type.Object({ type: Type.Literal("json_object") }, strict),
  Type.Object(
    {
      type: Type.Literal("json_schema"),
      name: Type.String({ maxLength: 64 }),
      schema: JsonSchemaObject,
      description: Type.Optional(Type.String()),
      strict: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    },
    strict,
  ),
]);

/** The fields a request and a token count share: what the model reads. */
const promptFields = {
  model: baseSampling.model,
  input: Type.Union([Type.String({ minLength: 1 }), Type.Array(InputItem, { minItems: 1, maxItems: 1000 })]),
  instructions: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  tools: Type.Optional(Type.Array(ResponsesTool, { maxItems: 128 })),
  tool_choice: Type.Optional(ResponsesToolChoice),
  parallel_tool_calls: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
  text: Type.Optional(
    Type.Object(
      {
        format: Type.Optional(TextFormat),
        verbosity: Type.Optional(Type.Union([Type.String(), Type.Null()])),
      },
      strict,
    ),
  ),
  reasoning: Type.Optional(
    Type.Union([
      Type.Object(
        {
          effort: Type.Optional(
            Type.Union([Type.String(), Type.Null()], { description: "none turns thinking off" }),
          ),
          summary: Type.Optional(Type.Union([Type.String(), Type.Null()])),
        },
        strict,
      ),
      Type.Null(),
    ]),
  ),
  previous_response_id: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  truncation: Type.Optional(Type.Union([Type.Literal("auto"), Type.Literal("disabled"), Type.Null()])),
};

function responsesRequestSchema(maxNewTokens: number) {
  return Type.Object(
    {
      ...promptFields,
      max_output_tokens: Type.Optional(
        Type.Union([Type.Integer({ minimum: 1, maximum: maxNewTokens }), Type.Null()]),
      ),
      store: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
      metadata: Type.Optional(Type.Union([Type.Record(Type.String(), Type.String()), Type.Null()])),
      include: Type.Optional(Type.Union([Type.Array(Type.String()), Type.Null()])),
      ...baseSampling,
      temperature: Type.Optional(Type.Union([Type.Number({ minimum: 0, maximum: 2 }), Type.Null()])),
      top_p: Type.Optional(Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()])),
    },
    strict,
  );
}

const InputTokensRequest = Type.Object(promptFields, strict);
type PromptBody = Static<typeof InputTokensRequest>;

const shortId = (prefix: string) => `${prefix}_${randomBytes(12).toString("hex")}`;

function partsText(content: string | { text: string }[]): string {
  return typeof content === "string" ? content : content.map((part) => part.text).join("");
}

/** Input items as chat messages: calls join the assistant turn before them, outputs answer them. */
function toMessages(body: PromptBody): ChatMessage[] {
  if (body.previous_response_id)
    throw badRequest(
      "previous_response_id is not supported: this server stores no responses; send the whole input",
      [{ path: "/previous_response_id" }],
    );
  const messages: ChatMessage[] = [];
  if (body.instructions) messages.push({ role: "system", content: body.instructions });
  if (typeof body.input === "string") return [...messages, { role: "user", content: body.input }];
  for (const item of body.input) {
    if (item.type === "reasoning") continue;
    if (item.type === "function_call") {
      const last = messages.at(-1);
      const call = { id: item.call_id, name: item.name, arguments: item.arguments };
      if (last?.role === "assistant") last.toolCalls = [...(last.toolCalls ?? []), call];
      else messages.push({ role: "assistant", content: "", toolCalls: [call] });
    } else if (item.type === "function_call_output")
      messages.push({ role: "tool", content: partsText(item.output), toolCallId: item.call_id });
    else
      messages.push({
        role: item.role === "developer" ? "system" : item.role,
        content: partsText(item.content),
      });
  }
  if (messages.every((message) => message.role === "assistant"))
    throw badRequest("input needs a user or system message", [{ path: "/input" }]);
  return messages;
}

function toolChoiceOf(choice: PromptBody["tool_choice"]): ToolChoice | undefined {
  if (choice === undefined || typeof choice === "string") return choice;
  return { name: choice.name };
}

function promptOf(body: PromptBody): Omit<ChatRequest, "maxTokens" | "temperature" | "stop"> {
  const format = body.text?.format;
  return {
    messages: toMessages(body),
    tools: body.tools?.map((tool) => ({
      name: tool.name,
      description: tool.description ?? undefined,
      parameters: tool.parameters ?? undefined,
    })),
    toolChoice: toolChoiceOf(body.tool_choice),
    constraint: toConstraint(
      format?.type === "json_schema"
        ? { type: "json_schema", json_schema: { schema: format.schema } }
        : format,
    ),
    thinking: body.reasoning?.effort === "none" ? false : undefined,
  };
}

function usageOf(result: CompletionResult) {
  return {
    input_tokens: result.promptTokens,
    input_tokens_details: { cached_tokens: result.cachedTokens ?? 0 },
    output_tokens: result.tokensGenerated,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: result.promptTokens + result.tokensGenerated,
  };
}

const messageItem = (id: string, text: string, status: string) => ({
  type: "message",
  id,
  status,
  role: "assistant",
  content: [{ type: "output_text", text, annotations: [], logprobs: [] }],
});
const reasoningItem = (id: string, text: string) => ({
  type: "reasoning",
  id,
  summary: [],
  content: [{ type: "reasoning_text", text }],
});
const functionCallItem = (id: string, callId: string, name: string, args: string, status: string) => ({
  type: "function_call",
  id,
  call_id: callId,
  name,
  arguments: args,
  status,
});

/** The output items of a finished result: reasoning, the message, the calls. */
function outputItems(result: CompletionResult): object[] {
  const status = result.finishReason === "length" ? "incomplete" : "completed";
  const items: object[] = [];
  if (result.reasoning !== undefined) items.push(reasoningItem(shortId("rs"), result.reasoning));
  if (result.text !== "" || !result.toolCalls) items.push(messageItem(shortId("msg"), result.text, status));
  for (const call of result.toolCalls ?? [])
    items.push(functionCallItem(shortId("fc"), call.id, call.name, call.arguments, status));
  return items;
}

export function registerResponses(app: TypedApp, service: TextgenService, maxNewTokens: number): void {
  app.post(
    "/responses",
    {
      schema: {
        tags: ["openai"],
        summary: "OpenAI's Responses API, stateless: text, tools, structured output, reasoning items",
        body: responsesRequestSchema(maxNewTokens),
      },
    },
    async (request, reply) => {
      const body = request.body;
      if (body.store === true)
        throw badRequest("store: true is not supported: this server is stateless and stores no responses", [
          { path: "/store" },
        ]);
      const generation: ChatRequest = {
        ...promptOf(body),
        maxTokens: body.max_output_tokens ?? Math.min(DEFAULT_CHAT_MAX_TOKENS, maxNewTokens),
        ...samplingOf(
          { ...body, temperature: body.temperature ?? 1, top_p: body.top_p ?? undefined },
          "max_output_tokens",
        ),
      };
      const id = shortId("resp");
      const createdAt = unixSeconds();
      const target = resolveModel(service, body.model, body.keep_alive);
      const model = target.name;
      const responseOf = (status: string, output: object[], result?: CompletionResult) => ({
        id,
        object: "response",
        created_at: createdAt,
        status,
        error: null,
        incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
        instructions: body.instructions ?? null,
        max_output_tokens: body.max_output_tokens ?? null,
        model,
        output,
        parallel_tool_calls: body.parallel_tool_calls ?? true,
        previous_response_id: null,
        reasoning: { effort: body.reasoning?.effort ?? null, summary: null },
        store: false,
        temperature: generation.temperature,
        text: { format: body.text?.format ?? { type: "text" } },
        tool_choice: body.tool_choice ?? "auto",
        tools: (body.tools ?? []).map((tool) => ({ ...tool, strict: tool.strict ?? false })),
        top_p: body.top_p ?? 1,
        truncation: "disabled",
        usage: result ? usageOf(result) : null,
        metadata: body.metadata ?? {},
      });
      const statusOf = (result: CompletionResult) =>
        result.finishReason === "length" ? "incomplete" : "completed";
      if (!body.stream) {
        const result = await generateOnce(target, generation, request, reply);
        return responseOf(statusOf(result), outputItems(result), result);
      }
      const stream = new ResponsesEventWriter();
      return generateStream(target, generation, request, reply, {
        open: () => {
          stream.events = openEventStream(request, reply);
          stream.emit("response.created", { response: responseOf("in_progress", []) });
          stream.emit("response.in_progress", { response: responseOf("in_progress", []) });
        },
        event: (event) => {
          if (event.type === "reasoning") stream.reasoning(event.text);
          else if (event.type === "text") stream.text(event.text);
          else stream.toolCall(event.delta);
        },
        finish: (result) => {
          const output = stream.finish(result);
          const status = statusOf(result);
          stream.emit(status === "completed" ? "response.completed" : "response.incomplete", {
            response: responseOf(status, output, result),
          });
        },
        fail: (error) => {
          stream.emit("error", { ...openAiErrorBody(error).error });
          stream.emit("response.failed", {
            response: { ...responseOf("failed", stream.output), error: openAiErrorBody(error).error },
          });
        },
        close: () => stream.events?.end(),
      });
    },
  );

  app.post(
    "/responses/input_tokens",
    {
      schema: {
        tags: ["openai"],
        summary: "How many tokens a Responses request's input is, rendered by the model's chat template",
        body: InputTokensRequest,
      },
    },
    async (request) => {
      const tokens = await resolveModel(service, request.body.model).countTokens({
        ...promptOf(request.body),
        maxTokens: 1,
        temperature: 0,
        stop: [],
      });
      return { object: "response.input_tokens", input_tokens: tokens };
    },
  );
}

/** OpenAI's streaming event sequence, item by item, each event numbered. */
class ResponsesEventWriter {
  events?: EventStream;
  readonly output: object[] = [];
  private sequence = 0;
  private messageSent = false;
  private open?:
    | { kind: "reasoning"; id: string; index: number; text: string }
    | { kind: "message"; id: string; index: number; text: string };
  private readonly calls: { id: string; index: number; callId: string; name: string; args: string }[] = [];

  emit(type: string, payload: object): void {
    this.events?.send({ type, sequence_number: this.sequence++, ...payload }, type);
  }

  reasoning(piece: string): void {
    if (this.open?.kind !== "reasoning") {
      this.closeOpen("completed");
      this.open = { kind: "reasoning", id: shortId("rs"), index: this.output.length, text: "" };
      this.output.push({});
      this.emit("response.output_item.added", {
        output_index: this.open.index,
        item: { type: "reasoning", id: this.open.id, summary: [], content: [] },
      });
      this.emit("response.content_part.added", {
        item_id: this.open.id,
        output_index: this.open.index,
        content_index: 0,
        part: { type: "reasoning_text", text: "" },
      });
    }
    this.open.text += piece;
    this.emit("response.reasoning_text.delta", {
      item_id: this.open.id,
      output_index: this.open.index,
      content_index: 0,
      delta: piece,
    });
  }

  text(piece: string): void {
    if (this.open?.kind !== "message") {
      this.closeOpen("completed");
      this.open = { kind: "message", id: shortId("msg"), index: this.output.length, text: "" };
      this.messageSent = true;
      this.output.push({});
      this.emit("response.output_item.added", {
        output_index: this.open.index,
        item: { type: "message", id: this.open.id, status: "in_progress", role: "assistant", content: [] },
      });
      this.emit("response.content_part.added", {
        item_id: this.open.id,
        output_index: this.open.index,
        content_index: 0,
        part: { type: "output_text", text: "", annotations: [], logprobs: [] },
      });
    }
    this.open.text += piece;
    if (piece !== "")
      this.emit("response.output_text.delta", {
        item_id: this.open.id,
        output_index: this.open.index,
        content_index: 0,
        delta: piece,
        logprobs: [],
      });
  }

  toolCall(delta: { id?: string; name?: string; arguments: string }): void {
    if (delta.id !== undefined) {
      this.closeOpen("completed");
      const call = {
        id: shortId("fc"),
        index: this.output.length,
        callId: delta.id,
        name: delta.name ?? "",
        args: "",
      };
      this.calls.push(call);
      this.output.push({});
      this.emit("response.output_item.added", {
        output_index: call.index,
        item: functionCallItem(call.id, call.callId, call.name, "", "in_progress"),
      });
    }
    const call = this.calls.at(-1);
    if (!call || delta.arguments === "") return;
    call.args += delta.arguments;
    this.emit("response.function_call_arguments.delta", {
      item_id: call.id,
      output_index: call.index,
      delta: delta.arguments,
    });
  }

  /** Sends what was held back, closes every item, and returns the output. */
  finish(result: CompletionResult): object[] {
    const status = result.finishReason === "length" ? "incomplete" : "completed";
    const streamed = this.open?.kind === "message" ? this.open.text : "";
    const rest = result.text.startsWith(streamed) ? result.text.slice(streamed.length) : "";
    if (
      rest !== "" ||
      (!result.toolCalls && this.output.length === (this.open?.kind === "reasoning" ? 1 : 0))
    )
      this.text(rest);
    this.closeOpen(status);
    const streamedCalls = this.calls.length;
    for (const [index, call] of (result.toolCalls ?? []).entries()) {
      if (index >= streamedCalls) this.toolCall({ id: call.id, name: call.name, arguments: call.arguments });
      const sent = this.calls[index]!;
      sent.args = call.arguments;
      this.emit("response.function_call_arguments.done", {
        item_id: sent.id,
        output_index: sent.index,
        name: sent.name,
        arguments: sent.args,
      });
      const item = functionCallItem(sent.id, sent.callId, sent.name, sent.args, status);
      this.output[sent.index] = item;
      this.emit("response.output_item.done", { output_index: sent.index, item });
    }
    return this.output;
  }

  private closeOpen(status: string): void {
    const open = this.open;
    if (!open) return;
    this.open = undefined;
    const where = { item_id: open.id, output_index: open.index, content_index: 0 };
    if (open.kind === "reasoning") {
      this.emit("response.reasoning_text.done", { ...where, text: open.text });
      this.emit("response.content_part.done", {
        ...where,
        part: { type: "reasoning_text", text: open.text },
      });
      const item = reasoningItem(open.id, open.text);
      this.output[open.index] = item;
      this.emit("response.output_item.done", { output_index: open.index, item });
      return;
    }
    this.emit("response.output_text.done", { ...where, text: open.text, logprobs: [] });
    this.emit("response.content_part.done", {
      ...where,
      part: { type: "output_text", text: open.text, annotations: [], logprobs: [] },
    });
    const item = messageItem(open.id, open.text, status);
    this.output[open.index] = item;
    this.emit("response.output_item.done", { output_index: open.index, item });
  }
}
