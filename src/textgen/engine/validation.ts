/**
 * The one validation stage, after TGI's `Validation` → `ValidGenerateRequest`: every dialect decodes
 * its wire request into a DecodedRequest (what the client asked, in the canonical names, nothing
 * checked), and this turns it into the GenerationRequest the engine runs. Defaults, ranges, limits,
 * the seed, stop strings, tools, the response format and the reasoning settings are decided here and
 * nowhere else; errors name the field in the client's own dialect (`DialectProfile.fields`).
 *
 * Limits are clamps where the servers users know clamp (llama.cpp server): a token limit above
 * MAX_NEW_TOKENS generates up to MAX_NEW_TOKENS, and one the context cannot hold after the prompt up
 * to what it holds (`clampMaxTokens`, applied where the prompt is counted), both ending with the
 * dialect's length reason. Our own /predict is strict: its profile clamps nothing.
 */
import { badRequest } from "../../core/errors.js";
import type {
  CacheHint,
  ChatMessage,
  GenerationRequest,
  OutputConstraint,
  SamplingOptions,
  ToolChoice,
  ToolDefinition,
} from "./generator.js";
import { DEFAULT_SCHEMA_BUDGET, SchemaError, translateSchema, type SchemaBudget } from "./json-schema.js";

/** How much a model may think before answering, in the words the APIs use. */
export type ReasoningEffort = "none" | "minimal" | "low" | "medium" | "high" | "xhigh" | "max";

/** A tool as a dialect sent it. */
export interface DecodedTool {
  name: string;
  description?: string;
  parameters?: unknown;
  /** Refuse what the grammar cannot enforce of the parameters when the call is forced. */
  strict?: boolean;
}

/** An output constraint as a dialect sent it. */
export type DecodedOutput =
  | { type: "json_object" }
  | { type: "json_schema"; schema?: unknown; strict?: boolean }
  | { type: "grammar"; grammar: string };

/**
 * A wire request decoded into canonical names: nothing defaulted, ranged or checked yet. The sampling
 * knobs are the engine's own (SamplingOptions), each optional; logit bias is still keyed by strings.
 */
export interface DecodedRequest extends Partial<Omit<SamplingOptions, "seed" | "logitBias">> {
  /** A raw prompt to continue, or a conversation. */
  prompt?: string;
  messages?: ChatMessage[];
  maxTokens?: number;
  /** -1 (and absent): a random seed, in every dialect. */
  seed?: number;
  logitBias?: Record<string, number>;
  stop?: string | readonly string[];
  tools?: DecodedTool[];
  toolChoice?: ToolChoice;
  /** Every constraint the request carries (several is a 400). */
  outputs?: DecodedOutput[];
  reasoning?: {
    effort?: ReasoningEffort;
    /** An explicit thinking budget in tokens (0: off). */
    budgetTokens?: number;
    /** false: thinking off. */
    enabled?: boolean;
    /** "none": reasoning stays in the text. */
    format?: "split" | "none";
  };
  /** Logprobs of each token and this many alternatives. */
  logprobs?: number;
  /** Answers to generate for the one prompt. */
  n?: number;
  truncate?: boolean;
  cachePrompt?: boolean;
  /** What the client asked to keep cached (`prompt_cache_key`, `cache_control` breakpoints). */
  cacheHint?: CacheHint;
  /** llama.cpp server's per-request adapter scales (the engine judges the ids: GET /lora-adapters). */
  lora?: { id: number; scale: number }[];
}

/** The canonical field names a profile may rename for error messages (`/options/num_predict`). */
export type FieldName =
  | "messages"
  | "prompt"
  | "maxTokens"
  | "temperature"
  | "topP"
  | "topK"
  | "minP"
  | "repeatPenalty"
  | "presencePenalty"
  | "frequencyPenalty"
  | "seed"
  | "logitBias"
  | "stop"
  | "tools"
  | "toolChoice"
  | "output"
  | "reasoning"
  | "logprobs"
  | "n";

/** What a dialect's wire contract decides about a request: its defaults and its field names. */
export interface DialectProfile {
  /** Default new tokens when the request sets none (given MAX_NEW_TOKENS). */
  defaultMaxTokens: (maxNewTokens: number) => number;
  defaultTemperature: number;
  /** Lower a token limit past MAX_NEW_TOKENS or the context instead of refusing it. */
  clampMaxTokens: boolean;
  /** Wire paths of the canonical fields, JSON-pointer style (`/max_tokens`). */
  fields: Partial<Record<FieldName, string>>;
  /** The path of tool `index`'s parameters (`/tools/0/function/parameters`). */
  toolParametersPath?: (index: number) => string;
  /** The path of the output schema (`/response_format/json_schema/schema`). */
  schemaPath?: string;
}

export interface ValidationLimits {
  maxNewTokens: number;
  schemaBudget?: SchemaBudget;
}

export interface ValidatedRequest {
  request: GenerationRequest;
  /** Answers to generate (`n`). */
  n: number;
  /** Schema keywords the grammar does not enforce, by path (`tools.0.function.parameters.properties.url.format`). */
  unenforced: string[];
}

/** Reasoning tokens each effort allows (none turns thinking off; xhigh and max: only max_tokens). */
const EFFORT_BUDGET: Record<ReasoningEffort, number | undefined> = {
  none: 0,
  minimal: 256,
  low: 1024,
  medium: 4096,
  high: 16_384,
  xhigh: undefined,
  max: undefined,
};

export const MAX_CHOICES = 16;
const MAX_STOP_STRINGS = 16;
const MAX_STOP_LENGTH = 512;
const MAX_TOOLS = 512;
const MAX_SEED = 2 ** 32;

export function validateRequest(
  decoded: DecodedRequest,
  profile: DialectProfile,
  limits: ValidationLimits,
): ValidatedRequest {
  const field = (name: FieldName) => profile.fields[name] ?? `/${snake(name)}`;
  const fail = (name: FieldName, message: string): never => {
    throw badRequest(`${label(field(name))} ${message}`, [{ path: field(name) }]);
  };
  const inRange = (name: FieldName, value: number | undefined, low: number, high = Infinity) => {
    if (value === undefined) return undefined;
    if (!Number.isFinite(value) || value < low || value > high)
      fail(
        name,
        `must be between ${low} and ${high === Infinity ? "any larger number" : high} (got ${value})`,
      );
    return value;
  };
  const integer = (name: FieldName, value: number | undefined) => {
    if (value !== undefined && !Number.isInteger(value)) fail(name, `must be an integer (got ${value})`);
    return value;
  };

  const maxTokens = clampedMaxTokens(decoded.maxTokens, profile, limits, fail);
  const unenforced: string[] = [];
  const common = {
    maxTokens,
    maxTokensField: label(field("maxTokens")),
    clampMaxTokens: profile.clampMaxTokens,
    temperature: inRange("temperature", decoded.temperature, 0, 2) ?? profile.defaultTemperature,
    topP: inRange("topP", decoded.topP, 0, 1),
    topK: inRange("topK", integer("topK", decoded.topK), 0),
    minP: inRange("minP", decoded.minP, 0, 1),
    repeatPenalty: inRange("repeatPenalty", decoded.repeatPenalty, 0),
    presencePenalty: inRange("presencePenalty", decoded.presencePenalty, -2, 2),
    frequencyPenalty: inRange("frequencyPenalty", decoded.frequencyPenalty, -2, 2),
    seed: seedOf(integer("seed", decoded.seed), fail),
    logitBias: logitBiasOf(decoded.logitBias, field("logitBias")),
    ignoreEos: decoded.ignoreEos,
    stop: stopOf(decoded.stop, fail),
    constraint: constraintOf(decoded.outputs ?? [], profile, limits, unenforced, fail),
    logprobs: inRange("logprobs", integer("logprobs", decoded.logprobs), 0, 20),
    truncate: decoded.truncate,
    cachePrompt: decoded.cachePrompt,
    cacheHint: cacheHintOf(decoded.cacheHint),
    lora: decoded.lora,
  };
  const n = inRange("n", integer("n", decoded.n), 1, MAX_CHOICES) ?? 1;
  if (decoded.messages === undefined) {
    if (decoded.prompt === undefined || decoded.prompt === "") fail("prompt", "is required and not empty");
    return { request: { prompt: decoded.prompt!, ...common }, n, unenforced };
  }
  if (decoded.messages.length === 0 || decoded.messages.every((message) => message.role === "assistant"))
    fail("messages", "need a user or system message");
  const { tools, toolChoice } = toolsOf(decoded, common.constraint, profile, limits, unenforced, fail);
  const reasoning = reasoningOf(decoded.reasoning, maxTokens);
  return {
    request: {
      messages: decoded.messages,
      ...common,
      tools,
      toolChoice,
      reasoningFormat: decoded.reasoning?.format === "none" ? "none" : "split",
      ...reasoning,
    },
    n,
    unenforced,
  };
}

type Fail = (name: FieldName, message: string) => never;

/** Anthropic allows 4 breakpoints (and so does the engine): the first 4 distinct ones are used. */
const MAX_CACHE_PREFIXES = 4;

function cacheHintOf(hint: CacheHint | undefined): CacheHint | undefined {
  if (hint === undefined) return undefined;
  const prefixes = [...new Set(hint.prefixes ?? [])].sort((a, b) => a - b).slice(0, MAX_CACHE_PREFIXES);
  const key = hint.key === "" ? undefined : hint.key;
  if (key === undefined && prefixes.length === 0) return undefined;
  return { ...(key !== undefined && { key }), ...(prefixes.length > 0 && { prefixes }) };
}

function clampedMaxTokens(
  requested: number | undefined,
  profile: DialectProfile,
  limits: ValidationLimits,
  fail: Fail,
): number {
  if (requested === undefined) return Math.max(1, profile.defaultMaxTokens(limits.maxNewTokens));
  if (!Number.isInteger(requested) || requested < 1)
    fail("maxTokens", `must be a positive integer (got ${requested})`);
  if (requested <= limits.maxNewTokens) return requested;
  if (!profile.clampMaxTokens) fail("maxTokens", `must be at most ${limits.maxNewTokens} (MAX_NEW_TOKENS)`);
  return limits.maxNewTokens;
}

/** -1 means a random seed; larger seeds wrap into llama.cpp's 32 bits. */
function seedOf(seed: number | undefined, fail: Fail): number | undefined {
  if (seed === undefined || seed === -1) return undefined;
  if (seed < -1) fail("seed", "must be -1 (random) or a non-negative integer");
  return seed % MAX_SEED;
}

/** The token ids of a `logit_bias` object; a key that is not a token id is a 400 naming it. */
function logitBiasOf(
  bias: Record<string, number> | undefined,
  path: string,
): Map<number, number> | undefined {
  if (bias === undefined) return undefined;
  const parsed = new Map<number, number>();
  for (const [key, value] of Object.entries(bias)) {
    if (!/^\d{1,9}$/.test(key))
      throw badRequest(`${label(path)} keys are token ids (non-negative integers); "${key}" is not one`, [
        { path: `${path}/${key}` },
      ]);
    if (typeof value !== "number" || !(value >= -100 && value <= 100))
      throw badRequest(`${label(path)}.${key} must be between -100 and 100`, [{ path: `${path}/${key}` }]);
    parsed.set(Number(key), value);
  }
  return parsed;
}

function stopOf(stop: string | readonly string[] | undefined, fail: Fail): string[] {
  const list = (stop === undefined ? [] : typeof stop === "string" ? [stop] : [...stop]).filter(
    (s) => s !== "",
  );
  if (list.length > MAX_STOP_STRINGS) fail("stop", `may hold at most ${MAX_STOP_STRINGS} strings`);
  if (list.some((s) => s.length > MAX_STOP_LENGTH))
    fail("stop", `strings are at most ${MAX_STOP_LENGTH} characters`);
  return list;
}

function constraintOf(
  outputs: DecodedOutput[],
  profile: DialectProfile,
  limits: ValidationLimits,
  unenforced: string[],
  fail: Fail,
): OutputConstraint | undefined {
  if (outputs.length > 1) fail("output", "and the other output constraints: give only one of them");
  const output = outputs[0];
  if (!output) return undefined;
  if (output.type === "grammar") {
    if (output.grammar === "") fail("output", "needs a grammar");
    return output;
  }
  if (output.type === "json_object" || output.schema === undefined) return { type: "json_object" };
  const path = profile.schemaPath ?? "/schema";
  try {
    const translation = translateSchema(output.schema, {
      path: dotted(path),
      budget: limits.schemaBudget ?? DEFAULT_SCHEMA_BUDGET,
      strict: output.strict === true,
    });
    unenforced.push(...translation.unenforced);
    return { type: "json_schema", schema: output.schema, grammar: translation.grammar };
  } catch (error) {
    if (error instanceof SchemaError) throw badRequest(`Invalid JSON schema: ${error.message}`, [{ path }]);
    throw error;
  }
}

/**
 * The tools and the choice. Only a forced call's tools get a grammar (their schemas translated, what
 * cannot be enforced listed or, `strict`, refused); with auto or none the schemas only describe.
 */
function toolsOf(
  decoded: DecodedRequest,
  constraint: OutputConstraint | undefined,
  profile: DialectProfile,
  limits: ValidationLimits,
  unenforced: string[],
  fail: Fail,
): { tools?: ToolDefinition[]; toolChoice?: ToolChoice } {
  const given = decoded.tools ?? [];
  if (given.length > MAX_TOOLS) fail("tools", `may hold at most ${MAX_TOOLS} tools`);
  const names = new Set<string>();
  for (const tool of given) {
    if (tool.name === "" || tool.name.length > 128)
      fail("tools", `names are 1 to 128 characters ("${tool.name}")`);
    if (names.has(tool.name)) fail("tools", `name "${tool.name}" twice`);
    names.add(tool.name);
  }
  const choice = decoded.toolChoice;
  if (typeof choice === "object" && !names.has(choice.name))
    fail(
      "toolChoice",
      `names the function "${choice.name}", which is not in tools (${[...names].join(", ") || "none"})`,
    );
  if (given.length === 0) return { tools: undefined, toolChoice: choice };
  const forced = choice !== undefined && choice !== "auto" && choice !== "none";
  if (forced && constraint)
    fail("toolChoice", "forces a tool call, which cannot be combined with an output format");
  const parametersPath = profile.toolParametersPath ?? ((i: number) => `/tools/${i}/parameters`);
  const tools = given.map((tool, index): ToolDefinition => {
    const definition: ToolDefinition = {
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters,
    };
    const callable = forced && (choice === "required" || choice.name === tool.name);
    if (!callable) return definition;
    const path = parametersPath(index);
    try {
      const translation = translateSchema(tool.parameters ?? { type: "object" }, {
        path: dotted(path),
        budget: limits.schemaBudget ?? DEFAULT_SCHEMA_BUDGET,
        strict: tool.strict === true,
      });
      unenforced.push(...translation.unenforced);
      return { ...definition, grammar: translation.grammar };
    } catch (error) {
      if (error instanceof SchemaError) throw badRequest(error.message, [{ path }]);
      throw error;
    }
  });
  return { tools, toolChoice: choice };
}

/** Effort, budget and switches as the engine's two settings: thinking on or off, and its budget. */
function reasoningOf(
  reasoning: DecodedRequest["reasoning"],
  maxTokens: number,
): { thinking?: boolean; thinkingBudget?: number } {
  if (!reasoning) return {};
  const budget = reasoning.budgetTokens ?? (reasoning.effort ? EFFORT_BUDGET[reasoning.effort] : undefined);
  if (reasoning.enabled === false || budget === 0) return { thinking: false };
  // A budget the answer's own limit already bounds says nothing more.
  return budget === undefined || budget >= maxTokens ? {} : { thinkingBudget: budget };
}

/** `/options/num_predict` → `options.num_predict`, as messages name fields. */
function label(path: string): string {
  return dotted(path);
}

function dotted(path: string): string {
  return path.replace(/^\//, "").replace(/\//g, ".");
}

function snake(name: string): string {
  return name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}
