/**
 * `multipart/form-data` bodies for the build and add-documents routes: text fields are the JSON
 * body's fields (checked against the same TypeBox schema), each uploaded file becomes a document. All
 * files are read and checked before anything is written, so a bad file fails the whole request. Files
 * are spooled to disk as they arrive and parsed in the parse processes (ingest/parse-pool.ts), never
 * held whole in memory or parsed on the event loop.
 */
import { createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import type { MultipartFile } from "@fastify/multipart";
import type { FastifyRequest } from "fastify";
import type { Static, TSchema } from "typebox";
import { Value } from "typebox/value";
import { actingTenant } from "../../core/auth.js";
import { badRequest, DomainError, isStorageFull, storageFull, tooLarge } from "../../core/errors.js";
import { validationProblem } from "../../core/http.js";
import { parseSpooledFile } from "../ingest/parse-pool.js";
import { RequestTextBudget, type Ingest } from "../ingest/limits.js";
import type { DocumentInput } from "../service.js";

/**
 * The options of a route whose body is JSON, validated against `body` by Fastify, or
 * multipart/form-data, whose fields readMultipart checks against the same schema's fields: the body
 * limit of uploads, and the body schema per content type (Fastify validates only the types it names).
 */
export function uploadRouteOptions<Schema extends object>(bodyLimit: number, body: TSchema, schema: Schema) {
  return { bodyLimit, schema: { ...schema, body: { content: { "application/json": { schema: body } } } } };
}

export interface MultipartBody<Fields> {
  fields: Fields;
  documents: DocumentInput[];
}

/** A file part written to the request's spool folder. */
interface SpooledUpload {
  name: string;
  path: string;
}

/**
 * Writes a file part to disk as it arrives, so an upload costs a few KB of memory however large it
 * is; a part cut at the size limit (MAX_BODY_BYTES) is a 413 naming the file.
 */
async function spool(part: MultipartFile, folder: string, index: number): Promise<SpooledUpload> {
  // The browser-given name, without any folder part: it is a label, never a path we open.
  const name = part.filename.split(/[\\/]/).pop() || "upload";
  const file = path.join(folder, String(index));
  await pipeline(part.file, createWriteStream(file, { flags: "wx" }));
  if (part.file.truncated) {
    throw tooLarge(`File "${name}" is larger than the upload limit (MAX_BODY_BYTES)`, [
      { file: name, setting: "MAX_BODY_BYTES" },
    ]);
  }
  return { name, path: file };
}

/** Resolves once the whole request body has arrived (a request timeout can no longer fire after). */
function bodyReceived(request: FastifyRequest): Promise<void> {
  const raw = request.raw;
  if (raw.complete || raw.readableEnded) return Promise.resolve();
  return new Promise((resolve, reject) => {
    raw.once("end", resolve);
    raw.once("error", reject);
    raw.once("close", () => (raw.complete ? resolve() : reject(clientLeft())));
    raw.resume(); // an epilogue after the last part is read and dropped
  });
}

const clientLeft = () => badRequest("The client closed the request before it was complete");

/**
 * An AbortSignal that fires when the client's connection closes: a parse waiting in the queue or
 * running on a thread for a client that left is dropped, and nothing it would have written is.
 */
export function clientGoneSignal(request: FastifyRequest): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const socket = request.raw.socket;
  const onClose = () => controller.abort();
  if (socket.destroyed) controller.abort();
  else socket.once("close", onClose);
  return { signal: controller.signal, dispose: () => socket.off("close", onClose) };
}

/**
 * The tenant of a multipart request: the `tenant_id` form field or `?tenant_id=` (as the GET and
 * DELETE routes take it); both given and different is a 400 rather than a silent choice.
 */
export function multipartTenant(request: FastifyRequest, formTenant: string | undefined): string | undefined {
  const query = (request.query ?? {}) as Record<string, unknown>;
  const raw = query["tenant_id"];
  if (raw === undefined) return formTenant;
  if (typeof raw !== "string" || raw === "")
    throw badRequest("tenant_id in the query must be one non-empty string");
  if (formTenant !== undefined && formTenant !== raw) {
    throw badRequest(
      `tenant_id differs between the query ("${raw}") and the form ("${formTenant}"); send one`,
    );
  }
  return raw;
}

/**
 * Reads every part, spooling files to a temporary folder (removed before returning); `maxFiles`
 * bounds the count before their contents are parsed. Only once the whole body has arrived are the
 * files parsed, through the ingest gate (MAX_CONCURRENT_PARSES, MAX_PARSE_QUEUE) in the parse
 * processes (MAX_PARSE_MS, MAX_PARSE_HEAP_MB and the per-file limits; past one, the request fails
 * with a 4xx and nothing is written). A client that leaves meanwhile gives up its place and its process.
 * `tenant` is whose parse slots the parsing takes (MAX_PARSES_PER_TENANT); left out, the tenant the
 * form's `tenant_id` (or `?tenant_id=`) and the key act for.
 */
export async function readMultipart<S extends TSchema>(
  request: FastifyRequest,
  fieldSchema: S,
  maxFiles: number,
  ingest: Ingest,
  tenant?: string,
): Promise<MultipartBody<Static<S>>> {
  const folder = await mkdtemp(path.join(tmpdir(), "lectern-upload-"));
  const gone = clientGoneSignal(request);
  try {
    return await readSpooled(request, fieldSchema, maxFiles, ingest, folder, gone.signal, tenant);
  } finally {
    gone.dispose();
    await rm(folder, { recursive: true, force: true });
  }
}

async function readSpooled<S extends TSchema>(
  request: FastifyRequest,
  fieldSchema: S,
  maxFiles: number,
  ingest: Ingest,
  folder: string,
  signal: AbortSignal,
  tenant: string | undefined,
): Promise<MultipartBody<Static<S>>> {
  // No prototype: a field named "__proto__" is just a (refused) field name here.
  const raw: Record<string, string> = Object.create(null) as Record<string, string>;
  const uploads: SpooledUpload[] = [];
  try {
    for await (const part of request.parts()) {
      if (part.type === "file") {
        if (uploads.length >= maxFiles) {
          throw badRequest(`More than ${maxFiles} files in one request (MAX_BUILD_DOCUMENTS)`);
        }
        uploads.push(await spool(part, folder, uploads.length));
      } else if (typeof part.value === "string") {
        if (part.fieldname in raw) throw badRequest(`Field "${part.fieldname}" is given more than once`);
        raw[part.fieldname] = part.value;
      }
    }
    await bodyReceived(request);
  } catch (error) {
    // Our own refusals and the plugin's size limits (413) keep their status; a full spool disk is a
    // 507; anything else thrown by the multipart parser means the body itself is malformed.
    if (error instanceof DomainError || typeof (error as { statusCode?: unknown }).statusCode === "number")
      throw error;
    if (isStorageFull(error)) throw storageFull("the upload spool folder is full");
    throw badRequest(`Malformed multipart/form-data body: ${(error as Error).message}`);
  }
  if (uploads.length === 0) throw badRequest('Send at least one file (form field "files")');
  const fields = checkFields(fieldSchema, raw);

  const names = new Set<string>();
  for (const { name } of uploads) {
    if (names.has(name)) throw badRequest(`Two uploaded files are named "${name}"`);
    names.add(name);
  }
  const parseTenant =
    tenant ?? actingTenant(request, multipartTenant(request, (fields as { tenant_id?: string }).tenant_id));
  const documents = await ingest.gate.run(
    async () => {
      const budget = new RequestTextBudget(ingest.limits);
      const parsed: DocumentInput[] = [];
      for (const { name, path: file } of uploads) {
        const loaded = await parseSpooledFile(name, file, ingest.limits, signal);
        budget.add(name, loaded.text.length);
        parsed.push({
          id: name,
          text: loaded.text,
          title: loaded.title,
          metadata: { ...loaded.metadata, file: name },
          source: name,
          pageStarts: loaded.pageStarts,
          sections: loaded.sections,
        });
      }
      return parsed;
    },
    signal,
    parseTenant,
  );
  // A client that left while its files were parsed gets nothing written for it.
  if (signal.aborted) throw clientLeft();
  return { fields, documents };
}

/**
 * Form fields arrive as strings: converted by the schema (e.g. "500" → 500), defaults applied, and
 * checked against the schema, whose type they then have.
 */
function checkFields<S extends TSchema>(fieldSchema: S, raw: Record<string, string>): Static<S> {
  const fields = Value.Default(fieldSchema, Value.Convert(fieldSchema, { ...raw }));
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
  return fields;
}
