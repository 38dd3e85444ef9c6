/**
 * Shared pieces of the fuzz suites (test/fuzz): the seed and run count, arbitraries for hostile
 * requests (wrong types, boundaries, huge strings, deeply nested JSON, invalid UTF-8, random bytes,
 * random content types, query strings and path segments), and the invariants every reply must keep.
 *
 * FUZZ_SEED fixes the seed (default fixed; "random" draws one, printed by the suite); FUZZ_RUNS sets
 * the requests per route (by default each suite shares a fixed budget among its routes, see
 * fuzz-routes.ts). A failing property prints its seed and counterexample path.
 */
import assert from "node:assert/strict";
import http from "node:http";
import fc from "fast-check";
import { repoRoot } from "./env.js";

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  if (raw === "random") return (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
  const value = Number(raw);
  if (!Number.isInteger(value)) throw new Error(`${name} must be an integer or "random", got "${raw}"`);
  return value;
}

export const FUZZ_SEED = intFromEnv("FUZZ_SEED", 0x1ec7e5);
export const FUZZ_RUNS = intFromEnv("FUZZ_RUNS", 5000);
/** Whether FUZZ_RUNS was given: then every route gets that many, else a suite shares its budget. */
export const FUZZ_RUNS_SET = (process.env.FUZZ_RUNS ?? "") !== "";

/** fast-check parameters of one route's property: its own seed derived from FUZZ_SEED. */
export function fuzzParameters(routeIndex: number, numRuns = FUZZ_RUNS): fc.Parameters<unknown> {
  return {
    seed: (FUZZ_SEED + routeIndex * 7919) | 0,
    numRuns,
    endOnFailure: true,
    includeErrorInReport: true,
  };
}

export type Method = "GET" | "POST" | "DELETE" | "PUT" | "PATCH" | "OPTIONS" | "HEAD";

export interface FuzzRequest {
  method: Method;
  url: string;
  headers: Record<string, string>;
  payload?: string | Buffer;
  /** How the payload was made (valid, mutated, deep, invalid-utf8…), for failure messages. */
  kind: string;
  /** Where a deeply nested value was put, and its depth. */
  deep?: { path: string; depth: number };
}

export interface FuzzReply {
  statusCode: number;
  headers: Record<string, unknown>;
  body: string;
}

// ---------------------------------------------------------------------------------------------
// Strings
// ---------------------------------------------------------------------------------------------

/** Strings that have broken servers before: traversal, NUL, encodings, prototype keys, bounds. */
export const SPECIAL_STRINGS = [
  "",
  " ",
  "\t\r\n",
  "\u0000",
  "a\u0000b",
  ".",
  "..",
  "../",
  "../../../../etc/passwd",
  "..\\..\\windows\\win.ini",
  "%00",
  "%2e%2e%2f",
  "%ZZ",
  "a/b",
  "\\",
  "\ud800",
  "\udfff",
  "\ud83d",
  "🙂",
  "👩‍👩‍👧‍👦",
  "索引",
  "café",
  "\u202eevil",
  "\ufeff",
  "\uffff",
  "null",
  "undefined",
  "true",
  "0",
  "-1",
  "NaN",
  "Infinity",
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "<script>alert(1)</script>",
  "' OR 1=1 --",
  "'; DROP TABLE indices; --",
  "${jndi:ldap://127.0.0.1/x}",
  "{{7*7}}",
  "%s%s%s%n",
  "x".repeat(128),
  "x".repeat(129),
  "x".repeat(256),
  "x".repeat(257),
  "x".repeat(512),
  "x".repeat(513),
  "x".repeat(4096),
  "x".repeat(4097),
];

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
const controlChar = fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c));
const anyChar = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 1 }) },
  // Any code point but surrogates (fast-check's "binary" unit builds a 1.1M-entry reverse map per use).
  {
    weight: 3,
    arbitrary: fc
      .integer({ min: 0, max: 0x10ffff })
      .filter((c) => c < 0xd800 || c > 0xdfff)
      .map((c) => String.fromCodePoint(c)),
  },
  { weight: 1, arbitrary: loneSurrogate },
  { weight: 1, arbitrary: controlChar },
);

/** A string of up to `maxLength` characters of every kind (graphemes, any code point, lone surrogates). */
export const anyString = (maxLength = 40, minLength = 0) =>
  fc.string({ unit: anyChar, minLength, maxLength });

/** A string of `minLength … maxLength` characters made by repeating a short random piece. */
export const hugeString = (minLength: number, maxLength: number) =>
  fc
    .tuple(
      fc.string({ unit: "grapheme", minLength: 1, maxLength: 6 }),
      fc.integer({ min: minLength, max: maxLength }),
    )
    .map(([piece, length]) => piece.repeat(Math.ceil(length / piece.length)).slice(0, length));

export const weirdString = fc.oneof(
  { weight: 5, arbitrary: anyString() },
  { weight: 3, arbitrary: fc.constantFrom(...SPECIAL_STRINGS) },
  { weight: 1, arbitrary: anyString(2000) },
);

// ---------------------------------------------------------------------------------------------
// JSON values and bodies
// ---------------------------------------------------------------------------------------------

export const BOUNDARY_NUMBERS = [
  0,
  -0,
  1,
  -1,
  0.5,
  1.5,
  -0.5,
  2,
  3,
  4,
  5,
  99,
  100,
  101,
  127,
  128,
  129,
  255,
  256,
  1000,
  1024,
  2048,
  2049,
  4096,
  4097,
  5000,
  5001,
  9999,
  10_000,
  10_001,
  32_768,
  32_769,
  65_535,
  2 ** 31 - 1,
  2 ** 31,
  2 ** 32 - 1,
  2 ** 32,
  2 ** 53 - 1,
  2 ** 53,
  2 ** 64,
  1e21,
  1e308,
  -1e308,
  Number.MIN_VALUE,
  -Number.MIN_VALUE,
  1e-7,
  0.1 + 0.2,
  0.999999,
  1.000001,
  2.000001,
  10.5,
];

export const boundaryNumber = fc.oneof(
  fc.constantFrom(...BOUNDARY_NUMBERS),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** Any JSON value a client could send in a field. */
export const fieldValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 3, arbitrary: boundaryNumber },
  { weight: 3, arbitrary: weirdString },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, [], {}, [null], [""], { "": "" }) },
  { weight: 1, arbitrary: fc.array(weirdString, { maxLength: 6 }) },
  { weight: 1, arbitrary: fc.dictionary(weirdString, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }) },
);

/** Depths of the deeply nested values: some clearly fine, some far past any sane limit. */
export const DEEP_DEPTHS = [2, 10, 64, 500, 1000, 10_000, 100_000];

/** JSON text nested `depth` levels: arrays, objects, or both. Built as text (JSON.stringify overflows). */
export function deepJson(depth: number, shape: "array" | "object" | "mixed"): string {
  if (shape === "array") return "[".repeat(depth) + "]".repeat(depth);
  if (shape === "object") return '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
  const half = Math.floor(depth / 2);
  return '[{"a":'.repeat(half) + "0" + "}]".repeat(half);
}

export type Path = ReadonlyArray<string | number>;

/** A copy of `value` with `path` set to `replacement` (containers made as needed), or deleted. */
export function setPath(value: unknown, path: Path, replacement: unknown, remove = false): unknown {
  if (path.length === 0) return remove ? undefined : replacement;
  const [head, ...rest] = path as [string | number, ...Array<string | number>];
  const container: Record<string | number, unknown> | unknown[] = Array.isArray(value)
    ? [...value]
    : value !== null && typeof value === "object"
      ? { ...(value as Record<string, unknown>) }
      : typeof head === "number"
        ? []
        : {};
  const target = container as Record<string | number, unknown>;
  if (rest.length === 0 && remove) {
    if (Array.isArray(container) && typeof head === "number") container.splice(head, 1);
    else delete target[head];
  } else {
    target[head] = setPath(target[head], rest, replacement, remove);
  }
  return container;
}

const DEEP_MARKER = "\u0001deep-value\u0001";

/** The JSON text of `body` with `path` replaced by a value nested `depth` levels. */
export function withDeepValue(body: unknown, path: Path, depth: number, shape: "array" | "object" | "mixed") {
  const text = JSON.stringify(setPath(body, path, DEEP_MARKER));
  return text.replace(JSON.stringify(DEEP_MARKER), () => deepJson(depth, shape));
}

/** Byte sequences that are not UTF-8: stray continuation bytes, overlong forms, surrogates, > U+10FFFF. */
export const INVALID_UTF8: number[][] = [
  [0xff],
  [0xfe],
  [0x80],
  [0xbf],
  [0xc3, 0x28],
  [0xa0, 0xa1],
  [0xe2, 0x28, 0xa1],
  [0xe2, 0x82, 0x28],
  [0xe2, 0x82],
  [0xf0, 0x28, 0x8c, 0xbc],
  [0xf0, 0x90, 0x28, 0xbc],
  [0xf8, 0xa1, 0xa1, 0xa1, 0xa1],
  [0xfc, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1],
  [0xc0, 0xaf],
  [0xc1, 0xbf],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80],
  [0x00],
  [0xef, 0xbb, 0xbf],
];

/** `text` as bytes with invalid UTF-8 put at some positions (inside a string value when possible). */
export const invalidUtf8Body = (text: string) =>
  fc
    .tuple(
      fc.array(fc.tuple(fc.constantFrom(...INVALID_UTF8), fc.nat(), fc.boolean()), {
        minLength: 1,
        maxLength: 4,
      }),
    )
    .map(([insertions]) => {
      let bytes = Buffer.from(text, "utf8");
      for (const [sequence, where, inString] of insertions) {
        let at = where % (bytes.length + 1);
        if (inString) {
          // Right after the opening quote of some string value.
          const quotes: number[] = [];
          for (let i = 0; i < bytes.length - 1; i++) {
            if (bytes[i] === 0x3a && bytes[i + 1] === 0x22) quotes.push(i + 2);
          }
          if (quotes.length > 0) at = quotes[where % quotes.length]!;
        }
        bytes = Buffer.concat([bytes.subarray(0, at), Buffer.from(sequence), bytes.subarray(at)]);
      }
      return bytes;
    });

/** Content types a client might send, well-formed or not. */
export const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "application/json;charset=UTF-8",
  "application/json; charset=iso-8859-1",
  "application/json; charset=utf-16le",
  "application/json; charset=nonsense",
  "APPLICATION/JSON",
  "application/json, text/plain",
  "application/jsonx",
  "application/vnd.api+json",
  "application/problem+json",
  "text/json",
  "text/plain",
  "text/plain; charset=utf-8",
  "text/html",
  "text/event-stream",
  "application/x-www-form-urlencoded",
  "multipart/form-data",
  "multipart/form-data; boundary=----lectern",
  "multipart/form-data; boundary=",
  "application/octet-stream",
  "application/xml",
  "application/x-ndjson",
  "*/*",
  "",
  ";",
  "application/",
  "/json",
  "json",
];

const headerSafeString = (maxLength: number) =>
  fc.string({
    unit: fc.oneof(
      { weight: 9, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) },
      // obs-text: bytes 0x80-0xff, legal in header values on the wire.
      { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)) },
    ),
    maxLength,
  });

export const contentType = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
  { weight: 1, arbitrary: headerSafeString(60) },
);

/** Extra request headers: nothing mostly, sometimes odd accept, request id, or authorization. */
export const extraHeaders: fc.Arbitrary<Record<string, string>> = fc.oneof(
  { weight: 8, arbitrary: fc.constant({}) },
  {
    weight: 2,
    arbitrary: fc.record(
      {
        accept: fc.oneof(
          fc.constantFrom("*/*", "application/json", "text/event-stream", "text/html", "image/png", ""),
          headerSafeString(40),
        ),
        "x-request-id": fc.oneof(
          fc.constantFrom("", "x", "../../etc/passwd", "%00", "a".repeat(2000)),
          headerSafeString(200),
        ),
        authorization: fc.oneof(
          fc.constantFrom("Bearer ", "Bearer x", "Basic Zm9vOmJhcg=="),
          headerSafeString(80),
        ),
        "accept-encoding": fc.constantFrom("gzip", "br", "identity", "*", "nonsense"),
        "content-encoding": fc.constantFrom("gzip", "deflate", "br", "identity", "nonsense"),
      },
      { requiredKeys: [] },
    ),
  },
);

// ---------------------------------------------------------------------------------------------
// URLs
// ---------------------------------------------------------------------------------------------

const rawUrlChar = fc
  .integer({ min: 0x21, max: 0x7e })
  .filter((c) => c !== 0x23 && c !== 0x3f) // '#' and '?' would end the path
  .map((c) => String.fromCharCode(c));

/** Path segments: valid names, traversal, NUL, bad escapes, unicode (raw and encoded), huge. */
export const pathSegment = (valid: fc.Arbitrary<string>) =>
  fc.oneof(
    { weight: 6, arbitrary: valid },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        "..",
        ".",
        "...",
        "%2e%2e",
        "%2E",
        "..%2f..%2fetc%2fpasswd",
        "%00",
        "a%00b",
        "%2F",
        "a%2Fb",
        "%5c..%5c",
        "%ZZ",
        "%",
        "%e",
        "%c3%28",
        "%ff",
        "%e2%82",
        "%ed%a0%80",
        "%C0%AF",
        "caf%C3%A9",
        "%F0%9F%99%82",
        "café",
        "索引",
        "🙂",
        "x".repeat(128),
        "x".repeat(129),
        "x".repeat(513),
        "x".repeat(2100),
        "__proto__",
        "constructor",
        "%20",
        "+",
        ";",
        "a;b=c",
      ),
    },
    {
      weight: 2,
      arbitrary: anyString(30, 1).map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, "x"))),
    },
    { weight: 2, arbitrary: fc.string({ unit: rawUrlChar, minLength: 1, maxLength: 30 }) },
  );

const queryToken = fc.oneof(
  fc.constantFrom("tenant_id", "force", "index_name", "top_k", "__proto__", "constructor", "a", "", "[]"),
  fc.string({ unit: rawUrlChar, maxLength: 12 }).map((s) => s.replace(/[&=]/g, "")),
  anyString(12).map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, "x"))),
  fc.constantFrom("%00", "%ZZ", "%", "%c3%28", "..", "../", "%2e%2e%2f", "x".repeat(300)),
);

/** Query strings (with the leading "?", or ""): none, valid ones, random pairs, known-nasty ones. */
export const queryString = (valid: fc.Arbitrary<string>) =>
  fc.oneof(
    { weight: 5, arbitrary: fc.constant("") },
    { weight: 3, arbitrary: valid },
    {
      weight: 3,
      arbitrary: fc
        .array(fc.tuple(queryToken, fc.option(queryToken, { nil: undefined })), {
          minLength: 1,
          maxLength: 4,
        })
        .map((pairs) => "?" + pairs.map(([k, v]) => (v === undefined ? k : `${k}=${v}`)).join("&")),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        "?",
        "?&&&",
        "?=",
        "?%",
        "?%ZZ=1",
        "?tenant_id",
        "?tenant_id=",
        "?tenant_id=%00",
        "?tenant_id=..",
        "?tenant_id=.",
        "?tenant_id=a&tenant_id=b",
        "?tenant_id[]=x",
        "?tenant_id[a]=x",
        "?__proto__=1",
        "?__proto__[polluted]=1",
        "?constructor[prototype][polluted]=1",
        "?force=true",
        "?force=false",
        "?force=maybe",
        "?force=true&force=true",
        "?tenant_id=caf%C3%A9",
        "?tenant_id=%F0%9F%99%82",
        "?tenant_id=" + "x".repeat(129),
        "?tenant_id=" + "x".repeat(10_000),
        "?" + "a=1&".repeat(2000),
      ),
    },
  );

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

export interface RouteSpec {
  /** "POST /rag/build" */
  name: string;
  method: Method;
  /** The path, parameters filled in (fuzzed or not). */
  path: fc.Arbitrary<string>;
  /** Valid query strings ("" or "?…"). */
  query?: fc.Arbitrary<string>;
  /** Valid bodies, for routes that take one. */
  body?: fc.Arbitrary<Record<string, unknown>>;
  /** Fields of the body worth mutating (paths into it). */
  fields?: Path[];
  /** Where to put deeply nested values besides the fields (e.g. inside metadata). */
  deepPaths?: Path[];
  /** The largest body the route accepts; huge bodies go a bit past it. */
  bodyLimit?: number;
  /** The error shape of this route. */
  shape: ErrorShape;
  /** Weight of the valid body among the payload kinds (default 30). */
  validWeight?: number;
  /** multipart/form-data bodies the route takes besides JSON (fuzz-routes.ts makes them). */
  multipart?: fc.Arbitrary<MultipartBody>;
}

/** A multipart/form-data body and its content type (with the boundary). */
export interface MultipartBody {
  payload: Buffer;
  contentType: string;
  kind: string;
}

export type ErrorShape = "contract" | "openai" | "anthropic" | "ollama";

const OTHER_METHODS: Method[] = ["GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD"];

interface Payload {
  payload?: string | Buffer;
  kind: string;
  deep?: { path: string; depth: number };
  /** Content type to send when none is drawn at random. */
  json: boolean;
  /** Its own content type (multipart's, with the boundary), when none is drawn at random. */
  contentType?: string;
}

function payloadArbitrary(spec: RouteSpec): fc.Arbitrary<Payload> {
  const body = spec.body ?? fc.constant({} as Record<string, unknown>);
  const fields: Path[] = spec.fields?.length ? spec.fields : [["x"]];
  const field = fc.constantFrom(...fields);
  const json = (kind: string) => (value: unknown) => ({ payload: JSON.stringify(value), kind, json: true });
  const limit = spec.bodyLimit ?? 1024 * 1024;
  const kinds: Array<fc.WeightedArbitrary<Payload>> = [
    { weight: spec.validWeight ?? 30, arbitrary: body.map(json("valid")) },
    {
      weight: 30,
      arbitrary: fc
        .tuple(
          body,
          fc.array(
            fc.oneof(
              { weight: 4, arbitrary: fc.tuple(fc.constant("set" as const), field, fieldValue) },
              {
                weight: 2,
                arbitrary: fc.tuple(fc.constant("delete" as const), field, fc.constant(undefined)),
              },
              {
                weight: 1,
                arbitrary: fc.tuple(
                  fc.constant("extra" as const),
                  weirdString.map((key) => [key] as Path),
                  fieldValue,
                ),
              },
            ),
            { minLength: 1, maxLength: 3 },
          ),
        )
        .map(([valid, mutations]) => {
          let value: unknown = valid;
          for (const [op, path, replacement] of mutations)
            value = setPath(value, path, replacement, op === "delete");
          return { payload: JSON.stringify(value) ?? "", kind: "mutated", json: true };
        }),
    },
    { weight: 5, arbitrary: fc.jsonValue({ maxDepth: 4 }).map(json("any-json")) },
    {
      weight: 6,
      arbitrary: fc
        .tuple(
          body,
          fc.constantFrom(...fields, ...(spec.deepPaths ?? []), [] as Path),
          fc.constantFrom(...DEEP_DEPTHS),
          fc.constantFrom("array" as const, "object" as const, "mixed" as const),
        )
        .map(([valid, path, depth, shape]) => ({
          payload: path.length === 0 ? deepJson(depth, shape) : withDeepValue(valid, path, depth, shape),
          kind: `deep-${shape}`,
          deep: { path: path.join("."), depth },
          json: true,
        })),
    },
    {
      weight: 3,
      arbitrary: fc
        .tuple(
          body,
          fc.constantFrom(
            '"__proto__":{"polluted":true}',
            '"constructor":{"prototype":{"polluted":true}}',
            '"__proto__":null',
            '"__proto__":[1]',
          ),
          fc.boolean(),
        )
        .map(([valid, injected, nested]) => {
          const text = JSON.stringify(valid);
          // At the top level, or inside the first nested object.
          const at = nested ? text.indexOf("{", 1) : 0;
          const where = at > 0 ? at : 0;
          const payload = `${text.slice(0, where + 1)}${injected}${text.length > where + 2 ? "," : ""}${text.slice(where + 1)}`;
          return { payload, kind: "proto", json: true };
        }),
    },
    {
      weight: 5,
      arbitrary: body.chain((valid) =>
        invalidUtf8Body(JSON.stringify(valid)).map((bytes) => ({
          payload: bytes,
          kind: "invalid-utf8",
          json: true,
        })),
      ),
    },
    {
      weight: 5,
      arbitrary: fc
        .uint8Array({ maxLength: 3000 })
        .map((bytes) => ({ payload: Buffer.from(bytes), kind: "random-bytes", json: true })),
    },
    {
      weight: 4,
      arbitrary: fc.tuple(body, fc.nat()).map(([valid, cut]) => {
        const text = JSON.stringify(valid);
        return { payload: text.slice(0, cut % Math.max(1, text.length)), kind: "truncated", json: true };
      }),
    },
    {
      weight: 2,
      arbitrary: fc
        .constantFrom("", " ", "null", "[]", "{}", '""', "0", "true", "\ufeff{}", "{}{}", "{,}", "{'a':1}")
        .map((payload) => ({
          payload,
          kind: "tiny",
          json: true,
        })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(body, field, hugeString(Math.floor(limit * 0.2), Math.floor(limit * 1.3)))
        .map(([valid, path, huge]) => ({
          payload: JSON.stringify(setPath(valid, path, huge)),
          kind: "huge",
          json: true,
        })),
    },
  ];
  if (spec.multipart) {
    const multipart = spec.multipart.map((form): Payload => ({
      payload: form.payload,
      kind: form.kind,
      json: false,
      contentType: form.contentType,
    }));
    // A route with no JSON body (an upload) gets mostly forms; one with both, some.
    kinds.push({ weight: spec.body === undefined ? 60 : 10, arbitrary: multipart });
  }
  return fc.oneof(...kinds);
}

/** Whether the request has the route's method (HEAD goes to a GET route): else it misses the route. */
export function hitsRoute(spec: RouteSpec, request: FuzzRequest): boolean {
  return request.method === spec.method || (request.method === "HEAD" && spec.method === "GET");
}

/**
 * The error shapes a reply to `request` may have: the route's own, or when the request has another
 * method (and so misses the route) also the app-wide 404's (contract or OpenAI's under /v1).
 */
export function shapesFor(spec: RouteSpec, request: FuzzRequest): ErrorShape[] {
  return hitsRoute(spec, request) ? [spec.shape] : [spec.shape, "contract", "openai"];
}

/** Requests to one route: mostly its method and path, with every kind of payload and header. */
export function requestArbitrary(spec: RouteSpec): fc.Arbitrary<FuzzRequest> {
  const takesBody = spec.body !== undefined || spec.multipart !== undefined;
  const payload: fc.Arbitrary<Payload> = takesBody
    ? payloadArbitrary(spec)
    : fc.oneof(
        { weight: 17, arbitrary: fc.constant({ kind: "no-body", json: false } as Payload) },
        { weight: 3, arbitrary: payloadArbitrary(spec) },
      );
  return fc
    .record({
      method: fc.oneof(
        { weight: 23, arbitrary: fc.constant(spec.method) },
        { weight: 2, arbitrary: fc.constantFrom(...OTHER_METHODS) },
      ),
      path: spec.path,
      query: queryString(spec.query ?? fc.constant("")),
      payload,
      contentType: fc.oneof(
        { weight: 17, arbitrary: fc.constant(null) },
        { weight: 3, arbitrary: contentType },
      ),
      headers: extraHeaders,
    })
    .map(({ method, path, query, payload, contentType, headers }) => {
      const all: Record<string, string> = { ...headers };
      if (contentType !== null) all["content-type"] = contentType;
      else if (payload.contentType !== undefined) all["content-type"] = payload.contentType;
      else if (payload.payload !== undefined && payload.json) all["content-type"] = "application/json";
      const request: FuzzRequest = { method, url: path + query, headers: all, kind: payload.kind };
      if (payload.payload !== undefined) request.payload = payload.payload;
      if (payload.deep) request.deep = payload.deep;
      return request;
    });
}

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

/** Text of the request, to tell an echo of the client's own input from a leak. */
function requestText(request: FuzzRequest): string {
  const payload = request.payload === undefined ? "" : request.payload.toString("utf8");
  let decodedUrl = request.url;
  try {
    decodedUrl = decodeURIComponent(request.url);
  } catch {
    // keep it raw
  }
  return `${request.method} ${request.url} ${decodedUrl} ${JSON.stringify(request.headers)} ${payload}`;
}

/** Things that must never reach a client: stack frames, file paths of the server, internals. */
const LEAKS: RegExp[] = [
  /(?:\n|\\n)\s*at \S/,
  /\bat [^\s()]+ \((?:\/|file:|node:)[^)]*\)/,
  /\bat (?:\/|file:\/\/|node:)\S+:\d+:\d+/,
  new RegExp(repoRoot.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")),
  /\/work\//,
  /node_modules/,
  /node:internal/,
  /\.ts:\d+:\d+/,
  /Maximum call stack/,
  /SQLITE_[A-Z]+/,
];

function describeRequest(request: FuzzRequest): string {
  const payload =
    request.payload === undefined
      ? "(none)"
      : Buffer.isBuffer(request.payload)
        ? `<${request.payload.length} bytes> ${request.payload.subarray(0, 200).toString("hex")}`
        : `${request.payload.length} chars: ${request.payload.slice(0, 300)}`;
  return (
    `${request.method} ${request.url.slice(0, 300)} kind=${request.kind}` +
    `${request.deep ? ` deep=${request.deep.path}@${request.deep.depth}` : ""} ` +
    `headers=${JSON.stringify(request.headers).slice(0, 300)} payload=${payload}`
  );
}

export interface CheckOptions {
  /** The error shape 4xx replies must have (any of them, given several); "either": contract or OpenAI. */
  shape: ErrorShape | "either" | ErrorShape[];
  /** A 503 the route may rightly answer (e.g. a model the app is not configured with), matched on its body. */
  unavailable?: RegExp;
}

/**
 * A URL refused before routing (a bad percent-escape, a path too long): no route, so no dialect, was
 * chosen, and the app-wide handler answers in the contract's shape even under /v1.
 */
function refusedBeforeRouting(reply: FuzzReply): boolean {
  return (
    reply.statusCode === 414 ||
    (reply.statusCode === 400 && reply.body.includes("is not a valid url component"))
  );
}

function isContractError(body: unknown): boolean {
  const error = (body as { error?: Record<string, unknown> } | null)?.error;
  return (
    !!error &&
    typeof error === "object" &&
    Object.keys(error).sort().join() === "code,details,message" &&
    typeof error.code === "string" &&
    error.code.length > 0 &&
    typeof error.message === "string" &&
    error.message.length > 0 &&
    Array.isArray(error.details)
  );
}

function isOpenAiError(body: unknown): boolean {
  const error = (body as { error?: Record<string, unknown> } | null)?.error;
  return (
    !!error &&
    typeof error === "object" &&
    typeof error.message === "string" &&
    error.message.length > 0 &&
    typeof error.type === "string" &&
    error.type.length > 0 &&
    (error.param === undefined || error.param === null || typeof error.param === "string") &&
    (error.code === undefined || error.code === null || typeof error.code === "string")
  );
}

/** Anthropic's `{type:"error", error:{type, message}}`. */
function isAnthropicError(body: unknown): boolean {
  const { type, error } = (body ?? {}) as { type?: unknown; error?: Record<string, unknown> };
  return (
    type === "error" &&
    !!error &&
    typeof error.type === "string" &&
    error.type.length > 0 &&
    typeof error.message === "string" &&
    error.message.length > 0
  );
}

/** Ollama's `{error: "message"}`. */
function isOllamaError(body: unknown): boolean {
  const error = (body as { error?: unknown } | null)?.error;
  return typeof error === "string" && error.length > 0;
}

const SHAPES: Record<ErrorShape | "either", (body: unknown) => boolean> = {
  contract: isContractError,
  openai: isOpenAiError,
  anthropic: isAnthropicError,
  ollama: isOllamaError,
  either: (body) => isContractError(body) || isOpenAiError(body),
};

/**
 * The invariants of every reply: never a 5xx; a 4xx is JSON of the route's error shape; a 2xx is
 * JSON or a well-formed event stream; nothing in any body that the client did not send itself and
 * that looks like a stack frame or a server path.
 */
export function checkReply(request: FuzzRequest, reply: FuzzReply, options: CheckOptions): void {
  const where = () => `${describeRequest(request)}\n→ ${reply.statusCode} ${reply.body.slice(0, 600)}`;
  const unavailable = reply.statusCode === 503 && options.unavailable?.test(reply.body) === true;
  assert.ok(reply.statusCode < 500 || unavailable, `5xx reply: ${where()}`);
  assert.ok(reply.statusCode >= 200, `odd status: ${where()}`);
  for (const leak of LEAKS) {
    const match = leak.exec(reply.body);
    if (match && !requestText(request).includes(match[0]))
      assert.fail(`leak (${leak}) "${match[0]}": ${where()}`);
  }
  if (request.method === "HEAD") return;
  const type = String(reply.headers["content-type"] ?? "");
  if (reply.statusCode >= 400) {
    const shape = refusedBeforeRouting(reply) ? "either" : options.shape;
    const shapes = Array.isArray(shape) ? shape : [shape];
    assert.match(type, /^application\/json/, `4xx without a JSON content type: ${where()}`);
    let body: unknown;
    try {
      body = JSON.parse(reply.body);
    } catch {
      assert.fail(`4xx body is not JSON: ${where()}`);
    }
    assert.ok(
      shapes.some((one) => SHAPES[one](body)),
      `4xx body is not the ${shapes.join(" or ")} error shape: ${where()}`,
    );
    if (reply.statusCode === 429) {
      assert.ok(
        reply.headers["retry-after"] !== undefined,
        `${reply.statusCode} without Retry-After: ${where()}`,
      );
    }
    return;
  }
  if (type.startsWith("text/event-stream")) {
    checkEventStream(reply.body, where);
    return;
  }
  if (type.startsWith("application/json")) {
    try {
      JSON.parse(reply.body);
    } catch {
      assert.fail(`2xx JSON body does not parse: ${where()}`);
    }
  }
}

/** Events of a server-sent event stream: no error event of a server failure, and a proper end. */
export function parseEvents(body: string): Array<{ event: string; data: string }> {
  const events: Array<{ event: string; data: string }> = [];
  for (const block of body.split("\n\n")) {
    if (block.trim() === "") continue;
    let event = "message";
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) event = line.slice(7);
      else if (line.startsWith("data: ")) data.push(line.slice(6));
    }
    events.push({ event, data: data.join("\n") });
  }
  return events;
}

function checkEventStream(body: string, where: () => string): void {
  assert.ok(body.endsWith("\n\n"), `event stream cut short: ${where()}`);
  const events = parseEvents(body);
  assert.ok(events.length > 0, `empty event stream: ${where()}`);
  for (const { event, data } of events) {
    if (data === "[DONE]") continue;
    let parsed: { error?: { code?: string; type?: string } };
    try {
      parsed = JSON.parse(data) as typeof parsed;
    } catch {
      assert.fail(`event data is not JSON: ${data.slice(0, 200)} in ${where()}`);
    }
    if (event === "error" || parsed.error) {
      const code = parsed.error?.code;
      const type = parsed.error?.type;
      assert.ok(
        code !== "internal_error" && type !== "server_error",
        `a server failure inside an event stream: ${where()}`,
      );
    }
  }
}

/** Sends a request through `inject` and returns the reply's status, headers and body. */
export async function injectRequest(
  app: {
    inject: (
      options: never,
    ) => Promise<{ statusCode: number; headers: Record<string, unknown>; body: string }>;
  },
  request: FuzzRequest,
  /** The client's address ("192.0.2.7": a client on another machine); the loopback one by default. */
  remoteAddress?: string,
): Promise<FuzzReply> {
  const options = {
    ...(remoteAddress === undefined ? {} : { remoteAddress }),
    method: request.method,
    url: request.url,
    headers: request.headers,
    ...(request.payload === undefined ? {} : { payload: request.payload }),
  };
  const reply = await app.inject(options as never);
  return { statusCode: reply.statusCode, headers: reply.headers, body: reply.body };
}

/** Sends a request over a real socket with its path exactly as given (no dot-segment removal). */
export function rawHttpRequest(
  port: number,
  request: Pick<FuzzRequest, "method" | "url" | "headers" | "payload">,
): Promise<FuzzReply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        method: request.method,
        path: request.url,
        headers: request.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () =>
          resolve({
            statusCode: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(request.payload);
  });
}

/** Counts requests per route, for the "≥ 5,000 per route" assertion. */
export class RequestCounter {
  private readonly counts = new Map<string, number>();
  add(route: string): void {
    this.counts.set(route, (this.counts.get(route) ?? 0) + 1);
  }
  get(route: string): number {
    return this.counts.get(route) ?? 0;
  }
  summary(): string {
    return [...this.counts].map(([route, n]) => `${route}: ${n}`).join(", ");
  }
}

/** Tallies statuses by route and payload kind, for the suite's diagnostics. */
export class StatusTally {
  private readonly byRoute = new Map<string, Map<number, number>>();
  add(route: string, status: number): void {
    const statuses = this.byRoute.get(route) ?? new Map<number, number>();
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
    this.byRoute.set(route, statuses);
  }
  line(route: string): string {
    const statuses = [...(this.byRoute.get(route) ?? new Map<number, number>())].sort((a, b) => a[0] - b[0]);
    return statuses.map(([status, n]) => `${status}×${n}`).join(" ");
  }
}

/** Milliseconds spent per payload kind, for the suite's diagnostics (where the time goes). */
export class KindTimer {
  private readonly totals = new Map<string, { ms: number; n: number }>();
  add(kind: string, ms: number): void {
    const total = this.totals.get(kind) ?? { ms: 0, n: 0 };
    total.ms += ms;
    total.n += 1;
    this.totals.set(kind, total);
  }
  line(): string {
    return [...this.totals]
      .sort((a, b) => b[1].ms - a[1].ms)
      .map(([kind, { ms, n }]) => `${kind} ${Math.round(ms)} ms/${n}`)
      .join(", ");
  }
}
