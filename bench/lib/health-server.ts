/**
 * One HTTP server answering GET /health, in a process of its own, for bench/http-floor.ts. The kind
 * comes from BENCH_SERVER:
 *
 *   textgen, rag          our apps (buildTextgenApp with the test model, buildRagApp on a temporary
 *                         DATA_DIR), configured from the environment like the real server
 *   core                  the base both apps are built on: createHttpApp (src/core/http.ts) and
 *                         registerMetrics, with one /health route; what the apps add is the rest
 *   bare                  Fastify with no options, answering BENCH_HEALTH_JSON
 *   bare+fastify-logger   … plus Fastify's default pino logger at LOG_LEVEL (two request lines each
 *                         at info: "incoming request", "request completed"), for reference
 *   bare+lifecycle        … plus our logging and per-request duties as createHttpApp sets them up:
 *                         redaction, request loggers made on first use (src/core/logger.ts), a UUID
 *                         request id in X-Request-Id and one access line per request, none for
 *                         /health below debug (src/core/request-lifecycle.ts)
 *   bare+lifecycle+metrics … plus src/core/metrics.ts (request counter, latency histogram, prom-client's
 *                         default process metrics)
 *   bare+onrequest-hook   … plus one onRequest hook that does nothing: what a hook run costs
 *   bare+empty-hook       … plus an async onResponse hook that does nothing
 *   bare+default-metrics  … plus prom-client's collectDefaultMetrics only (GC and event-loop observers)
 *
 * The "bare+" kinds add one piece of our HTTP base each, to show what each piece costs.
 * Sends {port} over the IPC channel once listening; closes on disconnect or SIGTERM.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import { Registry, collectDefaultMetrics } from "prom-client";
import { loadConfig } from "../../src/core/config.js";
import { createHttpApp } from "../../src/core/http.js";
import { lazyRequestLogger, loggerOptions } from "../../src/core/logger.js";
import { RequestLifecycle } from "../../src/core/request-lifecycle.js";
import { registerMetrics } from "../../src/core/metrics.js";
import { buildRagApp } from "../../src/rag/app.js";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { createGenerator } from "../../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../../src/textgen/engine/llama-generator.js";

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
  if (kind === "core") {
    const app = (await createHttpApp({
      service: "Bench",
      description: "createHttpApp with one /health route",
      config,
      ui: { service: "rag" },
    })) as unknown as FastifyInstance;
    registerMetrics(app, "bench");
    app.get("/health", async () => body);
    return app;
  }
  const withLifecycle = kind.startsWith("bare+lifecycle");
  const lifecycle = new RequestLifecycle({ cors: null });
  const app: FastifyInstance =
    kind === "bare+fastify-logger"
      ? Fastify({ logger: { level: config.server.logLevel } })
      : withLifecycle
        ? Fastify({
            logger: loggerOptions(config.server.logLevel),
            logController: lifecycle,
            childLoggerFactory: lazyRequestLogger,
            requestIdHeader: "x-request-id",
            genReqId: () => randomUUID(),
          })
        : Fastify();
  if (withLifecycle) app.decorate("onRequestCompleted", lifecycle.addCompletedListener.bind(lifecycle));
  if (kind === "bare+lifecycle+metrics") registerMetrics(app, "bench");
  if (kind === "bare+onrequest-hook") app.addHook("onRequest", (_request, _reply, done) => done());
  if (kind === "bare+empty-hook") app.addHook("onResponse", async () => {});
  if (kind === "bare+default-metrics") collectDefaultMetrics({ register: new Registry(), prefix: "bench_" });
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
