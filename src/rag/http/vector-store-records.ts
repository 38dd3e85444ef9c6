/**
 * OpenAI's vector store objects over our indices and the records kept for them (store/openai-objects.ts):
 * a vector store has an id `vs_…` apart from its free-form name, and the index behind it is named by
 * that id. An index with no record (built with /rag/build, or a store made before records were kept)
 * is served as a vector store whose id and name are the index name, its documents as completed files.
 */
import { unixSeconds } from "../../core/time.js";
import { randomUUID } from "node:crypto";
import { Type } from "typebox";
import { badRequest, notFound } from "../../core/errors.js";
import type { ObjectKind, ObjectRecords, StoredObject } from "../store/openai-objects.js";
import type { IndexKey, IndexMeta, Metadata } from "../store/types.js";
import type { FastifyRequest } from "fastify";
import { actingTenant } from "../../core/auth.js";
import type { RagService } from "../service.js";
import type { OpenAiRagOptions } from "./route-deps.js";
import { IndexName } from "./schemas.js";

const strict = { additionalProperties: false } as const;

export const FileStatus = Type.Union([
  Type.Literal("in_progress"),
  Type.Literal("completed"),
  Type.Literal("failed"),
  Type.Literal("cancelled"),
]);
export type FileStatus = "in_progress" | "completed" | "failed" | "cancelled";

export const Attributes = Type.Record(
  Type.String({ maxLength: 64 }),
  Type.Union([Type.String({ maxLength: 512 }), Type.Number(), Type.Boolean()]),
  { maxProperties: 16, description: "the file's attributes, for search filters" },
);
export const StoreMetadata = Type.Union([
  Type.Record(Type.String({ maxLength: 64 }), Type.String({ maxLength: 512 }), { maxProperties: 16 }),
  Type.Null(),
]);
export const ExpiresAfter = Type.Object(
  { anchor: Type.Literal("last_active_at"), days: Type.Integer({ minimum: 1, maximum: 365 }) },
  strict,
);
export const ChunkingStrategy = Type.Union([
  Type.Object({ type: Type.Literal("auto") }, strict),
  Type.Object(
    {
      type: Type.Literal("static"),
      static: Type.Object(
        {
          max_chunk_size_tokens: Type.Integer({ minimum: 100, maximum: 4096 }),
          chunk_overlap_tokens: Type.Integer({ minimum: 0 }),
        },
        strict,
      ),
    },
    strict,
  ),
]);
export type ChunkingStrategyParam =
  | { type: "auto" }
  | { type: "static"; static: { max_chunk_size_tokens: number; chunk_overlap_tokens: number } };

/** Characters a token is taken to be: OpenAI's chunk sizes are in tokens, our chunker's in characters. */
export const CHARS_PER_TOKEN = 4;

/** A static strategy as our chunking (characters); auto: the index's own (undefined). */
export function chunkingOf(strategy: ChunkingStrategyParam | undefined | null) {
  if (!strategy || strategy.type === "auto") return undefined;
  const { max_chunk_size_tokens: size, chunk_overlap_tokens: overlap } = strategy.static;
  if (overlap > size / 2)
    throw badRequest(
      `chunk_overlap_tokens (${overlap}) must not exceed half of max_chunk_size_tokens (${size})`,
    );
  return { chunkSize: size * CHARS_PER_TOKEN, overlap: overlap * CHARS_PER_TOKEN };
}

/** The strategy a file was chunked with, as OpenAI reports it (auto: the index's chunking). */
function strategyOf(given: ChunkingStrategyParam | null, meta: IndexMeta | null) {
  if (given?.type === "static") return given;
  const chunkSize = meta?.chunkSize ?? 800 * CHARS_PER_TOKEN;
  const overlap = meta?.overlap ?? 0;
  return {
    type: "static" as const,
    static: {
      max_chunk_size_tokens: Math.round(chunkSize / CHARS_PER_TOKEN),
      chunk_overlap_tokens: Math.round(overlap / CHARS_PER_TOKEN),
    },
  };
}

export interface StoreBody {
  name: string;
  metadata: Record<string, string> | null;
  expires_after: { anchor: "last_active_at"; days: number } | null;
  description: string | null;
  last_active_at: number;
}
export interface FileBody {
  status: FileStatus;
  last_error: { code: "server_error" | "unsupported_file" | "invalid_file"; message: string } | null;
  attributes: Metadata | null;
  chunking_strategy: ChunkingStrategyParam | null;
  usage_bytes: number;
  batch_id: string | null;
}
export interface BatchBody {
  status: FileStatus;
}

let lastCreated = 0;
/**
 * A record's creation time in milliseconds, later than any this process gave before: lists are ordered
 * by it, so objects made one after another list in that order even within one millisecond.
 */
export const createdMs = () => (lastCreated = Math.max(Date.now(), lastCreated + 1));
/** When a store was created (ms): its record's time, or its index's. */
export const storeCreatedMs = (store: ResolvedStore) =>
  store.record?.createdAt ?? Date.parse(store.meta.createdAt);
/** Orders by creation time (ms), then id. */
export const byCreation =
  <T extends { id: string }>(ms: (item: T) => number) =>
  (a: T, b: T) =>
    ms(a) - ms(b) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
export const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);
export const newId = (prefix: string) => `${prefix}${randomUUID().replace(/-/g, "")}`;

/** A record's body, typed by its kind. */
export const bodyOf = <T>(record: StoredObject) => JSON.parse(record.body) as T;

/** A vector store as the routes see it: its index and its record (null: an index served as one). */
export interface ResolvedStore {
  id: string;
  key: IndexKey;
  meta: IndexMeta;
  record: StoredObject | null;
}

/** The vector store `id` of `tenantId`: its record's, or an index of that name with no record. */
export async function resolveStore(
  objects: ObjectRecords,
  service: RagService,
  tenantId: string,
  id: string,
): Promise<ResolvedStore> {
  const record = (await objects.get(tenantId, "vector_store", "", id)) ?? null;
  const key = { tenantId, name: id };
  const meta = await service.store.getMeta(key);
  if (meta === undefined) throw notFound(`No vector store "${id}"`);
  return { id, key, meta, record };
}

/** Counts of a store's or batch's files by status. */
export function fileCounts(statuses: readonly FileStatus[]) {
  const counts = { in_progress: 0, completed: 0, failed: 0, cancelled: 0, total: statuses.length };
  for (const status of statuses) counts[status]++;
  return counts;
}

/**
 * The vector_store object. `files`: the statuses of its file records; documents with none (added
 * through /rag/*) count as completed files.
 */
export function vectorStoreObject(store: ResolvedStore, files: readonly FileStatus[]) {
  const body = store.record ? bodyOf<StoreBody>(store.record) : null;
  const lastActive = body?.last_active_at ?? seconds(store.meta.updatedAt);
  const expiresAt = body?.expires_after ? lastActive + body.expires_after.days * 86_400 : null;
  const recorded = files.filter((status) => status === "completed").length;
  const unrecorded = Math.max(0, store.meta.documentsCount - recorded);
  const counts = fileCounts([...files, ...Array.from({ length: unrecorded }, () => "completed" as const)]);
  return {
    id: store.id,
    object: "vector_store" as const,
    created_at: Math.floor(storeCreatedMs(store) / 1000),
    name: body ? body.name : store.id,
    usage_bytes: store.meta.sizeBytes,
    file_counts: counts,
    status:
      expiresAt !== null && expiresAt < unixSeconds()
        ? ("expired" as const)
        : counts.in_progress > 0
          ? ("in_progress" as const)
          : ("completed" as const),
    expires_after: body?.expires_after ?? null,
    expires_at: expiresAt,
    last_active_at: lastActive,
    metadata: body?.metadata ?? {},
  };
}

/** The vector_store.file object of a record, or of a document with none (null). */
export function vectorStoreFileObject(store: ResolvedStore, fileId: string, record: StoredObject | null) {
  const body = record ? bodyOf<FileBody>(record) : null;
  return {
    id: fileId,
    object: "vector_store.file" as const,
    created_at: record ? Math.floor(record.createdAt / 1000) : seconds(store.meta.updatedAt),
    usage_bytes: body?.usage_bytes ?? 0,
    vector_store_id: store.id,
    status: body?.status ?? ("completed" as const),
    last_error: body?.last_error ?? null,
    attributes: body ? body.attributes : {},
    chunking_strategy: strategyOf(body?.chunking_strategy ?? null, store.meta),
  };
}

/** The ids of a kind's records under a parent, as a fresh map by id. */
export async function recordsById(
  objects: ObjectRecords,
  tenantId: string,
  kind: ObjectKind,
  parentId: string,
): Promise<Map<string, StoredObject>> {
  return new Map((await objects.list(tenantId, kind, parentId)).map((record) => [record.id, record]));
}

export const ListQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
  after: Type.Optional(Type.String({ maxLength: 512 })),
  before: Type.Optional(Type.String({ maxLength: 512 })),
  order: Type.Optional(Type.Union([Type.Literal("asc"), Type.Literal("desc")])),
  filter: Type.Optional(FileStatus),
  purpose: Type.Optional(Type.String()),
});

/**
 * One page of a list, as OpenAI's cursor pages: `items` oldest first; `order` desc (the default) is
 * newest first; `after` / `before` are ids of the list (an id it does not hold gives an empty page).
 */
export function page<T extends { id: string }>(
  items: readonly T[],
  query: { limit: number; after?: string; before?: string; order?: "asc" | "desc" },
) {
  const ordered = query.order === "asc" ? items : [...items].reverse();
  const at = (id: string) => ordered.findIndex((item) => item.id === id);
  const start = query.after === undefined ? 0 : at(query.after) === -1 ? ordered.length : at(query.after) + 1;
  const end = query.before === undefined ? ordered.length : Math.max(at(query.before), 0);
  const window = ordered.slice(start, Math.max(start, end));
  // Before a cursor (and not after one): the items nearest it.
  const fromEnd = query.before !== undefined && query.after === undefined;
  const data = fromEnd
    ? window.slice(Math.max(0, window.length - query.limit))
    : window.slice(0, query.limit);
  return {
    object: "list" as const,
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: window.length > query.limit,
  };
}

/** Chunk metadata keys that say where a chunk is (service/documents.ts chunkMetadata). */
const POSITION_KEYS: Record<string, string> = {
  start: "lectern_start",
  end: "lectern_end",
  page: "lectern_page",
  pages: "lectern_pages",
  headings: "lectern_headings",
};

/**
 * A chunk's metadata as OpenAI's attributes (strings, numbers and booleans only): the file's attributes
 * as given, and where the chunk is under `lectern_` keys: lectern_start and lectern_end (offsets in the
 * file's text), lectern_page (its first page), lectern_pages (its pages, "3,4") and lectern_headings
 * (its heading path, " > " between). Any other value that is not a scalar is given as JSON.
 */
export function searchAttributes(metadata: Metadata): Record<string, string | number | boolean> {
  const attributes: Record<string, string | number | boolean> = {};
  for (const [key, value] of Object.entries(metadata)) {
    const name = POSITION_KEYS[key] ?? key;
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean")
      attributes[name] = value;
    else if (Array.isArray(value) && (key === "pages" || key === "headings"))
      attributes[name] = value.join(key === "pages" ? "," : " > ");
    else if (value !== null && value !== undefined) attributes[name] = JSON.stringify(value);
  }
  return attributes;
}

export const FileId = Type.String({ pattern: "^file-[A-Za-z0-9_-]{1,64}$" });
export const StoreParams = Type.Object({ vector_store_id: IndexName });
/** Activity closer together than this does not rewrite a store's last_active_at. */
const TOUCH_SECONDS = 60;

/** The vector store a route names (`vector_store_id`), as the acting tenant's. */
export function storeOf(
  options: OpenAiRagOptions,
  request: FastifyRequest & { params: { vector_store_id: string } },
): Promise<ResolvedStore> {
  const tenant = actingTenant(request, undefined);
  return resolveStore(options.service.store.objects, options.service, tenant, request.params.vector_store_id);
}

/** The vector_store object of a store, its file counts from its file records. */
export async function storeObject(options: OpenAiRagOptions, store: ResolvedStore) {
  const files = await options.service.store.objects.list(store.key.tenantId, "vector_store.file", store.id);
  return vectorStoreObject(
    store,
    files.map((file) => bodyOf<FileBody>(file).status),
  );
}

/** Records activity on a store (its expiry counts from it); at most once a TOUCH_SECONDS. */
export async function touchStore(options: OpenAiRagOptions, store: ResolvedStore): Promise<void> {
  if (store.record === null) return;
  const body = bodyOf<StoreBody>(store.record);
  const now = unixSeconds();
  if (now - body.last_active_at < TOUCH_SECONDS) return;
  const record = { ...store.record, body: JSON.stringify({ ...body, last_active_at: now }) };
  await options.service.store.objects.put(record);
  store.record = record;
}
