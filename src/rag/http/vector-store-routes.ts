/**
 * OpenAI's vector stores and files APIs over our indices (vector-store-records.ts says how a vector
 * store maps to an index and its record): /v1/files (file-shelf.ts keeps the uploads), the stores
 * here, their files and file batches in vector-store-file-routes.ts, and search.
 */
import { unixSeconds } from "../../core/time.js";
import { randomUUID } from "node:crypto";
import { Type, type Static } from "typebox";
import { actingTenant, listingTenant } from "../../core/auth.js";
import { badRequest } from "../../core/errors.js";
import type { TypedApp } from "../../core/http.js";
import { checkNestingDepth } from "../../core/validation.js";
import { writeEmbedding, retrievalInput } from "../retrieval/options.js";
import type { IndexMeta } from "../store/types.js";
import { fileShelf, type FileShelf, type StoredFile } from "./file-shelf.js";
import { compileFilter, FILTER_TRUNCATED_HEADER } from "./openai-filters.js";
import type { OpenAiRagOptions } from "./route-deps.js";
import { readMultipart } from "./uploads.js";
import { addToStore, registerFileBatchRoutes, registerStoreFileRoutes } from "./vector-store-file-routes.js";
import {
  ChunkingStrategy,
  ExpiresAfter,
  FileId,
  ListQuery,
  StoreParams,
  StoreMetadata,
  bodyOf,
  byCreation,
  createdMs,
  storeCreatedMs,
  newId,
  page,
  searchAttributes,
  storeObject,
  storeOf,
  touchStore,
  type ResolvedStore,
  type StoreBody,
} from "./vector-store-records.js";

const strict = { additionalProperties: false } as const;
export function registerVectorStoreRoutes(app: TypedApp, options: OpenAiRagOptions): void {
  const shelf = fileShelf(options);
  registerFileRoutes(app, options, shelf);
  registerStoreRoutes(app, options, shelf);
  registerStoreUpdateRoutes(app, options);
  registerStoreFileRoutes(app, options, shelf);
  registerFileBatchRoutes(app, options, shelf);
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
      const tenant = actingTenant(request, undefined);
      const upload = await readMultipart(
        request,
        Type.Object({ purpose: Type.Optional(Type.String()) }),
        1,
        options.ingest,
        tenant,
      );
      const document = upload.documents[0]!;
      const stored: StoredFile = {
        id: `file-${randomUUID().replace(/-/g, "")}`,
        filename: document.source ?? document.title ?? "upload",
        bytes: Buffer.byteLength(document.text),
        created_at: unixSeconds(),
        text: document.text,
        title: document.title ?? null,
        metadata: document.metadata ?? {},
        ...(document.pageStarts && { pageStarts: document.pageStarts }),
        ...(document.sections && { sections: document.sections }),
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
      // Newest first as listed: page() wants them oldest first.
      const records = (await listRecords(tenant)).reverse();
      return page(records.map(fileObject), request.query);
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
        summary: "Delete an uploaded file (a vector store that took it keeps its text)",
        params: Type.Object({ file_id: FileId }),
      },
    },
    async (request) => {
      await remove(actingTenant(request, undefined), request.params.file_id);
      return { id: request.params.file_id, object: "file", deleted: true };
    },
  );
}

const CreateStoreBody = Type.Object(
  {
    name: Type.Optional(Type.String({ maxLength: 1024, description: "any text; the id is `vs_…`" })),
    file_ids: Type.Optional(Type.Array(FileId, { maxItems: 500 })),
    description: Type.Optional(Type.String({ maxLength: 4096 })),
    metadata: Type.Optional(StoreMetadata),
    expires_after: Type.Optional(ExpiresAfter),
    chunking_strategy: Type.Optional(ChunkingStrategy),
  },
  strict,
);

/** Creates the index of a new store, then its record, then adds `file_ids`. */
async function createStore(
  options: OpenAiRagOptions,
  shelf: FileShelf,
  tenantId: string,
  body: Static<typeof CreateStoreBody>,
): Promise<ResolvedStore> {
  const id = newId("vs_");
  const key = { tenantId, name: id };
  // Every file must be there before anything is created.
  const files = await Promise.all((body.file_ids ?? []).map((fileId) => shelf.readStored(tenantId, fileId)));
  const built = await options.service.build({
    key,
    documents: [],
    // BM25 (as OpenAI's file search ranks); chunking as /rag/build's defaults.
    scorer: "bm25",
    mode: "create",
    allowEmpty: true,
    // A new store gets vectors when an embedder is configured (hybrid search), as /rag/build.
    embedding: writeEmbedding(options.retrievers, undefined, null),
  });
  const now = unixSeconds();
  const storeBody: StoreBody = {
    name: body.name ?? "",
    metadata: body.metadata ?? null,
    expires_after: body.expires_after ?? null,
    description: body.description ?? null,
    last_active_at: now,
  };
  const record = {
    tenantId,
    kind: "vector_store" as const,
    parentId: "",
    id,
    createdAt: createdMs(),
    body: JSON.stringify(storeBody),
  };
  await options.service.store.objects.put(record);
  const store: ResolvedStore = { id, key, meta: built.meta, record };
  const chunking = body.chunking_strategy ?? null;
  if (files.length > 0)
    await addToStore(
      options,
      shelf,
      store,
      files.map((file) => ({ file, chunking })),
      // As OpenAI's: a file that cannot be added fails alone; the store is made.
      { failSoft: true },
    );
  return { ...store, meta: await options.service.requireMeta(key) };
}

/** /v1/vector_stores: create, list, retrieve, delete. */
function registerStoreRoutes(app: TypedApp, options: OpenAiRagOptions, shelf: FileShelf): void {
  const { service } = options;
  app.post(
    "/vector_stores",
    { schema: { tags: ["openai"], summary: "Create a vector store (an index)", body: CreateStoreBody } },
    async (request) => {
      const store = await createStore(options, shelf, actingTenant(request, undefined), request.body);
      return storeObject(options, store);
    },
  );

  app.get(
    "/vector_stores",
    {
      schema: { tags: ["openai"], summary: "The tenant's vector stores", querystring: ListQuery },
    },
    async (request) => {
      const tenant = listingTenant(request, undefined);
      const records = await service.store.objects.list(tenant, "vector_store", "");
      const byKey = new Map(records.map((record) => [`${record.tenantId}\0${record.id}`, record]));
      const stores = (await service.listIndices(tenant)).map((meta: IndexMeta) => ({
        id: meta.name,
        key: { tenantId: meta.tenantId, name: meta.name },
        meta,
        record: byKey.get(`${meta.tenantId}\0${meta.name}`) ?? null,
      }));
      stores.sort(byCreation(storeCreatedMs));
      return page(await Promise.all(stores.map((store) => storeObject(options, store))), request.query);
    },
  );

  app.get(
    "/vector_stores/:vector_store_id",
    { schema: { tags: ["openai"], summary: "One vector store", params: StoreParams } },
    async (request) => storeObject(options, await storeOf(options, request)),
  );

  app.delete(
    "/vector_stores/:vector_store_id",
    { schema: { tags: ["openai"], summary: "Delete a vector store (its index)", params: StoreParams } },
    async (request) => {
      const store = await storeOf(options, request);
      await service.deleteIndex(store.key);
      await service.store.objects.removeChildren(store.key.tenantId, store.id);
      await service.store.objects.remove(store.key.tenantId, "vector_store", "", store.id);
      return { id: store.id, object: "vector_store.deleted", deleted: true };
    },
  );
}

/** POST /v1/vector_stores/{id}: name, metadata, expires_after (an index with no record gets one). */
function registerStoreUpdateRoutes(app: TypedApp, options: OpenAiRagOptions): void {
  app.post(
    "/vector_stores/:vector_store_id",
    {
      schema: {
        tags: ["openai"],
        summary: "Modify a vector store: name, metadata, expires_after",
        params: StoreParams,
        body: Type.Object(
          {
            name: Type.Optional(Type.Union([Type.String({ maxLength: 1024 }), Type.Null()])),
            metadata: Type.Optional(StoreMetadata),
            expires_after: Type.Optional(Type.Union([ExpiresAfter, Type.Null()])),
          },
          strict,
        ),
      },
    },
    async (request) => {
      const store = await storeOf(options, request);
      const now = unixSeconds();
      const before: StoreBody = store.record
        ? bodyOf<StoreBody>(store.record)
        : { name: store.id, metadata: null, expires_after: null, description: null, last_active_at: now };
      const { name, metadata, expires_after } = request.body;
      const body: StoreBody = {
        ...before,
        ...(name !== undefined && { name: name ?? "" }),
        ...(metadata !== undefined && { metadata }),
        ...(expires_after !== undefined && { expires_after }),
        last_active_at: now,
      };
      const record = store.record ?? {
        tenantId: store.key.tenantId,
        kind: "vector_store" as const,
        parentId: "",
        id: store.id,
        createdAt: Date.parse(store.meta.createdAt),
        body: "",
      };
      store.record = { ...record, body: JSON.stringify(body) };
      await options.service.store.objects.put(store.record);
      return storeObject(options, store);
    },
  );
}

const SearchBody = Type.Object(
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
    rewrite_query: Type.Optional(Type.Boolean({ description: "accepted; the query is searched as sent" })),
  },
  strict,
);

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
        body: SearchBody,
      },
    },
    async (request, reply) => {
      const body = request.body;
      const store = await storeOf(options, request);
      checkNestingDepth(body.filters, 40, "filters");
      const predicate = body.filters ? compileFilter(body.filters) : undefined;
      const queries = typeof body.query === "string" ? [body.query] : body.query;
      const { results, filter } = await service.query({
        key: store.key,
        query: queries.join(" \n"),
        topK: body.max_num_results,
        minScore: body.ranking_options?.score_threshold ?? 0,
        predicate,
        // Hybrid where the store holds vectors, as /rag/query by default.
        ...retrievalInput(options.retrievers, {}),
      });
      await touchStore(options, store);
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
          attributes: searchAttributes(result.metadata),
          content: [{ type: "text", text: result.text }],
        })),
        has_more: false,
        next_page: null,
      };
    },
  );
}
