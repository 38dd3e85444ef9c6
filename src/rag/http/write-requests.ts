/**
 * What the build and document routes check of a write before it is made: documents as the service
 * takes them (ids well-formed, metadata not too deep), and their count and size against
 * MAX_BUILD_DOCUMENTS and MAX_BUILD_CHARS (413 before any indexing is done).
 */
import type { Static } from "typebox";
import { tooLarge } from "../../core/errors.js";
import { checkWellFormed } from "../../core/validation.js";
import type { RagMetrics } from "../metrics.js";
import { writeEmbedding } from "../retrieval/options.js";
import type { EmbeddingsField } from "../retrieval/schemas.js";
import type { Retrievers } from "../retrieval/retrievers.js";
import type { DocumentInput, RagService } from "../service.js";
import type { IndexKey } from "../store/types.js";
import { checkMetadataDepth } from "../service/settings.js";
import type { DocumentInput as DocumentInputSchema } from "./schemas.js";
import type { RagRouteDeps } from "./route-deps.js";

type Limits = Pick<RagRouteDeps, "maxBuildDocuments" | "maxBuildChars">;

/** What adding documents to an index needs: the route's deps, or the MCP server's (no metrics in the CLI). */
export interface DocumentWriteDeps extends Limits {
  service: RagService;
  retrievers: Retrievers;
  metrics?: Pick<RagMetrics, "builds" | "buildDuration">;
}

export function toDocumentInputs(documents: Static<typeof DocumentInputSchema>[]): DocumentInput[] {
  return documents.map((doc, index) => {
    if (typeof doc === "string") return { text: doc };
    if (doc.id !== undefined) checkWellFormed(doc.id, `documents[${index}].id`);
    checkMetadataDepth(doc.metadata, `documents[${index}].metadata`);
    return doc;
  });
}

/** 413 for a build or append with more documents than MAX_BUILD_DOCUMENTS (checked before files are read). */
export function checkDocumentCount(limits: Limits, count: number): void {
  if (count > limits.maxBuildDocuments) {
    throw tooLarge(
      `${count} documents in one request; the limit is ${limits.maxBuildDocuments} (MAX_BUILD_DOCUMENTS). Split it into appends.`,
    );
  }
}

/**
 * A preValidation hook: more documents than MAX_BUILD_DOCUMENTS is a 413 before the schema checks
 * them one by one (a million tiny ones took longer to validate than to refuse).
 */
export function documentCountFirst(limits: Limits) {
  return async (request: { body: unknown }) => {
    const documents = (request.body as { documents?: unknown } | null)?.documents;
    if (Array.isArray(documents)) checkDocumentCount(limits, documents.length);
  };
}

/** 413 for a build or append larger than the configured limits, before any indexing is done. */
export function checkBuildSize(limits: Limits, documents: DocumentInput[]): void {
  checkDocumentCount(limits, documents.length);
  let chars = 0;
  for (const document of documents) chars += document.text.length;
  if (chars > limits.maxBuildChars) {
    throw tooLarge(
      `${chars} characters of text in one request; the limit is ${limits.maxBuildChars} (MAX_BUILD_CHARS). Split it into appends.`,
    );
  }
}

/**
 * Adds documents to an existing index, replacing those with the same id (404 when the index is
 * missing, 413 past the limits), counted in the metrics: POST /rag/indices/{name}/documents and the
 * MCP tool `add_document` alike. Returns that route's response.
 */
export async function addDocuments(
  deps: DocumentWriteDeps,
  key: IndexKey,
  documents: DocumentInput[],
  embeddings: EmbeddingsField | undefined,
) {
  checkBuildSize(deps, documents);
  const embedding = writeEmbedding(deps.retrievers, embeddings, await deps.service.requireMeta(key));
  const written = await deps.service.upsertDocuments(key, documents, embedding);
  deps.metrics?.builds.inc({ kind: "documents" });
  deps.metrics?.buildDuration.observe({ kind: "documents" }, written.buildMs / 1000);
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
}
