/**
 * Builds the RAG app without listening; the store is injected so tests and replicas choose it. RAG
 * reaches models only through its ports: GENERATION_URL (and EMBEDDING_URL, RERANK_URL) over HTTP, or
 * the models of this process when src/server.ts passes them (`local`, from local-models.ts).
 */
import type { Config } from "../core/config.js";
import { ConfigError } from "../core/errors.js";
import { createHttpApp, type HttpAppOptions } from "../core/http.js";
import { RAG_SERVICE_NAME, ragRoutes } from "./http/routes.js";
import { registerMetrics } from "../core/metrics.js";
import { createRagMetrics } from "./metrics.js";
import { RagService } from "./service.js";
import { openIndexStore } from "./store/open.js";
import type { IndexStore } from "./store/types.js";
import { answerWriterFor } from "./answering/generative.js";
import type { GenerationPort } from "./answering/generation-port.js";
import { generationPortFor } from "./answering/upstream-generation.js";
import { ingestFromConfig } from "./ingest/limits.js";
import { SUPPORTED_EXTENSIONS } from "./ingest/loaders.js";
import { openAiRagRoutes } from "./http/openai-routes.js";
import { mcpRoutes } from "./mcp/http.js";
import { tmpdir } from "node:os";
import path from "node:path";
import { registerUploadRoomCheck } from "./http/upload-room.js";
import type { LocalModelPorts } from "./retrieval/ports.js";
import { Retrievers } from "./retrieval/retrievers.js";
import { FsDirectory } from "./search/fs-directory.js";

export interface RagAppDeps {
  config: Config;
  /** Defaults to PostgreSQL when DATABASE_URL is set (replicas share it), else SQLite under DATA_DIR. */
  store?: IndexStore;
  /**
   * The models of the text generation app of the same process (`npm start`): generative answers and
   * conversation rewriting when GENERATION_URL is not set, embeddings and reranking when EMBEDDING_URL
   * and RERANK_URL are not.
   */
  local?: LocalModelPorts & { generation?: GenerationPort };
  /** Told of every route as it is registered (HttpAppOptions.onRoute). */
  onRoute?: HttpAppOptions["onRoute"];
}

/** The start-up line saying how answers are written. */
export function answeringDescription(port: GenerationPort | null): string {
  return (
    port?.description ??
    "RAG: extractive answers (no model in this process and GENERATION_URL is not set); conversations search the last user turn as it stands"
  );
}

/** Where vector codes spill (VECTOR_SPILL_DIR; null: nowhere); a directory that cannot be made stops start-up. */
function spillDirectory(dir: string | null): FsDirectory | undefined {
  if (dir === null) return undefined;
  try {
    return FsDirectory.open(dir);
  } catch (error) {
    throw new ConfigError(`VECTOR_SPILL_DIR (${dir}) cannot be used: ${(error as Error).message}`);
  }
}

export async function buildRagApp({ config, store, local = {}, onRoute }: RagAppDeps) {
  const app = await createHttpApp({
    onRoute,
    service: RAG_SERVICE_NAME,
    description:
      "Build TF-IDF/BM25 indices (with embeddings, for dense and hybrid retrieval) from documents and answer questions from them, offline. Errors are JSON: {error:{code,message,details}}.",
    config,
    ui: { service: "rag", config: { formats: SUPPORTED_EXTENSIONS } },
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
  let vectorDirectory: FsDirectory | undefined;
  try {
    vectorDirectory = spillDirectory(config.rag.vectorSpillDir);
    indexStore = store ?? (await openIndexStore(config.rag, app.log));
  } catch (error) {
    await app.close();
    throw error;
  }
  const service = new RagService(indexStore, { log: app.log, vectorDirectory });
  const generation = generationPortFor(config.generation, local.generation);
  const answerWriter = answerWriterFor(generation);
  const retrievers = new Retrievers(config.rag, local, config.models.embeddingModelPath);
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
    maxJsonDepth: config.limits.maxJsonDepth,
    maxBuildDocuments: config.ingest.maxBuildDocuments,
    maxBuildChars: config.ingest.maxBuildChars,
    ingest: ingestFromConfig(config),
  };
  // Before the routes: multipart uploads keep DISK_RESERVE_BYTES free where they are written.
  registerUploadRoomCheck(app, {
    reserveBytes: config.rag.diskReserveBytes,
    folders: [tmpdir(), config.rag.dataDir],
  });
  await app.register(ragRoutes, routeDeps);
  // The MCP server (issue #37) over the same service, at /mcp.
  await app.register(mcpRoutes, { ...routeDeps, sessions: config.rag.mcpSessions });
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
