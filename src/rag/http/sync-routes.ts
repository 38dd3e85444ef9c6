/** The folder sync route (#14): a Fastify plugin, registered in the /rag scope by routes.ts. */
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyPluginAsync } from "fastify";
import { actingTenant, confinedTenant } from "../../core/auth.js";
import { errorResponses } from "../../core/error-shapes.js";
import { resolveFolder } from "../ingest/files.js";
import { writeEmbedding } from "../retrieval/options.js";
import { syncFolder } from "../service/sync.js";
import { replyGoneSignal } from "./answer-http.js";
import type { RagRouteDeps } from "./route-deps.js";
import { IndexParams, SyncRequest, SyncResponse } from "./schemas.js";

export const syncRoutes: FastifyPluginAsync<RagRouteDeps> = async (instance, deps) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    "/rag/indices/:index_name/sync",
    {
      schema: {
        tags: ["indices"],
        summary: "Sync an index with a folder under RAG_FILES_DIR: only new, changed and removed files",
        description:
          "Files are compared by sha256 of their bytes with what the last sync stored; new and changed " +
          "files are indexed, documents of removed files deleted, all in one write (none when nothing " +
          "changed). A file that cannot be parsed is listed in `failed` and left as it was. A missing " +
          "index is created with scorer, chunk_size and overlap (defaults as /rag/build).",
        params: IndexParams,
        body: SyncRequest,
        response: { 200: SyncResponse, ...errorResponses },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const key = { tenantId: actingTenant(request, body.tenant_id), name: request.params.index_name };
      const { root, folder } = await resolveFolder(deps.ragFilesDir, body.folder, confinedTenant(request));
      const result = await syncFolder(deps.service, {
        key,
        root,
        folder,
        settings: { scorer: body.scorer, chunkSize: body.chunk_size, overlap: body.overlap },
        limits: { maxDocuments: deps.maxBuildDocuments, maxChars: deps.maxBuildChars },
        ingest: deps.ingest,
        // As a build: a new index gets vectors when an embedder is configured; an existing one stays as it is.
        embeddingFor: (existing) => writeEmbedding(deps.retrievers, undefined, existing),
        walk: deps.walk,
        signal: replyGoneSignal(reply),
      });
      // A sync that found nothing to change wrote nothing: it is not a write in the metrics.
      if (result.created || result.added + result.updated + result.deleted > 0) {
        deps.metrics.builds.inc({ kind: "sync" });
        deps.metrics.buildDuration.observe({ kind: "sync" }, result.elapsed_ms / 1000);
      }
      return result;
    },
  );
};
