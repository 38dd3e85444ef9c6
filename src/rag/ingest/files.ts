/**
 * Server-side files for `/rag/build`: only files inside RAG_FILES_DIR may be read. A path is refused
 * (400) when it holds a NUL byte, when it or any symlink on its way leads outside the folder, or when
 * it does not exist. A folder stands for every supported file below it (links leading outside are
 * skipped); a file of an unsupported type named on its own is a 400. A key confined to one tenant
 * has RAG_FILES_DIR/<tenant> as its root. The bytes are read by safe-open.ts, through one checked
 * descriptor, since a checked path may be swapped before it is read; a file with more than one hard
 * link is refused there unless RAG_FILES_HARD_LINKS=allow (a hard link to a file outside the folder
 * cannot be told apart from a file inside it).
 *
 * Walks are finite (FolderWalk): each folder is entered once by (device, inode), whatever links lead
 * to it (a link loop or a DAG of links costs one visit per folder), at most RAG_FILES_MAX_ENTRIES
 * entries are looked at, within RAG_FILES_WALK_MS, and a walk stops when its client leaves.
 */
import type { Stats } from "node:fs";
import { readdir, realpath, stat } from "node:fs/promises";
import path from "node:path";
import { badRequest, DomainError, notFound, tooLarge } from "../../core/errors.js";
import type { DocumentInput } from "../service.js";
import { isIndexable, isSupported } from "./loaders.js";
import { parseFileBytes } from "./parse-pool.js";
import { DEFAULT_INGEST_LIMITS, RequestTextBudget, type Ingest, type IngestLimits } from "./limits.js";
import { readRegularFileInside, within } from "./safe-open.js";

export { within };

/** Bounds of one walk of RAG_FILES_DIR (config: RAG_FILES_MAX_ENTRIES, RAG_FILES_WALK_MS, RAG_FILES_HARD_LINKS). */
export interface WalkLimits {
  /** Entries (files, folders, links) one walk may look at. */
  maxEntries: number;
  /** Time one walk may take, in ms. */
  timeoutMs: number;
  /** Whether files with more than one hard link are read. */
  allowHardLinks: boolean;
}

/** The defaults of the configuration (the CLI reading local folders uses them too). */
export const DEFAULT_WALK_LIMITS: WalkLimits = {
  maxEntries: 200_000,
  timeoutMs: 30_000,
  allowHardLinks: false,
};

/**
 * One walk's budget and the folders it has entered. `enter` says whether a folder is new (by device and
 * inode: the same folder reached through two links is one folder); `tick` counts an entry and throws
 * past the entry cap (413), the deadline (422) or once the client left (its signal's reason).
 */
export class FolderWalk {
  private entries = 0;
  private readonly deadline: number;
  private readonly entered = new Set<string>();

  constructor(
    readonly limits: WalkLimits = DEFAULT_WALK_LIMITS,
    private readonly signal?: AbortSignal,
  ) {
    this.deadline = performance.now() + limits.timeoutMs;
  }

  /** True the first time a folder (its `stat`) is entered. */
  enter(info: Pick<Stats, "dev" | "ino">): boolean {
    const id = `${info.dev}:${info.ino}`;
    if (this.entered.has(id)) return false;
    this.entered.add(id);
    return true;
  }

  tick(): void {
    stopIfGone(this.signal);
    if (++this.entries > this.limits.maxEntries)
      throw tooLarge(
        `The folder walk looked at more than ${this.limits.maxEntries} entries (RAG_FILES_MAX_ENTRIES); name subfolders instead`,
        [{ limit: this.limits.maxEntries, setting: "RAG_FILES_MAX_ENTRIES" }],
      );
    if (performance.now() > this.deadline)
      throw new DomainError(
        "unprocessable",
        `The folder walk took longer than ${this.limits.timeoutMs} ms (RAG_FILES_WALK_MS); name subfolders instead`,
        { details: [{ limit: this.limits.timeoutMs, setting: "RAG_FILES_WALK_MS" }] },
      );
  }
}

/** A 499 (nobody reads it) once the client left: work for it stops at the next step. */
export function stopIfGone(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new DomainError("cancelled", "The client closed the request");
}

interface Roots {
  configured: string;
  real: string;
}

/**
 * The folder a request may read: RAG_FILES_DIR, or its subfolder `<tenant>` for a key confined to
 * one tenant (tenant ids are single path segments, never "." or "..", so the join stays inside).
 */
async function roots(root: string | null, tenant?: string): Promise<Roots> {
  if (root === null) {
    throw badRequest("Server-side file builds are off: set RAG_FILES_DIR, or send the documents inline");
  }
  const configured = path.resolve(tenant === undefined ? root : path.join(root, tenant));
  const real = await realpath(configured).catch(() => {
    throw badRequest(
      tenant === undefined
        ? "RAG_FILES_DIR does not exist on the server"
        : `Tenant "${tenant}" has no folder on the server (RAG_FILES_DIR/${tenant})`,
    );
  });
  return { configured, real };
}

/** The real path of `requested` when it is inside `root` (a file or a folder); otherwise a 400. */
async function resolveInside(
  base: Roots,
  requested: string,
): Promise<{ real: string; isDirectory: boolean }> {
  if (requested.includes("\0")) throw badRequest("File path contains a NUL byte");
  // An absolute path may name the folder as configured or by its real path (they differ when
  // RAG_FILES_DIR or one of its parents is a symlink, e.g. /tmp on macOS); the realpath check decides.
  const candidate = path.resolve(base.configured, requested);
  const lexicallyInside = within(candidate, base.configured) || within(candidate, base.real);
  const real = lexicallyInside ? await realpath(candidate).catch(() => null) : null;
  if (!lexicallyInside || (real !== null && !within(real, base.real))) {
    throw badRequest(`File "${requested}" is outside RAG_FILES_DIR`);
  }
  if (real === null) throw badRequest(`File "${requested}" does not exist in RAG_FILES_DIR`);
  const info = await stat(real);
  if (info.isDirectory()) return { real, isDirectory: true };
  if (!info.isFile()) throw badRequest(`"${requested}" is not a regular file`);
  return { real, isDirectory: false };
}

/**
 * Supported files below a folder, in path order; links that lead outside the root are skipped, and a
 * folder already entered (through another link) is not entered again.
 */
async function walk(base: Roots, folder: string, found: string[], budget: FolderWalk): Promise<void> {
  const entries = await readdir(folder, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    budget.tick();
    if (entry.name.startsWith(".")) continue;
    const full = path.join(folder, entry.name);
    const real = await realpath(full).catch(() => null);
    if (real === null || !within(real, base.real)) continue;
    const info = await stat(real).catch(() => null);
    if (info === null) continue;
    if (info.isDirectory()) {
      if (budget.enter(info)) await walk(base, real, found, budget);
    } else if (info.isFile() && isIndexable(entry.name)) found.push(real);
  }
}

/**
 * Resolves the requested paths to the files they stand for, checking every one before anything is
 * read, so a bad path fails the whole request.
 */
export async function resolveFiles(
  root: string | null,
  requested: string[],
  /** A key confined to one tenant reads RAG_FILES_DIR/<tenant> only (confinedTenant). */
  tenant?: string,
  /** The walk's bounds and the client's signal (all requested folders share one walk). */
  walkOptions: { limits?: WalkLimits; signal?: AbortSignal } = {},
): Promise<{ root: string; files: string[] }> {
  const base = await roots(root, tenant);
  const budget = new FolderWalk(walkOptions.limits, walkOptions.signal);
  const files: string[] = [];
  for (const item of requested) {
    budget.tick();
    const { real, isDirectory } = await resolveInside(base, item);
    if (isDirectory) {
      const before = files.length;
      if (budget.enter(await stat(real))) await walk(base, real, files, budget);
      if (files.length === before) throw badRequest(`Folder "${item}" holds no supported files`);
    } else {
      if (!isSupported(real)) {
        throw badRequest(`File "${item}": unsupported type "${path.extname(real) || "(none)"}"`);
      }
      files.push(real);
    }
  }
  return { root: base.real, files: [...new Set(files)] };
}

/** Reads one resolved file into a document whose id and source are its path relative to the root. */
export async function loadResolvedFile(
  root: string,
  real: string,
  limits: IngestLimits = DEFAULT_INGEST_LIMITS,
  allowHardLinks = DEFAULT_WALK_LIMITS.allowHardLinks,
): Promise<DocumentInput & { source: string }> {
  const relative = path.relative(root, real);
  // Read through one descriptor checked to be a regular file inside the root (the path may have
  // been swapped since resolveFiles checked it).
  const bytes = await readRegularFileInside(root, real, {
    name: relative,
    maxBytes: limits.maxFileBytes,
    allowHardLinks,
  });
  const loaded = await parseFileBytes(relative, bytes, limits);
  return {
    id: relative,
    text: loaded.text,
    title: loaded.title,
    metadata: { ...loaded.metadata, file: relative },
    source: relative,
    pageStarts: loaded.pageStarts,
    sections: loaded.sections,
  };
}

/**
 * A folder to sync (folder sync, #14): the real root, the folder's real path and its path relative to
 * the root ("" for the root itself). 400 when RAG_FILES_DIR is unset or the folder lies outside it
 * (symlinks included), 404 when it does not exist, 400 when it is a file.
 */
export async function resolveFolder(
  root: string | null,
  requested: string,
  /** A key confined to one tenant syncs from RAG_FILES_DIR/<tenant> only (confinedTenant). */
  tenant?: string,
): Promise<{ root: string; folder: string; relative: string }> {
  const base = await roots(root, tenant);
  if (requested.includes("\0")) throw badRequest("Folder path contains a NUL byte");
  const candidate = path.resolve(base.configured, requested);
  const outside = () => badRequest(`Folder "${requested}" is outside RAG_FILES_DIR`);
  if (!within(candidate, base.configured) && !within(candidate, base.real)) throw outside();
  const real = await realpath(candidate).catch(() => null);
  if (real === null) throw notFound(`Folder "${requested}" does not exist in RAG_FILES_DIR`);
  if (!within(real, base.real)) throw outside();
  if (!(await stat(real)).isDirectory()) throw badRequest(`"${requested}" is a file, not a folder`);
  return { root: base.real, folder: real, relative: path.relative(base.real, real) };
}

/**
 * Reads resolved files one after another through the ingest gate, adding each file's text to the
 * request's budget (MAX_BUILD_CHARS) so a folder of large files stops at the cap, not after it.
 */
export async function loadResolvedFiles(
  root: string,
  files: string[],
  ingest: Ingest,
  /** Whose parse slots the reading takes (MAX_PARSES_PER_TENANT). */
  tenant?: string,
  /** Whether files with several hard links are read, and the client's signal (stops between files). */
  options: { allowHardLinks?: boolean; signal?: AbortSignal } = {},
): Promise<Array<DocumentInput & { source: string }>> {
  return ingest.gate.run(
    async () => {
      const budget = new RequestTextBudget(ingest.limits);
      const documents: Array<DocumentInput & { source: string }> = [];
      for (const file of files) {
        stopIfGone(options.signal);
        const document = await loadResolvedFile(root, file, ingest.limits, options.allowHardLinks);
        budget.add(document.source, document.text.length);
        documents.push(document);
      }
      return documents;
    },
    options.signal,
    tenant,
  );
}
