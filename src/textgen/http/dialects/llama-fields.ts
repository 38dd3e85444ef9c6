/**
 * The llama.cpp server's request fields that /predict and the OpenAI dialect both take, with the same
 * wire names: its sampling knobs, prompt cache and truncation switches, and its output constraints.
 */
import type { DecodedRequest } from "../../engine/validation.js";

export interface LlamaFieldsBody {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  repeat_penalty?: number;
  seed?: number;
  logit_bias?: Record<string, number>;
  ignore_eos?: boolean;
  stop?: string | string[];
  truncate?: boolean;
  cache_prompt?: boolean;
  json_schema?: Record<string, unknown>;
  grammar?: string;
}

/** Those fields in canonical names (decoding only: validation.ts judges them). */
export function decodeLlamaFields(body: LlamaFieldsBody): DecodedRequest {
  return {
    temperature: body.temperature,
    topP: body.top_p,
    topK: body.top_k,
    minP: body.min_p,
    repeatPenalty: body.repeat_penalty,
    seed: body.seed,
    logitBias: body.logit_bias,
    ignoreEos: body.ignore_eos,
    stop: body.stop,
    truncate: body.truncate,
    cachePrompt: body.cache_prompt,
    outputs: [
      ...(body.json_schema !== undefined ? [{ type: "json_schema" as const, schema: body.json_schema }] : []),
      ...(body.grammar !== undefined ? [{ type: "grammar" as const, grammar: body.grammar }] : []),
    ],
  };
}
