/**
 * The fuzz suites' routes come from the apps themselves, not from a list kept by hand (#38): every
 * operation of the OpenAPI document is a fuzz target, with valid bodies and query strings made from
 * its schemas (a suite may give a route better ones), and every route Fastify registers (seen by the
 * onRoute hook while the app is built) must be one of them or a stated exclusion. A route added
 * without a fuzz target fails the suite.
 *
 * Bodies that are not JSON: multipart/form-data is not in the OpenAPI document (the routes that take
 * it say so in their description), so a suite names such routes with `multipart` (the form's text
 * fields); they then get well-formed and broken multipart bodies besides the JSON ones, and a route
 * without a JSON body schema (POST /v1/files) gets them as its valid body. A JSON-RPC route is JSON:
 * its body schema makes its valid requests like any other route's.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import type { RouteOptions } from "fastify";
import {
  FUZZ_RUNS_SET,
  anyString,
  pathSegment,
  type Method,
  type MultipartBody,
  type Path,
  type RouteSpec,
} from "./fuzz-http.js";

/** A route as Fastify registered it, one method each, its path in OpenAPI's `{param}` form. */
export interface RegisteredRoute {
  method: string;
  path: string;
  hidden: boolean;
}

/** Records the routes an app registers: pass `onRoute` to buildRagApp / buildTextgenApp. */
export function routeRecorder() {
  const routes: RegisteredRoute[] = [];
  return {
    routes,
    onRoute(route: RouteOptions) {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      const hidden = (route.schema as { hide?: boolean } | undefined)?.hide === true;
      const path = route.url.replace(/:([A-Za-z0-9_]+)/g, "{$1}");
      for (const method of methods) routes.push({ method: method.toUpperCase(), path, hidden });
    },
  };
}

/**
 * Registered routes that are not fuzz targets, and why. Anything else hidden from the OpenAPI
 * document fails the suite: give it a fuzz target (put it in the document) or an entry here.
 */
export const NOT_FUZZED: Array<{ method?: string; path: RegExp; reason: string }> = [
  {
    method: "HEAD",
    path: /.*/,
    reason:
      "Fastify's automatic HEAD twin of a GET route runs the GET handler; every target sends HEAD among its other methods",
  },
  {
    path: /^\/docs(\/|$)/,
    reason: "Swagger UI's static page and assets (@fastify/swagger-ui), no input of ours",
  },
  {
    path: /^\/openapi\.json$/,
    reason: "the OpenAPI document itself, read by the suites to find the targets",
  },
  {
    path: /^\/ui(\/|$)/,
    reason: "the playground's static files (@fastify/static) and its fixed config.json",
  },
  {
    method: "OPTIONS",
    path: /^\*$/,
    reason: "the CORS preflight answers any path; every target sends OPTIONS among its other methods",
  },
  {
    path: /^\/mcp$/,
    reason:
      "MCP's JSON-RPC transport (@modelcontextprotocol/sdk), hidden from OpenAPI: the SDK validates each message; test/rag/mcp/ sends it bad arguments, unknown tools and missing keys through the SDK's client",
  },
  {
    path: /^\/__lectern\/host-not-allowed$/,
    reason: "where a refused Host header is routed internally (host-policy), not reachable by a path",
  },
];

function exclusionOf(route: RegisteredRoute) {
  return NOT_FUZZED.find(
    (rule) => (rule.method === undefined || rule.method === route.method) && rule.path.test(route.path),
  );
}

/** Asserts that the targets are exactly the registered routes less the stated exclusions. */
export function assertEveryRouteFuzzed(registered: RegisteredRoute[], targets: RouteSpec[]): string {
  const fuzzed = new Set(targets.map((spec) => spec.name));
  const expected = new Set<string>();
  const excluded: string[] = [];
  for (const route of registered) {
    const name = `${route.method} ${route.path}`;
    if (fuzzed.has(name)) expected.add(name);
    else if (exclusionOf(route)) excluded.push(name);
    else expected.add(name);
  }
  const missing = [...expected].filter((name) => !fuzzed.has(name));
  assert.deepEqual(missing, [], "registered routes without a fuzz target (hidden from OpenAPI?)");
  const extra = [...fuzzed].filter((name) => !expected.has(name));
  assert.deepEqual(extra, [], "fuzz targets that are not registered routes");
  assert.equal(fuzzed.size, expected.size);
  return `${fuzzed.size} routes fuzzed of ${registered.length} registered (${excluded.length} excluded: static, docs, HEAD twins, preflight)`;
}

// ---------------------------------------------------------------------------------------------
// Values from JSON Schema (what @fastify/swagger puts in the document from TypeBox)
// ---------------------------------------------------------------------------------------------

export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean | JsonSchema;
  required?: string[];
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number | boolean;
  exclusiveMaximum?: number | boolean;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  nullable?: boolean;
}

const SHORT = 3;

function stringArbitrary(schema: JsonSchema): fc.Arbitrary<string> {
  const min = schema.minLength ?? 0;
  const max = Math.max(min, Math.min(schema.maxLength ?? 24, 24));
  if (schema.pattern !== undefined) {
    let pattern: RegExp;
    try {
      pattern = new RegExp(schema.pattern, "u");
    } catch {
      return fc.string({ minLength: min, maxLength: max });
    }
    const limit = schema.maxLength ?? Infinity;
    const fits = (s: string) => s.length >= min && s.length <= limit;
    try {
      return fc.stringMatching(pattern).filter(fits);
    } catch {
      // fast-check reads no lookaheads: names-like strings, kept when they match.
      return fc
        .string({ unit: fc.constantFrom(..."abcxyz019._-"), minLength: Math.max(1, min), maxLength: max })
        .filter((s) => fits(s) && pattern.test(s));
    }
  }
  return fc.oneof(
    { weight: 3, arbitrary: fc.string({ minLength: min, maxLength: max }) },
    { weight: 1, arbitrary: anyString(max, min) },
  );
}

function numberArbitrary(schema: JsonSchema, integer: boolean): fc.Arbitrary<number> {
  const low =
    typeof schema.exclusiveMinimum === "number"
      ? schema.exclusiveMinimum + (integer ? 1 : 1e-6)
      : (schema.minimum ?? (integer ? -5 : -5));
  const high =
    typeof schema.exclusiveMaximum === "number"
      ? schema.exclusiveMaximum - (integer ? 1 : 1e-6)
      : (schema.maximum ?? low + 1000);
  if (integer) return fc.integer({ min: Math.ceil(low), max: Math.max(Math.ceil(low), Math.floor(high)) });
  return fc.double({ min: low, max: Math.max(low, high), noNaN: true, noDefaultInfinity: true });
}

/** Values valid against `schema` (mostly: patterns and combinations are approximated). */
export function schemaArbitrary(schema: JsonSchema, depth = 0): fc.Arbitrary<unknown> {
  const value = schemaValue(schema, depth);
  return schema.nullable
    ? fc.oneof({ weight: 4, arbitrary: value }, { weight: 1, arbitrary: fc.constant(null) })
    : value;
}

function schemaValue(schema: JsonSchema, depth: number): fc.Arbitrary<unknown> {
  if (depth > 5) return fc.constant(null);
  if ("const" in schema) return fc.constant(schema.const);
  if (schema.enum?.length) return fc.constantFrom(...schema.enum);
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives?.length) return fc.oneof(...alternatives.map((alt) => schemaArbitrary(alt, depth + 1)));
  if (schema.allOf?.length) return schemaArbitrary(schema.allOf[0]!, depth + 1);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case "string":
      return stringArbitrary(schema);
    case "integer":
      return numberArbitrary(schema, true);
    case "number":
      return numberArbitrary(schema, false);
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    case "array": {
      const minLength = schema.minItems ?? 0;
      const maxLength = Math.max(minLength, Math.min(schema.maxItems ?? SHORT, SHORT));
      return fc.array(schemaArbitrary(schema.items ?? {}, depth + 1), { minLength, maxLength });
    }
    case "object":
      return objectArbitrary(schema, depth);
    default:
      return schema.properties ? objectArbitrary(schema, depth) : fc.jsonValue({ maxDepth: 2 });
  }
}

function objectArbitrary(schema: JsonSchema, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const properties = schema.properties ?? {};
  if (Object.keys(properties).length === 0) {
    return schema.additionalProperties === false
      ? fc.constant({})
      : fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), {
          maxKeys: 3,
        });
  }
  const record = Object.fromEntries(
    Object.entries(properties).map(([key, value]) => [key, schemaArbitrary(value, depth + 1)]),
  );
  const required = (schema.required ?? []).filter((key) => key in properties);
  return fc.record(record, { requiredKeys: required }) as fc.Arbitrary<Record<string, unknown>>;
}

/** Paths into a body worth mutating: its properties, and one level into objects and first items. */
export function fieldsOf(schema: JsonSchema | undefined): Path[] {
  const fields: Path[] = [];
  for (const [key, value] of Object.entries(schema?.properties ?? {})) {
    fields.push([key]);
    for (const inner of Object.keys(value.properties ?? {})) fields.push([key, inner]);
    if (value.items) {
      fields.push([key, 0]);
      for (const inner of Object.keys(value.items.properties ?? {})) fields.push([key, 0, inner]);
    }
  }
  return fields;
}

// ---------------------------------------------------------------------------------------------
// Operations of the OpenAPI document
// ---------------------------------------------------------------------------------------------

interface Parameter {
  in: string;
  name: string;
  required?: boolean;
  schema?: JsonSchema;
}

interface Operation {
  tags?: string[];
  parameters?: Parameter[];
  requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
}

export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
}

/** What a suite adds to or replaces in a route's derived target. */
export type RouteOverride = Partial<Omit<RouteSpec, "name" | "method" | "multipart">> & {
  /** The route takes multipart/form-data too: these text fields (a file part is always added). */
  multipart?: Record<string, fc.Arbitrary<string>>;
};

export interface TargetOptions {
  /** The error shape of an operation (from its tags). */
  shape(tags: string[]): RouteSpec["shape"];
  /** Valid values of path parameters by name (raw, not encoded); the schema's otherwise. */
  pathValues?: Record<string, fc.Arbitrary<string>>;
  /** Better targets for some routes, by name ("POST /rag/build"); each must name an operation. */
  overrides?: Record<string, RouteOverride>;
  bodyLimit: number;
}

function queryArbitrary(parameters: Parameter[]): fc.Arbitrary<string> | undefined {
  const query = parameters.filter((p) => p.in === "query");
  if (query.length === 0) return undefined;
  const record = Object.fromEntries(
    query.map((p) => [p.name, schemaArbitrary(p.schema ?? { type: "string" })]),
  );
  return fc
    .record(record, { requiredKeys: query.filter((p) => p.required).map((p) => p.name) })
    .map((values) => {
      const pairs = Object.entries(values)
        .filter(([, value]) => value !== null && typeof value !== "object")
        .map(
          ([key, value]) => `${key}=${encodeURIComponent(String(value).replace(/[\ud800-\udfff]/g, "x"))}`,
        );
      return pairs.length === 0 ? "" : `?${pairs.join("&")}`;
    });
}

function pathArbitrary(
  template: string,
  parameters: Parameter[],
  options: TargetOptions,
): fc.Arbitrary<string> {
  const names = [...template.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]!);
  if (names.length === 0) return fc.constant(template);
  const segments = names.map((name) => {
    const given = options.pathValues?.[name];
    const schema = parameters.find((p) => p.in === "path" && p.name === name)?.schema ?? { type: "string" };
    const valid = (given ?? (schemaArbitrary(schema) as fc.Arbitrary<string>).map(String)).map((value) =>
      encodeURIComponent(value.replace(/[\ud800-\udfff]/g, "x")),
    );
    return pathSegment(valid.filter((segment) => segment.length > 0));
  });
  return fc.tuple(...segments).map((values) => {
    let i = 0;
    return template.replace(/\{[^}]+\}/g, () => values[i++]!);
  });
}

/** One fuzz target per operation of the document, with the suite's overrides applied. */
export function fuzzTargets(doc: OpenApiDocument, options: TargetOptions): RouteSpec[] {
  const targets: RouteSpec[] = [];
  for (const [template, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const name = `${method.toUpperCase()} ${template}`;
      const parameters = operation.parameters ?? [];
      const schema = operation.requestBody?.content?.["application/json"]?.schema;
      const { multipart, ...override } = options.overrides?.[name] ?? {};
      const spec: RouteSpec = {
        name,
        method: method.toUpperCase() as Method,
        path: pathArbitrary(template, parameters, options),
        shape: options.shape(operation.tags ?? []),
        bodyLimit: options.bodyLimit,
      };
      const query = queryArbitrary(parameters);
      if (query) spec.query = query;
      if (schema) {
        spec.body = schemaArbitrary(schema) as fc.Arbitrary<Record<string, unknown>>;
        spec.fields = fieldsOf(schema);
      }
      if (multipart) spec.multipart = multipartArbitrary(multipart);
      targets.push({ ...spec, ...override });
    }
  }
  const names = new Set(targets.map((spec) => spec.name));
  const stale = Object.keys(options.overrides ?? {}).filter((name) => !names.has(name));
  assert.deepEqual(stale, [], "overrides for routes the OpenAPI document does not have");
  return targets;
}

/** Requests each target gets: FUZZ_RUNS when set, else the suite's budget shared among the routes. */
export function runsPerRoute(routes: number, budget: number, fallback: number): number {
  return FUZZ_RUNS_SET ? fallback : Math.max(200, Math.floor(budget / Math.max(1, routes)));
}

// ---------------------------------------------------------------------------------------------
// multipart/form-data
// ---------------------------------------------------------------------------------------------

const BOUNDARY = "----lectern-fuzz";

function multipartArbitrary(fields: Record<string, fc.Arbitrary<string>>): fc.Arbitrary<MultipartBody> {
  const file = fc.record({
    filename: fc.oneof(
      fc.constantFrom(
        "a.txt",
        "notes.md",
        "page.html",
        "data.json",
        "x.pdf",
        "../../etc/passwd",
        "",
        "a\u0000.txt",
      ),
      anyString(20, 1),
    ),
    type: fc.constantFrom("text/plain", "text/markdown", "application/pdf", "application/octet-stream", ""),
    content: fc.oneof(
      fc
        .array(fc.constantFrom("sun", "moon", "planet", "ocean", "bread"), { minLength: 1, maxLength: 40 })
        .map((w) => Buffer.from(w.join(" "))),
      fc.uint8Array({ maxLength: 2000 }).map((bytes) => Buffer.from(bytes)),
    ),
  });
  const textFields = fc.record(fields, { requiredKeys: [] });
  return fc
    .tuple(
      textFields,
      fc.array(file, { minLength: 0, maxLength: 2 }),
      fc.constantFrom("file", "files", "x"),
      fc.nat(),
      fc.boolean(),
    )
    .map(([values, files, fileField, cut, truncate]) => {
      const parts: Buffer[] = [];
      for (const [key, value] of Object.entries(values))
        parts.push(
          Buffer.from(`--${BOUNDARY}\r\ncontent-disposition: form-data; name="${key}"\r\n\r\n${value}\r\n`),
        );
      for (const part of files) {
        const type = part.type === "" ? "" : `content-type: ${part.type}\r\n`;
        parts.push(
          Buffer.from(
            `--${BOUNDARY}\r\ncontent-disposition: form-data; name="${fileField}"; filename="${part.filename.replace(/["\r\n]/g, "_")}"\r\n${type}\r\n`,
          ),
          part.content,
          Buffer.from("\r\n"),
        );
      }
      parts.push(Buffer.from(`--${BOUNDARY}--\r\n`));
      const whole = Buffer.concat(parts);
      return {
        payload: truncate ? whole.subarray(0, cut % Math.max(1, whole.length)) : whole,
        contentType: `multipart/form-data; boundary=${BOUNDARY}`,
        kind: truncate ? "multipart-truncated" : "multipart",
      };
    });
}
