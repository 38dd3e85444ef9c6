/** Builds the RAG app without listening. */
import type { Config } from "../core/config.js";
import { createHttpApp, rootMessage } from "../core/http.js";

export const RAG_SERVICE_NAME = "RAG";

export async function buildRagApp({ config }: { config: Config }) {
  const app = await createHttpApp({
    service: RAG_SERVICE_NAME,
    description: "Build TF-IDF/BM25 indices from documents and answer questions from them, offline.",
    bodyLimit: config.maxBodyBytes,
    logLevel: config.logLevel,
  });
  app.get("/health", async () => ({ status: "healthy" }));
  app.get("/", async () => rootMessage(RAG_SERVICE_NAME));
  return app;
}
