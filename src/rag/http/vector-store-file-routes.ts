/**
 * /v1/vector_stores/{id}/files and /file_batches: a vector store file is a document of the store's
 * index (its id the file id) and a record (attributes, status, chunking strategy). Files are added
 * within the request (one write per request), so a file or batch is complete, or failed, when its
 * answer comes back; a batch cannot be cancelled any more by then, and cancel returns it as it is.
 */
import { unixSeconds } from "../../core/time.js";
import { Type, type Static } from "typebox";
import { badRequest, DomainError, notFound } from "../../core/errors.js";
import type { TypedApp } from "../../core/http.js";
import type { StoredObject } from "../store/openai-objects.js";
import type { Metadata } from "../store/types.js";
import type { FileShelf, StoredFile } from "./file-shelf.js";
import type { OpenAiRagOptions } from "./route-deps.js";
import {
  Attributes,
  ChunkingStrategy,
  FileId,
  ListQuery,
  StoreParams,
  bodyOf,
  byCreation,
  createdMs,
  chunkingOf,
  fileCounts,
  newId,
  page,
  recordsById,
  storeOf,
  touchStore,
  vectorStoreFileObject,
  type BatchBody,
  type ChunkingStrategyParam,
  type FileBody,
  type ResolvedStore,
} from "./vector-store-records.js";

const strict = { additionalProperties: false } as const;
const StoreFileParams = Type.Object({
  vector_store_id: StoreParams.properties.vector_store_id,
  file_id: Type.String({ minLength: 1, maxLength: 512 }),
});
const BatchParams = Type.Object({
  vector_store_id: StoreParams.properties.vector_store_id,
  batch_id: Type.String({ pattern: "^vsfb_[A-Za-z0-9]{1,64}$" }),
});

/** A file to add: the stored file (null: not found, so it fails), its attributes and chunking. */
export interface StoreEntry {
  fileId?: string;
  file: StoredFile | null;
  attributes?: Metadata | null;
  chunking: ChunkingStrategyParam | null;
}

/**
 * Adds files to a store in one write and records each (with `batchId`). With `failSoft` (a batch, the
 * files of a new store) an error of the write fails the files (recorded with it), not the request.
 */
export async function addToStore(
  options: OpenAiRagOptions,
  shelf: FileShelf,
  store: ResolvedStore,
  entries: readonly StoreEntry[],
  { batchId = null, failSoft = false }: { batchId?: string | null; failSoft?: boolean } = {},
): Promise<StoredObject[]> {
  const found = entries.filter((entry): entry is StoreEntry & { file: StoredFile } => entry.file !== null);
  const chunkings = found.map((entry) => chunkingOf(entry.chunking));
  let error: FileBody["last_error"] = null;
  try {
    const files = found.map((entry, at) => ({
      file: entry.file,
      attributes: entry.attributes ?? undefined,
      chunking: chunkings[at],
    }));
    if (files.length > 0) await shelf.addFiles(store.key, files);
  } catch (caught) {
    if (!failSoft) throw caught;
    const invalid =
      caught instanceof DomainError && ["invalid", "unprocessable", "too_large"].includes(caught.kind);
    error = { code: invalid ? "invalid_file" : "server_error", message: (caught as Error).message };
  }
  const records = entries.map((entry): StoredObject => {
    const body: FileBody = {
      status: entry.file === null || error !== null ? "failed" : "completed",
      last_error:
        entry.file === null ? { code: "invalid_file", message: `No file "${entry.fileId}"` } : error,
      attributes: entry.attributes ?? {},
      chunking_strategy: entry.chunking,
      usage_bytes: entry.file === null ? 0 : Buffer.byteLength(entry.file.text),
      batch_id: batchId,
    };
    const id = entry.file?.id ?? entry.fileId!;
    const [tenantId, parentId] = [store.key.tenantId, store.id];
    return {
      tenantId,
      kind: "vector_store.file",
      parentId,
      id,
      createdAt: createdMs(),
      body: JSON.stringify(body),
    };
  });
  for (const record of records) await options.service.store.objects.put(record);
  await touchStore(options, store);
  return records;
}

/** A store file's record, or null for a document with none; a 404 when it is neither. */
async function fileRecordOf(options: OpenAiRagOptions, store: ResolvedStore, fileId: string) {
  const record = await options.service.store.objects.get(
    store.key.tenantId,
    "vector_store.file",
    store.id,
    fileId,
  );
  if (record !== undefined) return record;
  if (await options.service.store.hasDocument(store.key, fileId)) return null;
  throw notFound(`No file "${fileId}" in vector store "${store.id}"`);
}

/** The store's files: records, and documents with none; `batchId`: a batch's files only. */
async function storeFiles(options: OpenAiRagOptions, store: ResolvedStore, batchId: string | null) {
  const records = await recordsById(
    options.service.store.objects,
    store.key.tenantId,
    "vector_store.file",
    store.id,
  );
  const files = [...records.values()]
    .filter((record) => batchId === null || bodyOf<FileBody>(record).batch_id === batchId)
    .map((record) => ({ id: record.id, ms: record.createdAt, record: record as StoredObject | null }));
  if (batchId === null) {
    // A document with no record (added through /rag/*): as old as the index's last change.
    const ms = Date.parse(store.meta.updatedAt);
    for (const doc of await options.service.store.listDocuments(store.key))
      if (!records.has(doc.id)) files.push({ id: doc.id, ms, record: null });
  }
  files.sort(byCreation((file) => file.ms));
  return files.map((file) => vectorStoreFileObject(store, file.id, file.record));
}

/** A list of a store's (or a batch's) files, filtered by status and paged. */
async function listFiles(
  options: OpenAiRagOptions,
  store: ResolvedStore,
  batchId: string | null,
  query: Static<typeof ListQuery>,
) {
  const files = await storeFiles(options, store, batchId);
  return page(
    query.filter === undefined ? files : files.filter((file) => file.status === query.filter),
    query,
  );
}

/**
 * A document's text as the store holds it: the uploaded file's where it is still there, or put back
 * together from its chunks (their offsets; a gap between two chunks, whitespace the chunker skipped,
 * as one space per character).
 */
async function documentText(
  options: OpenAiRagOptions,
  shelf: FileShelf,
  store: ResolvedStore,
  fileId: string,
) {
  const stored = await shelf.readStored(store.key.tenantId, fileId).catch(() => null);
  if (stored !== null) return { text: stored.text, title: stored.title, stored };
  const byDocument = await options.service.store.getDocumentChunks(store.key, [fileId]);
  const keys = byDocument.get(fileId)?.chunks.map((chunk) => chunk.engineKey) ?? [];
  const chunks = (await options.service.store.getChunks(store.key, keys)).sort((a, b) => a.seq - b.seq);
  let text = "";
  for (const chunk of chunks) {
    if (chunk.start >= text.length) text += " ".repeat(chunk.start - text.length) + chunk.text;
    else text += chunk.text.slice(text.length - chunk.start);
  }
  return { text, title: byDocument.get(fileId)?.title ?? null, stored: null };
}

/** /v1/vector_stores/{id}/files: add, list, retrieve, update, remove. */
export function registerStoreFileRoutes(app: TypedApp, options: OpenAiRagOptions, shelf: FileShelf): void {
  const { service } = options;
  app.post(
    "/vector_stores/:vector_store_id/files",
    {
      schema: {
        tags: ["openai"],
        summary: "Add an uploaded file to a vector store (as a document with the file's id)",
        params: StoreParams,
        body: Type.Object(
          {
            file_id: FileId,
            attributes: Type.Optional(Type.Union([Attributes, Type.Null()])),
            chunking_strategy: Type.Optional(ChunkingStrategy),
          },
          strict,
        ),
      },
    },
    async (request) => {
      const store = await storeOf(options, request);
      const { file_id, attributes, chunking_strategy } = request.body;
      const file = await shelf.readStored(store.key.tenantId, file_id);
      const entry = { file, attributes: attributes ?? null, chunking: chunking_strategy ?? null };
      const [record] = await addToStore(options, shelf, store, [entry]);
      store.meta = await service.requireMeta(store.key);
      return vectorStoreFileObject(store, file.id, record!);
    },
  );

  app.get(
    "/vector_stores/:vector_store_id/files",
    {
      schema: {
        tags: ["openai"],
        summary: "The files of a vector store",
        params: StoreParams,
        querystring: ListQuery,
      },
    },
    async (request) => listFiles(options, await storeOf(options, request), null, request.query),
  );

  app.get(
    "/vector_stores/:vector_store_id/files/:file_id",
    { schema: { tags: ["openai"], summary: "One file of a vector store", params: StoreFileParams } },
    async (request) => {
      const store = await storeOf(options, request);
      const record = await fileRecordOf(options, store, request.params.file_id);
      return vectorStoreFileObject(store, request.params.file_id, record);
    },
  );

  app.delete(
    "/vector_stores/:vector_store_id/files/:file_id",
    { schema: { tags: ["openai"], summary: "Remove a file from a vector store", params: StoreFileParams } },
    async (request) => {
      const store = await storeOf(options, request);
      const fileId = request.params.file_id;
      const record = await fileRecordOf(options, store, fileId);
      if (record === null || bodyOf<FileBody>(record).status === "completed")
        await service.deleteDocument(store.key, fileId);
      await service.store.objects.remove(store.key.tenantId, "vector_store.file", store.id, fileId);
      return { id: fileId, object: "vector_store.file.deleted", deleted: true };
    },
  );
  registerStoreFileExtras(app, options, shelf);
}

/**
 * A store file's new attributes: its document written again with them over the file's own metadata
 * (where the upload is still there; else the text put back from the chunks), so filters see them.
 */
async function updateAttributes(
  options: OpenAiRagOptions,
  shelf: FileShelf,
  store: ResolvedStore,
  fileId: string,
  attributes: Metadata | null,
) {
  const record = await fileRecordOf(options, store, fileId);
  const before = record ? bodyOf<FileBody>(record) : null;
  const { text, title, stored } = await documentText(options, shelf, store, fileId);
  const listing = (await options.service.store.listDocuments(store.key)).find((doc) => doc.id === fileId);
  const file: StoredFile = stored ?? {
    id: fileId,
    filename: listing?.source ?? fileId,
    bytes: Buffer.byteLength(text),
    created_at: unixSeconds(),
    title,
    metadata: {},
    text,
  };
  const entry = { file, attributes: attributes ?? {}, chunking: before?.chunking_strategy ?? null };
  const [updated] = await addToStore(options, shelf, store, [entry], { batchId: before?.batch_id ?? null });
  // The file keeps its place in lists.
  const kept = { ...updated!, createdAt: record?.createdAt ?? updated!.createdAt };
  await options.service.store.objects.put(kept);
  return vectorStoreFileObject(store, fileId, kept);
}

/** POST /v1/vector_stores/{id}/files/{file_id} (attributes) and GET …/content. */
function registerStoreFileExtras(app: TypedApp, options: OpenAiRagOptions, shelf: FileShelf): void {
  app.post(
    "/vector_stores/:vector_store_id/files/:file_id",
    {
      schema: {
        tags: ["openai"],
        summary: "Update a vector store file's attributes (its chunks' metadata with them)",
        params: StoreFileParams,
        body: Type.Object({ attributes: Type.Union([Attributes, Type.Null()]) }, strict),
      },
    },
    async (request) =>
      updateAttributes(
        options,
        shelf,
        await storeOf(options, request),
        request.params.file_id,
        request.body.attributes,
      ),
  );

  app.get(
    "/vector_stores/:vector_store_id/files/:file_id/content",
    {
      schema: {
        tags: ["openai"],
        summary: "The parsed text of a vector store file",
        params: StoreFileParams,
      },
    },
    async (request) => {
      const store = await storeOf(options, request);
      await fileRecordOf(options, store, request.params.file_id);
      const { text } = await documentText(options, shelf, store, request.params.file_id);
      return {
        object: "vector_store.file_content.page",
        data: [{ type: "text", text }],
        has_more: false,
        next_page: null,
      };
    },
  );
}

const BatchFile = Type.Object(
  {
    file_id: FileId,
    attributes: Type.Optional(Type.Union([Attributes, Type.Null()])),
    chunking_strategy: Type.Optional(ChunkingStrategy),
  },
  strict,
);

/** A batch's object, its counts from its files' records. */
async function batchObject(options: OpenAiRagOptions, store: ResolvedStore, batch: StoredObject) {
  const files = await storeFiles(options, store, batch.id);
  return {
    id: batch.id,
    object: "vector_store.files_batch" as const,
    created_at: Math.floor(batch.createdAt / 1000),
    vector_store_id: store.id,
    status: bodyOf<BatchBody>(batch).status,
    file_counts: fileCounts(files.map((file) => file.status)),
  };
}

async function batchOf(options: OpenAiRagOptions, store: ResolvedStore, batchId: string) {
  const batch = await options.service.store.objects.get(
    store.key.tenantId,
    "vector_store.files_batch",
    store.id,
    batchId,
  );
  if (batch === undefined) throw notFound(`No file batch "${batchId}" in vector store "${store.id}"`);
  return batch;
}

/** /v1/vector_stores/{id}/file_batches: create (registerBatchCreate), retrieve, cancel, list files. */
export function registerFileBatchRoutes(app: TypedApp, options: OpenAiRagOptions, shelf: FileShelf): void {
  registerBatchCreate(app, options, shelf);
  app.get(
    "/vector_stores/:vector_store_id/file_batches/:batch_id",
    { schema: { tags: ["openai"], summary: "One file batch", params: BatchParams } },
    async (request) => {
      const store = await storeOf(options, request);
      return batchObject(options, store, await batchOf(options, store, request.params.batch_id));
    },
  );

  app.post(
    "/vector_stores/:vector_store_id/file_batches/:batch_id/cancel",
    {
      schema: {
        tags: ["openai"],
        summary: "Cancel a file batch (done when created: returned as it is)",
        params: BatchParams,
      },
    },
    async (request) => {
      const store = await storeOf(options, request);
      return batchObject(options, store, await batchOf(options, store, request.params.batch_id));
    },
  );

  app.get(
    "/vector_stores/:vector_store_id/file_batches/:batch_id/files",
    {
      schema: {
        tags: ["openai"],
        summary: "The files of a batch",
        params: BatchParams,
        querystring: ListQuery,
      },
    },
    async (request) => {
      const store = await storeOf(options, request);
      await batchOf(options, store, request.params.batch_id);
      return listFiles(options, store, request.params.batch_id, request.query);
    },
  );
}

/** POST /v1/vector_stores/{id}/file_batches: the files added in one write, the batch recorded. */
function registerBatchCreate(app: TypedApp, options: OpenAiRagOptions, shelf: FileShelf): void {
  app.post(
    "/vector_stores/:vector_store_id/file_batches",
    {
      schema: {
        tags: ["openai"],
        summary: "Add files to a vector store in one batch (file_ids, or files with their attributes)",
        params: StoreParams,
        body: Type.Object(
          {
            file_ids: Type.Optional(Type.Array(FileId, { minItems: 1, maxItems: 500 })),
            files: Type.Optional(Type.Array(BatchFile, { minItems: 1, maxItems: 500 })),
            attributes: Type.Optional(Type.Union([Attributes, Type.Null()])),
            chunking_strategy: Type.Optional(ChunkingStrategy),
          },
          strict,
        ),
      },
    },
    async (request) => {
      const store = await storeOf(options, request);
      const body = request.body;
      if ((body.file_ids === undefined) === (body.files === undefined))
        throw badRequest("Give file_ids or files (one of them)");
      const given = body.files ?? body.file_ids!.map((file_id) => ({ file_id }));
      const entries: StoreEntry[] = await Promise.all(
        given.map(async (item: Static<typeof BatchFile>) => ({
          fileId: item.file_id,
          file: await shelf.readStored(store.key.tenantId, item.file_id).catch(() => null),
          attributes: item.attributes ?? body.attributes ?? null,
          chunking: item.chunking_strategy ?? body.chunking_strategy ?? null,
        })),
      );
      const id = newId("vsfb_");
      await addToStore(options, shelf, store, entries, { batchId: id, failSoft: true });
      const batch = {
        tenantId: store.key.tenantId,
        kind: "vector_store.files_batch" as const,
        parentId: store.id,
      };
      const record = { ...batch, id, createdAt: createdMs(), body: JSON.stringify({ status: "completed" }) };
      await options.service.store.objects.put(record);
      return batchObject(options, store, record);
    },
  );
}
