/** Starts the apps on their ports; used by the CLI and by tests that need real sockets. */
import path from "node:path";
import type { Config } from "./core/config.js";
import { answeringDescription, buildRagApp } from "./rag/app.js";
import { localModels, type LocalModels } from "./rag/local-models.js";
import { SQLITE_FILE_NAME } from "./rag/store/sqlite-store.js";
import { buildTextgenApp } from "./textgen/app.js";
import { fileSearchPortOf, type Injectable } from "./textgen/http/dialects/file-search.js";
import { createGenerator } from "./textgen/engine/create-generator.js";
import { LlamaGenerator } from "./textgen/engine/llama-generator.js";
import { describePlan } from "./textgen/engine/context-plan.js";

export type Which = "textgen" | "rag" | "all";

export interface Listening {
  close(): Promise<void>;
}

/** An app could not bind its address: the variables to change, and why, without a stack trace. */
export class ListenError extends Error {
  constructor(
    readonly portVariable: "TEXTGEN_PORT" | "RAG_PORT",
    readonly host: string,
    readonly port: number,
    readonly code: string,
  ) {
    const why: Record<string, string> = {
      EADDRINUSE: "the address is already in use (another process listens there)",
      EACCES: "permission denied (ports below 1024 need privileges)",
      EADDRNOTAVAIL: "no network interface of this machine has that address (HOST)",
    };
    super(
      `cannot listen on ${host}:${port} (HOST, ${portVariable}): ${why[code] ?? code}; ` +
        `stop what uses it or set ${portVariable}`,
    );
    this.name = "ListenError";
  }
}

async function listen(
  app: { listen(options: { host: string; port: number }): Promise<string>; close(): Promise<void> },
  config: Config,
  portVariable: "TEXTGEN_PORT" | "RAG_PORT",
  port: number,
): Promise<void> {
  try {
    await app.listen({ host: config.server.host, port });
  } catch (error) {
    await app.close().catch(() => undefined);
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE" || code === "EACCES" || code === "EADDRNOTAVAIL") {
      throw new ListenError(portVariable, config.server.host, port, code);
    }
    throw error;
  }
}

/** DATABASE_URL without its password, for logs. */
function redacted(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  if (url.password) url.password = "***";
  return url.toString();
}

/** The start-up line saying who may call: keys or none, rate limit, CORS. */
export function accessLine(config: Config): string {
  const auth =
    config.auth.apiKeysFile === null
      ? `auth off (API_KEYS_FILE is not set): anyone who reaches ${config.server.host} may call every route`
      : `auth on: keys from API_KEYS_FILE=${path.resolve(config.auth.apiKeysFile)} (every route but /health, /livez, /, /docs and /ui needs one)`;
  const rate =
    config.auth.rateLimitPerMinute > 0
      ? `rate limit ${config.auth.rateLimitPerMinute} requests/min`
      : "no rate limit";
  const cors =
    config.auth.corsOrigins.length > 0 ? `CORS for ${config.auth.corsOrigins.join(", ")}` : "CORS off";
  return `${auth}; ${rate}; ${cors}`;
}

/** The line once the default model has loaded (or failed to): its name, context, binary and device. */
function modelLine(generator: LlamaGenerator, config: Config): { ok: boolean; line: string } {
  const status = generator.status();
  const from = generator.loadedFrom;
  const plan = generator.contextPlan;
  if (status.state === "ready" && from !== null && plan !== null) {
    return {
      ok: true,
      line:
        `text generation: model "${generator.modelName}" loaded from ${from.modelPath}; ` +
        `${describePlan(plan, generator.requestedSequences)}; ${from.binary}; device ${from.device}; ` +
        `libuv thread pool ${process.env.UV_THREADPOOL_SIZE ?? "4 (default)"}`,
    };
  }
  const reason = status.state === "unhealthy" ? status.reason : status.state;
  return {
    ok: false,
    line: `text generation: no model loaded (MODEL_PATH=${config.textgen.modelPath}): ${reason}`,
  };
}

export async function serve(which: Which, config: Config): Promise<Listening[]> {
  const started: Listening[] = [];
  // With both apps here, RAG uses their models in-process (through its ports) unless GENERATION_URL,
  // EMBEDDING_URL or RERANK_URL name other servers.
  let local: LocalModels | undefined;
  let modelLoaded: Promise<boolean> | undefined;
  // Responses' file_search reaches the RAG app of this process (built below) through inject.
  let ragApp: Injectable | undefined;
  try {
    if (which === "textgen" || which === "all") {
      const generator = createGenerator(config);
      const fileSearch = fileSearchPortOf(config, which === "all" ? () => ragApp : undefined);
      const app = await buildTextgenApp({ config, generator, fileSearch });
      local = localModels(app.textgenService, config.generation);
      await listen(app, config, "TEXTGEN_PORT", config.server.textgenPort);
      started.push(app);
      app.log.info(accessLine(config));
      // The Responses store opens here, so a DATA_DIR or DATABASE_URL it cannot use stops start-up.
      const kept = app.responsesStore;
      await kept?.sizeBytes();
      app.log.info(
        kept
          ? `Responses: kept in ${kept.where} for ${kept.limits.ttlMs / 1000} s, up to ${kept.limits.maxBytes} bytes`
          : "Responses: nothing is kept (RESPONSES_TTL=0)",
      );
      if (generator instanceof LlamaGenerator) {
        modelLoaded = generator.ready().then(() => {
          const { ok, line } = modelLine(generator, config);
          if (ok) app.log.info(line);
          else app.log.warn(line);
          return ok;
        });
      } else {
        app.log.info(
          `text generation: no local model; serving from GENERATION_UPSTREAM_URL=${config.generation.generationUpstreamUrl}`,
        );
      }
    }
    if (which === "rag" || which === "all") {
      const app = await buildRagApp({ config, local });
      ragApp = app;
      await listen(app, config, "RAG_PORT", config.server.ragPort);
      started.push(app);
      if (which === "rag") app.log.info(accessLine(config));
      app.log.info(
        config.rag.databaseUrl
          ? `RAG: store PostgreSQL at ${redacted(config.rag.databaseUrl)}`
          : `RAG: store SQLite at ${path.join(config.rag.dataDir, SQLITE_FILE_NAME)}`,
      );
      app.log.info(app.answering);
      for (const line of app.retrieval) app.log.info(line);
      // Answers were said to come from the model while it loaded; say so when it did not load.
      const port = local?.generation;
      if (modelLoaded && port && !config.generation.generationUrl)
        void modelLoaded.then((ok) => {
          if (!ok) app.log.warn(answeringDescription(port));
        });
    }
  } catch (error) {
    // An app that did start is closed again: the caller exits, and nothing is left half up.
    await Promise.allSettled(started.map((app) => app.close()));
    throw error;
  }
  return started;
}
