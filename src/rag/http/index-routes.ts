/**
 * Listing and deleting indices, and their figures: GET /rag/indices, DELETE /rag/indices/{name},
 * GET /rag/stats and GET /rag/stats/{name}. A Fastify plugin, registered in the /rag scope by routes.ts.
 */
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyPluginAsync } from "fastify";
import type { Static } from "typebox";
import { actingTenant, confinedTenant, listingTenant } from "../../core/auth.js";
import { errorResponses } from "../../core/error-shapes.js";
import type { IndexStats } from "../service.js";
import type { IndexMeta } from "../store/types.js";
import type { RagRouteDeps } from "./route-deps.js";
import type { IndexInfo } from "./schemas.js";
import {
  DeletedResponse,
  DeleteIndexQuery,
  IndexParams,
  IndexStatsResponse,
  IndicesResponse,
  TenantQuery,
} from "./schemas.js";

export const indexRoutes: FastifyPluginAsync<RagRouteDeps> = async (instance, { service }) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    "/rag/indices",
    {
      schema: {
        tags: ["indices"],
        summary: "List a tenant's indices",
        querystring: TenantQuery,
        response: { 200: IndicesResponse, ...errorResponses },
      },
    },
    async (request) => {
      const indices = await service.listIndices(listingTenant(request, request.query.tenant_id));
      return { indices: indices.map(indexInfo), count: indices.length };
    },
  );

  app.delete(
    "/rag/indices/:index_name",
    {
      schema: {
        tags: ["indices"],
        summary: "Delete an index",
        params: IndexParams,
        querystring: DeleteIndexQuery,
        response: { 200: DeletedResponse, ...errorResponses },
      },
    },
    async (request) => {
      const name = request.params.index_name;
      await service.deleteIndex({ tenantId: actingTenant(request, request.query.tenant_id), name });
      return { success: true, message: `Deleted index "${name}"` };
    },
  );

  app.get(
    "/rag/stats",
    { schema: { tags: ["stats"], summary: "Whole-system counts, latency, storage, uptime and memory" } },
    // Keys that are not admin see their own tenant's share of the figures.
    async (request) => service.stats(confinedTenant(request) ?? null),
  );

  app.get(
    "/rag/stats/:index_name",
    {
      schema: {
        tags: ["stats"],
        summary: "One index's counts, sizes, vocabulary, dates, segments, deleted chunks and merges",
        params: IndexParams,
        querystring: TenantQuery,
        response: { 200: IndexStatsResponse, ...errorResponses },
      },
    },
    async (request) => {
      const tenantId = actingTenant(request, request.query.tenant_id);
      return indexStats(await service.indexStats({ tenantId, name: request.params.index_name }));
    },
  );
};

export function indexInfo(meta: IndexMeta): Static<typeof IndexInfo> {
  return {
    name: meta.name,
    tenant_id: meta.tenantId,
    scorer: meta.scorer,
    documents_count: meta.documentsCount,
    chunks_count: meta.chunksCount,
    vocabulary_size: meta.vocabularySize,
    chunk_size: meta.chunkSize,
    overlap: meta.overlap,
    created_at: meta.createdAt,
    updated_at: meta.updatedAt,
    size_bytes: meta.sizeBytes,
    version: meta.version,
    embeddings: meta.vectors
      ? { model: meta.vectors.model, dimension: meta.vectors.dimension, storage: meta.vectors.storage }
      : null,
  };
}

function indexStats(stats: IndexStats): Static<typeof IndexStatsResponse> {
  return {
    ...indexInfo(stats.meta),
    segments: stats.segments.map((segment) => ({
      id: segment.id,
      documents: segment.documentCount,
      deleted: segment.deletedCount,
      bytes: segment.byteLength,
    })),
    segments_count: stats.segments.length,
    deleted_chunks: stats.deletedChunks,
    vectors:
      stats.meta.vectors && stats.vectors
        ? {
            count: stats.vectors.count,
            dimension: stats.vectors.dimension,
            model: stats.meta.vectors.model,
            storage: stats.meta.vectors.storage,
            bytes: stats.vectors.bytes,
          }
        : null,
    merges: stats.merges,
    loaded: { segments_loaded: stats.loaded.segmentsLoaded, bytes_loaded: stats.loaded.bytesLoaded },
  };
}
