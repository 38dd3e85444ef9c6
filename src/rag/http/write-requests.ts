/**
 * What the build and document routes check of a write before it is made: documents as the service
 * takes them (ids well-formed, metadata not too deep), and their count and size against
 * MAX_BUILD_DOCUMENTS and MAX_BUILD_CHARS (413 before any indexing is done).
 */
import type { Static } from "typebox";
import { tooLarge } from "../../core/errors.js";
import { checkWellFormed } from "../../core/validation.js";
import type { DocumentInput } from "../service.js";
import { checkMetadataDepth } from "../service/settings.js";
import type { DocumentInput as DocumentInputSchema } from "./schemas.js";
import type { RagRouteDeps } from "./route-deps.js";

type Limits = Pick<RagRouteDeps, "maxBuildDocuments" | "maxBuildChars">;

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
