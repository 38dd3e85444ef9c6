/**
 * What the OpenAI-style dialects (chat, completions, Responses, embeddings) share: the error shape,
 * the sampling fields' wire names (types only: ranges and defaults are validation.ts's), and small
 * pieces of their encodings.
 */
import { Type, type Static, type TObject } from "typebox";
import type { Usage } from "../../engine/events.js";
import type { CompletionResult, TokenLogprob, ToolCall } from "../../engine/generator.js";
import type { DecodedOutput, DecodedRequest, ReasoningEffort } from "../../engine/validation.js";
import { noEffect, type Dialect } from "../../../core/dialect-plugin.js";

import { openAiErrorBody } from "../../../core/error-shapes.js";
import { decodeLlamaFields } from "./llama-fields.js";
import { unixSeconds, type WireFrame } from "./run.js";

export { openAiErrorBody };

/** OpenAI's API: its error shape, tolerant reading. */
export const openAiDialect: Dialect = { errorShape: openAiErrorBody, tolerant: true };

/** OpenAI's prompt caching fields (Chat Completions, Responses): a key is honoured; caching is automatic. */
export const promptCacheFields = {
  prompt_cache_key: Type.Optional(
    Type.String({ description: "requests with a key keep their prompt's cache entries ahead of others" }),
  ),
  prompt_cache_retention: Type.Optional(Type.String(noEffect("prompt caching is automatic"))),
  prompt_cache_options: Type.Optional(Type.Unknown(noEffect("prompt caching is automatic"))),
};

export const modelField = Type.Optional(
  Type.String({ description: "the model to answer (GET /v1/models); the default model when absent" }),
);

/** Ollama's keep_alive, accepted here too: how long the model stays loaded after this request. */
export const keepAliveField = Type.Optional(
  Type.Union([Type.String(), Type.Number()], {
    description: 'a duration ("5m") or seconds; 0 unloads after the answer, -1 keeps it loaded',
  }),
);

export const StopField = Type.Optional(
  Type.Union([Type.String(), Type.Array(Type.String())], {
    description: "generation ends before any of these strings; the stop string is not returned",
  }),
);

/** The sampling fields every OpenAI-style route takes (OpenAI's, plus llama.cpp's own names). */
export const samplingFields = {
  model: modelField,
  keep_alive: keepAliveField,
  temperature: Type.Optional(Type.Number({ description: "0…2; 0 = greedy" })),
  top_p: Type.Optional(Type.Number({ description: "0…1" })),
  top_k: Type.Optional(Type.Integer({ description: "0 = all tokens (llama.cpp)" })),
  min_p: Type.Optional(Type.Number({ description: "llama.cpp's min-p sampling, 0…1" })),
  repeat_penalty: Type.Optional(Type.Number({ description: "1 = off (llama.cpp)" })),
  presence_penalty: Type.Optional(Type.Number({ description: "-2…2, over the last 64 generated tokens" })),
  frequency_penalty: Type.Optional(Type.Number({ description: "-2…2, over the last 64 generated tokens" })),
  seed: Type.Optional(Type.Integer({ description: "-1 = random (llama.cpp's convention)" })),
  logit_bias: Type.Optional(
    Type.Record(Type.String(), Type.Number(), { description: "token id → bias, -100…100" }),
  ),
  ignore_eos: Type.Optional(
    Type.Boolean({ description: "never draw an end-of-generation token: generate until the token limit" }),
  ),
  stop: StopField,
  stream: Type.Optional(Type.Boolean()),
  truncate: Type.Optional(
    Type.Boolean({ description: "drop tokens from the start of a prompt too long for the context" }),
  ),
  user: Type.Optional(Type.String(noEffect("an end-user id"))),
  cache_prompt: Type.Optional(
    Type.Boolean({
      description: "reuse the cached prefix of an earlier request (llama.cpp's; default true)",
    }),
  ),
  n: Type.Optional(Type.Integer({ description: "answers to generate, 1…16" })),
  lora: Type.Optional(
    Type.Array(Type.Object({ id: Type.Integer(), scale: Type.Number() }), {
      description:
        "llama.cpp's per-request LoRA scales by adapter id (GET /lora-adapters); adapters not named get 0",
    }),
  ),
  stream_options: Type.Optional(
    Type.Object({
      include_usage: Type.Optional(Type.Boolean()),
      include_obfuscation: Type.Optional(Type.Boolean(noEffect("stream obfuscation"))),
    }),
  ),
  // llama.cpp's constraint fields.
  json_schema: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), { description: "the output is JSON matching this schema" }),
  ),
  grammar: Type.Optional(Type.String({ description: "a GBNF grammar the output follows" })),
};

/** The shared fields as the schema types them (each dialect's body holds them). */
type SamplingBody = Static<TObject<typeof samplingFields>>;

/** The shared fields in canonical names (decoding only: validation.ts judges them). */
export function decodeSampling(body: SamplingBody): DecodedRequest {
  return {
    ...decodeLlamaFields(body),
    presencePenalty: body.presence_penalty,
    frequencyPenalty: body.frequency_penalty,
    lora: body.lora,
    n: body.n,
  };
}

/** The wire paths of the shared fields, for validation's messages. */
export const openAiFields = {
  maxTokens: "/max_tokens",
  temperature: "/temperature",
  topP: "/top_p",
  topK: "/top_k",
  minP: "/min_p",
  repeatPenalty: "/repeat_penalty",
  presencePenalty: "/presence_penalty",
  frequencyPenalty: "/frequency_penalty",
  seed: "/seed",
  logitBias: "/logit_bias",
  stop: "/stop",
  tools: "/tools",
  toolChoice: "/tool_choice",
  output: "/response_format",
  logprobs: "/top_logprobs",
  n: "/n",
  messages: "/messages",
  prompt: "/prompt",
} as const;

export const JsonSchemaObject = Type.Record(Type.String(), Type.Unknown(), { description: "a JSON Schema" });

export const ResponseFormat = Type.Object({
  type: Type.String({ description: "text, json_object or json_schema" }),
  json_schema: Type.Optional(
    Type.Object({
      name: Type.Optional(Type.String()),
      description: Type.Optional(Type.String()),
      schema: Type.Optional(JsonSchemaObject),
      strict: Type.Optional(Type.Boolean({ description: "true: refuse what the grammar cannot enforce" })),
    }),
  ),
});

export type ResponseFormatValue = Static<typeof ResponseFormat>;

/** OpenAI's response_format as an output constraint; `text` (or an unknown type) is none. */
export function decodeResponseFormat(format: ResponseFormatValue | undefined): DecodedOutput[] {
  if (format?.type === "json_object") return [{ type: "json_object" }];
  if (format?.type === "json_schema")
    return [{ type: "json_schema", schema: format.json_schema?.schema, strict: format.json_schema?.strict }];
  return [];
}

/** OpenAI's reasoning effort as ours; an unknown word means the model's default. */
export function effortOf(effort: string | undefined): ReasoningEffort | undefined {
  const known = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];
  return effort !== undefined && known.includes(effort) ? (effort as ReasoningEffort) : undefined;
}

export function toolCallsOf(calls: ToolCall[]) {
  return calls.map((call) => ({
    id: call.id,
    type: "function" as const,
    function: { name: call.name, arguments: call.arguments },
  }));
}

export const usageOf = (usage: Usage) => ({
  prompt_tokens: usage.promptTokens,
  completion_tokens: usage.completionTokens,
  total_tokens: usage.promptTokens + usage.completionTokens,
  prompt_tokens_details: { cached_tokens: usage.cachedTokens },
});

/** Usage of several answers to one prompt: the prompt once, the answers added up. */
export function totalUsage(
  results: { promptTokens: number; tokensGenerated: number; cachedTokens?: number }[],
): Usage {
  return {
    promptTokens: results[0]?.promptTokens ?? 0,
    completionTokens: results.reduce((sum, result) => sum + result.tokensGenerated, 0),
    cachedTokens: results[0]?.cachedTokens ?? 0,
  };
}

/** One chunk of an OpenAI stream (`object` names the API's chunks); the usage chunk has no choices. */
export function openAiChunk(
  head: { id: string; object: string; model: string },
  choices: object[],
  usage?: Usage,
): WireFrame {
  return {
    data: {
      id: head.id,
      object: head.object,
      created: unixSeconds(),
      model: head.model,
      choices,
      ...(usage && { usage: usageOf(usage) }),
    },
  };
}

/** The end of an OpenAI stream: the usage of all choices when the client asked for it, then [DONE]. */
export function openAiStreamEnd(
  head: { id: string; object: string; model: string },
  includeUsage: boolean,
  results: CompletionResult[],
): WireFrame[] {
  const usage = includeUsage ? [openAiChunk(head, [], totalUsage(results))] : [];
  return [...usage, { data: "[DONE]" }];
}

/** OpenAI's chat logprobs entry. */
export function chatLogprob(entry: TokenLogprob) {
  return {
    token: entry.text,
    logprob: entry.logprob,
    bytes: entry.bytes,
    top_logprobs: entry.top.map((top) => ({ token: top.text, logprob: top.logprob, bytes: top.bytes })),
  };
}

/** llama.cpp's `reasoning_format`: "none" keeps the reasoning in the text; the others split it off. */
export const ReasoningFormat = Type.Optional(
  Type.String({
    description: "none: reasoning stays in the text; auto/deepseek: split off into reasoning_content",
  }),
);

/** Chat answers default to 256 new tokens: OpenAI's "until done" would tie up a sequence too long. */
export const DEFAULT_CHAT_MAX_TOKENS = 256;
