/** Builds the RAG app without listening; the store is injected so tests and replicas choose it. */
import type { Config } from "../core/config.js";
import { ConfigError } from "../core/errors.js";
import { createHttpApp } from "../core/http.js";
import { RAG_SERVICE_NAME, ragRoutes } from "./http/routes.js";
import { registerMetrics } from "../core/metrics.js";
import { createRagMetrics } from "./metrics.js";
import { RagService } from "./service.js";
import { openIndexStore } from "./store/open.js";
import type { IndexStore } from "./store/types.js";
import { AnswerWriter, upstreamGeneration, type GenerationPort } from "./answering/generative.js";
import { ingestFromConfig } from "./ingest/limits.js";
import { openAiRagRoutes } from "./http/openai-routes.js";
import path from "node:path";
import type { TextgenService } from "../textgen/engine/service.js";
import { Retrievers } from "./retrieval/retrievers.js";
import { configureVectorSpill } from "./search/vectors/spill.js";

export interface RagAppDeps {
  config: Config;
  /** Defaults to PostgreSQL when DATABASE_URL is set (replicas share it), else SQLite under DATA_DIR. */
  store?: IndexStore;
  /**
   * The text generation service of the same process (`npm start`), used for generative answers and
   * conversation rewriting when GENERATION_URL is not set.
   */
  localGeneration?: GenerationPort;
  /**
   * The text generation service of the same process: it embeds and reranks for RAG when EMBEDDING_URL
   * and RERANK_URL are not set, without an HTTP hop.
   */
  textgenService?: TextgenService;
}

/** The port RAG writes with: GENERATION_URL when set, else the in-process model, else none. */
export function generationPortFor(
  config: Config["generation"],
  local: GenerationPort | undefined,
): GenerationPort | null {
  if (config.generationUrl) return upstreamGeneration(config, config.generationUrl);
  return local ?? null;
}

/** The start-up line saying how answers are written. */
export function answeringDescription(port: GenerationPort | null): string {
  return (
    port?.description ??
    "RAG: extractive answers (no model in this process and GENERATION_URL is not set); conversations search the last user turn as it stands"
  );
}

/** Configures where vector codes spill (VECTOR_SPILL_DIR); a directory that cannot be made stops start-up. */
function spillVectorsTo(dir: string | null): void {
  try {
    configureVectorSpill(dir);
  } catch (error) {
    throw new ConfigError(`VECTOR_SPILL_DIR (${dir}) cannot be used: ${(error as Error).message}`);
  }
}

export async function buildRagApp({ config, store, localGeneration, textgenService }: RagAppDeps) {
  const app = await createHttpApp({
    service: RAG_SERVICE_NAME,
    description:
      "Build TF-IDF/BM25 indices (with embeddings, for dense and hybrid retrieval) from documents and answer questions from them, offline. Errors are JSON: {error:{code,message,details}}.",
    config,
    ui: { service: "rag" },
    tags: [
      { name: "indices", description: "Build, list and delete indices" },
      { name: "query", description: "Search and answer" },
      { name: "documents", description: "Add, replace and delete single documents" },
      { name: "stats", description: "Counts and latency" },
      { name: "openai", description: "OpenAI's API over the indices (errors in OpenAI's shape)" },
      { name: "service", description: "Health and identity" },
    ],
  });
  let indexStore: IndexStore;
  try {
    // Before any index is loaded: the segments decoded from now on spill their codes there.
    spillVectorsTo(config.rag.vectorSpillDir);
    indexStore = store ?? (await openIndexStore(config.rag, app.log));
  } catch (error) {
    await app.close();
    throw error;
  }
  const service = new RagService(indexStore, { log: app.log });
  const generation = generationPortFor(config.generation, localGeneration);
  const answerWriter = generation ? new AnswerWriter(generation, { maxTokens: 256 }) : null;
  const retrievers = new Retrievers(config.rag, textgenService, config.models.embeddingModelPath);
  const { registry } = registerMetrics(app, "rag");
  const routeDeps = {
    retrievers,
    metrics: createRagMetrics(registry, indexStore, service),
    service,
    answerWriter,
    ragFilesDir: config.rag.ragFilesDir,
    walk: {
      maxEntries: config.rag.filesMaxEntries,
      timeoutMs: config.rag.filesWalkTimeoutMs,
      allowHardLinks: config.rag.filesAllowHardLinks,
    },
    largeBodyLimit: config.limits.maxBodyBytesLarge,
    maxBuildDocuments: config.ingest.maxBuildDocuments,
    maxBuildChars: config.ingest.maxBuildChars,
    ingest: ingestFromConfig(config),
  };
  await app.register(ragRoutes, routeDeps);
  // OpenAI's API over the indices (chat completions, models, vector stores, files).
  await app.register(openAiRagRoutes, {
    prefix: "/v1",
    ...routeDeps,
    filesDir: path.join(config.rag.dataDir, "openai-files"),
  });
  app.addHook("onClose", async () => {
    // Merges still running are waited for (and not committed) before the store closes under them.
    await service.close();
    await answerWriter?.close();
    await retrievers.close();
    await indexStore.close();
  });
  return Object.assign(app, {
    answering: answeringDescription(generation),
    retrieval: retrievers.descriptions,
  });
}
