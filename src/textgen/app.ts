/** Builds the text generation app without listening; `app.inject()` drives it in tests. */
import { existsSync } from "node:fs";
import path from "node:path";
import type { Config } from "../core/config.js";
import { createHttpApp, type HttpAppOptions } from "../core/http.js";
import type { Generator } from "./engine/generator.js";
import { registerTextgenRoutes, SERVICE_NAME } from "./http/routes.js";
import { registerMetrics } from "../core/metrics.js";
import { TextgenService } from "./engine/service.js";
import { openAiRoutes } from "./http/openai.js";
import { buildCatalogue } from "./engine/presets.js";
import { ModelRegistry } from "./engine/model-registry.js";
import { generatorBackend, loadBackend, type ServingBackend } from "./engine/model-backends.js";
import { contextTokensOf } from "./engine/context-plan.js";
import { catalogueSources } from "./engine/presets.js";
import { locateModel } from "./engine/model-source.js";
import { registerRerankRoutes } from "./http/rerank-routes.js";
import { registerLoraRoutes, registerModelRoutes } from "./http/models-routes.js";
import { registerKeepAliveCheck } from "./http/model-access.js";
import { LlamaGenerator } from "./engine/llama-generator.js";
import { anthropicRoutes } from "./http/dialects/anthropic.js";
import { ollamaRoutes } from "./http/dialects/ollama.js";
import { RegistryCatalog } from "./http/dialects/model-catalog.js";
import { storedResponseRoutes } from "./http/stored-responses.js";
import { responsesStoreOf } from "./store/open.js";
import { RESPONSES_DB_FILE } from "./store/sqlite-backend.js";
import type { DurableResponsesStore } from "./store/responses-store.js";
import { fileSearchPortOf, type FileSearchPort } from "./http/dialects/file-search.js";
import type { TypedApp } from "../core/http.js";
import { BatchFiles } from "./batches/files.js";
import { BatchRunner } from "./batches/batch-runner.js";
import { batchRoutes } from "./batches/batch-routes.js";

export interface TextgenAppDeps {
  config: Config;
  /** The default model (MODEL_PATH), already loading; reloaded from its file after an unload. */
  generator: Generator;
  /** Where Responses are kept; by default the configuration's (store/open.ts); null: nothing is kept. */
  responsesStore?: DurableResponsesStore | null;
  /**
   * Where the Responses file_search tool searches; by default RAG_URL's RAG app when set, else none
   * (server.ts gives the RAG app of the same process).
   */
  fileSearch?: FileSearchPort;
  /** Told of every route as it is registered (HttpAppOptions.onRoute). */
  onRoute?: HttpAppOptions["onRoute"];
}

/** The Files and Batch APIs (batches/), kept in the Responses store's database: their runner. */
async function registerBatches(app: TypedApp, config: Config, store: DurableResponsesStore) {
  const tables = store.batchTables;
  const files = new BatchFiles(tables, config.rag.dataDir);
  const runner = new BatchRunner(app, tables, files, config.batches, app.log);
  await app.register(batchRoutes, { prefix: "/v1", tables, files, runner, limits: config.batches });
  return runner;
}

export async function buildTextgenApp({ config, generator, ...deps }: TextgenAppDeps) {
  const app = await createHttpApp({
    onRoute: deps.onRoute,
    service: SERVICE_NAME,
    description:
      "Generate text with local GGUF models (llama.cpp). Errors are JSON: {error:{code,message,details}}.",
    config,
    ui: { service: "textgen" },
    tags: [
      { name: "generation", description: "Text generation" },
      { name: "openai", description: "OpenAI-compatible routes (errors in OpenAI's shape)" },
      { name: "anthropic", description: "Anthropic's Messages API (errors in Anthropic's shape)" },
      { name: "ollama", description: "The Ollama API (errors as {error: string})" },
      { name: "models", description: "The models served, loaded on demand" },
      { name: "service", description: "Health and identity" },
    ],
  });
  const remote = config.generation.generationUpstreamUrl !== null;
  const catalogue = buildCatalogue(catalogueSources(config));
  // The generator given is the default model's first load; later loads make their own.
  let initial: Generator | undefined = remote ? undefined : generator;
  const models = new ModelRegistry<ServingBackend>({
    entries: catalogue.entries,
    defaultId: catalogue.defaultId,
    resolveFile: async (entry) => {
      // The default model's first load is the generator already loading it: its file, its reason.
      const starting = entry.id === catalogue.defaultId ? initial : undefined;
      if (starting instanceof LlamaGenerator) {
        await starting.ready();
        const status = starting.status();
        if (status.state === "unhealthy") throw new Error(status.reason);
        if (starting.loadedFrom) return starting.loadedFrom.modelPath;
      }
      // Not checked here: the registry reads the file (gguf-check.ts) next, once.
      return locateModel({ reference: entry.reference, modelsDir: config.models.modelsDir });
    },
    createBackend: async (entry, file, summary) => {
      const given = entry.id === catalogue.defaultId ? initial : undefined;
      if (given) initial = undefined;
      return loadBackend(config, entry, file, summary, given);
    },
    contextTokensOf: (entry, summary) => contextTokensOf(config, entry, summary),
    kvCacheTypeOf: (entry) => entry.settings.kvCacheType ?? config.textgen.kvCacheType,
    maxLoaded: config.models.modelsMaxLoaded,
    memoryBudget: config.models.modelsMemoryBudget,
    defaultKeepAliveMs: config.models.modelKeepAliveMs,
    pinned: remote ? { [catalogue.defaultId]: generatorBackend(config, generator) } : undefined,
    log: (line) => app.log.info(line),
  });
  await models.inspectLocal();
  // The default model loads at start, as with one model; a failure leaves the app up, degraded.
  if (!remote)
    void models.load(catalogue.defaultId).catch(async () => {
      await initial?.close();
      initial = undefined;
    });
  const { registry } = registerMetrics(app, "textgen");
  const service = new TextgenService(
    models,
    {
      multiModel: catalogue.multiModel,
      remote,
      embeddingId: catalogue.embeddingId,
      startingGenerator: () => initial,
      maxTokenizeChars: config.limits.maxTokenizeChars,
    },
    registry,
  );
  // Before the routes: keep_alive 0 (an unload) is a model administrator's, on every API.
  registerKeepAliveCheck(app);
  registerTextgenRoutes(app, { service, limits: config.limits });
  registerRerankRoutes(app, service);
  registerModelRoutes(app, service);
  registerLoraRoutes(app, service);
  const responsesStore =
    deps.responsesStore === undefined
      ? responsesStoreOf(config, app.log)
      : (deps.responsesStore ?? undefined);
  await app.register(openAiRoutes, {
    prefix: "/v1",
    service,
    limits: config.limits,
    responsesStore,
    fileSearch: deps.fileSearch ?? fileSearchPortOf(config),
  });
  if (responsesStore) await app.register(storedResponseRoutes, { prefix: "/v1", store: responsesStore });
  const batches = responsesStore && (await registerBatches(app, config, responsesStore));
  await app.register(anthropicRoutes, { prefix: "/v1", service, limits: config.limits });
  await app.register(ollamaRoutes, {
    prefix: "/api",
    service,
    // /api/tags, /api/ps, /api/show, /api/pull and /api/delete: the registry's models.
    catalog: new RegistryCatalog(service, config.models.modelsDir, {
      hosts: config.models.modelsPullHosts,
      maxBytes: config.models.modelsPullMaxBytes,
      timeoutMs: config.models.modelsPullTimeoutMs,
    }),
    limits: config.limits,
  });
  // Closing: Fastify answers new requests 503 at once; admitted generations get SHUTDOWN_GRACE_MS to
  // finish before they are stopped, then the models are released.
  let drained: Promise<void> = Promise.resolve();
  app.addHook("preClose", async () => {
    // No batch line starts once closing; those in flight end with the generations (resumed later).
    drained = Promise.all([service.shutdown(config.server.shutdownGraceMs), batches?.close()]).then(
      () => undefined,
    );
  });
  app.addHook("onClose", async () => {
    await drained;
    await models.close();
    await responsesStore?.close();
    await initial?.close();
    if (remote) await generator.close();
  });
  // Batches left unfinished by the last run (a restart, a crash) resume once the app is up; a SQLite
  // store not made yet holds none (and its worker thread is not started for nothing).
  const mayHoldBatches =
    config.rag.databaseUrl !== null || existsSync(path.join(config.rag.dataDir, RESPONSES_DB_FILE));
  if (batches && mayHoldBatches) app.addHook("onReady", async () => batches.kick());
  // The service, for the RAG app of the same process to reach through its ports (rag/local-models.ts).
  return Object.assign(app, { textgenService: service, responsesStore });
}
