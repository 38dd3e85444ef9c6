/**
 * JSON Schema as clients send it (OpenAI's `response_format`, zod via the AI SDK or LangChain, tool
 * parameters) turned into what the grammar enforces: the subset node-llama-cpp compiles
 * (`GbnfJsonSchema`), plus `pattern` (and `format: uuid`) as GBNF of our own (regex-grammar.ts),
 * substituted for placeholder literals in node-llama-cpp's grammar.
 *
 * Why a translation: node-llama-cpp reads `oneOf` but not `anyOf`, only `#/$defs/` references, and
 * treats a schema it does not recognise as `null`. What the grammar can enforce, it does: types,
 * properties, enums, `anyOf`/`oneOf`, `allOf` of objects (merged), local `$ref`s, string lengths,
 * `pattern`, the formats llama.cpp enforces (date, time, date-time, uuid), item counts up to
 * MAX_ENFORCED_ITEMS, integer ranges of up to 256 values. The rest (`not`, `if`, `format: uri`, wide
 * numeric bounds…) is listed in `unenforced` with its path, or, with `strict`, refused with it.
 * Numeric bounds are never refused: zod writes them on every number.
 *
 * Tool schemas with tool_choice auto/none only describe: `describeSchema` copies them for the prompt,
 * never refusing anything.
 */
import type { GbnfJsonSchema } from "node-llama-cpp";
import type { Config } from "../../core/config.js";
import type { GrammarSchema } from "./generator.js";
import { patternGrammar, RegexGrammarError, UUID_PATTERN } from "./regex-grammar.js";

export class SchemaError extends Error {}

/**
 * How large a schema may be before it is translated (translate recurses along its nesting, and the
 * grammar node-llama-cpp writes grows with every property, enum value and alternative): refused with
 * a SchemaError naming the path and the limit. `$ref`s cost nothing extra: each definition becomes
 * one grammar rule, referenced, never copied.
 */
export interface SchemaBudget {
  /** Nested subschemas on any path (properties, items, anyOf…, $defs), the root being 1. */
  maxDepth: number;
  /** Properties over the whole schema. */
  maxProperties: number;
  /** Values of one enum (integer ranges enumerated by the translation count too). */
  maxEnum: number;
  /** Bytes of all enum and const values together, as JSON. */
  maxEnumBytes: number;
  /** Alternatives of one anyOf / oneOf, and types of one `type` list. */
  maxAlternatives: number;
}

/** The defaults of SCHEMA_MAX_* (src/core/config.ts), for callers without a configuration. */
export const DEFAULT_SCHEMA_BUDGET: SchemaBudget = {
  maxDepth: 32,
  maxProperties: 1000,
  maxEnum: 500,
  maxEnumBytes: 32 * 1024,
  maxAlternatives: 128,
};

/** SCHEMA_MAX_* as a budget. */
export function schemaBudgetOf(
  limits: Pick<
    Config["limits"],
    | "schemaMaxDepth"
    | "schemaMaxProperties"
    | "schemaMaxEnum"
    | "schemaMaxEnumBytes"
    | "schemaMaxAlternatives"
  >,
): SchemaBudget {
  return {
    maxDepth: limits.schemaMaxDepth,
    maxProperties: limits.schemaMaxProperties,
    maxEnum: limits.schemaMaxEnum,
    maxEnumBytes: limits.schemaMaxEnumBytes,
    maxAlternatives: limits.schemaMaxAlternatives,
  };
}

/** Keywords whose value is a subschema, a list of them, or a map of them. */
const singleSubschema = ["items", "additionalProperties", "not", "if", "then", "else", "contains"];
const listOfSubschemas = ["anyOf", "oneOf", "allOf", "prefixItems", "items"];
const mapOfSubschemas = ["properties", "$defs", "definitions", "patternProperties"];

/** Walks the schema without recursion (a 3,000-deep one must not overflow this either). */
export function checkSchemaBudget(schema: unknown, budget: SchemaBudget, root = "schema"): void {
  const todo: { node: unknown; path: string; depth: number }[] = [{ node: schema, path: root, depth: 1 }];
  let properties = 0;
  let enumBytes = 0;
  const over = (path: string, what: string, variable: string, limit: number) =>
    new SchemaError(`${path}: ${what}; ${variable} allows ${limit}`);
  while (todo.length > 0) {
    const { node, path, depth } = todo.pop()!;
    if (!isObject(node)) continue;
    if (depth > budget.maxDepth)
      throw over(
        path,
        `subschemas nest more than ${budget.maxDepth} deep`,
        "SCHEMA_MAX_DEPTH",
        budget.maxDepth,
      );
    const values = Array.isArray(node.enum) ? node.enum : node.const !== undefined ? [node.const] : [];
    if (values.length > budget.maxEnum)
      throw over(`${path}.enum`, `${values.length} values`, "SCHEMA_MAX_ENUM", budget.maxEnum);
    for (const value of values) enumBytes += typeof value === "string" ? Buffer.byteLength(value) + 2 : 8;
    if (enumBytes > budget.maxEnumBytes)
      throw over(
        path,
        `enum and const values pass ${budget.maxEnumBytes} bytes`,
        "SCHEMA_MAX_ENUM_BYTES",
        budget.maxEnumBytes,
      );
    const integerRange = integerRangeSize(node);
    if (integerRange > budget.maxEnum)
      throw over(
        path,
        `an integer range of ${integerRange} values is enumerated`,
        "SCHEMA_MAX_ENUM",
        budget.maxEnum,
      );
    for (const key of ["anyOf", "oneOf", "type"]) {
      const list = node[key];
      if (Array.isArray(list) && list.length > budget.maxAlternatives)
        throw over(
          `${path}.${key}`,
          `${list.length} alternatives`,
          "SCHEMA_MAX_ALTERNATIVES",
          budget.maxAlternatives,
        );
    }
    for (const key of singleSubschema)
      if (isObject(node[key])) todo.push({ node: node[key], path: `${path}.${key}`, depth: depth + 1 });
    for (const key of listOfSubschemas) {
      const list = node[key];
      if (Array.isArray(list))
        list.forEach((item, i) => todo.push({ node: item, path: `${path}.${key}.${i}`, depth: depth + 1 }));
    }
    for (const key of mapOfSubschemas) {
      const map = node[key];
      if (!isObject(map)) continue;
      const names = Object.keys(map);
      if (key === "properties") {
        properties += names.length;
        if (properties > budget.maxProperties)
          throw over(
            `${path}.properties`,
            `more than ${budget.maxProperties} properties in the schema`,
            "SCHEMA_MAX_PROPERTIES",
            budget.maxProperties,
          );
      }
      for (const name of names)
        todo.push({ node: map[name], path: `${path}.${key}.${name}`, depth: depth + 1 });
    }
  }
}

/** Values the translation would enumerate for an integer range (0 when it would not). */
function integerRangeSize(schema: Json): number {
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  if (!types.includes("integer")) return 0;
  const low = integerBound(schema.minimum, schema.exclusiveMinimum, 1, Math.ceil);
  const high = integerBound(schema.maximum, schema.exclusiveMaximum, -1, Math.floor);
  if (low === undefined || high === undefined || high < low || high - low >= MAX_ENUMERATED_INTEGERS)
    return 0;
  return high - low + 1;
}

type Json = Record<string, unknown>;

/** Keywords that only describe. */
const annotations = new Set([
  "description",
  "title",
  "default",
  "examples",
  "$schema",
  "$id",
  "$comment",
  "$anchor",
  "deprecated",
  "readOnly",
  "writeOnly",
  "contentEncoding",
  "contentMediaType",
  "strict",
  "required",
]);

/** Keywords the translation reads (whether or not a given use of them is enforced). */
const translated = new Set([
  "type",
  "properties",
  "additionalProperties",
  "items",
  "prefixItems",
  "minItems",
  "maxItems",
  "minLength",
  "maxLength",
  "minProperties",
  "maxProperties",
  "format",
  "pattern",
  "enum",
  "const",
  "anyOf",
  "oneOf",
  "allOf",
  "$ref",
  "$defs",
  "definitions",
  "nullable",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
]);

/** The formats node-llama-cpp's grammar writes; uuid is a pattern. */
const grammarFormats = new Set(["date-time", "date", "time"]);
const MAX_ENUMERATED_INTEGERS = 256;
/**
 * Item counts enforced: node-llama-cpp copies the item schema once per counted item, so a count past
 * this would grow the grammar past GRAMMAR_MAX_REPETITION's reach; such counts are not enforced.
 */
export const MAX_ENFORCED_ITEMS = 100;
/** zod's bounds on every number: they say "a safe integer", which is nothing to enforce. */
const SAFE_BOUND = Number.MAX_SAFE_INTEGER;

export interface TranslateOptions {
  /** Where the schema sits in the request, for paths in messages (`schema`, `tools.0.function.parameters`). */
  path?: string;
  budget?: SchemaBudget;
  /** Refuse (SchemaError) what cannot be enforced, instead of listing it in `unenforced`. */
  strict?: boolean;
}

export interface Translation {
  grammar: GrammarSchema;
  /** Paths of keywords the grammar does not enforce (`schema.properties.url.format`). */
  unenforced: string[];
}

interface Context {
  /** Makes placeholders unique across the schemas of one grammar (a forced call's tools). */
  root: string;
  strict: boolean;
  unenforced: string[];
  patterns: Map<string, string>;
  /** The root's definitions, for `allOf` members that are references. */
  defs: Json | undefined;
}

/**
 * The schema as the grammar enforces it. Throws SchemaError for a schema that is not one (a bad type,
 * a remote `$ref`, an empty enum…), for one over its budget, and with `strict` for anything the grammar
 * cannot enforce; otherwise lists that in `unenforced`.
 */
export function translateSchema(schema: unknown, options: TranslateOptions = {}): Translation {
  const path = options.path ?? "schema";
  if (!isObject(schema)) throw new SchemaError(`${path} must be a JSON Schema object`);
  checkSchemaBudget(schema, options.budget ?? DEFAULT_SCHEMA_BUDGET, path);
  const rawDefs = schema.$defs ?? schema.definitions;
  if (rawDefs !== undefined && !isObject(rawDefs)) throw new SchemaError(`${path}.$defs must be an object`);
  const context: Context = {
    root: path.replace(/[^A-Za-z0-9]+/g, "_"),
    strict: options.strict ?? false,
    unenforced: [],
    patterns: new Map(),
    defs: rawDefs,
  };
  const root = translate(schema, path, context);
  let result = root;
  if (rawDefs !== undefined) {
    const translatedDefs: Json = {};
    const key = schema.$defs !== undefined ? "$defs" : "definitions";
    for (const [name, def] of Object.entries(rawDefs)) {
      if (!isObject(def)) throw new SchemaError(`${path}.${key}.${name} must be a JSON Schema object`);
      translatedDefs[name] = translate(def, `${path}.${key}.${name}`, context);
    }
    result = { ...root, $defs: translatedDefs } as GbnfJsonSchema;
  }
  return { grammar: { schema: result, patterns: context.patterns }, unenforced: context.unenforced };
}

/**
 * The strict translation's schema alone (what node-llama-cpp compiles; patterns appear as placeholder
 * literals): throws SchemaError naming the first keyword the grammar cannot enforce.
 */
export function toGrammarSchema(
  schema: unknown,
  path = "schema",
  budget: SchemaBudget = DEFAULT_SCHEMA_BUDGET,
): GbnfJsonSchema {
  return translateSchema(schema, { path, budget, strict: true }).grammar.schema;
}

/** Records (or, strict, refuses) a keyword the grammar does not enforce. */
function unenforced(context: Context, path: string, why: string): void {
  if (context.strict)
    throw new SchemaError(`${path}: ${why} (the grammar cannot enforce it; strict output refuses it)`);
  context.unenforced.push(path);
}

function translate(schema: unknown, path: string, context: Context): GbnfJsonSchema {
  if (schema === true) return anyValue();
  if (!isObject(schema)) throw new SchemaError(`${path} must be a JSON Schema object`);
  for (const key of Object.keys(schema)) {
    if (translated.has(key) || annotations.has(key) || key.startsWith("x-")) continue;
    unenforced(context, `${path}.${key}`, `the "${key}" keyword is not supported in constrained output`);
  }
  const result = translateCore(schema, path, context);
  return schema.nullable === true ? { oneOf: [result, { type: "null" }] } : result;
}

function translateCore(schema: Json, path: string, context: Context): GbnfJsonSchema {
  if (typeof schema.$ref === "string") {
    const match = /^#\/(?:\$defs|definitions)\/(.+)$/.exec(schema.$ref);
    if (!match) throw new SchemaError(`${path}.$ref: only local references (#/$defs/…) are supported`);
    return { $ref: `#/$defs/${match[1]}` } as GbnfJsonSchema;
  }
  if (schema.const !== undefined) return { const: literal(schema.const, `${path}.const`) };
  if (schema.enum !== undefined) {
    if (!Array.isArray(schema.enum) || schema.enum.length === 0)
      throw new SchemaError(`${path}.enum must be a non-empty array`);
    return { enum: schema.enum.map((value, i) => literal(value, `${path}.enum.${i}`)) };
  }
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives !== undefined) {
    const key = schema.anyOf !== undefined ? "anyOf" : "oneOf";
    if (!Array.isArray(alternatives) || alternatives.length === 0)
      throw new SchemaError(`${path}.${key} must be a non-empty array`);
    return { oneOf: alternatives.map((item, i) => translate(item, `${path}.${key}.${i}`, context)) };
  }
  if (schema.allOf !== undefined) return allOfSchema(schema, path, context);
  const types =
    schema.type === undefined ? undefined : Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types === undefined) {
    if (schema.properties !== undefined) return objectSchema(schema, path, context);
    if (schema.items !== undefined || schema.prefixItems !== undefined)
      return arraySchema(schema, path, context);
    if (schema.pattern !== undefined || schema.format !== undefined)
      return stringSchema(schema, path, context);
    return anyValue();
  }
  const options = types.map((type) => typedSchema(schema, type, path, context));
  return options.length === 1 ? options[0]! : { oneOf: options };
}

/** `allOf`: one member is that member; members that are all objects merge into one object. */
function allOfSchema(schema: Json, path: string, context: Context): GbnfJsonSchema {
  if (!Array.isArray(schema.allOf) || schema.allOf.length === 0)
    throw new SchemaError(`${path}.allOf must be a non-empty array`);
  const members = schema.allOf.map((member, i) => resolveLocal(member, `${path}.allOf.${i}`, context));
  if (members.length === 1) return translate(members[0], `${path}.allOf.0`, context);
  const objects = members.every(
    (member) =>
      isObject(member) &&
      (member.type === "object" || (member.type === undefined && isObject(member.properties))),
  );
  if (!objects) {
    unenforced(context, `${path}.allOf`, "an allOf of members that are not all objects");
    return anyValue();
  }
  const merged: Json = { type: "object", properties: {}, required: [] };
  for (const member of members as Json[]) {
    Object.assign(merged.properties as Json, isObject(member.properties) ? member.properties : {});
    if (Array.isArray(member.required)) (merged.required as unknown[]).push(...member.required);
    if (member.additionalProperties !== undefined) merged.additionalProperties = member.additionalProperties;
  }
  return objectSchema(merged, `${path}.allOf`, context);
}

/** A member that is a local reference, as the definition it names (for merging). */
function resolveLocal(member: unknown, path: string, context: Context): unknown {
  if (!isObject(member) || typeof member.$ref !== "string") return member;
  const match = /^#\/(?:\$defs|definitions)\/(.+)$/.exec(member.$ref);
  const target = match ? context.defs?.[match[1]!] : undefined;
  if (target === undefined)
    throw new SchemaError(`${path}.$ref: only local references (#/$defs/…) are supported`);
  return target;
}

function typedSchema(schema: Json, type: unknown, path: string, context: Context): GbnfJsonSchema {
  switch (type) {
    case "object":
      return objectSchema(schema, path, context);
    case "array":
      return arraySchema(schema, path, context);
    case "string":
      return stringSchema(schema, path, context);
    case "integer": {
      const low = integerBound(schema.minimum, schema.exclusiveMinimum, 1, Math.ceil);
      const high = integerBound(schema.maximum, schema.exclusiveMaximum, -1, Math.floor);
      if (low !== undefined && high !== undefined && high >= low && high - low < MAX_ENUMERATED_INTEGERS)
        return { enum: Array.from({ length: high - low + 1 }, (_, i) => low + i) };
      noteNumericBounds(schema, path, context);
      return { type: "integer" };
    }
    case "number":
      noteNumericBounds(schema, path, context);
      return { type };
    case "boolean":
    case "null":
      return { type };
    default:
      throw new SchemaError(`${path}.type: unknown type ${JSON.stringify(type)}`);
  }
}

/** Bounds the grammar does not enforce are listed (never refused: zod writes them on every number). */
function noteNumericBounds(schema: Json, path: string, context: Context): void {
  for (const key of ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]) {
    const value = schema[key];
    if (typeof value !== "number") continue;
    if (key !== "multipleOf" && Math.abs(value) >= SAFE_BOUND) continue;
    if (key === "multipleOf" && value === 1 && schema.type === "integer") continue;
    context.unenforced.push(`${path}.${key}`);
  }
}

function stringSchema(schema: Json, path: string, context: Context): GbnfJsonSchema {
  const format = typeof schema.format === "string" ? schema.format : undefined;
  let pattern = typeof schema.pattern === "string" ? schema.pattern : undefined;
  if (schema.pattern !== undefined && pattern === undefined)
    throw new SchemaError(`${path}.pattern must be a string`);
  if (format === "uuid") {
    if (pattern === undefined) pattern = UUID_PATTERN;
    else unenforced(context, `${path}.format`, "a format beside a pattern");
  }
  if (pattern !== undefined) {
    try {
      const grammar = patternGrammar(pattern);
      if (format !== undefined && format !== "uuid")
        unenforced(context, `${path}.format`, "a format beside a pattern");
      for (const key of ["minLength", "maxLength"])
        if (schema[key] !== undefined) unenforced(context, `${path}.${key}`, "a length beside a pattern");
      // A literal no schema would hold, replaced by the pattern's GBNF in the grammar text.
      const placeholder = `__lectern_pattern_${context.root}_${context.patterns.size}__`;
      context.patterns.set(placeholder, grammar);
      return { const: placeholder };
    } catch (error) {
      if (!(error instanceof RegexGrammarError)) throw error;
      unenforced(context, `${path}.pattern`, `the pattern cannot be enforced: ${error.message}`);
    }
  }
  if (format !== undefined && grammarFormats.has(format))
    return { type: "string", format: format as "date-time" | "date" | "time" };
  if (format !== undefined && format !== "uuid")
    unenforced(context, `${path}.format`, `the format "${format}" is not enforced`);
  const lengths: { minLength?: number; maxLength?: number } = {};
  if (typeof schema.minLength === "number") lengths.minLength = schema.minLength;
  if (typeof schema.maxLength === "number") lengths.maxLength = schema.maxLength;
  return { type: "string", ...lengths };
}

function objectSchema(schema: Json, path: string, context: Context): GbnfJsonSchema {
  const properties: Record<string, GbnfJsonSchema> = {};
  if (schema.properties !== undefined) {
    if (!isObject(schema.properties)) throw new SchemaError(`${path}.properties must be an object`);
    for (const [name, property] of Object.entries(schema.properties))
      properties[name] = translate(property, `${path}.properties.${name}`, context);
  }
  const hasProperties = Object.keys(properties).length > 0;
  const extra = schema.additionalProperties;
  // JSON Schema's default is "any other property"; with named properties we write only those (valid
  // either way), without any, "any object" keeps `{type: "object"}` meaning what it says.
  const additionalProperties: boolean | GbnfJsonSchema =
    extra === undefined
      ? !hasProperties
      : typeof extra === "boolean"
        ? extra
        : translate(extra, `${path}.additionalProperties`, context);
  const result: Json = { type: "object", properties, additionalProperties };
  if (typeof schema.minProperties === "number") result.minProperties = schema.minProperties;
  if (typeof schema.maxProperties === "number") result.maxProperties = schema.maxProperties;
  return result as GbnfJsonSchema;
}

function arraySchema(schema: Json, path: string, context: Context): GbnfJsonSchema {
  const result: Json = { type: "array" };
  if (Array.isArray(schema.items))
    result.prefixItems = schema.items.map((item, i) => translate(item, `${path}.items.${i}`, context));
  else if (schema.items !== undefined) result.items = translate(schema.items, `${path}.items`, context);
  if (Array.isArray(schema.prefixItems))
    result.prefixItems = schema.prefixItems.map((item, i) =>
      translate(item, `${path}.prefixItems.${i}`, context),
    );
  for (const key of ["minItems", "maxItems"] as const) {
    const count = schema[key];
    if (typeof count !== "number") continue;
    if (count <= MAX_ENFORCED_ITEMS) result[key] = count;
    else unenforced(context, `${path}.${key}`, `an item count over ${MAX_ENFORCED_ITEMS}`);
  }
  return result as GbnfJsonSchema;
}

/** Any JSON value. */
function anyValue(): GbnfJsonSchema {
  return {
    oneOf: [
      { type: ["string", "number", "boolean", "null"] },
      { type: "object", additionalProperties: true },
      { type: "array" },
    ],
  };
}

function integerBound(
  inclusive: unknown,
  exclusive: unknown,
  step: 1 | -1,
  round: (value: number) => number,
): number | undefined {
  if (typeof exclusive === "number")
    return round(exclusive) === exclusive ? exclusive + step : round(exclusive);
  if (typeof inclusive === "number") return round(inclusive);
  return undefined;
}

function literal(value: unknown, path: string): string | number | boolean | null {
  if (value === null || ["string", "number", "boolean"].includes(typeof value))
    return value as string | number | boolean | null;
  throw new SchemaError(`${path}: only string, number, boolean and null literals are supported`);
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The grammar text node-llama-cpp wrote for a translation's schema, with each pattern placeholder's
 * literal replaced by its pattern's GBNF (the literal is written as `"\"<placeholder>\""`).
 */
export function substitutePatterns(grammar: string, patterns: ReadonlyMap<string, string>): string {
  let text = grammar;
  for (const [placeholder, pattern] of patterns) {
    const quoted = `"\\"${placeholder}\\""`;
    if (!text.includes(quoted)) throw new Error(`the grammar lost the pattern placeholder ${placeholder}`);
    text = text.split(quoted).join(`(${pattern})`);
  }
  return text;
}

/** Subschema keywords `describeSchema` walks into. */
const describedMaps = ["properties", "$defs", "definitions"];
const describedLists = ["anyOf", "oneOf", "allOf", "prefixItems"];
const describedSingles = ["items", "additionalProperties"];
/** Nodes copied for the prompt at most; the rest of a larger schema is shown as "any". */
const MAX_DESCRIBED_NODES = 5000;

/**
 * A tool's parameters as the prompt shows them (tool_choice auto/none): the schema copied with every
 * keyword kept (the model reads `pattern` or `format` as a hint), `anyOf` written as the `oneOf`
 * node-llama-cpp's renderer reads, anything that is not a subschema where one belongs dropped, and
 * depth and size capped (a pathological schema is shown truncated, never refused). Never throws.
 */
export function describeSchema(
  schema: unknown,
  budget: SchemaBudget = DEFAULT_SCHEMA_BUDGET,
): GbnfJsonSchema {
  let nodes = 0;
  const copy = (node: unknown, depth: number): Json => {
    if (!isObject(node) || depth > budget.maxDepth || ++nodes > MAX_DESCRIBED_NODES) return {};
    const out: Json = {};
    for (const [key, value] of Object.entries(node)) {
      if (describedMaps.includes(key)) {
        if (!isObject(value)) continue;
        const map: Json = {};
        for (const [name, sub] of Object.entries(value)) map[name] = copy(sub, depth + 1);
        out[key] = map;
      } else if (describedLists.includes(key) || (key === "items" && Array.isArray(value))) {
        if (!Array.isArray(value)) continue;
        out[key === "anyOf" ? "oneOf" : key] = value.map((sub) => copy(sub, depth + 1));
      } else if (describedSingles.includes(key)) {
        if (typeof value === "boolean") out[key] = value;
        else if (isObject(value)) out[key] = copy(value, depth + 1);
      } else if (key === "type") {
        if (typeof value === "string" || (Array.isArray(value) && value.every((t) => typeof t === "string")))
          out[key] = value;
      } else out[key] = value;
    }
    return out;
  };
  const described = copy(schema, 1);
  return (Object.keys(described).length === 0 ? { type: "object" } : described) as GbnfJsonSchema;
}
