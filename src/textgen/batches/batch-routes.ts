/**
 * OpenAI's Files API (purpose "batch") and Batch API under /v1: upload a JSONL file of requests,
 * create a batch over it, follow it, cancel it, read its output and error files. Installed through
 * the dialect plugin factory with OpenAI's error shape, beside the OpenAI routes (which answer
 * unknown routes under /v1). Everything is per tenant: another tenant's file or batch is a 404.
 */
import { unixSeconds } from "../../core/time.js";
import multipart from "@fastify/multipart";
import type { FastifyRequest } from "fastify";
import { Type } from "typebox";
import { actingTenant } from "../../core/auth.js";
import type { Config } from "../../core/config.js";
import { dialectPlugin } from "../../core/dialect-plugin.js";
import { badRequest, DomainError, notFound } from "../../core/errors.js";
import type { TypedApp } from "../../core/http.js";
import { openAiDialect } from "../http/dialects/openai-shared.js";
import type { BatchBackend } from "../store/types.js";
import { ownerOf, type BatchObject, type BatchState } from "./batch-object.js";
import type { BatchRunner } from "./batch-runner.js";
import type { BatchFiles } from "./files.js";
import { newId, type FileObject } from "./files.js";
import { BATCH_ENDPOINTS } from "./jsonl.js";

export interface BatchRouteOptions {
  tables: BatchBackend;
  files: BatchFiles;
  runner: BatchRunner;
  limits: Config["batches"];
}

const FileId = Type.Object({ file_id: Type.String() });
const BatchId = Type.Object({ batch_id: Type.String() });
const ListQuery = Type.Object({
  after: Type.Optional(Type.String({ description: "an id: the objects created before it" })),
  limit: Type.Optional(Type.Integer({ description: "1…100 (clamped); 20 when absent" })),
});
const clamp = (limit: number | undefined) => Math.min(100, Math.max(1, limit ?? 20));

const Metadata = Type.Union([
  Type.Record(Type.String(), Type.String({ maxLength: 512 }), {
    maxProperties: 16,
    propertyNames: { maxLength: 64 },
  }),
  Type.Null(),
]);

const CreateBatch = Type.Object({
  input_file_id: Type.String({ description: "a file uploaded with purpose batch" }),
  endpoint: Type.Union(BATCH_ENDPOINTS.map((endpoint) => Type.Literal(endpoint))),
  completion_window: Type.Literal("24h"),
  metadata: Type.Optional(Metadata),
});

const batchGone = (id: string) => notFound(`No batch found with id '${id}'.`);

export const batchRoutes = dialectPlugin<BatchRouteOptions>(
  { ...openAiDialect, notFound: false },
  async (app, options) => {
    await app.register(multipart, {
      limits: { fileSize: options.limits.maxFileBytes, files: 1, fields: 8, fieldSize: 64 * 1024 },
    });
    registerFileRoutes(app, options);
    registerFileContent(app, options.files);
    registerBatchRoutes(app, options);
    registerBatchCancel(app, options);
  },
);

/** POST/GET /v1/files, GET/DELETE /v1/files/{file_id}. */
function registerFileRoutes(app: TypedApp, { files, limits }: BatchRouteOptions): void {
  app.post(
    "/files",
    {
      bodyLimit: limits.maxFileBytes + 1024 ** 2,
      schema: {
        tags: ["openai"],
        summary: `Upload a batch input file: multipart/form-data with fields file (JSONL) and purpose "batch"`,
      },
    },
    async (request) => {
      if (!request.isMultipart())
        throw badRequest('Send the file as multipart/form-data (fields file and purpose "batch")');
      return readUpload(request, files, limits.maxFileBytes);
    },
  );

  app.get(
    "/files",
    {
      schema: {
        tags: ["openai"],
        summary: "Files of this tenant, newest first (batch inputs, outputs and errors)",
        querystring: Type.Object({ ...ListQuery.properties, purpose: Type.Optional(Type.String()) }),
      },
    },
    async (request) => {
      const page = await files.list(
        actingTenant(request, undefined),
        request.query.after,
        clamp(request.query.limit),
      );
      const purpose = request.query.purpose;
      return purpose === undefined
        ? page
        : { ...page, data: page.data.filter((file) => file.purpose === purpose) };
    },
  );

  app.get(
    "/files/:file_id",
    { schema: { tags: ["openai"], summary: "One file's object", params: FileId } },
    async (request) => files.get(actingTenant(request, undefined), request.params.file_id),
  );

  app.delete(
    "/files/:file_id",
    { schema: { tags: ["openai"], summary: "Deletes a file", params: FileId } },
    async (request) => {
      await files.delete(actingTenant(request, undefined), request.params.file_id);
      return { id: request.params.file_id, object: "file" as const, deleted: true };
    },
  );
}

/** An upload's form: the file written to disk as it arrives, its purpose checked ("batch" only). */
async function readUpload(request: FastifyRequest, files: BatchFiles, maxBytes: number): Promise<FileObject> {
  const tenant = actingTenant(request, undefined);
  let purpose: string | undefined;
  let uploaded: FileObject | undefined;
  try {
    for await (const part of request.parts()) {
      if (part.type === "field") {
        if (part.fieldname === "purpose") purpose = String(part.value);
      } else if (uploaded || (purpose !== undefined && purpose !== "batch")) part.file.resume();
      else uploaded = await files.upload(tenant, part.filename, part.file, maxBytes);
    }
  } catch (error) {
    if (uploaded) await files.delete(tenant, uploaded.id);
    // Our refusals and the plugin's size limit (413) keep their status; else the body is malformed.
    if (error instanceof DomainError || typeof (error as { statusCode?: unknown }).statusCode === "number")
      throw error;
    throw badRequest(`Malformed multipart/form-data body: ${(error as Error).message}`);
  }
  if (purpose !== "batch") {
    if (uploaded) await files.delete(tenant, uploaded.id);
    throw badRequest(
      `purpose must be "batch": this server's Files API holds Batch API input (vector store files are the RAG app's)`,
      [{ path: "/purpose" }],
    );
  }
  if (!uploaded) throw badRequest("The form has no file field", [{ path: "/file" }]);
  return uploaded;
}

/** GET /v1/files/{file_id}/content. */
function registerFileContent(app: TypedApp, files: BatchFiles): void {
  app.get(
    "/files/:file_id/content",
    {
      schema: {
        tags: ["openai"],
        summary:
          "A file's content: an input as uploaded, a batch's output or errors as JSONL (one line per request)",
        params: FileId,
      },
    },
    async (request, reply) => {
      const content = await files.content(actingTenant(request, undefined), request.params.file_id);
      return reply.type("application/octet-stream").send(content);
    },
  );
}

async function readState(tables: BatchBackend, tenant: string, id: string): Promise<BatchState> {
  const stored = await tables.batch(tenant, id);
  if (!stored) throw batchGone(id);
  return JSON.parse(stored.body) as BatchState;
}

/** A stored batch as OpenAI's object, its counts from the recorded lines. */
async function readBatch(tables: BatchBackend, tenant: string, id: string): Promise<BatchObject> {
  const stored = await tables.batch(tenant, id);
  if (!stored) throw batchGone(id);
  const { batch } = JSON.parse(stored.body) as BatchState;
  return {
    ...batch,
    request_counts: { ...batch.request_counts, completed: stored.completed, failed: stored.failed },
  };
}

/** POST/GET /v1/batches, GET /v1/batches/{batch_id}. */
function registerBatchRoutes(app: TypedApp, { tables, files, runner }: BatchRouteOptions): void {
  app.post(
    "/batches",
    {
      schema: {
        tags: ["openai"],
        summary: "Runs a file of requests at low priority, within 24 h",
        body: CreateBatch,
      },
    },
    async (request) => {
      const tenant = actingTenant(request, undefined);
      const body = request.body;
      const input = await files.get(tenant, body.input_file_id).catch(() => undefined);
      if (!input || input.purpose !== "batch")
        throw badRequest(`input_file_id '${body.input_file_id}' is not a file of purpose "batch" of yours`, [
          { path: "/input_file_id" },
        ]);
      const created = unixSeconds();
      const batch: BatchObject = {
        id: newId("batch_"),
        object: "batch",
        endpoint: body.endpoint,
        errors: null,
        input_file_id: input.id,
        completion_window: "24h",
        status: "validating",
        output_file_id: null,
        error_file_id: null,
        created_at: created,
        in_progress_at: null,
        expires_at: created + 24 * 3600,
        ...{ finalizing_at: null, completed_at: null, failed_at: null, expired_at: null },
        ...{ cancelling_at: null, cancelled_at: null },
        request_counts: { total: 0, completed: 0, failed: 0 },
        metadata: body.metadata ?? null,
      };
      const state: BatchState = { batch, owner: ownerOf(request.principal) };
      await tables.saveBatch(tenant, batch.id, JSON.stringify(state), true, Date.now());
      runner.kick();
      return batch;
    },
  );

  app.get(
    "/batches",
    { schema: { tags: ["openai"], summary: "Batches of this tenant, newest first", querystring: ListQuery } },
    async (request) => {
      const tenant = actingTenant(request, undefined);
      const page = await tables.listBatches(tenant, request.query.after, clamp(request.query.limit));
      if (page === "no_cursor") throw batchGone(request.query.after!);
      const ids = page.rows.map((row) => (JSON.parse(row) as BatchState).batch.id);
      const data = await Promise.all(ids.map((id) => readBatch(tables, tenant, id)));
      return {
        object: "list" as const,
        data,
        first_id: ids[0] ?? null,
        last_id: ids.at(-1) ?? null,
        has_more: page.hasMore,
      };
    },
  );

  app.get(
    "/batches/:batch_id",
    {
      schema: {
        tags: ["openai"],
        summary: "One batch: status, counts, output and error files",
        params: BatchId,
      },
    },
    async (request) => readBatch(tables, actingTenant(request, undefined), request.params.batch_id),
  );
}

/** POST /v1/batches/{batch_id}/cancel. */
function registerBatchCancel(app: TypedApp, { tables, runner }: BatchRouteOptions): void {
  app.post(
    "/batches/:batch_id/cancel",
    {
      schema: {
        tags: ["openai"],
        summary: "Cancels a batch: cancelling, then cancelled with the results of the lines already run",
        params: BatchId,
      },
    },
    async (request) => {
      const tenant = actingTenant(request, undefined);
      const id = request.params.batch_id;
      const cancellable = (state: BatchState) =>
        state.batch.status === "validating" || state.batch.status === "in_progress";
      const before = await readState(tables, tenant, id);
      if (cancellable(before)) {
        // The runner learns first, so none of its later saves undoes the cancellation (batch-runner.ts).
        runner.cancel({ tenant, id });
        const state = await readState(tables, tenant, id);
        if (cancellable(state))
          Object.assign(state.batch, { status: "cancelling", cancelling_at: unixSeconds() });
        await tables.saveBatch(tenant, id, JSON.stringify(state), true, Date.now());
        runner.kick();
      } else if (before.batch.status !== "cancelling" && before.batch.status !== "cancelled")
        throw new DomainError("conflict", `Cannot cancel a batch with status '${before.batch.status}'.`);
      return readBatch(tables, tenant, id);
    },
  );
}
