/**
 * JSON Schema as clients send it (OpenAI's `response_format`, zod via the AI SDK or LangChain, tool
 * parameters) turned into the subset node-llama-cpp compiles to a grammar (`GbnfJsonSchema`).
 *
 * Why a translation: node-llama-cpp reads `oneOf` but not `anyOf`, only `#/$defs/` references, and
 * treats a schema it does not recognise as `null`. Keywords the grammar cannot enforce and that would
 * change which values are valid (`pattern`, `not`, `if`…) are refused with the path that holds them,
 * so an answer never silently breaks its schema. Numeric bounds are the exception: zod writes them on
 * every integer, so they are accepted; an integer range of up to 256 values becomes an enum, wider
 * bounds are not enforced.
 */
import type { GbnfJsonSchema } from "node-llama-cpp";

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

/** Keywords that only describe, or that the translation handles. */
const handled = new Set([
  "type",
  "properties",
  "required",
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
  // Annotations.
  "description",
  "title",
  "default",
  "examples",
  "$schema",
  "$id",
  "$comment",
  "deprecated",
  "readOnly",
  "writeOnly",
  "contentEncoding",
  "contentMediaType",
  "strict",
]);

const grammarFormats = new Set(["date-time", "date", "time"]);
const MAX_ENUMERATED_INTEGERS = 256;

/**
 * Throws SchemaError naming the first problem (with its path, e.g. `schema.properties.age`); the
 * budget is checked first, so translation never meets a schema deeper than SCHEMA_MAX_DEPTH.
 */
export function toGrammarSchema(
  schema: unknown,
  path = "schema",
  budget: SchemaBudget = DEFAULT_SCHEMA_BUDGET,
): GbnfJsonSchema {
  if (!isObject(schema)) throw new SchemaError(`${path} must be a JSON Schema object`);
  checkSchemaBudget(schema, budget, path);
  const root = translate(schema, path);
  const defs = schema.$defs ?? schema.definitions;
  if (defs === undefined) return root;
  if (!isObject(defs)) throw new SchemaError(`${path}.$defs must be an object`);
  const translatedDefs: Json = {};
  for (const [name, def] of Object.entries(defs)) {
    if (!isObject(def)) throw new SchemaError(`${path}.$defs.${name} must be a JSON Schema object`);
    translatedDefs[name] = translate(def, `${path}.$defs.${name}`);
  }
  return { ...root, $defs: translatedDefs } as GbnfJsonSchema;
}

function translate(schema: Json | boolean, path: string): GbnfJsonSchema {
  if (schema === true) return anyValue();
  if (schema === false || !isObject(schema)) throw new SchemaError(`${path} must be a JSON Schema object`);
  for (const key of Object.keys(schema)) {
    if (!handled.has(key))
      throw new SchemaError(
        `${path}.${key}: the "${key}" keyword is not supported in constrained output (the grammar cannot enforce it)`,
      );
  }
  const result = translateCore(schema, path);
  return schema.nullable === true ? { oneOf: [result, { type: "null" }] } : result;
}

function translateCore(schema: Json, path: string): GbnfJsonSchema {
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
    return { oneOf: alternatives.map((item, i) => translate(item as Json, `${path}.${key}.${i}`)) };
  }
  if (schema.allOf !== undefined) {
    if (!Array.isArray(schema.allOf) || schema.allOf.length !== 1)
      throw new SchemaError(`${path}.allOf: only a single-element allOf is supported`);
    return translate(schema.allOf[0] as Json, `${path}.allOf.0`);
  }
  const types =
    schema.type === undefined ? undefined : Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types === undefined) {
    if (schema.properties !== undefined) return objectSchema(schema, path);
    if (schema.items !== undefined || schema.prefixItems !== undefined) return arraySchema(schema, path);
    return anyValue();
  }
  const options = types.map((type) => typedSchema(schema, type, path));
  return options.length === 1 ? options[0]! : { oneOf: options };
}

function typedSchema(schema: Json, type: unknown, path: string): GbnfJsonSchema {
  switch (type) {
    case "object":
      return objectSchema(schema, path);
    case "array":
      return arraySchema(schema, path);
    case "string": {
      if (typeof schema.format === "string" && grammarFormats.has(schema.format))
        return { type: "string", format: schema.format as "date-time" | "date" | "time" };
      const lengths: { minLength?: number; maxLength?: number } = {};
      if (typeof schema.minLength === "number") lengths.minLength = schema.minLength;
      if (typeof schema.maxLength === "number") lengths.maxLength = schema.maxLength;
      return { type: "string", ...lengths };
    }
    case "integer": {
      const low = integerBound(schema.minimum, schema.exclusiveMinimum, 1, Math.ceil);
      const high = integerBound(schema.maximum, schema.exclusiveMaximum, -1, Math.floor);
      if (low !== undefined && high !== undefined && high >= low && high - low < MAX_ENUMERATED_INTEGERS)
        return { enum: Array.from({ length: high - low + 1 }, (_, i) => low + i) };
      return { type: "integer" };
    }
    case "number":
    case "boolean":
    case "null":
      return { type };
    default:
      throw new SchemaError(`${path}.type: unknown type ${JSON.stringify(type)}`);
  }
}

function objectSchema(schema: Json, path: string): GbnfJsonSchema {
  const properties: Record<string, GbnfJsonSchema> = {};
  if (schema.properties !== undefined) {
    if (!isObject(schema.properties)) throw new SchemaError(`${path}.properties must be an object`);
    for (const [name, property] of Object.entries(schema.properties))
      properties[name] = translate(property as Json, `${path}.properties.${name}`);
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
        : translate(extra as Json, `${path}.additionalProperties`);
  const result: Json = { type: "object", properties, additionalProperties };
  if (typeof schema.minProperties === "number") result.minProperties = schema.minProperties;
  if (typeof schema.maxProperties === "number") result.maxProperties = schema.maxProperties;
  return result as GbnfJsonSchema;
}

function arraySchema(schema: Json, path: string): GbnfJsonSchema {
  const result: Json = { type: "array" };
  if (Array.isArray(schema.items))
    result.prefixItems = schema.items.map((item, i) => translate(item as Json, `${path}.items.${i}`));
  else if (schema.items !== undefined) result.items = translate(schema.items as Json, `${path}.items`);
  if (Array.isArray(schema.prefixItems))
    result.prefixItems = schema.prefixItems.map((item, i) =>
      translate(item as Json, `${path}.prefixItems.${i}`),
    );
  if (typeof schema.minItems === "number") result.minItems = schema.minItems;
  if (typeof schema.maxItems === "number") result.maxItems = schema.maxItems;
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
