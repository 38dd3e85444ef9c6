/**
 * One index's documents: POST /rag/indices/{name}/documents (add, or replace by id; JSON or
 * multipart uploads) and DELETE /rag/indices/{name}/documents/{id}. A Fastify plugin, registered in
 * the /rag scope by routes.ts.
 */
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { actingTenant } from "../../core/auth.js";
import { errorResponses } from "../../core/error-shapes.js";
import { badRequest } from "../../core/errors.js";
import type { RagRouteDeps } from "./route-deps.js";
import {
  DeletedResponse,
  DocumentParams,
  DocumentsForm,
  DocumentsRequest,
  DocumentsResponse,
  IndexParams,
  TenantQuery,
} from "./schemas.js";
import { multipartTenant, readMultipart, uploadRouteOptions } from "./uploads.js";
import { addDocuments, documentCountFirst, toDocumentInputs } from "./write-requests.js";

/** JSON, validated against DocumentsRequest by Fastify; undefined when the body is multipart. */
type UpsertRoute = { Body: DocumentsRequest | undefined; Params: { index_name: string } };

export const documentRoutes: FastifyPluginAsync<RagRouteDeps> = async (instance, deps) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  app.post<UpsertRoute>(
    "/rag/indices/:index_name/documents",
    {
      ...uploadRouteOptions(deps.largeBodyLimit, DocumentsRequest, {
        tags: ["documents"],
        summary: "Add documents to an index, replacing those with the same id",
        description: "JSON body as below, or multipart/form-data with the files in the field `files`.",
        params: IndexParams,
        response: { 200: DocumentsResponse, ...errorResponses },
      }),
      preValidation: documentCountFirst(deps),
    },
    (request) => upsert(deps, request),
  );

  app.delete(
    "/rag/indices/:index_name/documents/:document_id",
    {
      schema: {
        tags: ["documents"],
        summary: "Delete one document from an index",
        params: DocumentParams,
        querystring: TenantQuery,
        response: { 200: DeletedResponse, ...errorResponses },
      },
    },
    async (request) => {
      const { index_name: name, document_id: id } = request.params;
      await deps.service.deleteDocument(
        { tenantId: actingTenant(request, request.query.tenant_id), name },
        id,
      );
      return { success: true, message: `Deleted document "${id}" from "${name}"` };
    },
  );
};

/** The request's documents and fields: uploads (fields checked against DocumentsForm), else JSON. */
async function upsertInput(deps: RagRouteDeps, request: FastifyRequest<UpsertRoute>) {
  if (request.isMultipart()) {
    const upload = await readMultipart(request, DocumentsForm, deps.maxBuildDocuments, deps.ingest);
    const tenant = multipartTenant(request, upload.fields.tenant_id);
    return { tenant, embeddings: upload.fields.embeddings, documents: upload.documents };
  }
  const body = request.body;
  if (!body) throw badRequest("Send the documents as JSON or multipart/form-data");
  return { tenant: body.tenant_id, embeddings: body.embeddings, documents: toDocumentInputs(body.documents) };
}

async function upsert(deps: RagRouteDeps, request: FastifyRequest<UpsertRoute>) {
  const { tenant, embeddings, documents } = await upsertInput(deps, request);
  const key = { tenantId: actingTenant(request, tenant), name: request.params.index_name };
  return addDocuments(deps, key, documents, embeddings);
}
