/**
 * OpenAI's Responses API (`POST /v1/responses`, `/v1/responses/input_tokens`), translated into a chat
 * the way the llama.cpp server does it: a decoder (input items → chat messages), and an encoder
 * (events → output items, and the stream's numbered events).
 *
 * Keeping responses (`store`, `previous_response_id`, `item_reference`, GET/DELETE, the Conversations
 * API) is a ResponsesStore's job: the route asks the store it is given, and with none nothing is kept,
 * so an id it would have to look up is a 404 in OpenAI's shape.
 */
import { randomBytes } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type, type Static } from "typebox";
import { badRequest, notFound, type ApiError } from "../../../core/errors.js";
import type { TypedApp } from "../../../core/http.js";
import type { GenerationEvent, Usage } from "../../engine/events.js";
import type { ChatMessage, CompletionResult, ToolChoice } from "../../engine/generator.js";
import type { TextgenService } from "../../engine/service.js";
import {
  validateRequest,
  type DecodedRequest,
  type DecodedTool,
  type DialectProfile,
  type ValidationLimits,
} from "../../engine/validation.js";
import { dialectPost, noteIgnored, noteUnenforced } from "../../../core/dialect-plugin.js";
import { respond, unixSeconds, type StreamEncoder, type WireFrame } from "./run.js";
import {
  DEFAULT_CHAT_MAX_TOKENS,
  JsonSchemaObject,
  decodeSampling,
  effortOf,
  openAiErrorBody,
  openAiFields,
  samplingFields,
} from "./openai-shared.js";
import type { FileSearchPort } from "./file-search.js";
import { fileSearchTool, runFileSearch, type FileCitation, type FileSearchRun } from "./file-search-tool.js";

/** A Responses item as it travels on the wire (input, output, or stored). */
export type ResponseItem = Record<string, unknown>;

/**
 * Where responses are kept, for `store`, `previous_response_id` and `item_reference` (the storage
 * itself, its routes and the Conversations API live beside this file, built on this interface).
 * Every method gets the request, for its tenant.
 */
export interface ResponsesStore {
  /** The input and output items of a stored response and its own predecessors, oldest first. */
  history(responseId: string, request: FastifyRequest): Promise<ResponseItem[] | undefined>;
  /** One stored item (of any response's input or output), for an `item_reference`. */
  item(itemId: string, request: FastifyRequest): Promise<ResponseItem | undefined>;
  /** A conversation's items, oldest first, for `conversation` (they come before the input). */
  conversation(conversationId: string, request: FastifyRequest): Promise<ResponseItem[] | undefined>;
  /**
   * Keeps a finished response with its own input items (references resolved, history apart) when
   * its `store` is true (the default), and adds both to its `conversation`.
   */
  save(response: ResponseItem, input: ResponseItem[], request: FastifyRequest): Promise<void>;
}

const noEffect = (what: string) => ({ description: `${what}; accepted, no effect` });

const ContentPart = Type.Object(
  { type: Type.String(), text: Type.Optional(Type.String()) },
  {
    additionalProperties: true,
    description: "input_text / output_text / refusal are read; images and files refused",
  },
);
/** Any input item: a message (type message or none), a call, a call's output, reasoning, a reference… */
const InputItem = Type.Object(
  {
    type: Type.Optional(Type.String()),
    role: Type.Optional(Type.String()),
    content: Type.Optional(Type.Union([Type.String(), Type.Array(ContentPart)])),
    id: Type.Optional(Type.String()),
    call_id: Type.Optional(Type.String()),
    name: Type.Optional(Type.String()),
    namespace: Type.Optional(Type.String()),
    arguments: Type.Optional(Type.String()),
    output: Type.Optional(Type.Union([Type.String(), Type.Array(ContentPart)])),
  },
  { additionalProperties: true },
);
const FunctionTool = {
  name: Type.Optional(Type.String()),
  description: Type.Optional(Type.String()),
  parameters: Type.Optional(JsonSchemaObject),
  strict: Type.Optional(Type.Boolean({ description: "true: a forced call refuses what cannot be enforced" })),
};
/** Function tools, namespaces of them (their nested functions offered), and hosted tools (not offered). */
const ResponsesTool = Type.Object(
  {
    type: Type.String(),
    ...FunctionTool,
    tools: Type.Optional(
      Type.Array(Type.Object({ type: Type.String(), ...FunctionTool }, { additionalProperties: true })),
    ),
  },
  { additionalProperties: true },
);
const ToolChoiceSchema = Type.Union([
  Type.String({ description: "auto, none or required" }),
  Type.Object(
    {
      type: Type.String(),
      name: Type.Optional(Type.String()),
      mode: Type.Optional(Type.String()),
      tools: Type.Optional(Type.Array(Type.Record(Type.String(), Type.Unknown()))),
    },
    { additionalProperties: true },
  ),
]);
const TextFormat = Type.Object({
  type: Type.String({ description: "text, json_object or json_schema" }),
  name: Type.Optional(Type.String()),
  schema: Type.Optional(JsonSchemaObject),
  description: Type.Optional(Type.String()),
  strict: Type.Optional(Type.Boolean({ description: "true: refuse what the grammar cannot enforce" })),
});

/** The fields a request and a token count share: what the model reads. */
const promptFields = {
  model: samplingFields.model,
  input: Type.Optional(Type.Union([Type.String(), Type.Array(InputItem)])),
  instructions: Type.Optional(Type.String()),
  tools: Type.Optional(Type.Array(ResponsesTool)),
  tool_choice: Type.Optional(ToolChoiceSchema),
  parallel_tool_calls: Type.Optional(Type.Boolean({ description: "a forced call is always one call" })),
  text: Type.Optional(
    Type.Object({
      format: Type.Optional(TextFormat),
      verbosity: Type.Optional(Type.String(noEffect("verbosity"))),
    }),
  ),
  reasoning: Type.Optional(
    Type.Object({
      effort: Type.Optional(
        Type.String({ description: "none turns thinking off; minimal…high set a budget" }),
      ),
      summary: Type.Optional(Type.String({ description: "the summary is the reasoning text itself" })),
      generate_summary: Type.Optional(Type.String(noEffect("older name of summary"))),
    }),
  ),
  previous_response_id: Type.Optional(Type.String({ description: "needs a response store" })),
  conversation: Type.Optional(
    Type.Union([Type.String(), Type.Object({ id: Type.String() }), Type.Null()], {
      description: "its items come before the input; the input and output join it (needs a response store)",
    }),
  ),
  truncation: Type.Optional(Type.String({ description: "auto: a prompt too long loses its start" })),
};

export const ResponsesRequestSchema = Type.Object({
  ...promptFields,
  max_output_tokens: Type.Optional(
    Type.Integer({ description: "above MAX_NEW_TOKENS or the context: clamped" }),
  ),
  store: Type.Optional(Type.Boolean({ description: "keep the response (needs a response store)" })),
  metadata: Type.Optional(Type.Record(Type.String(), Type.String(), { description: "echoed back" })),
  include: Type.Optional(
    Type.Array(Type.String(), {
      description:
        "file_search_call.results: the search results in the file_search_call item; others no effect",
    }),
  ),
  top_logprobs: Type.Optional(Type.Integer(noEffect("logprobs in Responses"))),
  prompt_cache_key: Type.Optional(
    Type.String({ description: "requests with a key keep their prompt's cache entries ahead of others" }),
  ),
  prompt_cache_retention: Type.Optional(Type.String(noEffect("prompt caching is automatic"))),
  prompt_cache_options: Type.Optional(Type.Unknown(noEffect("prompt caching is automatic"))),
  client_metadata: Type.Optional(Type.Unknown(noEffect("client metadata"))),
  safety_identifier: Type.Optional(Type.String(noEffect("an end-user id"))),
  service_tier: Type.Optional(Type.String(noEffect("service tier"))),
  background: Type.Optional(Type.Boolean(noEffect("every response is answered in the foreground"))),
  context_management: Type.Optional(Type.Unknown(noEffect("context management"))),
  prompt: Type.Optional(Type.Unknown(noEffect("stored prompt templates"))),
  moderation: Type.Optional(Type.Unknown(noEffect("moderation"))),
  max_tool_calls: Type.Optional(Type.Integer(noEffect("a forced call is one call"))),
  ...samplingFields,
});

export const InputTokensRequestSchema = Type.Object(promptFields);
type PromptBody = Static<typeof InputTokensRequestSchema>;
type ResponsesBody = Static<typeof ResponsesRequestSchema>;

const shortId = (prefix: string) => `${prefix}_${randomBytes(12).toString("hex")}`;

/** Hosted tools the model cannot run here: accepted, not offered, named as ignored. */
function isFunction(tool: { type: string }): boolean {
  return tool.type === "function";
}

/** The offered name of each function, and the namespace it came from (for the call's `namespace`). */
export type ToolNames = Map<string, { name: string; namespace?: string }>;

/** The tools: functions offered as they are, a namespace's functions offered, hosted ones ignored. */
function decodeTools(body: PromptBody, ignored: string[]): { tools: DecodedTool[]; names: ToolNames } {
  const tools: DecodedTool[] = [];
  const names: ToolNames = new Map();
  const offer = (
    tool: { name?: string; description?: string; parameters?: unknown; strict?: boolean },
    namespace?: string,
  ) => {
    if (tool.name === undefined) return;
    // A name two namespaces share is qualified; otherwise the model sees the function's own name.
    const offered = names.has(tool.name) && namespace ? `${namespace}.${tool.name}` : tool.name;
    names.set(offered, { name: tool.name, ...(namespace && { namespace }) });
    tools.push({
      name: offered,
      description: tool.description,
      parameters: tool.parameters,
      strict: tool.strict,
    });
  };
  (body.tools ?? []).forEach((tool, index) => {
    if (isFunction(tool)) offer(tool);
    else if (tool.type === "namespace" && tool.tools) {
      tool.tools.forEach((inner, at) => {
        if (isFunction(inner)) offer(inner, tool.name);
        else ignored.push(`tools.${index}.tools.${at} (${inner.type})`);
      });
    } else if (tool.type !== "file_search") ignored.push(`tools.${index} (${tool.type})`);
  });
  return { tools, names };
}

function decodeToolChoice(choice: PromptBody["tool_choice"], ignored: string[]): ToolChoice | undefined {
  if (choice === undefined) return undefined;
  if (typeof choice === "string") {
    if (!["auto", "none", "required"].includes(choice))
      throw badRequest(`tool_choice "${choice}" is not auto, none or required`, [{ path: "/tool_choice" }]);
    return choice as ToolChoice;
  }
  if (choice.type === "function" && choice.name !== undefined) return { name: choice.name };
  if (choice.type === "allowed_tools") return choice.mode === "required" ? "required" : "auto";
  // file_search runs whenever it is given (file-search-tool.ts): choosing it is already so.
  if (choice.type === "file_search") return "auto";
  ignored.push(`tool_choice (${choice.type})`);
  return "auto";
}

function partsText(content: unknown, path: string): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part: { type?: string; text?: string }, at) => {
      if (
        ["input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal"].includes(
          part.type ?? "",
        )
      )
        return part.text ?? (part as { refusal?: string }).refusal ?? "";
      throw badRequest(`${part.type} content is not supported: the served model reads text only`, [
        { path: `${path}/${at}` },
      ]);
    })
    .join("");
}

/** Input items as chat messages: calls join the assistant turn before them, outputs answer them. */
function decodeItems(items: ResponseItem[], ignored: string[]): ChatMessage[] {
  const messages: ChatMessage[] = [];
  items.forEach((item, index) => {
    const type = (item.type as string | undefined) ?? "message";
    const path = `/input/${index}`;
    if (type === "message") {
      const role = item.role as string;
      if (!["user", "system", "developer", "assistant"].includes(role))
        throw badRequest(`input.${index}.role "${role}" is not user, system, developer or assistant`, [
          { path: `${path}/role` },
        ]);
      messages.push({
        role: role === "developer" ? "system" : (role as ChatMessage["role"]),
        content: partsText(item.content, `${path}/content`),
      });
    } else if (type === "function_call") {
      const last = messages.at(-1);
      const call = {
        id: String(item.call_id),
        name: String(item.name),
        arguments: String(item.arguments ?? ""),
      };
      if (last?.role === "assistant") last.toolCalls = [...(last.toolCalls ?? []), call];
      else messages.push({ role: "assistant", content: "", toolCalls: [call] });
    } else if (type === "function_call_output")
      messages.push({
        role: "tool",
        content: partsText(item.output, `${path}/output`),
        toolCallId: String(item.call_id),
      });
    // A file_search_call of an earlier response: its passages were that turn's; this one searches anew.
    else if (type !== "reasoning" && type !== "file_search_call") ignored.push(`input.${index} (${type})`);
  });
  return messages;
}

/** The id `conversation` names (a string or `{id}`), if any. */
const conversationIdOf = (body: PromptBody) =>
  typeof body.conversation === "string" ? body.conversation : (body.conversation?.id ?? undefined);

/**
 * The history (`conversation`'s items or `previous_response_id`'s chain) and the request's own
 * input with every `item_reference` replaced by the item it names, all through the store (none: a
 * 404, as for an id OpenAI does not know).
 */
async function resolveInput(
  body: PromptBody,
  store: ResponsesStore | undefined,
  request: FastifyRequest,
): Promise<{ history: ResponseItem[]; own: ResponseItem[] }> {
  const given: ResponseItem[] =
    body.input === undefined
      ? []
      : typeof body.input === "string"
        ? [{ role: "user", content: body.input }]
        : body.input;
  const history: ResponseItem[] = [];
  const conversation = conversationIdOf(body);
  if (conversation !== undefined) {
    if (body.previous_response_id !== undefined)
      throw badRequest("previous_response_id and conversation cannot be used together", [
        { path: "/conversation" },
      ]);
    const items = await store?.conversation(conversation, request);
    if (!items)
      throw withParam(notFound(`Conversation with id '${conversation}' not found.`), "/conversation");
    history.push(...items);
  }
  if (body.previous_response_id !== undefined) {
    const chain = await store?.history(body.previous_response_id, request);
    if (!chain)
      throw withParam(
        notFound(`Previous response with id '${body.previous_response_id}' not found.`),
        "/previous_response_id",
      );
    history.push(...chain);
  }
  const items: ResponseItem[] = [];
  for (const [index, item] of given.entries()) {
    if (item.type !== "item_reference") {
      items.push(item);
      continue;
    }
    const found = typeof item.id === "string" ? await store?.item(item.id, request) : undefined;
    if (!found) throw withParam(notFound(`Item with id '${String(item.id)}' not found.`), `/input/${index}`);
    items.push(found);
  }
  return { history, own: items };
}

function withParam<T extends { details: unknown[] }>(error: T, path: string): T {
  error.details.push({ path });
  return error;
}

export interface ResponsesDecoding {
  decoded: DecodedRequest;
  ignored: string[];
  names: ToolNames;
  /** The request's own input items (references resolved, history apart), for the store. */
  input: ResponseItem[];
}

/** A request as a DecodedRequest, its input and history already resolved (`resolveInput`). */
export function decodeResponses(
  body: PromptBody & Partial<ResponsesBody>,
  input: ResponseItem[],
  history: ResponseItem[] = [],
): ResponsesDecoding {
  const ignored: string[] = [];
  const { tools, names } = decodeTools(body, ignored);
  const messages: ChatMessage[] = [];
  if (body.instructions) messages.push({ role: "system", content: body.instructions });
  messages.push(...decodeItems([...history, ...input], ignored));
  const format = body.text?.format;
  const effort = effortOf(body.reasoning?.effort);
  const sampling = decodeSampling(body);
  return {
    decoded: {
      ...sampling,
      messages,
      maxTokens: body.max_output_tokens,
      tools,
      toolChoice: decodeToolChoice(body.tool_choice, ignored),
      outputs: [
        ...(format?.type === "json_object"
          ? [{ type: "json_object" as const }]
          : format?.type === "json_schema"
            ? [{ type: "json_schema" as const, schema: format.schema, strict: format.strict }]
            : []),
        ...(sampling.outputs ?? []),
      ],
      reasoning: effort ? { effort } : undefined,
      truncate: body.truncation === "auto" ? true : sampling.truncate,
      // A conversation's turns share their prefix, so its id is as good a key as one the client names.
      cacheHint: { key: body.prompt_cache_key ?? conversationIdOf(body) },
    },
    ignored,
    names,
    input,
  };
}

const profile: DialectProfile = {
  defaultMaxTokens: (max) => Math.min(DEFAULT_CHAT_MAX_TOKENS, max),
  defaultTemperature: 1,
  clampMaxTokens: true,
  fields: { ...openAiFields, maxTokens: "/max_output_tokens", output: "/text/format", messages: "/input" },
  toolParametersPath: (index) => `/tools/${index}/parameters`,
  schemaPath: "/text/format/schema",
};

function usageOf(usage: Usage) {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: usage.cachedTokens },
    output_tokens: usage.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

const messageItem = (id: string, text: string, status: string, annotations: FileCitation[] = []) => ({
  type: "message",
  id,
  status,
  role: "assistant",
  content: [{ type: "output_text", text, annotations, logprobs: [] }],
});
/** The reasoning, as its text and as its summary (clients that show summaries see the reasoning). */
const reasoningItem = (id: string, text: string) => ({
  type: "reasoning",
  id,
  summary: [{ type: "summary_text", text }],
  content: [{ type: "reasoning_text", text }],
});

function functionCallItem(
  id: string,
  callId: string,
  offered: string,
  args: string,
  status: string,
  names: ToolNames,
) {
  const origin = names.get(offered);
  return {
    type: "function_call",
    id,
    call_id: callId,
    name: origin?.name ?? offered,
    ...(origin?.namespace && { namespace: origin.namespace }),
    arguments: args,
    status,
  };
}

const statusOf = (finishReason: CompletionResult["finishReason"]) =>
  finishReason === "length" ? "incomplete" : "completed";

/** The output items of a finished result: the file search, reasoning, the message, the calls. */
function outputItems(result: CompletionResult, names: ToolNames, search?: FileSearchRun): ResponseItem[] {
  const status = statusOf(result.finishReason);
  const items: ResponseItem[] = search ? [search.item] : [];
  if (result.reasoning !== undefined) items.push(reasoningItem(shortId("rs"), result.reasoning));
  if (result.text !== "" || !result.toolCalls)
    items.push(messageItem(shortId("msg"), result.text, status, search?.annotate(result.text)));
  for (const call of result.toolCalls ?? [])
    items.push(functionCallItem(shortId("fc"), call.id, call.name, call.arguments, status, names));
  return items;
}

/** The response object around an output. */
type ResponseOf = (status: string, output: ResponseItem[], usage?: Usage) => ResponseItem;

function responseShape(
  body: ResponsesBody,
  id: string,
  model: string,
  temperature: number,
  stored: boolean,
): ResponseOf {
  const createdAt = unixSeconds();
  return (status, output, usage) => ({
    id,
    object: "response",
    created_at: createdAt,
    status,
    background: false,
    error: null,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model,
    output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    conversation: conversationIdOf(body) === undefined ? null : { id: conversationIdOf(body) },
    prompt_cache_key: body.prompt_cache_key ?? null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? null },
    safety_identifier: body.safety_identifier ?? null,
    service_tier: "default",
    store: stored,
    temperature,
    text: { format: body.text?.format ?? { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: (body.tools ?? []).map((tool) =>
      isFunction(tool) ? { ...tool, strict: tool.strict ?? false } : tool,
    ),
    top_p: body.top_p ?? 1,
    truncation: body.truncation ?? "disabled",
    usage: usage ? usageOf(usage) : null,
    user: body.user ?? null,
    metadata: body.metadata ?? {},
  });
}

/**
 * OpenAI's streaming event sequence, item by item, each event numbered. An item's closing events
 * wait for the next part or the end, so its status says whether the answer was cut.
 */
class ResponsesEncoder implements StreamEncoder {
  readonly output: ResponseItem[] = [];
  private sequence = 0;
  private current?: {
    kind: "reasoning" | "message" | "call";
    id: string;
    index: number;
    text: string;
    callId?: string;
    name?: string;
  };
  private closing?: NonNullable<ResponsesEncoder["current"]>;

  constructor(
    private readonly responseOf: ResponseOf,
    private readonly names: ToolNames,
    private readonly onDone?: (response: ResponseItem) => void,
    private readonly search?: FileSearchRun,
  ) {}

  private frame(type: string, payload: object): WireFrame {
    return { event: type, data: { type, sequence_number: this.sequence++, ...payload } };
  }

  start(): WireFrame[] {
    const frames = [
      this.frame("response.created", { response: this.responseOf("in_progress", []) }),
      this.frame("response.in_progress", { response: this.responseOf("in_progress", []) }),
    ];
    if (this.search) {
      frames.push(...this.search.frames((type, payload) => this.frame(type, payload), this.output.length));
      this.output.push(this.search.item);
    }
    return frames;
  }

  private open(
    kind: "reasoning" | "message" | "call",
    prefix: string,
    extra: { callId?: string; name?: string } = {},
  ) {
    const frames = this.flush("completed");
    this.current = { kind, id: shortId(prefix), index: this.output.length, text: "", ...extra };
    this.output.push({});
    return frames;
  }

  event(event: GenerationEvent): WireFrame[] {
    const where = () => ({ item_id: this.current!.id, output_index: this.current!.index });
    switch (event.type) {
      case "reasoning-start": {
        const frames = this.open("reasoning", "rs");
        return [
          ...frames,
          this.frame("response.output_item.added", {
            output_index: this.current!.index,
            item: { type: "reasoning", id: this.current!.id, summary: [], content: [] },
          }),
          this.frame("response.reasoning_summary_part.added", {
            ...where(),
            summary_index: 0,
            part: { type: "summary_text", text: "" },
          }),
          this.frame("response.content_part.added", {
            ...where(),
            content_index: 0,
            part: { type: "reasoning_text", text: "" },
          }),
        ];
      }
      case "reasoning-delta":
        this.current!.text += event.delta;
        return [
          this.frame("response.reasoning_summary_text.delta", {
            ...where(),
            summary_index: 0,
            delta: event.delta,
          }),
          this.frame("response.reasoning_text.delta", { ...where(), content_index: 0, delta: event.delta }),
        ];
      case "text-start": {
        const frames = this.open("message", "msg");
        return [
          ...frames,
          this.frame("response.output_item.added", {
            output_index: this.current!.index,
            item: {
              type: "message",
              id: this.current!.id,
              status: "in_progress",
              role: "assistant",
              content: [],
            },
          }),
          this.frame("response.content_part.added", {
            ...where(),
            content_index: 0,
            part: { type: "output_text", text: "", annotations: [], logprobs: [] },
          }),
        ];
      }
      case "text-delta":
        this.current!.text += event.delta;
        return [
          this.frame("response.output_text.delta", {
            ...where(),
            content_index: 0,
            delta: event.delta,
            logprobs: [],
          }),
        ];
      case "tool-call-start": {
        const frames = this.open("call", "fc", { callId: event.id, name: event.name });
        return [
          ...frames,
          this.frame("response.output_item.added", {
            output_index: this.current!.index,
            item: functionCallItem(this.current!.id, event.id, event.name, "", "in_progress", this.names),
          }),
        ];
      }
      case "tool-call-delta":
        this.current!.text += event.delta;
        return [this.frame("response.function_call_arguments.delta", { ...where(), delta: event.delta })];
      case "tool-call-end":
        this.current!.text = event.arguments;
        this.closing = this.current;
        this.current = undefined;
        return [];
      case "reasoning-end":
      case "text-end":
        this.closing = this.current;
        this.current = undefined;
        return [];
      case "finish": {
        const status = statusOf(event.finishReason);
        const frames = this.flush(status);
        const response = this.responseOf(status, this.output, event.usage);
        this.onDone?.(response);
        return [
          ...frames,
          this.frame(status === "completed" ? "response.completed" : "response.incomplete", { response }),
        ];
      }
      default:
        return [];
    }
  }

  /** The closing events of the item that ended last, now that its status is known. */
  private flush(status: string): WireFrame[] {
    const item = this.closing;
    this.closing = undefined;
    if (!item) return [];
    const where = { item_id: item.id, output_index: item.index };
    let done: ResponseItem;
    const frames: WireFrame[] = [];
    if (item.kind === "reasoning") {
      done = reasoningItem(item.id, item.text);
      frames.push(
        this.frame("response.reasoning_text.done", { ...where, content_index: 0, text: item.text }),
        this.frame("response.content_part.done", {
          ...where,
          content_index: 0,
          part: { type: "reasoning_text", text: item.text },
        }),
        this.frame("response.reasoning_summary_text.done", { ...where, summary_index: 0, text: item.text }),
        this.frame("response.reasoning_summary_part.done", {
          ...where,
          summary_index: 0,
          part: { type: "summary_text", text: item.text },
        }),
      );
    } else if (item.kind === "message") {
      const annotations = this.search?.annotate(item.text) ?? [];
      done = messageItem(item.id, item.text, status, annotations);
      frames.push(
        ...annotations.map((annotation, at) =>
          this.frame("response.output_text.annotation.added", {
            ...where,
            content_index: 0,
            annotation_index: at,
            annotation,
          }),
        ),
        this.frame("response.output_text.done", {
          ...where,
          content_index: 0,
          text: item.text,
          logprobs: [],
        }),
        this.frame("response.content_part.done", {
          ...where,
          content_index: 0,
          part: { type: "output_text", text: item.text, annotations, logprobs: [] },
        }),
      );
    } else {
      done = functionCallItem(item.id, item.callId!, item.name!, item.text, status, this.names);
      frames.push(
        this.frame("response.function_call_arguments.done", {
          ...where,
          name: done.name,
          arguments: item.text,
        }),
      );
    }
    this.output[item.index] = done;
    frames.push(this.frame("response.output_item.done", { output_index: item.index, item: done }));
    return frames;
  }

  end(): WireFrame[] {
    return [];
  }

  error(error: ApiError): WireFrame[] {
    const body = openAiErrorBody(error).error;
    return [
      this.frame("error", { code: body.code, message: body.message, param: body.param }),
      this.frame("response.failed", { response: { ...this.responseOf("failed", this.output), error: body } }),
    ];
  }
}

/** Decodes and validates a body; ignored fields and unenforced keywords go in the headers. */
async function prepare(
  body: PromptBody & Partial<ResponsesBody>,
  request: FastifyRequest,
  reply: FastifyReply,
  limits: ValidationLimits,
  store: ResponsesStore | undefined,
  fileSearch: FileSearchPort | undefined,
) {
  const { history, own } = await resolveInput(body, store, request);
  const decoding = decodeResponses(body, own, history);
  // The search runs before generation: its passages are part of what the model reads.
  const searched = await runFileSearch(
    fileSearchTool(body.tools),
    body.tool_choice,
    decoding.decoded.messages ?? [],
    fileSearch,
    request,
    body.include,
  );
  decoding.decoded.messages = searched.messages;
  const validated = validateRequest(decoding.decoded, profile, limits);
  noteIgnored(request, reply, decoding.ignored);
  noteUnenforced(reply, validated.unenforced);
  return { decoding, validated, search: searched.run };
}

export function registerResponses(
  app: TypedApp,
  service: TextgenService,
  limits: ValidationLimits,
  store: ResponsesStore | undefined,
  fileSearch?: FileSearchPort,
): void {
  dialectPost(
    app,
    "/responses",
    {
      tags: ["openai"],
      summary:
        "OpenAI's Responses API: text, tools (namespaces too), structured output, reasoning with summaries",
      body: ResponsesRequestSchema,
    },
    async (body, request, reply) => {
      const { decoding, validated, search } = await prepare(body, request, reply, limits, store, fileSearch);
      const target = service.resolveModel(body.model, "generate", { keepAlive: body.keep_alive });
      const stored = store !== undefined && body.store !== false;
      const responseOf = responseShape(
        body,
        shortId("resp"),
        target.name,
        validated.request.temperature,
        stored,
      );
      // A conversation gets the input and output even with store: false (the response is not kept).
      // A whole response is answered once kept; a stream's last event goes out as its save starts.
      const save = async (response: ResponseItem) => {
        if (stored || (store !== undefined && conversationIdOf(body) !== undefined))
          await store.save(response, decoding.input, request).catch((error: unknown) => {
            request.log.error({ err: error }, "could not store the response");
          });
      };
      return respond({
        request,
        reply,
        model: target,
        validated: { ...validated, n: 1 },
        stream: body.stream === true,
        encoder: () =>
          new ResponsesEncoder(responseOf, decoding.names, (response) => void save(response), search),
        whole: async ([result]) => {
          const output = outputItems(result!, decoding.names, search);
          const response = responseOf(statusOf(result!.finishReason), output, {
            promptTokens: result!.promptTokens,
            completionTokens: result!.tokensGenerated,
            cachedTokens: result!.cachedTokens ?? 0,
          });
          await save(response);
          return response;
        },
      });
    },
  );

  app.post(
    "/responses/input_tokens",
    {
      schema: {
        tags: ["openai"],
        summary: "How many tokens a Responses request's input is, rendered by the model's chat template",
        body: InputTokensRequestSchema,
      },
    },
    async (request, reply) => {
      const { validated } = await prepare(request.body, request, reply, limits, store, fileSearch);
      const tokens = await service
        .resolveModel(request.body.model, "generate")
        .countTokens(validated.request);
      return { object: "response.input_tokens", input_tokens: tokens };
    },
  );
}
