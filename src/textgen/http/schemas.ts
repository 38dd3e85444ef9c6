/**
 * Request and response schemas of the text generation API. These TypeBox definitions are at once the
 * TypeScript types, the validation Fastify applies, and the OpenAPI document served at /docs.
 */
import { Type, type Static } from "typebox";

export { ErrorResponse } from "../../core/error-shapes.js";

export const MAX_PROMPT_CHARS = 32_768;

export const StopSequences = Type.Union(
  [
    Type.String({ minLength: 1, maxLength: 256 }),
    Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 4 }),
  ],
  { description: "generation ends before any of these strings; the stop string is not returned" },
);

/** OpenAI's `logit_bias` (also read by llama.cpp's server): token id → bias; -100 bans, 100 forces. */
export const LogitBias = Type.Record(Type.String(), Type.Number({ minimum: -100, maximum: 100 }), {
  description:
    "token id → bias added to its logit before sampling (-100 bans the token, 100 all but forces it)",
  examples: [{ "2": -100 }],
});

/** /predict's sampling fields (strict: their ranges are checked here and again by validation.ts). */
export const samplingFields = {
  top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1, description: "nucleus sampling" })),
  top_k: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000, description: "0 = all tokens" })),
  min_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  repeat_penalty: Type.Optional(Type.Number({ minimum: 0, maximum: 10, description: "1 = off" })),
  seed: Type.Optional(
    Type.Integer({ minimum: -1, maximum: 4294967295, description: "makes sampling repeatable; -1 = random" }),
  ),
  logit_bias: Type.Optional(LogitBias),
  ignore_eos: Type.Optional(
    Type.Boolean({
      description: "never draw an end-of-generation token: generate until the token limit (llama.cpp's name)",
    }),
  ),
};

/** Constrained output, named as llama.cpp's server names the fields (at most one of them). */
export const constraintFields = {
  json_schema: Type.Optional(
    Type.Record(Type.String(), Type.Unknown(), {
      description: "the output is JSON matching this schema (enforced by a grammar while sampling)",
    }),
  ),
  grammar: Type.Optional(
    Type.String({ minLength: 1, maxLength: 65_536, description: "a GBNF grammar the output follows" }),
  ),
};

export function predictRequestSchema(maxNewTokens: number) {
  return Type.Object(
    {
      text: Type.String({ minLength: 1, maxLength: MAX_PROMPT_CHARS, description: "the prompt to continue" }),
      model: Type.Optional(
        Type.String({ description: "the model to use (GET /v1/models); the default when absent" }),
      ),
      keep_alive: Type.Optional(
        Type.Union([Type.String(), Type.Number()], {
          description: "how long the model stays loaded after this request, as Ollama's: 5m, 300, 0, -1",
        }),
      ),
      max_length: Type.Integer({
        minimum: 1,
        maximum: maxNewTokens,
        // The contract's default, unless the server allows fewer new tokens.
        default: Math.min(128, maxNewTokens),
        description: "new tokens at most, prompt excluded",
      }),
      temperature: Type.Number({
        minimum: 0,
        maximum: 2,
        default: 0.8,
        description: "0 = greedy, deterministic",
      }),
      ...samplingFields,
      stop: Type.Optional(StopSequences),
      stream: Type.Optional(Type.Boolean({ default: false, description: "answer with server-sent events" })),
      ...constraintFields,
      cache_prompt: Type.Optional(
        Type.Boolean({ description: "reuse the cached prefix of an earlier request (default true)" }),
      ),
      truncate: Type.Optional(
        Type.Boolean({ description: "drop tokens from the start of a prompt too long for the context" }),
      ),
    },
    { examples: [{ text: "Once upon a time", max_length: 20, temperature: 0 }] },
  );
}

export type PredictRequest = Static<ReturnType<typeof predictRequestSchema>>;

export const PredictResponse = Type.Object({
  generated_text: Type.String({ description: "the continuation only" }),
  model_name: Type.String(),
  tokens_generated: Type.Integer(),
  finish_reason: Type.Union([Type.Literal("length"), Type.Literal("stop")]),
  prompt_tokens: Type.Integer(),
  elapsed_ms: Type.Number(),
});
export type PredictResponse = Static<typeof PredictResponse>;

/** llama.cpp server's /tokenize and /detokenize shapes. */
export const TokenizeRequest = Type.Object(
  {
    content: Type.String({ maxLength: MAX_PROMPT_CHARS * 4 }),
    add_special: Type.Boolean({ default: false, description: "BOS first, when the model wants one" }),
    with_pieces: Type.Boolean({ default: false, description: "each token as {id, piece}" }),
  },
  { additionalProperties: false, examples: [{ content: "Once upon a time", with_pieces: true }] },
);
export const TokenizeResponse = Type.Object({
  tokens: Type.Union([
    Type.Array(Type.Integer()),
    Type.Array(Type.Object({ id: Type.Integer(), piece: Type.String() })),
  ]),
});
export const DetokenizeRequest = Type.Object(
  { tokens: Type.Array(Type.Integer(), { maxItems: 1_000_000 }) },
  { additionalProperties: false },
);
export const DetokenizeResponse = Type.Object({ content: Type.String() });

export const HealthResponse = Type.Object({
  status: Type.Union([Type.Literal("healthy"), Type.Literal("loading"), Type.Literal("unhealthy")]),
  model_name: Type.Optional(Type.String({ description: "the name /v1/models, /models and /api/tags list" })),
  model_architecture: Type.Optional(Type.String({ description: "the GGUF's general.architecture" })),
  model_loaded: Type.Optional(Type.Boolean()),
  reason: Type.Optional(Type.String()),
  failed_models: Type.Optional(Type.Array(Type.Object({ id: Type.String(), reason: Type.String() }))),
});

export const RootResponse = Type.Object({ message: Type.String(), docs: Type.String() });
