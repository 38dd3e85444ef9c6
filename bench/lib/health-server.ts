/**
 * One HTTP server answering GET /health, in a process of its own, for bench/http-floor.ts. The kind
 * comes from BENCH_SERVER:
 *
 *   textgen, rag          our apps (buildTextgenApp with the test model, buildRagApp on a temporary
 *                         DATA_DIR), configured from the environment like the real server
 *   bare                  Fastify with no options, answering BENCH_HEALTH_JSON
 *   bare+logger           … plus Fastify's default pino logger at LOG_LEVEL (request logging at info)
 *   bare+our-logger       … plus the logger options of src/core/logger.ts (pino with redaction)
 *   bare+request-id       … plus a UUID request id echoed in x-request-id (as src/core/http.ts)
 *   bare+metrics          … plus src/core/metrics.ts (prom-client request counter and histogram)
 *   bare+metrics-cached   … plus the same two metrics, but with the labelled children cached per
 *                         (method, route, status) instead of hashing a label object per request
 *   bare+cors-delegator   … plus @fastify/cors with a per-request options delegator (as src/core/http.ts)
 *   bare+cors-origin-fn   … plus @fastify/cors with static options and an origin function
 *   replica               all of the above as src/core/http.ts + metrics.ts combine them today
 *   proposed              the same duties, cheaper: one access-log line per request (Fastify's two
 *                         request logs off), redaction without wildcard paths, CORS work only for
 *                         requests with an Origin header, metrics children cached, one hook each way
 *   bare+empty-hook       … plus an async onResponse hook that does nothing
 *   bare+default-metrics  … plus prom-client's collectDefaultMetrics only (GC and event-loop observers)
 *
 * The "bare+" kinds rebuild one piece of src/core/http.ts each, to show what each piece costs.
 * Sends {port} over the IPC channel once listening; closes on disconnect or SIGTERM.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import cors from "@fastify/cors";
import Fastify, { LogController, type FastifyInstance } from "fastify";
import { loadConfig } from "../../src/core/config.js";
import { loggerOptions } from "../../src/core/logger.js";
import { registerMetrics } from "../../src/core/metrics.js";
import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { buildRagApp } from "../../src/rag/app.js";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { createGenerator } from "../../src/textgen/create-generator.js";
import type { LlamaGenerator } from "../../src/textgen/llama-generator.js";

const kind = process.env.BENCH_SERVER ?? "bare";
const dataDir = mkdtempSync(path.join(os.tmpdir(), "lectern-http-floor-"));

async function build(): Promise<FastifyInstance> {
  const config = loadConfig({ ...process.env, DATA_DIR: dataDir });
  if (kind === "textgen") {
    const generator = createGenerator(config) as LlamaGenerator;
    await generator.ready();
    return (await buildTextgenApp({ config, generator })) as unknown as FastifyInstance;
  }
  if (kind === "rag") return (await buildRagApp({ config })) as unknown as FastifyInstance;

  const body = JSON.parse(process.env.BENCH_HEALTH_JSON ?? '{"status":"healthy"}') as unknown;
  if (kind === "replica") return replica(config, body);
  if (kind === "proposed") return proposed(config, body);
  const app: FastifyInstance =
    kind === "bare+logger"
      ? Fastify({ logger: { level: config.logLevel } })
      : kind === "bare+our-logger"
        ? Fastify({ logger: loggerOptions(config.logLevel) })
        : kind === "bare+request-id"
          ? Fastify({ requestIdHeader: "x-request-id", genReqId: () => randomUUID() })
          : Fastify();
  if (kind === "bare+request-id") {
    app.addHook("onRequest", async (request, reply) => {
      void reply.header("x-request-id", request.id);
    });
  }
  if (kind === "bare+metrics") registerMetrics(app, "bench");
  if (kind === "bare+metrics-cached") cachedMetrics(app);
  const allowed = (origin: string | undefined) => origin !== undefined && config.corsOrigins.includes(origin);
  if (kind === "bare+cors-delegator") {
    await app.register(cors, {
      delegator: (request, callback) => {
        const origin = request.headers.origin;
        callback(null, {
          origin: allowed(origin) ? origin : false,
          exposedHeaders: ["x-request-id", "retry-after"],
        });
      },
    });
  }
  if (kind === "bare+cors-origin-fn") {
    await app.register(cors, {
      origin: (origin, callback) => callback(null, allowed(origin) ? origin! : false),
      exposedHeaders: ["x-request-id", "retry-after"],
    });
  }
  if (kind === "bare+empty-hook") app.addHook("onResponse", async () => {});
  if (kind === "bare+default-metrics") collectDefaultMetrics({ register: new Registry(), prefix: "bench_" });
  app.get("/health", async () => body);
  return app;
}

/** The hook of src/core/metrics.ts with each (method, route, status)'s children looked up once. */
function cachedMetrics(app: FastifyInstance): void {
  const registry = new Registry();
  const labelNames = ["method", "route", "status"] as const;
  const requests = new Counter({ name: "requests", help: "h", labelNames, registers: [registry] });
  const duration = new Histogram({
    name: "duration",
    help: "h",
    labelNames,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  const children = new Map<string, { count: Counter; time: Histogram }>();
  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    const key = `${request.method} ${route} ${reply.statusCode}`;
    let child = children.get(key);
    if (!child) {
      const labels = [request.method, route, String(reply.statusCode)];
      child = {
        count: requests.labels(...labels) as unknown as Counter,
        time: duration.labels(...labels) as unknown as Histogram,
      };
      children.set(key, child);
    }
    child.count.inc();
    child.time.observe(reply.elapsedTime / 1000);
  });
}

/** What src/core/http.ts and metrics.ts add to every request today, rebuilt on bare Fastify. */
async function replica(config: ReturnType<typeof loadConfig>, body: unknown): Promise<FastifyInstance> {
  const app = Fastify({
    logger: loggerOptions(config.logLevel),
    requestIdHeader: "x-request-id",
    genReqId: () => randomUUID(),
  });
  app.addHook("onRequest", async (request, reply) => {
    void reply.header("x-request-id", request.id);
  });
  await app.register(cors, {
    delegator: (request, callback) => {
      const origin = request.headers.origin;
      const ok = origin !== undefined && config.corsOrigins.includes(origin);
      callback(null, { origin: ok ? origin : false, exposedHeaders: ["x-request-id", "retry-after"] });
    },
  });
  registerMetrics(app, "bench");
  app.get("/health", async () => body);
  return app;
}

/** The same duties with the changes proposed for src/core/http.ts and metrics.ts. */
async function proposed(config: ReturnType<typeof loadConfig>, body: unknown): Promise<FastifyInstance> {
  const app = Fastify({
    logger: {
      level: config.logLevel,
      // Explicit paths: wildcard paths make pino's redaction walk every logged object.
      redact: {
        paths: ["req.headers.authorization", "headers.authorization", "apiKey", "api_key"],
        censor: "[redacted]",
      },
    },
    // One access-log line per request (in the onResponse hook below) instead of Fastify's two
    // ("incoming request" + "request completed").
    logController: new LogController({ disableRequestLogging: true }),
    requestIdHeader: "x-request-id",
    genReqId: () => randomUUID(),
  });
  const exposed = "x-request-id, retry-after";
  app.addHook("onRequest", (request, reply, done) => {
    void reply.header("x-request-id", request.id);
    // CORS only concerns browsers, which always send Origin; other clients skip it.
    const origin = request.headers.origin;
    if (origin !== undefined) {
      void reply.header("vary", "Origin");
      if (config.corsOrigins.includes("*") || config.corsOrigins.includes(origin)) {
        void reply.header("access-control-allow-origin", origin);
        void reply.header("access-control-expose-headers", exposed);
      }
    }
    done();
  });
  const registry = new Registry();
  const labelNames = ["method", "route", "status"] as const;
  const requests = new Counter({ name: "requests", help: "h", labelNames, registers: [registry] });
  const duration = new Histogram({
    name: "duration",
    help: "h",
    labelNames,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  const children = new Map<string, { count: Counter; time: Histogram }>();
  app.addHook("onResponse", (request, reply, done) => {
    const route = request.routeOptions.url ?? "unmatched";
    const status = reply.statusCode;
    const key = `${request.method} ${route} ${status}`;
    let child = children.get(key);
    if (!child) {
      const labels = [request.method, route, String(status)];
      child = {
        count: requests.labels(...labels) as unknown as Counter,
        time: duration.labels(...labels) as unknown as Histogram,
      };
      children.set(key, child);
    }
    child.count.inc();
    child.time.observe(reply.elapsedTime / 1000);
    request.log.info({ method: request.method, url: request.url, status, ms: reply.elapsedTime }, "request");
    done();
  });
  app.get("/health", async () => body);
  return app;
}

const app = await build();
await app.listen({ host: "127.0.0.1", port: 0 });
process.send!({ port: (app.server.address() as AddressInfo).port });

let closing = false;
async function shutdown(): Promise<void> {
  if (closing) return;
  closing = true;
  await app.close();
  rmSync(dataDir, { recursive: true, force: true });
  process.exit(0);
}
process.on("disconnect", () => void shutdown());
process.on("SIGTERM", () => void shutdown());
