/**
 * Folder sync (issue #14): makes an index's documents from a folder match the folder's files, writing
 * only what changed since the last sync. No HTTP here: the route and the CLI call `syncFolder`.
 *
 * - A file's document id and source are its path relative to the root (RAG_FILES_DIR), so a sync and
 *   a `files` build of the same file address the same document.
 * - A file is unchanged when the sha256 of its bytes equals the hash stored with its document; only
 *   new and changed files are parsed. Documents whose source lies under the folder and whose file is
 *   gone are deleted. All of it is one atomic write, or no write at all when nothing changed.
 * - A file that cannot be read or parsed is reported by name and left as it was in the index (its
 *   previously indexed version stays, a new one is not added); the other files still sync.
 * - A sync into a missing index creates it with the given settings, as a build would.
 */
import { createHash } from "node:crypto";
import type { Dirent, Stats } from "node:fs";
import { readdir, realpath, stat } from "node:fs/promises";
import path from "node:path";
import { badRequest, DomainError, tooLarge } from "../../core/errors.js";
import { FolderWalk, stopIfGone, within, type WalkLimits } from "../ingest/files.js";
import { DEFAULT_INGEST_LIMITS, type Ingest, type IngestLimits } from "../ingest/limits.js";
import { isIndexable } from "../ingest/loaders.js";
import { parseFileBytes } from "../ingest/parse-pool.js";
import { readRegularFileInside } from "../ingest/safe-open.js";
import type { BuildOutput, DocumentInput, RagService, WriteEmbedding } from "../service.js";
import type { IndexKey, IndexMeta, IndexSettings } from "../store/types.js";
import { resolveIndexSettings } from "./settings.js";

export interface SyncInput {
  key: IndexKey;
  /** Real path of the root: document ids are file paths relative to it; symlinks may not leave it. */
  root: string;
  /** Real path of the folder to sync, inside `root` (or `root` itself). */
  folder: string;
  /**
   * Settings of the index when the sync creates it (defaults as a build's); an existing index keeps
   * its own. Checked either way, so a bad value is refused whether or not it would be used.
   */
  settings?: Partial<IndexSettings>;
  /** Documents and characters one sync may write (MAX_BUILD_DOCUMENTS, MAX_BUILD_CHARS); 413 beyond. */
  limits?: { maxDocuments: number; maxChars: number };
  /** The app's file-parsing limits and gate (MAX_EXTRACTED_BYTES, MAX_CONCURRENT_PARSES, …). */
  ingest?: Ingest;
  /**
   * The embeddings of a write, given the index as it stands (null: the sync creates it); left out, the
   * sync stores none (and an index with vectors refuses its changes, 409).
   */
  embeddingFor?: (existing: IndexMeta | null) => WriteEmbedding | undefined;
  /** Called after each file is looked at (read, and parsed when new or changed): a live count. */
  onFile?: (done: number, total: number, file: string) => void;
  /** Bounds of the folder walk and the hard-link policy (RAG_FILES_*); the defaults without. */
  walk?: WalkLimits;
  /** The client's request: listing and reading stop when it goes away (nothing is written then). */
  signal?: AbortSignal;
}

export interface SyncFailure {
  /** Path relative to the root. */
  file: string;
  message: string;
}

export interface SyncResult {
  index_name: string;
  tenant_id: string;
  /** True when this sync created the index. */
  created: boolean;
  added: number;
  updated: number;
  deleted: number;
  unchanged: number;
  failed: SyncFailure[];
  /** The index's totals after the sync. */
  documents_count: number;
  chunks_count: number;
  /** The index's version after the sync (unchanged when nothing was written). */
  version: number;
  elapsed_ms: number;
}

interface FolderFile {
  /** Path relative to the root: the document id and source. */
  id: string;
  /** Where to read it (the target of a symlink). */
  real: string;
}

interface FolderListing {
  files: FolderFile[];
  /** Subfolders that could not be read (relative paths): documents below them are left alone. */
  unreadable: SyncFailure[];
}

/** Whether `source` (relative to the root) lies under `folder` (relative to the root; "" is the root). */
function isUnder(source: string, folder: string): boolean {
  if (folder === "")
    return !path.isAbsolute(source) && source !== ".." && !source.startsWith(`..${path.sep}`);
  return source === folder || source.startsWith(folder + path.sep);
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * The supported files below `folder`, in path order. Hidden entries are skipped, and so are symlinks
 * whose target lies outside the root; a symlink inside is followed, under its own (link) path. A
 * folder reached a second time (a link loop, or two links to one folder) is not entered again, so it
 * is listed under the first path met; the walk is bounded by `walk` (FolderWalk).
 */
async function listFolder(root: string, folder: string, walk: FolderWalk): Promise<FolderListing> {
  const listing: FolderListing = { files: [], unreadable: [] };
  const visit = async (lexical: string, real: string): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await readdir(real, { withFileTypes: true });
    } catch (error) {
      listing.unreadable.push({ file: path.relative(root, lexical), message: messageOf(error) });
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      walk.tick();
      if (entry.name.startsWith(".")) continue;
      const entryPath = path.join(lexical, entry.name);
      let target = path.join(real, entry.name);
      let isFile = entry.isFile();
      let folderInfo: Stats | null = null;
      if (entry.isSymbolicLink()) {
        const resolved = await realpath(target).catch(() => null);
        if (resolved === null || !within(resolved, root)) continue;
        const info = await stat(resolved).catch(() => null);
        if (info === null) continue;
        target = resolved;
        isFile = info.isFile();
        if (info.isDirectory()) folderInfo = info;
      } else if (entry.isDirectory()) {
        folderInfo = await stat(target).catch(() => null);
      }
      if (folderInfo !== null) {
        if (walk.enter(folderInfo)) await visit(entryPath, target);
      } else if (isFile && isIndexable(entry.name)) {
        listing.files.push({ id: path.relative(root, entryPath), real: target });
      }
    }
  };
  const top = await stat(folder).catch(() => null);
  if (top !== null) walk.enter(top);
  await visit(folder, folder);
  return listing;
}

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** One file as a document: id and source its relative path, as `files` builds store it. */
async function documentOf(
  id: string,
  bytes: Uint8Array,
  contentHash: string,
  limits: IngestLimits | undefined,
): Promise<DocumentInput> {
  const loaded = await parseFileBytes(id, bytes, limits);
  return {
    id,
    text: loaded.text,
    title: loaded.title,
    metadata: { ...loaded.metadata, file: id },
    source: id,
    contentHash,
    pageStarts: loaded.pageStarts,
    sections: loaded.sections,
  };
}

function checkLimits(documents: DocumentInput[], limits: SyncInput["limits"]): void {
  if (!limits) return;
  if (documents.length > limits.maxDocuments) {
    throw tooLarge(
      `${documents.length} new or changed files in one sync; the limit is ${limits.maxDocuments} (MAX_BUILD_DOCUMENTS)`,
    );
  }
  const chars = documents.reduce((sum, document) => sum + document.text.length, 0);
  if (chars > limits.maxChars) {
    throw tooLarge(
      `${chars} characters of new or changed text in one sync; the limit is ${limits.maxChars} (MAX_BUILD_CHARS)`,
    );
  }
}

/** The index's documents, or null when the index does not exist. */
async function indexedDocuments(service: RagService, key: IndexKey) {
  try {
    return await service.listDocuments(key);
  } catch (error) {
    if (error instanceof DomainError && error.kind === "not_found") return null;
    throw error;
  }
}

export async function syncFolder(service: RagService, input: SyncInput): Promise<SyncResult> {
  const started = performance.now();
  const { key, root, folder } = input;
  const settings = resolveIndexSettings(input.settings ?? {});
  const folderId = path.relative(root, folder);
  const listing = await listFolder(root, folder, new FolderWalk(input.walk, input.signal));
  const indexed = await indexedDocuments(service, key);
  const indexedById = new Map((indexed ?? []).map((document) => [document.id, document]));

  const failed: SyncFailure[] = [...listing.unreadable];
  const upsert: DocumentInput[] = [];
  let added = 0;
  let updated = 0;
  let unchanged = 0;
  const present = new Set<string>();
  const maxBytes = (input.ingest?.limits ?? DEFAULT_INGEST_LIMITS).maxFileBytes;
  const allowHardLinks = input.walk?.allowHardLinks ?? false;
  const parseAll = async () => {
    for (const [index, file] of listing.files.entries()) {
      stopIfGone(input.signal);
      present.add(file.id);
      if (index > 0) input.onFile?.(index, listing.files.length, listing.files[index - 1]!.id);
      try {
        // One descriptor, checked (regular, one link, inside the root, size): the listing may be stale.
        const bytes = await readRegularFileInside(root, file.real, {
          name: file.id,
          maxBytes,
          allowHardLinks,
        });
        const contentHash = sha256(bytes);
        const previous = indexedById.get(file.id);
        if (previous && previous.contentHash === contentHash) {
          unchanged++;
          continue;
        }
        upsert.push(await documentOf(file.id, bytes, contentHash, input.ingest?.limits));
        if (previous) updated++;
        else added++;
      } catch (error) {
        // The loaders' messages start with the file's name, which `file` already gives.
        failed.push({ file: file.id, message: messageOf(error).replace(`File "${file.id}": `, "") });
      }
    }
  };
  // Parsing is the costly, memory-hungry part: as many syncs parse at once as uploads may.
  if (input.ingest) await input.ingest.gate.run(parseAll, input.signal, key.tenantId);
  else await parseAll();
  stopIfGone(input.signal);
  const last = listing.files.at(-1);
  if (last) input.onFile?.(listing.files.length, listing.files.length, last.id);

  // Gone: indexed from this folder, no longer there, and not below a subfolder that could not be read.
  const deleteIds = (indexed ?? [])
    .filter(
      (document) =>
        document.source !== null &&
        isUnder(document.source, folderId) &&
        !present.has(document.id) &&
        !listing.unreadable.some((unreadable) => isUnder(document.source!, unreadable.file)),
    )
    .map((document) => document.id);

  checkLimits(upsert, input.limits);
  let meta: IndexMeta;
  let created = false;
  if (indexed === null) {
    if (upsert.length === 0) {
      const why =
        failed.length > 0 ? `; failed: ${failed.map((f) => `${f.file}: ${f.message}`).join("; ")}` : "";
      throw badRequest(
        `Folder "${folderId || "."}" holds no readable supported files to create index "${key.name}" from${why}`,
        failed,
      );
    }
    const built: BuildOutput = await service.build({
      key,
      documents: upsert,
      ...settings,
      mode: "create",
      embedding: input.embeddingFor?.(null),
    });
    meta = built.meta;
    created = true;
  } else if (upsert.length === 0 && deleteIds.length === 0) {
    // Nothing changed: no write at all, so the version stays and caches stay valid.
    meta = await service.requireMeta(key);
  } else {
    const embedding = input.embeddingFor?.(await service.requireMeta(key));
    meta = (await service.applyDocumentChanges(key, { upsert, deleteIds, embedding })).meta;
  }

  return {
    index_name: key.name,
    tenant_id: key.tenantId,
    created,
    added,
    updated,
    deleted: deleteIds.length,
    unchanged,
    failed,
    documents_count: meta.documentsCount,
    chunks_count: meta.chunksCount,
    version: meta.version,
    elapsed_ms: Math.round((performance.now() - started) * 1000) / 1000,
  };
}
