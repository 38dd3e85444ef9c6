/** Builds the text generation app without listening; `app.inject()` drives it in tests. */
import type { Config } from "../core/config.js";
import { createHttpApp } from "../core/http.js";
import type { Generator } from "./generator.js";
import { registerTextgenRoutes, SERVICE_NAME } from "./routes.js";
import { Scheduler } from "./scheduler.js";
import { registerMetrics } from "../core/metrics.js";
import { TextgenService } from "./service.js";
import { openAiRoutes } from "./openai.js";
import { LlamaEmbedder, type Embedder } from "./embedder.js";
import { anthropicRoutes } from "./dialects/anthropic.js";
import { ollamaRoutes } from "./dialects/ollama.js";
import { SingleModelCatalog } from "./dialects/model-catalog.js";

export interface TextgenAppDeps {
  config: Config;
  generator: Generator;
  /** Defaults to EMBEDDING_MODEL_PATH's model, or the generator's own. */
  embedder?: Embedder;
}

export async function buildTextgenApp({ config, generator, embedder: givenEmbedder }: TextgenAppDeps) {
  const app = await createHttpApp({
    service: SERVICE_NAME,
    description:
      "Generate text with a local GGUF model (llama.cpp). Errors are JSON: {error:{code,message,details}}.",
    config,
    ui: { service: "textgen" },
    tags: [
      { name: "generation", description: "Text generation" },
      { name: "openai", description: "OpenAI-compatible routes (errors in OpenAI's shape)" },
      { name: "anthropic", description: "Anthropic's Messages API (errors in Anthropic's shape)" },
      { name: "ollama", description: "The Ollama API (errors as {error: string})" },
      { name: "service", description: "Health and identity" },
    ],
  });
  const scheduler = new Scheduler({
    maxConcurrent: config.maxConcurrent,
    maxQueue: config.maxQueue,
    timeoutMs: config.requestTimeoutMs,
  });
  const { registry } = registerMetrics(app, "textgen");
  const service = new TextgenService(generator, scheduler, registry);
  registerTextgenRoutes(app, { service, maxNewTokens: config.maxNewTokens });
  const embedder =
    givenEmbedder ??
    new LlamaEmbedder({
      model: config.embeddingModelPath
        ? { reference: config.embeddingModelPath, modelsDir: config.modelsDir, progress: true }
        : null,
      sharedModel: async () => generator.sharedModel?.(),
      threads: config.llamaThreads,
      contextSize: config.embeddingContextSize,
      gpu: config.llamaGpu,
    });
  await app.register(openAiRoutes, {
    prefix: "/v1",
    service,
    maxNewTokens: config.maxNewTokens,
    embedder,
    maxEmbeddingInputs: config.embeddingMaxInputs,
  });
  await app.register(anthropicRoutes, { prefix: "/v1", service, maxNewTokens: config.maxNewTokens });
  await app.register(ollamaRoutes, {
    prefix: "/api",
    service,
    embedder,
    // The model registry replaces this catalog of one served model and MODELS_DIR's downloads.
    catalog: new SingleModelCatalog(generator, config.modelsDir),
    maxNewTokens: config.maxNewTokens,
    maxEmbeddingInputs: config.embeddingMaxInputs,
  });
  // Closing: Fastify answers new requests 503 at once; admitted generations get SHUTDOWN_GRACE_MS to
  // finish before they are stopped, then the model is released.
  let drained: Promise<void> = Promise.resolve();
  app.addHook("preClose", async () => {
    drained = scheduler.shutdown(config.shutdownGraceMs);
  });
  app.addHook("onClose", async () => {
    await drained;
    await embedder.close();
    await generator.close();
  });
  // The service, for the RAG app of the same process to generate through (rag/local-generation.ts).
  return Object.assign(app, { textgenService: service });
}
