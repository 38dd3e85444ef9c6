/**
 * OpenAI's vector stores and files APIs over our indices: a vector store is an index (its id is the
 * index name), a vector store file is a document (its id the file id). Files uploaded with POST
 * /v1/files are parsed at once (the same loaders and limits as /rag/build uploads) and wait, their text
 * and a small record apart (fileShelf), under DATA_DIR/openai-files/<tenant>/ until a vector store
 * takes them; that folder is this replica's own (replicas sharing PostgreSQL do not share uploads
 * waiting there).
 */
import { randomUUID } from "node:crypto";
import { mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { Type } from "typebox";
import { actingTenant, listingTenant } from "../../core/auth.js";
import { badRequest, notFound } from "../../core/errors.js";
import type { TypedApp } from "../../core/http.js";
import type { FastifyRequest } from "fastify";
import { checkNestingDepth } from "../../core/validation.js";
import { compileFilter, FILTER_TRUNCATED_HEADER } from "./openai-filters.js";
import type { OpenAiRagOptions } from "./route-deps.js";
import { IndexName } from "./schemas.js";
import type { IndexKey, IndexMeta, Metadata } from "../store/types.js";
import { readMultipart } from "./uploads.js";
import { retrievalInput, writeEmbedding } from "../retrieval/options.js";

const strict = { additionalProperties: false } as const;
const FileId = Type.String({ pattern: "^file-[A-Za-z0-9_-]{1,64}$" });
const StoreParams = Type.Object({ vector_store_id: IndexName });
const StoreFileParams = Type.Object({
  vector_store_id: IndexName,
  file_id: Type.String({ minLength: 1, maxLength: 512 }),
});
const Attributes = Type.Record(Type.String(), Type.Union([Type.String(), Type.Number(), Type.Boolean()]), {
  description: "metadata of the document, for search filters",
});
const ListQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
  after: Type.Optional(Type.String()),
  order: Type.Optional(Type.Union([Type.Literal("asc"), Type.Literal("desc")])),
  filter: Type.Optional(Type.String()),
  purpose: Type.Optional(Type.String()),
});

/** What a listing needs of an uploaded file: kept apart from its text, so listing reads no text. */
interface FileRecord {
  id: string;
  filename: string;
  bytes: number;
  created_at: number;
  title: string | null;
  metadata: Metadata;
}

interface StoredFile extends FileRecord {
  text: string;
}

const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);

function vectorStore(meta: IndexMeta) {
  return {
    id: meta.name,
    object: "vector_store" as const,
    created_at: seconds(meta.createdAt),
    name: meta.name,
    usage_bytes: meta.sizeBytes,
    file_counts: {
      in_progress: 0,
      completed: meta.documentsCount,
      failed: 0,
      cancelled: 0,
      total: meta.documentsCount,
    },
    status: "completed" as const,
    expires_after: null,
    expires_at: null,
    last_active_at: seconds(meta.updatedAt),
    metadata: {},
  };
}

function vectorStoreFile(storeId: string, fileId: string, createdAt: number) {
  return {
    id: fileId,
    object: "vector_store.file" as const,
    created_at: createdAt,
    usage_bytes: 0,
    vector_store_id: storeId,
    status: "completed" as const,
    last_error: null,
    attributes: {},
  };
}

function page<T extends { id: string }>(items: T[], limit: number, after: string | undefined) {
  const start = after === undefined ? 0 : items.findIndex((item) => item.id === after) + 1;
  const data = items.slice(start, start + limit);
  return {
    object: "list" as const,
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: start + limit < items.length,
  };
}

/** The index a vector store route names (`vector_store_id`), as the acting tenant's. */
function storeKey(request: FastifyRequest & { params: { vector_store_id: string } }): IndexKey {
  return { tenantId: actingTenant(request, undefined), name: request.params.vector_store_id };
}

const FILE_ID = /^file-[A-Za-z0-9_-]{1,64}$/;
const RECORD_SUFFIX = ".meta.json";

/**
 * Uploaded files waiting for a vector store, per tenant, and adding them to an index. Each file is two
 * files: `<id>.txt` (its text) and `<id>.meta.json` (its FileRecord), written in that order and
 * removed in the other, so a record always has its text; listing and retrieving read records only. A
 * `<id>.json` holding both (written before records were kept apart) is split the first time it is read.
 */
function fileShelf(options: OpenAiRagOptions) {
  const filesOf = (tenant: string) => path.join(options.filesDir, tenant);
  const at = (tenant: string, id: string, suffix: string) => path.join(filesOf(tenant), `${id}${suffix}`);
  const missing = (id: string) => notFound(`No file "${id}" (upload it with POST /v1/files)`);
  const store = async (tenant: string, file: StoredFile) => {
    const { text, ...record } = file;
    await mkdir(filesOf(tenant), { recursive: true });
    try {
      await writeFile(at(tenant, file.id, ".txt"), text);
      await writeFile(at(tenant, file.id, RECORD_SUFFIX), JSON.stringify(record));
    } catch (error) {
      // A write cut short (a full disk: 507) leaves no half file to list.
      await rm(at(tenant, file.id, RECORD_SUFFIX), { force: true });
      await rm(at(tenant, file.id, ".txt"), { force: true });
      throw error;
    }
  };
  /** A file stored whole as `<id>.json` before records were kept apart, split into text and record. */
  const splitLegacy = async (tenant: string, id: string): Promise<FileRecord | null> => {
    const whole = await readFile(at(tenant, id, ".json"), "utf8").catch(() => null);
    if (whole === null) return null;
    const file = JSON.parse(whole) as StoredFile;
    await store(tenant, file);
    await rm(at(tenant, id, ".json"), { force: true });
    const { text: _text, ...record } = file;
    return record;
  };
  const readRecord = async (tenant: string, id: string): Promise<FileRecord> => {
    if (!FILE_ID.test(id)) throw notFound(`No file "${id}"`);
    try {
      return JSON.parse(await readFile(at(tenant, id, RECORD_SUFFIX), "utf8")) as FileRecord;
    } catch {
      const legacy = await splitLegacy(tenant, id).catch(() => null);
      if (legacy === null) throw missing(id);
      return legacy;
    }
  };
  const readStored = async (tenant: string, id: string): Promise<StoredFile> => {
    const record = await readRecord(tenant, id);
    const text = await readFile(at(tenant, id, ".txt"), "utf8").catch(() => null);
    if (text === null) throw missing(id);
    return { ...record, text };
  };
  /** Every file's record, newest first; reads no text. */
  const listRecords = async (tenant: string): Promise<FileRecord[]> => {
    const names = await readdir(filesOf(tenant)).catch(() => [] as string[]);
    const ids = new Set<string>();
    for (const name of names) {
      const id = name.endsWith(RECORD_SUFFIX)
        ? name.slice(0, -RECORD_SUFFIX.length)
        : name.endsWith(".json")
          ? name.slice(0, -".json".length)
          : null;
      if (id !== null && FILE_ID.test(id)) ids.add(id);
    }
    const records = await Promise.all([...ids].map((id) => readRecord(tenant, id).catch(() => null)));
    const found = records.filter((record): record is FileRecord => record !== null);
    return found.sort((a, b) => b.created_at - a.created_at || a.id.localeCompare(b.id));
  };
  const remove = async (tenant: string, id: string) => {
    await readRecord(tenant, id);
    await rm(at(tenant, id, RECORD_SUFFIX), { force: true });
    await rm(at(tenant, id, ".txt"), { force: true });
  };
  const fileObject = (file: FileRecord) => ({
    id: file.id,
    object: "file" as const,
    bytes: file.bytes,
    created_at: file.created_at,
    filename: file.filename,
    purpose: "assistants",
    status: "processed",
  });
  /** Adds stored files to an index as documents (id = file id), replacing one with the same id. */
  const addFiles = async (
    key: { tenantId: string; name: string },
    files: StoredFile[],
    attributes?: Metadata,
  ) => {
    // Embedded as the store's index is: with vectors of its model, or without.
    const meta = await options.service.requireMeta(key);
    return options.service.upsertDocuments(
      key,
      files.map((file) => ({
        id: file.id,
        text: file.text,
        title: file.title,
        source: file.filename,
        metadata: { ...file.metadata, ...attributes },
      })),
      writeEmbedding(options.retrievers, undefined, meta),
    );
  };

  return { store, readRecord, readStored, listRecords, remove, fileObject, addFiles };
}
type FileShelf = ReturnType<typeof fileShelf>;

export function registerVectorStoreRoutes(app: TypedApp, options: OpenAiRagOptions): void {
  const shelf = fileShelf(options);
  registerFileRoutes(app, options, shelf);
  registerStoreRoutes(app, options, shelf);
  registerStoreFileRoutes(app, options, shelf);
  registerSearchRoute(app, options);
}

/** /v1/files: upload, list, retrieve, delete. */
function registerFileRoutes(app: TypedApp, options: OpenAiRagOptions, shelf: FileShelf): void {
  const { store, readRecord, listRecords, remove, fileObject } = shelf;
  app.post(
    "/files",
    {
      bodyLimit: options.largeBodyLimit,
      schema: { tags: ["openai"], summary: "Upload a file for vector stores" },
    },
    async (request) => {
      if (!request.isMultipart()) throw badRequest("Send the file as multipart/form-data (field file)");
      const upload = await readMultipart(
        request,
        Type.Object({ purpose: Type.Optional(Type.String()) }),
        1,
        options.ingest,
        actingTenant(request, undefined),
      );
      const document = upload.documents[0]!;
      const tenant = actingTenant(request, undefined);
      const stored: StoredFile = {
        id: `file-${randomUUID().replace(/-/g, "")}`,
        filename: document.source ?? document.title ?? "upload",
        bytes: Buffer.byteLength(document.text),
        created_at: Math.floor(Date.now() / 1000),
        text: document.text,
        title: document.title ?? null,
        metadata: document.metadata ?? {},
      };
      await store(tenant, stored);
      return fileObject(stored);
    },
  );

  app.get(
    "/files",
    { schema: { tags: ["openai"], summary: "Uploaded files", querystring: ListQuery } },
    async (request) => {
      const tenant = listingTenant(request, undefined) ?? actingTenant(request, undefined);
      const records = await listRecords(tenant);
      return page(records.map(fileObject), request.query.limit, request.query.after);
    },
  );

  app.get(
    "/files/:file_id",
    { schema: { tags: ["openai"], summary: "One uploaded file", params: Type.Object({ file_id: FileId }) } },
    async (request) => fileObject(await readRecord(actingTenant(request, undefined), request.params.file_id)),
  );

  app.delete(
    "/files/:file_id",
    {
      schema: {
        tags: ["openai"],
        summary: "Delete an uploaded file",
        params: Type.Object({ file_id: FileId }),
      },
    },
    async (request) => {
      await remove(actingTenant(request, undefined), request.params.file_id);
      return { id: request.params.file_id, object: "file", deleted: true };
    },
  );
}

/** /v1/vector_stores: create, list, retrieve, delete. */
function registerStoreRoutes(
  app: TypedApp,
  { service, retrievers }: OpenAiRagOptions,
  shelf: FileShelf,
): void {
  const { readStored, addFiles } = shelf;
  app.post(
    "/vector_stores",
    {
      schema: {
        tags: ["openai"],
        summary: "Create a vector store: an index named `name`",
        body: Type.Object(
          {
            name: { ...IndexName, description: "the index name, and the vector store's id" },
            file_ids: Type.Optional(Type.Array(FileId, { maxItems: 500 })),
            description: Type.Optional(Type.String()),
            metadata: Type.Optional(Type.Union([Type.Record(Type.String(), Type.String()), Type.Null()])),
            expires_after: Type.Optional(Type.Unknown()),
            chunking_strategy: Type.Optional(Type.Unknown()),
          },
          strict,
        ),
      },
    },
    async (request) => {
      const key = { tenantId: actingTenant(request, undefined), name: request.body.name };
      const files = await Promise.all(
        (request.body.file_ids ?? []).map((id) => readStored(key.tenantId, id)),
      );
      const built = await service.build({
        key,
        documents: [],
        // BM25 (as OpenAI's file search ranks); chunking as /rag/build's defaults.
        scorer: "bm25",
        mode: "create",
        allowEmpty: true,
        // A new store gets vectors when an embedder is configured (hybrid search), as /rag/build.
        embedding: writeEmbedding(retrievers, undefined, null),
      });
      const meta = files.length > 0 ? (await addFiles(key, files)).meta : built.meta;
      return vectorStore(meta);
    },
  );

  app.get(
    "/vector_stores",
    {
      schema: { tags: ["openai"], summary: "The tenant's indices, as vector stores", querystring: ListQuery },
    },
    async (request) => {
      const indices = await service.listIndices(listingTenant(request, undefined));
      return page(indices.map(vectorStore), request.query.limit, request.query.after);
    },
  );

  app.get(
    "/vector_stores/:vector_store_id",
    { schema: { tags: ["openai"], summary: "One vector store (index)", params: StoreParams } },
    async (request) => vectorStore(await service.requireMeta(storeKey(request))),
  );

  app.delete(
    "/vector_stores/:vector_store_id",
    { schema: { tags: ["openai"], summary: "Delete a vector store (the index)", params: StoreParams } },
    async (request) => {
      await service.deleteIndex(storeKey(request));
      return { id: request.params.vector_store_id, object: "vector_store.deleted", deleted: true };
    },
  );
}

/** /v1/vector_stores/{id}/files: add, list, retrieve, remove. */
function registerStoreFileRoutes(app: TypedApp, { service }: OpenAiRagOptions, shelf: FileShelf): void {
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
            chunking_strategy: Type.Optional(Type.Unknown()),
          },
          strict,
        ),
      },
    },
    async (request) => {
      const key = storeKey(request);
      await service.requireMeta(key);
      const file = await shelf.readStored(key.tenantId, request.body.file_id);
      await shelf.addFiles(key, [file], request.body.attributes ?? undefined);
      return vectorStoreFile(key.name, file.id, Math.floor(Date.now() / 1000));
    },
  );

  app.get(
    "/vector_stores/:vector_store_id/files",
    {
      schema: {
        tags: ["openai"],
        summary: "The documents of a vector store",
        params: StoreParams,
        querystring: ListQuery,
      },
    },
    async (request) => {
      const key = storeKey(request);
      const meta = await service.requireMeta(key);
      const documents = await service.listDocuments(key);
      const files = documents.map((doc) => vectorStoreFile(key.name, doc.id, seconds(meta.updatedAt)));
      return page(files, request.query.limit, request.query.after);
    },
  );

  app.get(
    "/vector_stores/:vector_store_id/files/:file_id",
    { schema: { tags: ["openai"], summary: "One document of a vector store", params: StoreFileParams } },
    async (request) => {
      const key = storeKey(request);
      const meta = await service.requireMeta(key);
      if (!(await service.store.hasDocument(key, request.params.file_id)))
        throw notFound(`No file "${request.params.file_id}" in vector store "${key.name}"`);
      return vectorStoreFile(key.name, request.params.file_id, seconds(meta.updatedAt));
    },
  );

  app.delete(
    "/vector_stores/:vector_store_id/files/:file_id",
    {
      schema: { tags: ["openai"], summary: "Remove a document from a vector store", params: StoreFileParams },
    },
    async (request) => {
      const key = storeKey(request);
      await service.deleteDocument(key, request.params.file_id);
      return { id: request.params.file_id, object: "vector_store.file.deleted", deleted: true };
    },
  );
}

/** POST /v1/vector_stores/{id}/search. */
function registerSearchRoute(app: TypedApp, options: OpenAiRagOptions): void {
  const { service } = options;
  app.post(
    "/vector_stores/:vector_store_id/search",
    {
      schema: {
        tags: ["openai"],
        summary: "Search a vector store (BM25/TF-IDF over the index), with OpenAI's metadata filters",
        params: StoreParams,
        body: Type.Object(
          {
            query: Type.Union([
              Type.String({ minLength: 1, maxLength: 4096 }),
              Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), { minItems: 1, maxItems: 16 }),
            ]),
            filters: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
            max_num_results: Type.Integer({ minimum: 1, maximum: 50, default: 10 }),
            ranking_options: Type.Optional(
              Type.Object(
                {
                  ranker: Type.Optional(Type.String()),
                  score_threshold: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
                },
                strict,
              ),
            ),
            rewrite_query: Type.Optional(
              Type.Boolean({ description: "accepted; the query is searched as sent" }),
            ),
          },
          strict,
        ),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const key = storeKey(request);
      checkNestingDepth(body.filters, 40, "filters");
      const predicate = body.filters ? compileFilter(body.filters) : undefined;
      const queries = typeof body.query === "string" ? [body.query] : body.query;
      const { results, filter } = await service.query({
        key,
        query: queries.join(" \n"),
        topK: body.max_num_results,
        minScore: body.ranking_options?.score_threshold ?? 0,
        predicate,
        // Hybrid where the store holds vectors, as /rag/query by default.
        ...retrievalInput(options.retrievers, {}),
      });
      // OpenAI's page has no field for it: a header says the filter was tested on the best N only.
      if (filter?.truncated)
        void reply.header(FILTER_TRUNCATED_HEADER, `examined=${filter.examined}; limit=${filter.limit}`);
      return {
        object: "vector_store.search_results.page",
        search_query: queries,
        data: results.map((result) => ({
          file_id: result.document_id,
          filename: result.file,
          score: result.score,
          attributes: result.metadata,
          content: [{ type: "text", text: result.text }],
        })),
        has_more: false,
        next_page: null,
      };
    },
  );
}
