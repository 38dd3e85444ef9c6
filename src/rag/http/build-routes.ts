/** POST /rag/build: a Fastify plugin, registered in the /rag scope by routes.ts. */
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { actingTenant, confinedTenant } from "../../core/auth.js";
import { errorResponses } from "../../core/error-shapes.js";
import { badRequest } from "../../core/errors.js";
import { loadResolvedFiles, resolveFiles } from "../ingest/files.js";
import { SUPPORTED_EXTENSIONS } from "../ingest/loaders.js";
import { writeEmbedding } from "../retrieval/options.js";
import type { DocumentInput } from "../service.js";
import type { IndexSettings } from "../store/types.js";
import { resolveIndexSettings } from "../service/settings.js";
import type { RagRouteDeps } from "./route-deps.js";
import { BuildForm, BuildRequest, BuildResponse } from "./schemas.js";
import { multipartTenant, readMultipart, uploadRouteOptions } from "./uploads.js";
import { replyGoneSignal } from "./answer-http.js";
import {
  checkBuildSize,
  checkDocumentCount,
  documentCountFirst,
  toDocumentInputs,
} from "./write-requests.js";

/** A build's request: JSON, validated against BuildRequest by Fastify; undefined when it is multipart. */
type BuildRoute = { Body: BuildRequest | undefined };

export const buildRoutes: FastifyPluginAsync<RagRouteDeps> = async (instance, deps) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  app.post<BuildRoute>(
    "/rag/build",
    {
      ...uploadRouteOptions(deps.largeBodyLimit, BuildRequest, {
        tags: ["indices"],
        summary:
          "Build an index from inline documents, files under RAG_FILES_DIR, or uploads (all-or-nothing)",
        description:
          "JSON body as below, or multipart/form-data with the same fields as text fields and the files " +
          `(${SUPPORTED_EXTENSIONS.join(" ")}) in the field \`files\`.`,
        response: { 201: BuildResponse, ...errorResponses },
      }),
      preValidation: documentCountFirst(deps),
    },
    (request, reply) => build(deps, request, reply),
  );
};

/**
 * The build's fields and documents: uploads for multipart (fields checked against BuildForm), else
 * the JSON body's documents and files (its settings checked before any file is read).
 */
async function buildInput(
  deps: RagRouteDeps,
  request: FastifyRequest<BuildRoute>,
  reply: FastifyReply,
): Promise<{ fields: BuildForm; settings: IndexSettings; documents: DocumentInput[] }> {
  if (request.isMultipart()) {
    const upload = await readMultipart(request, BuildForm, deps.maxBuildDocuments, deps.ingest);
    const fields = { ...upload.fields, tenant_id: multipartTenant(request, upload.fields.tenant_id) };
    return { fields, settings: settingsOf(fields), documents: upload.documents };
  }
  const body = request.body;
  if (!body?.documents?.length && !body?.files?.length)
    throw badRequest("Send at least one of documents or files");
  const { documents: inline, files, ...fields } = body;
  const settings = settingsOf(fields);
  const documents = toDocumentInputs(inline ?? []);
  checkDocumentCount(deps, documents.length + (files?.length ?? 0));
  if (files?.length) {
    // Walking and reading stop when the client leaves (a large folder takes a while).
    const signal = replyGoneSignal(reply);
    const walk = { limits: deps.walk, signal };
    const resolved = await resolveFiles(deps.ragFilesDir, files, confinedTenant(request), walk);
    checkDocumentCount(deps, documents.length + resolved.files.length);
    const tenant = actingTenant(request, body.tenant_id);
    const options = { allowHardLinks: deps.walk.allowHardLinks, signal };
    documents.push(...(await loadResolvedFiles(resolved.root, resolved.files, deps.ingest, tenant, options)));
  }
  return { fields, settings, documents };
}

const settingsOf = (fields: BuildForm) =>
  resolveIndexSettings({ chunkSize: fields.chunk_size, overlap: fields.overlap, scorer: fields.scorer });

async function build(deps: RagRouteDeps, request: FastifyRequest<BuildRoute>, reply: FastifyReply) {
  const { fields, settings, documents } = await buildInput(deps, request, reply);
  checkBuildSize(deps, documents);
  const key = { tenantId: actingTenant(request, fields.tenant_id), name: fields.index_name };
  // An append keeps the index as it is (with vectors of its model, or without) unless asked.
  const existing = fields.mode === "append" ? await deps.service.requireMeta(key) : null;
  const built = await deps.service.build({
    key,
    documents,
    ...settings,
    mode: fields.mode,
    embedding: writeEmbedding(deps.retrievers, fields.embeddings, existing),
  });
  const kind = fields.mode === "append" ? "append" : "build";
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
    message: `${fields.mode === "append" ? "Appended" : "Built"} index "${key.name}": ${built.documentsCount} documents, ${built.chunksCount} chunks`,
  });
}
