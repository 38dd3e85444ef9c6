/** Builds the RAG app without listening; the store is injected so tests and replicas choose it. */
import type { Config } from "../core/config.js";
import { createHttpApp } from "../core/http.js";
import { RAG_SERVICE_NAME, registerRagRoutes } from "./routes.js";
import { RagService } from "./service.js";
import { SqliteIndexStore } from "./store/sqlite-store.js";
import type { IndexStore } from "./store/types.js";
import { AnswerWriter } from "./generative.js";
import { OpenAIUpstreamGenerator } from "../textgen/openai-upstream.js";

export interface RagAppDeps {
  config: Config;
  /** Defaults to the SQLite store under DATA_DIR. */
  store?: IndexStore;
}

export async function buildRagApp({ config, store }: RagAppDeps) {
  const app = await createHttpApp({
    service: RAG_SERVICE_NAME,
    description:
      "Build TF-IDF/BM25 indices from documents and answer questions from them, offline. Errors are JSON: {error:{code,message,details}}.",
    config,
    tags: [
      { name: "indices", description: "Build, list and delete indices" },
      { name: "query", description: "Search and answer" },
      { name: "documents", description: "Add, replace and delete single documents" },
      { name: "stats", description: "Counts and latency" },
      { name: "service", description: "Health and identity" },
    ],
  });
  const indexStore = store ?? SqliteIndexStore.open(config.dataDir);
  const service = new RagService(indexStore);
  const answerWriter = config.generationUrl
    ? new AnswerWriter(
        new OpenAIUpstreamGenerator({
          baseUrl: config.generationUrl,
          model: config.generationModel,
          apiKey: config.generationApiKey,
          timeoutMs: config.generationTimeoutMs,
        }),
        { maxTokens: 256 },
      )
    : null;
  registerRagRoutes(app, {
    service,
    answerWriter,
    ragFilesDir: config.ragFilesDir,
    largeBodyLimit: config.maxBodyBytesLarge,
  });
  app.addHook("onClose", async () => {
    await answerWriter?.close();
    await indexStore.close();
  });
  return app;
}
