/**
 * The per-request duties of the HTTP base (src/core/http.ts, logger.ts, cors.ts, metrics.ts): access
 * log, redaction, request ids, CORS and the HTTP metrics, on an app built by createHttpApp.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import Fastify from "fastify";
import pino from "pino";
import { createHttpApp } from "../../src/core/http.js";
import { LazyRequestLogger } from "../../src/core/logger.js";
import { registerMetrics } from "../../src/core/metrics.js";
import { testConfig } from "../helpers/env.js";

interface LogLine {
  level: number;
  msg: string;
  reqId?: string;
  [key: string]: unknown;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** An app like ours (createHttpApp + registerMetrics) with a few routes, its log lines kept. */
async function testApp(env: Record<string, string> = {}, ui = false) {
  const lines: string[] = [];
  const app = await createHttpApp({
    service: "Test",
    description: "test",
    config: testConfig({ LOG_LEVEL: "info", ...env }),
    logStream: { write: (line: string) => void lines.push(line) },
    ...(ui ? { ui: { service: "textgen" as const } } : {}),
  });
  const { registry } = registerMetrics(app, "test");
  app.get("/health", async () => ({ status: "healthy" }));
  app.get("/things/:id", async (request) => ({ id: (request.params as { id: string }).id }));
  app.get("/boom", async () => {
    throw new Error("boom");
  });
  app.post("/echo", async (request) => request.body);
  // Access lines are written once the response has finished, just after inject() resolves.
  const logs = async (): Promise<LogLine[]> => {
    await new Promise((resolve) => setImmediate(resolve));
    return lines.map((line) => JSON.parse(line) as LogLine);
  };
  return { app, logs, raw: lines, registry };
}

describe("access log", () => {
  it("writes one line per request, with method, url, status, response time and request id", async () => {
    const { app, logs } = await testApp();
    try {
      await app.inject({ method: "GET", url: "/things/7?x=1", headers: { "x-request-id": "req-1" } });
      await app.inject({ method: "GET", url: "/nowhere", headers: { "x-request-id": "req-2" } });
      const lines = await logs();
      const first = lines.filter((line) => line.reqId === "req-1");
      assert.equal(first.length, 1, JSON.stringify(first));
      assert.equal(first[0]!.msg, "request completed");
      assert.equal(first[0]!.level, 30);
      assert.equal(first[0]!.method, "GET");
      assert.equal(first[0]!.url, "/things/7?x=1");
      assert.equal(first[0]!.statusCode, 200);
      assert.equal(typeof first[0]!.responseTime, "number");
      const second = lines.filter((line) => line.reqId === "req-2" && line.msg === "request completed");
      assert.equal(second.length, 1);
      assert.equal(second[0]!.statusCode, 404);
      assert.ok(!lines.some((line) => line.msg === "incoming request"));
    } finally {
      await app.close();
    }
  });

  it("a failed request gets its error line and its access line", async () => {
    const { app, logs } = await testApp();
    try {
      const res = await app.inject({ method: "GET", url: "/boom", headers: { "x-request-id": "req-3" } });
      assert.equal(res.statusCode, 500);
      const lines = (await logs()).filter((line) => line.reqId === "req-3");
      assert.deepEqual(
        lines.map((line) => [line.level, line.msg]),
        [
          [50, "request failed"],
          [30, "request completed"],
        ],
      );
    } finally {
      await app.close();
    }
  });

  it("probes and scrapes (/health, /livez, /metrics) are logged at debug only", async () => {
    const info = await testApp();
    const debug = await testApp({ LOG_LEVEL: "debug" });
    try {
      for (const { app } of [info, debug]) {
        for (const url of ["/health", "/livez", "/metrics", "/health?probe=1"]) {
          assert.equal((await app.inject({ method: "GET", url })).statusCode, 200, url);
        }
      }
      const requestLines = (lines: LogLine[]) => lines.filter((line) => line.reqId !== undefined);
      assert.deepEqual(requestLines(await info.logs()), []);
      const atDebug = requestLines(await debug.logs());
      const completed = atDebug.filter((line) => line.msg === "request completed");
      assert.deepEqual(
        completed.map((line) => [line.level, line.url]),
        [
          [20, "/health"],
          [20, "/livez"],
          [20, "/metrics"],
          [20, "/health?probe=1"],
        ],
      );
      // At debug the arrival of each request is logged too.
      assert.equal(atDebug.filter((line) => line.msg === "incoming request").length, 4);
    } finally {
      await info.app.close();
      await debug.app.close();
    }
  });

  it("nothing per request at warn", async () => {
    const { app, logs } = await testApp({ LOG_LEVEL: "warn" });
    try {
      await app.inject({ method: "GET", url: "/things/1" });
      assert.deepEqual(await logs(), []);
    } finally {
      await app.close();
    }
  });

  it("redacts the Authorization header and API keys", async () => {
    const { app, raw } = await testApp();
    try {
      app.log.info(
        {
          req: { headers: { authorization: "Bearer secret-1" } },
          headers: { authorization: "Bearer secret-2", "x-api-key": "secret-3" },
          apiKey: "secret-4",
          api_key: "secret-5",
          config: { generationApiKey: "secret-6" },
          options: { apiKey: "secret-7" },
          kept: "visible",
        },
        "with secrets",
      );
      const text = raw.join("");
      for (let i = 1; i <= 7; i++) assert.ok(!text.includes(`secret-${i}`), `secret-${i} in ${text}`);
      assert.match(text, /"kept":"visible"/);
      // `req` goes through Fastify's request serializer, which keeps no headers; the rest is censored.
      assert.equal(text.match(/\[redacted\]/g)?.length, 6);
    } finally {
      await app.close();
    }
  });
});

describe("request loggers", () => {
  /** A pino logger writing to `lines`, whose child() calls are counted. */
  function countingLogger(level = "info") {
    const lines: LogLine[] = [];
    const logger = pino({ level }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
    const made = { children: 0 };
    const child = logger.child.bind(logger);
    logger.child = ((...args: Parameters<typeof child>) => {
      made.children++;
      return child(...args);
    }) as typeof logger.child;
    return { logger, lines, made };
  }

  it("make no pino child until something logs through them, then one, whose lines carry the bindings", () => {
    const { logger, lines, made } = countingLogger();
    const log = new LazyRequestLogger(logger, { reqId: "r-1" }, {});
    assert.equal(log.level, "info");
    log.debug("dropped");
    assert.equal(made.children, 1, "a dropped line still goes through the child (pino decides)");
    const quiet = new LazyRequestLogger(logger, { reqId: "r-2" }, {});
    assert.equal(quiet.level, "info");
    assert.equal(made.children, 1, "reading the level makes no child");
    log.info({ a: 1 }, "first");
    log.warn("second %s", "arg");
    assert.equal(made.children, 1);
    assert.deepEqual(
      lines.map((line) => [line.level, line.reqId, line.msg, line.a]),
      [
        [30, "r-1", "first", 1],
        [40, "r-1", "second arg", undefined],
      ],
    );
  });

  it("a route's own log level is the request logger's level", () => {
    const { logger, lines } = countingLogger("info");
    const log = new LazyRequestLogger(logger, { reqId: "r-3" }, { level: "debug" });
    assert.equal(log.level, "debug");
    log.debug("seen");
    assert.deepEqual(
      lines.map((line) => [line.level, line.msg]),
      [[20, "seen"]],
    );
  });
});

describe("request ids", () => {
  let app: Awaited<ReturnType<typeof testApp>>["app"];
  before(async () => {
    app = (await testApp()).app;
  });
  after(() => app.close());

  it("every answer carries X-Request-Id: the client's, else a new UUID", async () => {
    const generated = await app.inject({ method: "GET", url: "/things/1" });
    assert.match(String(generated.headers["x-request-id"]), UUID);
    const other = await app.inject({ method: "GET", url: "/things/1" });
    assert.notEqual(other.headers["x-request-id"], generated.headers["x-request-id"]);
    const echoed = await app.inject({ method: "GET", url: "/things/1", headers: { "x-request-id": "abc" } });
    assert.equal(echoed.headers["x-request-id"], "abc");
  });

  it("errors carry it too (404, 400, 500)", async () => {
    const notFound = await app.inject({ method: "GET", url: "/nowhere" });
    const badJson = await app.inject({
      method: "POST",
      url: "/echo",
      headers: { "content-type": "application/json" },
      payload: "{",
    });
    const failed = await app.inject({ method: "GET", url: "/boom" });
    for (const [res, status] of [
      [notFound, 404],
      [badJson, 400],
      [failed, 500],
    ] as const) {
      assert.equal(res.statusCode, status);
      assert.match(String(res.headers["x-request-id"]), UUID);
    }
  });
});

describe("CORS", () => {
  let app: Awaited<ReturnType<typeof testApp>>["app"];
  let withUi: Awaited<ReturnType<typeof testApp>>["app"];
  let withKeys: Awaited<ReturnType<typeof testApp>>["app"];
  before(async () => {
    app = (await testApp({ CORS_ORIGINS: "https://app.example" })).app;
    withUi = (await testApp({ TEXTGEN_PORT: "8000", RAG_PORT: "8001" }, true)).app;
    const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-cors-keys-"));
    writeFileSync(path.join(dir, "keys.txt"), "key-for-tenant-a-0001 tenant-a\n");
    withKeys = (
      await testApp({ CORS_ORIGINS: "https://app.example", API_KEYS_FILE: path.join(dir, "keys.txt") })
    ).app;
  });
  after(async () => {
    await app.close();
    await withUi.close();
    await withKeys.close();
  });

  const corsHeaders = (headers: Record<string, unknown>) =>
    Object.keys(headers).filter((name) => name.startsWith("access-control-"));

  it("requests without Origin (not from a browser) get no CORS headers", async () => {
    const res = await app.inject({ method: "GET", url: "/things/1" });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(corsHeaders(res.headers), []);
  });

  it("a configured origin is allowed, and may read X-Request-Id and Retry-After", async () => {
    const res = await app.inject({
      method: "GET",
      url: "/things/1",
      headers: { origin: "https://app.example" },
    });
    assert.equal(res.headers["access-control-allow-origin"], "https://app.example");
    assert.equal(res.headers["access-control-expose-headers"], "x-request-id, retry-after");
    assert.match(String(res.headers.vary), /\bOrigin\b/);
  });

  it("any other origin gets no CORS headers, but Vary: Origin", async () => {
    const res = await app.inject({
      method: "GET",
      url: "/things/1",
      headers: { origin: "https://evil.example" },
    });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(corsHeaders(res.headers), []);
    assert.match(String(res.headers.vary), /\bOrigin\b/);
  });

  it("a preflight from an allowed origin is answered 204 with the methods and the asked headers", async () => {
    const res = await app.inject({
      method: "OPTIONS",
      url: "/echo",
      headers: {
        origin: "https://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, authorization",
      },
    });
    assert.equal(res.statusCode, 204);
    assert.equal(res.headers["access-control-allow-origin"], "https://app.example");
    assert.match(String(res.headers["access-control-allow-methods"]), /\bPOST\b/);
    assert.match(String(res.headers["access-control-allow-methods"]), /\bDELETE\b/);
    assert.equal(res.headers["access-control-allow-headers"], "content-type, authorization");
    assert.match(String(res.headers.vary), /Origin, Access-Control-Request-Headers/);
    assert.equal(res.headers["content-length"], "0");
    assert.equal(res.body, "");
  });

  it("a preflight from another origin is a 404, and an OPTIONS that is no preflight a 400, in JSON", async () => {
    const refused = await app.inject({
      method: "OPTIONS",
      url: "/echo",
      headers: { origin: "https://evil.example", "access-control-request-method": "POST" },
    });
    assert.equal(refused.statusCode, 404);
    assert.equal(refused.json().error.code, "not_found");
    assert.equal(refused.headers["access-control-allow-origin"], undefined);
    const noOrigin = await app.inject({ method: "OPTIONS", url: "/echo" });
    assert.equal(noOrigin.statusCode, 404);
    const notPreflight = await app.inject({
      method: "OPTIONS",
      url: "/echo",
      headers: { origin: "https://app.example" },
    });
    assert.equal(notPreflight.statusCode, 400);
    assert.equal(notPreflight.json().error.code, "invalid_request");
  });

  it("the sibling app on the same host is allowed when the playground is on", async () => {
    const sibling = await withUi.inject({
      method: "GET",
      url: "/things/1",
      headers: { host: "127.0.0.1:8000", origin: "http://127.0.0.1:8001" },
    });
    assert.equal(sibling.headers["access-control-allow-origin"], "http://127.0.0.1:8001");
    const otherHost = await withUi.inject({
      method: "GET",
      url: "/things/1",
      headers: { host: "127.0.0.1:8000", origin: "http://elsewhere.example:8001" },
    });
    assert.equal(otherHost.headers["access-control-allow-origin"], undefined);
  });

  it("preflights are answered before the API key check; the request itself still needs the key", async () => {
    const preflight = await withKeys.inject({
      method: "OPTIONS",
      url: "/echo",
      headers: {
        origin: "https://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization",
      },
    });
    assert.equal(preflight.statusCode, 204);
    const request = await withKeys.inject({
      method: "POST",
      url: "/echo",
      headers: { origin: "https://app.example" },
      payload: {},
    });
    assert.equal(request.statusCode, 401);
    // A browser can read the error: it carries the CORS headers too.
    assert.equal(request.headers["access-control-allow-origin"], "https://app.example");
  });
});

describe("HTTP metrics", () => {
  /** The value of the series `name` whose labels include all of `labels` (in any order), from /metrics. */
  function value(text: string, name: string, labels: Record<string, string>): string | undefined {
    for (const line of text.split("\n")) {
      if (!line.startsWith(`${name}{`)) continue;
      const [series, found] = line.split(/ (?=\S+$)/);
      if (Object.entries(labels).every(([key, v]) => series!.includes(`${key}="${v}"`))) return found;
    }
    return undefined;
  }

  it("count requests and time them by method, route pattern and status, across scrapes", async () => {
    const { app, registry } = await testApp();
    try {
      const scrape = async () => (await app.inject({ method: "GET", url: "/metrics" })).body;
      for (const id of ["1", "2", "3"]) await app.inject({ method: "GET", url: `/things/${id}` });
      await app.inject({ method: "GET", url: "/nowhere" });
      const things = { method: "GET", route: "/things/:id", status: "200", service: "test" };
      const first = await scrape();
      assert.equal(value(first, "lectern_http_requests_total", things), "3");
      assert.equal(value(first, "lectern_http_request_duration_seconds_count", things), "3");
      const unmatched = { method: "GET", route: "unmatched", status: "404" };
      assert.equal(value(first, "lectern_http_requests_total", unmatched), "1");
      for (const id of ["4", "5"]) await app.inject({ method: "GET", url: `/things/${id}` });
      const second = await scrape();
      assert.equal(value(second, "lectern_http_requests_total", things), "5");
      assert.equal(value(second, "lectern_http_request_duration_seconds_count", things), "5");
      assert.equal(
        value(second, "lectern_http_request_duration_seconds_bucket", { ...things, le: "+Inf" }),
        "5",
      );
      // The first scrape is counted by the second.
      const metrics = { method: "GET", route: "/metrics", status: "200" };
      assert.equal(value(second, "lectern_http_requests_total", metrics), "1");
      // The JSON form agrees, and a reset starts the series again from zero.
      const json = await registry.getMetricsAsJSON();
      const durations = json.find((m) => m.name === "lectern_http_request_duration_seconds")!;
      const count = durations.values.find(
        (v) =>
          (v as { metricName?: string }).metricName === "lectern_http_request_duration_seconds_count" &&
          v.labels.route === "/things/:id",
      );
      assert.equal(count?.value, 5);
      assert.equal(count?.labels.service, "test");
      registry.resetMetrics();
      await app.inject({ method: "GET", url: "/things/6" });
      const third = await scrape();
      assert.equal(value(third, "lectern_http_requests_total", things), "1");
      assert.equal(value(third, "lectern_http_request_duration_seconds_count", things), "1");
    } finally {
      await app.close();
    }
  });

  it("count on a plain Fastify app too (through an onResponse hook there)", async () => {
    const app = Fastify();
    registerMetrics(app, "plain");
    app.get("/ping", async () => ({ ok: true }));
    try {
      for (let i = 0; i < 2; i++) await app.inject({ method: "GET", url: "/ping" });
      const text = (await app.inject({ method: "GET", url: "/metrics" })).body;
      const ping = { method: "GET", route: "/ping", status: "200", service: "plain" };
      assert.equal(value(text, "lectern_http_requests_total", ping), "2");
    } finally {
      await app.close();
    }
  });

  it("a failing request-completed listener is logged; the answer, the others and the access line go on", async () => {
    const { app, logs } = await testApp();
    const seen: string[] = [];
    app.onRequestCompleted!(() => {
      throw new Error("listener bug");
    });
    app.onRequestCompleted!((request) => seen.push(request.url));
    try {
      const res = await app.inject({ method: "GET", url: "/things/9", headers: { "x-request-id": "req-9" } });
      assert.equal(res.statusCode, 200);
      const lines = (await logs()).filter((line) => line.reqId === "req-9");
      assert.deepEqual(
        lines.map((line) => [line.level, line.msg]),
        [
          [50, "request-completed listener failed"],
          [30, "request completed"],
        ],
      );
      assert.deepEqual(seen, ["/things/9"]);
    } finally {
      await app.close();
    }
  });
});
