/** What the OpenAI-style dialects (chat, completions, Responses) share: error shape, sampling fields. */
import { Type } from "typebox";
import { badRequest } from "../../../core/errors.js";
import type { CompletionResult, OutputConstraint, ToolCall, ToolChoice } from "../../engine/generator.js";
import { LogitBias, StopSequences, parseLogitBias, stopList } from "../schemas.js";

export { openAiErrorBody } from "../../../core/error-shapes.js";

export const modelField = Type.Optional(
  Type.String({ description: "the model to answer (GET /v1/models); the default model when absent" }),
);

/** Ollama's keep_alive, accepted here too: how long the model stays loaded after this request. */
export const keepAliveField = Type.Optional(
  Type.Union([Type.String(), Type.Number()], {
    description: 'a duration ("5m") or seconds; 0 unloads after the answer, -1 keeps it loaded',
  }),
);

/** Sampling fields every OpenAI-style route takes, in llama.cpp's ranges. */
export const baseSampling = {
  model: modelField,
  keep_alive: keepAliveField,
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
  stream: Type.Boolean({ default: false }),
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

/** Chat and completions add `n` and `stream_options`. */
export const sampling = {
  ...baseSampling,
  n: Type.Integer({ minimum: 1, maximum: 1, default: 1, description: "only 1 is supported" }),
  stream_options: Type.Optional(
    Type.Union([Type.Object({ include_usage: Type.Optional(Type.Boolean()) }), Type.Null()]),
  ),
};

export const JsonSchemaObject = Type.Record(Type.String(), Type.Unknown(), { description: "a JSON Schema" });

export const ResponseFormat = Type.Union([
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

export type ResponseFormatValue =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; json_schema: { schema?: Record<string, unknown> } };

interface SamplingBody {
  temperature: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  repeat_penalty?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  seed?: number;
  logit_bias?: Record<string, number> | null;
  ignore_eos?: boolean;
  stop?: string | string[] | null;
  truncate?: boolean;
  cache_prompt?: boolean;
}

/** The sampling fields in the generator's terms; `maxTokensField` names the limit in errors. */
export function samplingOf(body: SamplingBody, maxTokensField = "max_tokens") {
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
    maxTokensField,
  };
}

/** At most one of response_format, json_schema and grammar. */
export function toConstraint(
  format: ResponseFormatValue | undefined,
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

export const ChatToolChoice = Type.Union([
  Type.Literal("auto"),
  Type.Literal("none"),
  Type.Literal("required"),
  Type.Object({ type: Type.Literal("function"), function: Type.Object({ name: Type.String() }) }),
]);

export function toToolChoice(
  choice: "auto" | "none" | "required" | { function: { name: string } } | undefined,
): ToolChoice | undefined {
  if (choice === undefined || typeof choice === "string") return choice;
  return { name: choice.function.name };
}

export function toolCallsOf(calls: ToolCall[]) {
  return calls.map((call) => ({
    id: call.id,
    type: "function" as const,
    function: { name: call.name, arguments: call.arguments },
  }));
}

export const usageOf = (
  result: Pick<CompletionResult, "promptTokens" | "tokensGenerated" | "cachedTokens">,
) => ({
  prompt_tokens: result.promptTokens,
  completion_tokens: result.tokensGenerated,
  total_tokens: result.promptTokens + result.tokensGenerated,
  prompt_tokens_details: { cached_tokens: result.cachedTokens ?? 0 },
});

/** llama.cpp's `reasoning_format`: "none" keeps the reasoning in the text; the others split it off. */
export const ReasoningFormat = Type.Optional(
  Type.Union([Type.Literal("none"), Type.Literal("auto"), Type.Literal("deepseek")], {
    description: "none: reasoning stays in the text; auto/deepseek: split off into reasoning_content",
  }),
);

/** Chat answers default to 256 new tokens: OpenAI's "until done" would tie up a sequence too long. */
export const DEFAULT_CHAT_MAX_TOKENS = 256;
