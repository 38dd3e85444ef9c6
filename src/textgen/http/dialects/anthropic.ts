/**
 * Anthropic's Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`), for @anthropic-ai/sdk
 * and the tools built on it: a decoder (wire body → DecodedRequest) and an encoder (events → the
 * message, or its event stream). Errors in Anthropic's shape: `{type:"error", error:{type, message}}`.
 */
import { randomBytes } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type, type Static } from "typebox";
import { badRequest, type ApiError } from "../../../core/errors.js";
import type { TypedApp } from "../../../core/http.js";
import type { GenerationEvent, Usage } from "../../engine/events.js";
import type { ChatMessage, CompletionResult, ToolChoice } from "../../engine/generator.js";
import type { TextgenService } from "../../engine/service.js";
import {
  validateRequest,
  type DecodedRequest,
  type DialectProfile,
  type ReasoningEffort,
  type ValidationLimits,
} from "../../engine/validation.js";
import { parseArgumentsObject } from "./json-partial.js";
import { JsonSchemaObject } from "./openai-shared.js";
import {
  dialectPost,
  dialectPlugin,
  noEffect,
  noteIgnored,
  noteUnenforced,
  type Dialect,
} from "../../../core/dialect-plugin.js";
import { respond, validationLimits, type LimitsConfig, type StreamEncoder, type WireFrame } from "./run.js";

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

/** Registered under /v1 beside the OpenAI routes, which answer unknown /v1 paths. */
export const anthropicDialect: Dialect = { errorShape: anthropicErrorBody, tolerant: true, notFound: false };

const cacheControl = {
  cache_control: Type.Optional(
    Type.Unknown({ description: "a breakpoint: the prompt up to here is kept cached ahead of others" }),
  ),
};
/** Whether a block, tool or body carries a `cache_control` breakpoint. */
const marked = (value: unknown) =>
  typeof value === "object" && value !== null && (value as { cache_control?: unknown }).cache_control != null;

const TextBlock = Type.Object({
  type: Type.Literal("text"),
  text: Type.String(),
  citations: Type.Optional(Type.Unknown(noEffect("citations"))),
  ...cacheControl,
});
const ToolUseBlock = Type.Object({
  type: Type.Literal("tool_use"),
  id: Type.String(),
  name: Type.String(),
  input: Type.Unknown(),
  caller: Type.Optional(Type.Unknown(noEffect("the call's caller"))),
  toolset_name: Type.Optional(Type.Unknown(noEffect("the toolset"))),
  ...cacheControl,
});
const ToolResultBlock = Type.Object({
  type: Type.Literal("tool_result"),
  tool_use_id: Type.String(),
  content: Type.Optional(
    Type.Union([
      Type.String(),
      Type.Array(Type.Object({ type: Type.String(), text: Type.Optional(Type.String()) })),
    ]),
  ),
  is_error: Type.Optional(Type.Boolean()),
  toolset_name: Type.Optional(Type.Unknown(noEffect("the toolset"))),
  ...cacheControl,
});
/** Earlier thinking: shown to the model again (as Anthropic does), unless context_management clears it. */
const ThinkingBlock = Type.Object({
  type: Type.Literal("thinking"),
  thinking: Type.String(),
  signature: Type.Optional(Type.String()),
  ...cacheControl,
});
const RedactedThinkingBlock = Type.Object({
  type: Type.Literal("redacted_thinking"),
  data: Type.String(),
  ...cacheControl,
});
/** Any other block the reference defines (images, documents, server tool results…): read by its type. */
const OtherBlock = Type.Object({ type: Type.String() }, { additionalProperties: true });
const Block = Type.Union([
  TextBlock,
  ToolUseBlock,
  ToolResultBlock,
  ThinkingBlock,
  RedactedThinkingBlock,
  OtherBlock,
]);
const Message = Type.Object({
  role: Type.Union([Type.Literal("user"), Type.Literal("assistant"), Type.Literal("system")]),
  content: Type.Union([Type.String(), Type.Array(Block)]),
});
const CustomTool = Type.Object({
  name: Type.String(),
  description: Type.Optional(Type.String()),
  input_schema: JsonSchemaObject,
  type: Type.Optional(Type.Literal("custom")),
  strict: Type.Optional(Type.Boolean({ description: "true: a forced call refuses what cannot be enforced" })),
  defer_loading: Type.Optional(Type.Boolean(noEffect("every tool is offered at once"))),
  eager_input_streaming: Type.Optional(Type.Boolean(noEffect("tool input always streams"))),
  input_examples: Type.Optional(Type.Unknown(noEffect("input examples"))),
  allowed_callers: Type.Optional(Type.Unknown(noEffect("callers"))),
  ...cacheControl,
});
/** Anthropic's server tools (web search, code execution…): accepted, not offered, named as ignored. */
const ServerTool = Type.Object({ type: Type.String(), name: Type.String() }, { additionalProperties: true });
const Tool = Type.Union([CustomTool, ServerTool]);
const ToolChoiceSchema = Type.Object({
  type: Type.Union(["auto", "any", "tool", "none"].map((type) => Type.Literal(type))),
  name: Type.Optional(Type.String()),
  disable_parallel_tool_use: Type.Optional(Type.Boolean({ description: "a forced call is always one call" })),
});
const Thinking = Type.Object({
  type: Type.Union(["enabled", "disabled", "adaptive", "between_tools"].map((type) => Type.Literal(type))),
  budget_tokens: Type.Optional(Type.Integer({ description: "reasoning tokens at most (within max_tokens)" })),
  display: Type.Optional(Type.String({ description: "omitted: thinking blocks carry no text" })),
});
const OutputFormat = Type.Object({ type: Type.String(), schema: Type.Optional(JsonSchemaObject) });
const ContextManagement = Type.Object({
  edits: Type.Optional(
    Type.Array(
      Type.Object({
        type: Type.String({
          description: "clear_thinking_20251015 is applied; the others accepted, no effect",
        }),
        keep: Type.Optional(Type.Unknown()),
        trigger: Type.Optional(Type.Unknown()),
        clear_at_least: Type.Optional(Type.Unknown()),
        clear_tool_inputs: Type.Optional(Type.Unknown()),
        exclude_tools: Type.Optional(Type.Unknown()),
        instructions: Type.Optional(Type.Unknown()),
        pause_after_compaction: Type.Optional(Type.Unknown()),
      }),
    ),
  ),
});

/** The fields a request and a token count share: what the model reads. */
const promptFields = {
  model: Type.String({ description: "the model to answer (GET /v1/models)" }),
  messages: Type.Array(Message),
  system: Type.Optional(Type.Union([Type.String(), Type.Array(TextBlock)])),
  tools: Type.Optional(Type.Array(Tool)),
  tool_choice: Type.Optional(ToolChoiceSchema),
  thinking: Type.Optional(Thinking),
  output_config: Type.Optional(
    Type.Object({
      effort: Type.Optional(Type.String({ description: "low…max: the thinking budget" })),
      format: Type.Optional(OutputFormat),
      task_budget: Type.Optional(Type.Unknown(noEffect("a task budget"))),
    }),
  ),
  output_format: Type.Optional(OutputFormat),
  context_management: Type.Optional(ContextManagement),
  ...cacheControl,
  speed: Type.Optional(Type.String(noEffect("speed"))),
  mcp_servers: Type.Optional(Type.Unknown(noEffect("MCP servers are not connected"))),
  betas: Type.Optional(Type.Unknown(noEffect("beta flags"))),
};

export const MessagesRequestSchema = Type.Object({
  ...promptFields,
  max_tokens: Type.Integer({ description: "above MAX_NEW_TOKENS or the context: clamped" }),
  stop_sequences: Type.Optional(Type.Array(Type.String())),
  temperature: Type.Optional(Type.Number()),
  top_p: Type.Optional(Type.Number()),
  top_k: Type.Optional(Type.Integer()),
  stream: Type.Optional(Type.Boolean()),
  metadata: Type.Optional(Type.Object({ user_id: Type.Optional(Type.String()) }, noEffect("metadata"))),
  container: Type.Optional(Type.Unknown(noEffect("containers"))),
  diagnostics: Type.Optional(Type.Unknown(noEffect("diagnostics"))),
  inference_geo: Type.Optional(Type.Unknown(noEffect("inference location"))),
  service_tier: Type.Optional(Type.String(noEffect("service tier"))),
  user_profile_id: Type.Optional(Type.String(noEffect("a user profile"))),
  workspace_id: Type.Optional(Type.String(noEffect("a workspace"))),
  billing_policy: Type.Optional(Type.Unknown(noEffect("billing"))),
  compaction: Type.Optional(Type.Unknown(noEffect("compaction"))),
  fallbacks: Type.Optional(Type.Unknown(noEffect("fallback models"))),
  fallback_credit_token: Type.Optional(Type.Unknown(noEffect("fallback credit"))),
  thread: Type.Optional(Type.Unknown(noEffect("threads"))),
  // llama.cpp's extensions, as its server accepts them here too.
  min_p: Type.Optional(Type.Number()),
  seed: Type.Optional(Type.Integer({ description: "-1 = random" })),
  logit_bias: Type.Optional(Type.Record(Type.String(), Type.Number())),
});

export const CountTokensRequestSchema = Type.Object(promptFields);
type PromptBody = Static<typeof CountTokensRequestSchema>;
type MessagesBody = Static<typeof MessagesRequestSchema>;
type BlockValue = Static<typeof Block>;

const shortId = (prefix: string) => `${prefix}_${randomBytes(12).toString("base64url")}`;

/** What decoding learned besides the request: fields read and not acted on, edits applied. */
export interface AnthropicDecoding {
  decoded: DecodedRequest;
  ignored: string[];
  clearedThinkingTurns?: number;
  /** `thinking.display: "omitted"`: thinking blocks go out without their text. */
  omitThinking: boolean;
}

export function decodeMessages(body: PromptBody & Partial<MessagesBody>): AnthropicDecoding {
  const ignored: string[] = [];
  const breakpoints: number[] = (body.tools ?? []).some(marked) ? [0] : [];
  let messages = decodeConversation(body, ignored, breakpoints);
  // A top-level cache_control (Anthropic's automatic caching) marks the whole conversation.
  if (marked(body)) breakpoints.push(messages.length);
  let clearedThinkingTurns: number | undefined;
  for (const [i, edit] of (body.context_management?.edits ?? []).entries()) {
    if (edit.type.startsWith("clear_thinking")) {
      const cleared = clearThinking(messages, edit.keep);
      messages = cleared.messages;
      clearedThinkingTurns = (clearedThinkingTurns ?? 0) + cleared.turns;
    } else if (!edit.type.startsWith("clear_tool_uses") && !edit.type.startsWith("compact"))
      ignored.push(`context_management.edits.${i} (${edit.type})`);
  }
  const tools = (body.tools ?? []).flatMap((tool, index) => {
    if (tool.type === undefined || tool.type === "custom") {
      const custom = tool as Static<typeof CustomTool>;
      return [
        {
          name: custom.name,
          description: custom.description,
          parameters: custom.input_schema,
          strict: custom.strict,
        },
      ];
    }
    ignored.push(`tools.${index} (${tool.type})`);
    return [];
  });
  const format = body.output_config?.format ?? body.output_format;
  return {
    decoded: {
      messages,
      maxTokens: body.max_tokens,
      temperature: body.temperature,
      topP: body.top_p,
      topK: body.top_k,
      minP: body.min_p,
      seed: body.seed,
      logitBias: body.logit_bias,
      stop: body.stop_sequences,
      tools,
      toolChoice: toolChoiceOf(body.tool_choice),
      outputs: format?.type === "json_schema" ? [{ type: "json_schema", schema: format.schema }] : [],
      reasoning: reasoningOf(body),
      cacheHint: { prefixes: breakpoints },
    },
    ignored,
    clearedThinkingTurns,
    omitThinking: body.thinking?.display === "omitted",
  };
}

/**
 * `system` and the messages' blocks as chat messages: tool results answer the calls of the turn before.
 * `breakpoints` gets, for each system or message with a `cache_control` block, the number of chat
 * messages up to and including it (the engine's prefix hints count messages).
 */
function decodeConversation(body: PromptBody, ignored: string[], breakpoints: number[]): ChatMessage[] {
  const messages: ChatMessage[] = [];
  const system = body.system === undefined ? "" : textOf(body.system);
  if (system !== "") messages.push({ role: "system", content: system });
  if (Array.isArray(body.system) && body.system.some(marked)) breakpoints.push(messages.length);
  body.messages.forEach((message, index) => {
    decodeMessage(message, index, messages, ignored);
    if (Array.isArray(message.content) && message.content.some(marked)) breakpoints.push(messages.length);
  });
  return messages;
}

/** One wire message's blocks appended to `messages` (a tool result is a message of its own). */
function decodeMessage(
  message: PromptBody["messages"][number],
  index: number,
  messages: ChatMessage[],
  ignored: string[],
): void {
  if (typeof message.content === "string") {
    messages.push({ role: message.role, content: message.content });
    return;
  }
  let text = "";
  let reasoning = "";
  const calls: NonNullable<ChatMessage["toolCalls"]> = [];
  (message.content as BlockValue[]).forEach((block, at) => {
    const path = `/messages/${index}/content/${at}`;
    switch (block.type) {
      case "text":
        text += (block as { text: string }).text;
        return;
      case "tool_use": {
        const use = block as Static<typeof ToolUseBlock>;
        calls.push({ id: use.id, name: use.name, arguments: JSON.stringify(use.input ?? {}) });
        return;
      }
      case "tool_result": {
        const result = block as Static<typeof ToolResultBlock>;
        messages.push({ role: "tool", content: textOf(result.content), toolCallId: result.tool_use_id });
        return;
      }
      case "thinking":
        if (message.role === "assistant") reasoning += (block as { thinking: string }).thinking;
        return;
      case "redacted_thinking":
        return;
      case "image":
      case "document":
        throw badRequest(`${block.type} blocks are not supported: the served model reads text only`, [
          { path },
        ]);
      default:
        ignored.push(`${path.slice(1).replace(/\//g, ".")} (${block.type})`);
    }
  });
  if (message.role === "assistant")
    messages.push({
      role: "assistant",
      content: text,
      ...(calls.length > 0 && { toolCalls: calls }),
      ...(reasoning !== "" && { reasoning }),
    });
  else if (text !== "") messages.push({ role: message.role, content: text });
}

function textOf(content: string | { text?: string }[] | undefined): string {
  if (content === undefined) return "";
  return typeof content === "string" ? content : content.map((block) => block.text ?? "").join("");
}

/**
 * context_management's clear_thinking: thinking of earlier assistant turns leaves the prompt, all but
 * the last `keep` turns that have some (default 1; "all" keeps every one).
 */
function clearThinking(messages: ChatMessage[], keep: unknown): { messages: ChatMessage[]; turns: number } {
  const keepAll = keep === "all" || (keep as { type?: string } | undefined)?.type === "all";
  if (keepAll) return { messages, turns: 0 };
  const value = (keep as { value?: unknown } | undefined)?.value;
  const kept = typeof value === "number" && value >= 0 ? value : 1;
  const thinking = messages.flatMap((message, i) => (message.reasoning ? [i] : []));
  const cleared = new Set(thinking.slice(0, Math.max(0, thinking.length - kept)));
  return {
    messages: messages.map((message, i) => {
      if (!cleared.has(i)) return message;
      const { reasoning: _dropped, ...rest } = message;
      return rest;
    }),
    turns: cleared.size,
  };
}

function toolChoiceOf(choice: PromptBody["tool_choice"]): ToolChoice | undefined {
  if (choice === undefined) return undefined;
  if (choice.type === "any") return "required";
  if (choice.type === "tool") {
    if (choice.name === undefined)
      throw badRequest("tool_choice.name is required for type tool", [{ path: "/tool_choice/name" }]);
    return { name: choice.name };
  }
  return choice.type as ToolChoice;
}

const efforts: ReasoningEffort[] = ["low", "medium", "high", "xhigh", "max"];

/** thinking and output_config.effort: disabled is off; enabled has its budget; adaptive follows effort. */
function reasoningOf(body: PromptBody): DecodedRequest["reasoning"] {
  const effortWord = body.output_config?.effort;
  const effort = efforts.includes(effortWord as ReasoningEffort)
    ? (effortWord as ReasoningEffort)
    : undefined;
  const thinking = body.thinking;
  if (thinking?.type === "disabled") return { enabled: false };
  if (thinking?.type === "enabled")
    return { budgetTokens: thinking.budget_tokens, ...(effort && { effort }) };
  return effort ? { effort } : {};
}

function profile(): DialectProfile {
  return {
    defaultMaxTokens: (max) => max,
    defaultTemperature: 1,
    clampMaxTokens: true,
    fields: {
      maxTokens: "/max_tokens",
      temperature: "/temperature",
      topP: "/top_p",
      topK: "/top_k",
      minP: "/min_p",
      seed: "/seed",
      logitBias: "/logit_bias",
      stop: "/stop_sequences",
      tools: "/tools",
      toolChoice: "/tool_choice",
      output: "/output_config/format",
      messages: "/messages",
    },
    toolParametersPath: (index) => `/tools/${index}/input_schema`,
    schemaPath: "/output_config/format/schema",
  };
}

function stopReasonOf(finishReason: CompletionResult["finishReason"]): string {
  if (finishReason === "length") return "max_tokens";
  return finishReason === "tool_calls" ? "tool_use" : "end_turn";
}

function usageOf(usage: Usage) {
  return {
    input_tokens: usage.promptTokens - usage.cachedTokens,
    output_tokens: usage.completionTokens,
    cache_read_input_tokens: usage.cachedTokens,
    cache_creation_input_tokens: 0,
    cache_creation: null,
    server_tool_use: null,
    service_tier: "standard",
    inference_geo: null,
    output_tokens_details: null,
    speed: null,
  };
}

/** What every message carries besides its content, usage and stop reason. */
interface MessageHead {
  id: string;
  model: string;
  contextManagement: object | null;
  omitThinking: boolean;
}

function messageOf(head: MessageHead, content: object[], stopReason: string | null, usage: object) {
  return {
    id: head.id,
    type: "message",
    role: "assistant",
    model: head.model,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    stop_details: null,
    usage,
    container: null,
    diagnostics: null,
    context_management: head.contextManagement,
  };
}

const textBlock = (text: string) => ({ type: "text", text, citations: null });
const thinkingBlock = (thinking: string) => ({ type: "thinking", thinking, signature: "" });
const toolUseBlock = (id: string, name: string, input: object) => ({
  type: "tool_use",
  id,
  name,
  input,
  caller: { type: "direct" },
});

/** The content blocks of a finished answer: thinking, text, tool uses. */
function contentOf(result: CompletionResult, omitThinking: boolean): object[] {
  const blocks: object[] = [];
  if (result.reasoning !== undefined) blocks.push(thinkingBlock(omitThinking ? "" : result.reasoning));
  if (result.text !== "" || !result.toolCalls) blocks.push(textBlock(result.text));
  for (const call of result.toolCalls ?? [])
    blocks.push(toolUseBlock(call.id, call.name, parseArgumentsObject(call.arguments)));
  return blocks;
}

/** Anthropic's streaming events: one content block at a time, each started, added to, stopped. */
class MessagesEncoder implements StreamEncoder {
  private index = -1;
  private open?: "thinking" | "text" | "tool_use";

  constructor(private readonly head: MessageHead) {}

  private frame(type: string, payload: object): WireFrame {
    return { event: type, data: { type, ...payload } };
  }

  /** More of the open block. */
  private delta(delta: { type: string } & Record<string, string>): WireFrame {
    return this.frame("content_block_delta", { index: this.index, delta });
  }

  start(promptTokens: number): WireFrame[] {
    const usage = { ...usageOf({ promptTokens, completionTokens: 0, cachedTokens: 0 }), output_tokens: 0 };
    return [
      this.frame("message_start", { message: messageOf(this.head, [], null, usage) }),
      this.frame("ping", {}),
    ];
  }

  private begin(kind: "thinking" | "text" | "tool_use", block: object): WireFrame[] {
    this.open = kind;
    this.index++;
    return [this.frame("content_block_start", { index: this.index, content_block: block })];
  }

  private stop(): WireFrame[] {
    if (this.open === undefined) return [];
    const frames = this.open === "thinking" ? [this.delta({ type: "signature_delta", signature: "" })] : [];
    this.open = undefined;
    return [...frames, this.frame("content_block_stop", { index: this.index })];
  }

  event(event: GenerationEvent): WireFrame[] {
    switch (event.type) {
      case "reasoning-start":
        return this.begin("thinking", thinkingBlock(""));
      case "reasoning-delta":
        if (this.head.omitThinking) return [];
        return [this.delta({ type: "thinking_delta", thinking: event.delta })];
      case "text-start":
        return this.begin("text", textBlock(""));
      case "text-delta":
        return [this.delta({ type: "text_delta", text: event.delta })];
      case "tool-call-start":
        return this.begin("tool_use", toolUseBlock(event.id, event.name, {}));
      case "tool-call-delta":
        return [this.delta({ type: "input_json_delta", partial_json: event.delta })];
      case "reasoning-end":
      case "text-end":
      case "tool-call-end":
        return this.stop();
      case "finish": {
        // An answer with no block at all still has one (empty) text block, as a message does.
        const empty = this.index === -1 ? [...this.begin("text", textBlock("")), ...this.stop()] : [];
        return [
          ...empty,
          this.frame("message_delta", {
            delta: { stop_reason: stopReasonOf(event.finishReason), stop_sequence: null, stop_details: null },
            usage: usageOf(event.usage),
            context_management: this.head.contextManagement,
          }),
          this.frame("message_stop", {}),
        ];
      }
      default:
        return [];
    }
  }

  end(): WireFrame[] {
    return [];
  }

  error(error: ApiError): WireFrame[] {
    return [{ event: "error", data: anthropicErrorBody(error) }];
  }
}

export interface AnthropicRouteOptions {
  service: TextgenService;
  /** MAX_NEW_TOKENS and SCHEMA_MAX_*. */
  limits: LimitsConfig;
}

/** Decodes and validates a body; the ignored fields and unenforced keywords go in the headers. */
function validated(
  body: PromptBody & Partial<MessagesBody>,
  request: FastifyRequest,
  reply: FastifyReply,
  limits: ValidationLimits,
) {
  const decoding = decodeMessages(body);
  const result = validateRequest(decoding.decoded, profile(), limits);
  noteIgnored(request, reply, decoding.ignored);
  noteUnenforced(reply, result.unenforced);
  return { decoding, validated: result };
}

export const anthropicRoutes = dialectPlugin<AnthropicRouteOptions>(anthropicDialect, (app, options) => {
  const { service } = options;
  const limits = validationLimits(options.limits);
  registerMessages(app, service, limits);
});

function registerMessages(app: TypedApp, service: TextgenService, limits: ValidationLimits): void {
  dialectPost(
    app,
    "/messages",
    {
      tags: ["anthropic"],
      summary: "Anthropic's Messages API: text, tool use, thinking, structured output",
      body: MessagesRequestSchema,
    },
    async (body, request, reply) => {
      const { decoding, validated: checked } = validated(body, request, reply, limits);
      const target = service.resolveModel(body.model, "generate");
      const head: MessageHead = {
        id: shortId("msg"),
        model: target.name,
        omitThinking: decoding.omitThinking,
        contextManagement:
          decoding.clearedThinkingTurns === undefined
            ? null
            : {
                applied_edits: [
                  {
                    type: "clear_thinking_20251015",
                    cleared_thinking_turns: decoding.clearedThinkingTurns,
                    // Not counted: the cleared text is never tokenized.
                    cleared_input_tokens: 0,
                  },
                ],
              },
      };
      return respond({
        request,
        reply,
        model: target,
        validated: checked,
        stream: body.stream === true,
        encoder: () => new MessagesEncoder(head),
        whole: ([result]) =>
          messageOf(
            head,
            contentOf(result!, head.omitThinking),
            stopReasonOf(result!.finishReason),
            usageOf({
              promptTokens: result!.promptTokens,
              completionTokens: result!.tokensGenerated,
              cachedTokens: result!.cachedTokens ?? 0,
            }),
          ),
      });
    },
  );

  app.post(
    "/messages/count_tokens",
    {
      schema: {
        tags: ["anthropic"],
        summary: "How many tokens a Messages request's input is, rendered by the model's chat template",
        body: CountTokensRequestSchema,
      },
    },
    async (request, reply) => {
      const { validated: checked } = validated({ ...request.body, max_tokens: 1 }, request, reply, limits);
      return {
        input_tokens: await service.resolveModel(request.body.model, "generate").countTokens(checked.request),
      };
    },
  );
}
