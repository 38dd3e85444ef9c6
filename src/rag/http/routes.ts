/** Routes of the RAG API. They validate (schemas), translate to RagService calls, and shape replies. */
import { ApiError, badRequest } from "../../core/errors.js";
import { checkNestingDepth, checkWellFormed } from "../../core/validation.js";
import multipart from "@fastify/multipart";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyPluginAsync } from "fastify";
import { rootMessage, type TypedApp } from "../../core/http.js";
import { actingTenant, confinedTenant, listingTenant } from "../../core/auth.js";
import { ErrorResponse } from "../../textgen/http/schemas.js";
import { loadResolvedFiles, resolveFiles } from "../ingest/files.js";
import { defaultOverlap } from "../ingest/chunker.js";
import { multipartTenant, readMultipart } from "./uploads.js";
import { parseJsonBody } from "./json-body.js";
import type { IndexInfo } from "./schemas.js";
import { syncRoutes } from "./sync-routes.js";
import {
  BuildForm,
  BuildRequest,
  BuildResponse,
  DocumentsForm,
  DeletedResponse,
  DeleteIndexQuery,
  DocumentParams,
  DocumentsRequest,
  DocumentsResponse,
  IndexParams,
  IndexStatsResponse,
  IndicesResponse,
  QueryRequest,
  QueryResponse,
  TenantQuery,
  type DocumentInput as DocumentInputBody,
} from "./schemas.js";
import type { DocumentInput, IndexStats } from "../service.js";
import { clientGoneSignal, generativeAnswer } from "../answering/compose.js";
import { answerConversation, chatRoutes } from "./chat-routes.js";
import type { RagRouteDeps } from "./route-deps.js";
import { openEventStream } from "../../core/sse.js";
import { reportedRetrieval, retrievalInput, writeEmbedding } from "../retrieval/options.js";
import type { IndexMeta } from "../store/types.js";
import type { EmbeddingsField } from "../retrieval/schemas.js";
import type { Static } from "typebox";

export const RAG_SERVICE_NAME = "RAG";
export const DEFAULT_TENANT = "default";

export type { RagRouteDeps };

const errors = { "4xx": ErrorResponse, "5xx": ErrorResponse };

/** Metadata and filters deeper than this are refused: nothing real needs more, and it bounds work. */
const MAX_METADATA_DEPTH = 32;

function toDocumentInputs(documents: DocumentInputBody[]): DocumentInput[] {
  return documents.map((doc, index) => {
    if (typeof doc === "string") return { text: doc };
    if (doc.id !== undefined) checkWellFormed(doc.id, `documents[${index}].id`);
    checkNestingDepth(doc.metadata, MAX_METADATA_DEPTH, `documents[${index}].metadata`);
    return doc;
  });
}

/** 413 for a build or append with more documents than MAX_BUILD_DOCUMENTS (checked before files are read). */
function checkDocumentCount(deps: RagRouteDeps, count: number): void {
  if (count > deps.maxBuildDocuments) {
    throw new ApiError(
      413,
      "payload_too_large",
      `${count} documents in one request; the limit is ${deps.maxBuildDocuments} (MAX_BUILD_DOCUMENTS). Split it into appends.`,
    );
  }
}

/**
 * A preValidation hook: more documents than MAX_BUILD_DOCUMENTS is a 413 before the schema checks
 * them one by one (a million tiny ones took longer to validate than to refuse).
 */
function documentCountFirst(deps: RagRouteDeps) {
  return async (request: { body: unknown }) => {
    const documents = (request.body as { documents?: unknown } | null)?.documents;
    if (Array.isArray(documents)) checkDocumentCount(deps, documents.length);
  };
}

/** 413 for a build or append larger than the configured limits, before any indexing is done. */
function checkBuildSize(deps: RagRouteDeps, documents: DocumentInput[]): void {
  checkDocumentCount(deps, documents.length);
  let chars = 0;
  for (const document of documents) chars += document.text.length;
  if (chars > deps.maxBuildChars) {
    throw new ApiError(
      413,
      "payload_too_large",
      `${chars} characters of text in one request; the limit is ${deps.maxBuildChars} (MAX_BUILD_CHARS). Split it into appends.`,
    );
  }
}

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

/**
 * The RAG app's routes, a Fastify plugin: /health and / here, and the /rag route groups (indices,
 * folder sync, chat), each a plugin of its own in one scope.
 */
export const ragRoutes: FastifyPluginAsync<RagRouteDeps> = async (instance, deps) => {
  const app: TypedApp = instance.withTypeProvider<TypeBoxTypeProvider>();
  const { service } = deps;

  app.get("/health", { schema: { tags: ["service"], summary: "Readiness" } }, async () => ({
    status: "healthy",
    storage: service.store.kind,
  }));
  app.get("/", { schema: { tags: ["service"], summary: "Service name and version" } }, async () =>
    rootMessage(RAG_SERVICE_NAME),
  );
  // The /rag routes live in a scope of their own with the multipart parser, whose hooks would
  // otherwise run on every request of the app (health checks and metrics scrapes included).
  await app.register(async (scope) => {
    await scope.register(multipart, {
      limits: {
        fileSize: deps.largeBodyLimit,
        files: deps.maxBuildDocuments,
        fields: 32,
        fieldSize: 64 * 1024,
      },
    });
    // Large JSON bodies (builds, appends) are parsed off the event loop.
    scope.addContentTypeParser("application/json", parseJsonBody);
    await scope.register(indexRoutes, deps);
    await scope.register(syncRoutes, deps);
    await scope.register(chatRoutes, deps);
  });
};

/** Build, query, list, documents and stats: everything under /rag but folder sync and chat. */
const indexRoutes: FastifyPluginAsync<RagRouteDeps> = async (instance, deps) => {
  const app: TypedApp = instance.withTypeProvider<TypeBoxTypeProvider>();
  const { service } = deps;

  app.post(
    "/rag/build",
    {
      bodyLimit: deps.largeBodyLimit,
      preValidation: documentCountFirst(deps),
      schema: {
        tags: ["indices"],
        summary:
          "Build an index from inline documents, files under RAG_FILES_DIR, or uploads (all-or-nothing)",
        description:
          "JSON body as below, or multipart/form-data with the same fields as text fields and the files " +
          "(.txt .md .html .pdf .docx) in the field `files`.",
        // Per content type: JSON is validated here; multipart fields are checked in readMultipart.
        body: { content: { "application/json": { schema: BuildRequest } } },
        response: { 201: BuildResponse, ...errors },
      },
    },
    async (request, reply) => {
      let body: BuildRequest;
      let documents: DocumentInput[];
      if (request.isMultipart()) {
        const upload = await readMultipart<BuildForm>(
          request,
          BuildForm,
          deps.maxBuildDocuments,
          deps.ingest,
        );
        body = { ...upload.fields, tenant_id: multipartTenant(request, upload.fields.tenant_id) };
        documents = upload.documents;
      } else {
        body = request.body as BuildRequest;
        if (!body.documents?.length && !body.files?.length) {
          throw badRequest("Send at least one of documents or files");
        }
        documents = toDocumentInputs(body.documents ?? []);
        checkDocumentCount(deps, documents.length + (body.files?.length ?? 0));
        if (body.files?.length) {
          // Walking and reading stop when the client leaves (a large folder takes a while).
          const signal = clientGoneSignal(reply);
          const walk = { limits: deps.walk, signal };
          const resolved = await resolveFiles(deps.ragFilesDir, body.files, confinedTenant(request), walk);
          checkDocumentCount(deps, documents.length + resolved.files.length);
          const options = { allowHardLinks: deps.walk.allowHardLinks, signal };
          documents.push(...(await loadResolvedFiles(resolved.root, resolved.files, deps.ingest, options)));
        }
      }
      const overlap = body.overlap ?? defaultOverlap(body.chunk_size);
      if (overlap > body.chunk_size / 2) {
        throw badRequest(`overlap must be at most chunk_size/2 (${Math.floor(body.chunk_size / 2)})`, [
          { path: "/overlap", message: "greater than chunk_size/2" },
        ]);
      }
      checkBuildSize(deps, documents);
      const key = { tenantId: actingTenant(request, body.tenant_id), name: body.index_name };
      // An append keeps the index as it is (with vectors of its model, or without) unless asked.
      const existing = body.mode === "append" ? await service.requireMeta(key) : null;
      const built = await service.build({
        key,
        documents,
        chunkSize: body.chunk_size,
        overlap,
        scorer: body.scorer,
        mode: body.mode,
        embedding: writeEmbedding(deps.retrievers, body.embeddings, existing),
      });
      const kind = body.mode === "append" ? "append" : "build";
      deps.metrics.builds.inc({ kind });
      deps.metrics.buildDuration.observe({ kind }, built.buildMs / 1000);
      return reply.status(201).send({
        success: true,
        index_name: key.name,
        tenant_id: key.tenantId,
        documents_count: built.documentsCount,
        chunks_count: built.chunksCount,
        vocabulary_size: built.meta.vocabularySize,
        build_ms: built.buildMs,
        message: `${body.mode === "append" ? "Appended" : "Built"} index "${key.name}": ${built.documentsCount} documents, ${built.chunksCount} chunks`,
      });
    },
  );

  app.post(
    "/rag/query",
    {
      schema: {
        tags: ["query"],
        summary: "Search an index and compose an answer from the best chunks",
        body: QueryRequest,
        response: { 200: QueryResponse, ...errors },
      },
    },
    async (request, reply) => {
      const body = request.body;
      if (body.messages)
        return answerConversation(deps, request, reply, { ...body, messages: body.messages });
      const query = body.query ?? body.question;
      checkNestingDepth(body.filter, MAX_METADATA_DEPTH, "filter");
      if (query === undefined) throw badRequest("Send the question as query (or question)");
      if (body.query !== undefined && body.question !== undefined && body.query !== body.question) {
        throw badRequest("query and question differ; send one of them");
      }
      const key = { tenantId: actingTenant(request, body.tenant_id), name: body.index_name };
      const signal = clientGoneSignal(reply);
      const { results, elapsedMs, retrieval, loaded, filter } = await service.query({
        key,
        query,
        topK: body.top_k,
        minScore: body.min_score,
        filter: body.filter,
        expand: body.expand,
        ...retrievalInput(deps.retrievers, body, signal),
      });
      const mode = body.answer ?? (deps.answerWriter ? "generative" : "extractive");
      deps.metrics.queries.inc({ answer_mode: mode });
      deps.metrics.queryDuration.observe(elapsedMs / 1000);
      const response = {
        query,
        results,
        count: results.length,
        ...reportedRetrieval(body, retrieval),
        ...(filter && { filter_truncated: filter.truncated }),
        elapsed_ms: elapsedMs,
        answer: null as string | null,
        answer_mode: mode,
      };
      if (mode === "none") return response;
      if (mode === "extractive") return { ...response, answer: service.extractive(query, results, loaded) };
      const events = body.stream ? openEventStream(request, reply) : undefined;
      events?.send({ results, count: results.length, elapsed_ms: elapsedMs }, "results");
      const answered = await generativeAnswer(
        deps,
        { question: query, results, loaded },
        {
          signal,
          onText: events ? (piece) => events.send({ token: piece }) : undefined,
          log: request.log,
        },
      );
      const whole = { ...response, ...answered };
      if (!events) return whole;
      events.send(whole, "done");
      events.end();
      return reply;
    },
  );

  app.get(
    "/rag/indices",
    {
      schema: {
        tags: ["indices"],
        summary: "List a tenant's indices",
        querystring: TenantQuery,
        response: { 200: IndicesResponse, ...errors },
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
        response: { 200: DeletedResponse, ...errors },
      },
    },
    async (request) => {
      const key = {
        tenantId: actingTenant(request, request.query.tenant_id),
        name: request.params.index_name,
      };
      await service.deleteIndex(key);
      return { success: true, message: `Deleted index "${key.name}"` };
    },
  );

  app.post(
    "/rag/indices/:index_name/documents",
    {
      bodyLimit: deps.largeBodyLimit,
      preValidation: documentCountFirst(deps),
      schema: {
        tags: ["documents"],
        summary: "Add documents to an index, replacing those with the same id",
        description: "JSON body as below, or multipart/form-data with the files in the field `files`.",
        params: IndexParams,
        body: { content: { "application/json": { schema: DocumentsRequest } } },
        response: { 200: DocumentsResponse, ...errors },
      },
    },
    async (request) => {
      let tenant: string | undefined;
      let embeddings: EmbeddingsField | undefined;
      let documents: DocumentInput[];
      if (request.isMultipart()) {
        const upload = await readMultipart<DocumentsForm>(
          request,
          DocumentsForm,
          deps.maxBuildDocuments,
          deps.ingest,
        );
        tenant = multipartTenant(request, upload.fields.tenant_id);
        embeddings = upload.fields.embeddings;
        documents = upload.documents;
      } else {
        const body = request.body as Static<typeof DocumentsRequest>;
        tenant = body.tenant_id;
        embeddings = body.embeddings;
        documents = toDocumentInputs(body.documents);
      }
      const key = { tenantId: actingTenant(request, tenant), name: request.params.index_name };
      checkBuildSize(deps, documents);
      const embedding = writeEmbedding(deps.retrievers, embeddings, await service.requireMeta(key));
      const written = await service.upsertDocuments(key, documents, embedding);
      deps.metrics.builds.inc({ kind: "documents" });
      deps.metrics.buildDuration.observe({ kind: "documents" }, written.buildMs / 1000);
      return {
        success: true,
        index_name: key.name,
        tenant_id: key.tenantId,
        documents_count: written.documentsCount,
        chunks_count: written.chunksCount,
        index_documents_count: written.meta.documentsCount,
        index_chunks_count: written.meta.chunksCount,
        build_ms: written.buildMs,
      };
    },
  );

  app.delete(
    "/rag/indices/:index_name/documents/:document_id",
    {
      schema: {
        tags: ["documents"],
        summary: "Delete one document from an index",
        params: DocumentParams,
        querystring: TenantQuery,
        response: { 200: DeletedResponse, ...errors },
      },
    },
    async (request) => {
      const key = {
        tenantId: actingTenant(request, request.query.tenant_id),
        name: request.params.index_name,
      };
      await service.deleteDocument(key, request.params.document_id);
      return {
        success: true,
        message: `Deleted document "${request.params.document_id}" from "${key.name}"`,
      };
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
        response: { 200: IndexStatsResponse, ...errors },
      },
    },
    async (request) =>
      indexStats(
        await service.indexStats({
          tenantId: actingTenant(request, request.query.tenant_id),
          name: request.params.index_name,
        }),
      ),
  );
};

export function indexStats(stats: IndexStats): Static<typeof IndexStatsResponse> {
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
