/**
 * Files uploaded with POST /v1/files: parsed at once (the same loaders and limits as /rag/build
 * uploads), they wait, their text and a small record apart, under DATA_DIR/openai-files/<tenant>/
 * until a vector store takes them; that folder is this replica's own (replicas sharing PostgreSQL do
 * not share uploads waiting there).
 */
import { mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { notFound } from "../../core/errors.js";
import type { Section } from "../ingest/sections.js";
import { writeEmbedding } from "../retrieval/options.js";
import type { IndexKey, Metadata } from "../store/types.js";
import type { OpenAiRagOptions } from "./route-deps.js";

/** A stored file to add to a vector store, with the attributes and chunking it is added with. */
export interface FileToAdd {
  file: StoredFile;
  attributes?: Metadata;
  chunking?: { chunkSize: number; overlap: number };
}

/** What a listing needs of an uploaded file: kept apart from its text, so listing reads no text. */
export interface FileRecord {
  id: string;
  filename: string;
  bytes: number;
  created_at: number;
  title: string | null;
  metadata: Metadata;
  /** Where each page starts (PDF) and the sections (Markdown, HTML, DOCX): chunks carry them. */
  pageStarts?: number[];
  sections?: Section[];
}

export interface StoredFile extends FileRecord {
  text: string;
}

const FILE_ID = /^file-[A-Za-z0-9_-]{1,64}$/;
const RECORD_SUFFIX = ".meta.json";

/**
 * Uploaded files waiting for a vector store, per tenant, and adding them to an index. Each file is two
 * files: `<id>.txt` (its text) and `<id>.meta.json` (its FileRecord), written in that order and
 * removed in the other, so a record always has its text; listing and retrieving read records only. A
 * `<id>.json` holding both (written before records were kept apart) is split the first time it is read.
 */
export function fileShelf(options: OpenAiRagOptions) {
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
  /**
   * Adds stored files to an index as documents (id = file id), replacing one with the same id, each
   * with its attributes (over the file's own metadata) and chunking, in one write.
   */
  const addFiles = async (key: IndexKey, files: ReadonlyArray<FileToAdd>) => {
    // Embedded as the store's index is: with vectors of its model, or without.
    const meta = await options.service.requireMeta(key);
    return options.service.upsertDocuments(
      key,
      files.map(({ file, attributes, chunking }) => ({
        id: file.id,
        text: file.text,
        title: file.title,
        source: file.filename,
        metadata: { ...file.metadata, ...attributes },
        ...(file.pageStarts && { pageStarts: file.pageStarts }),
        ...(file.sections && { sections: file.sections }),
        ...(chunking && { chunking }),
      })),
      writeEmbedding(options.retrievers, undefined, meta),
    );
  };

  return { store, readRecord, readStored, listRecords, remove, fileObject, addFiles };
}
export type FileShelf = ReturnType<typeof fileShelf>;
