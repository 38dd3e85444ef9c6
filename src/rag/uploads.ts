/**
 * `multipart/form-data` bodies for the build and add-documents routes: text fields are the JSON
 * body's fields (checked against the same TypeBox schema), each uploaded file becomes a document. All
 * files are read and checked before anything is written, so a bad file fails the whole request.
 */
import type { FastifyRequest } from "fastify";
import type { TSchema } from "typebox";
import { Value } from "typebox/value";
import { badRequest, DomainError } from "../core/errors.js";
import { validationProblem } from "../core/http.js";
import { loadFile } from "./ingest/loaders.js";
import { RequestTextBudget, type Ingest } from "./ingest/limits.js";
import type { DocumentInput } from "./service.js";

export interface MultipartBody<Fields> {
  fields: Fields;
  documents: DocumentInput[];
}

/**
 * Reads every part; `maxFiles` bounds the count before their contents are parsed, and the files are
 * parsed through the ingest gate and limits (a file past a limit fails the request with a 413).
 */
export async function readMultipart<Fields>(
  request: FastifyRequest,
  fieldSchema: TSchema,
  maxFiles: number,
  ingest: Ingest,
): Promise<MultipartBody<Fields>> {
  // No prototype: a field named "__proto__" is just a (refused) field name here.
  const raw: Record<string, string> = Object.create(null) as Record<string, string>;
  const uploads: Array<{ name: string; bytes: Buffer }> = [];
  try {
    for await (const part of request.parts()) {
      if (part.type === "file") {
        if (uploads.length >= maxFiles) {
          throw badRequest(`More than ${maxFiles} files in one request (MAX_BUILD_DOCUMENTS)`);
        }
        // The browser-given name, without any folder part: it is a label, never a path we open.
        const name = part.filename.split(/[\\/]/).pop() || "upload";
        uploads.push({ name, bytes: await part.toBuffer() });
      } else if (typeof part.value === "string") {
        if (part.fieldname in raw) throw badRequest(`Field "${part.fieldname}" is given more than once`);
        raw[part.fieldname] = part.value;
      }
    }
  } catch (error) {
    // Our own refusals and the plugin's size limits (413) keep their status; anything else thrown by
    // the multipart parser means the body itself is malformed.
    if (error instanceof DomainError || typeof (error as { statusCode?: unknown }).statusCode === "number")
      throw error;
    throw badRequest(`Malformed multipart/form-data body: ${(error as Error).message}`);
  }
  if (uploads.length === 0) throw badRequest('Send at least one file (form field "files")');

  // Form fields arrive as strings: convert by the schema (e.g. "500" → 500), then apply defaults.
  const fields = Value.Default(fieldSchema, Value.Convert(fieldSchema, { ...raw })) as Fields;
  if (!Value.Check(fieldSchema, fields)) {
    const errors = Value.Errors(fieldSchema, fields) as Array<{
      instancePath?: string;
      message?: string;
      params?: unknown;
    }>;
    throw badRequest(
      `Invalid form field ${errors[0]?.instancePath?.slice(1) || "value"}: ${validationProblem(errors)}`,
    );
  }

  const names = new Set<string>();
  for (const { name } of uploads) {
    if (names.has(name)) throw badRequest(`Two uploaded files are named "${name}"`);
    names.add(name);
  }
  const documents = await ingest.gate.run(async () => {
    const budget = new RequestTextBudget(ingest.limits);
    const parsed: DocumentInput[] = [];
    for (let index = 0; index < uploads.length; index++) {
      const { name, bytes } = uploads[index]!;
      const loaded = await loadFile(name, bytes, ingest.limits);
      budget.add(name, loaded.text.length);
      // The raw bytes are no longer needed: let them go while the next file is parsed.
      uploads[index] = { name, bytes: Buffer.alloc(0) };
      parsed.push({
        id: name,
        text: loaded.text,
        title: loaded.title,
        metadata: { ...loaded.metadata, file: name },
        source: name,
        pageStarts: loaded.pageStarts,
      });
    }
    return parsed;
  });
  return { fields, documents };
}
