/**
 * Server-side files for `/rag/build`: only files inside RAG_FILES_DIR may be read. A path is refused
 * (400) when it holds a NUL byte, when it or any symlink on its way leads outside the folder, or when
 * it is not a regular file of a supported type.
 */
import { realpath, readFile, stat } from "node:fs/promises";
import path from "node:path";
import { badRequest } from "../../core/errors.js";
import type { DocumentInput } from "../service.js";

export const SUPPORTED_TEXT_EXTENSIONS = [".txt", ".md", ".markdown", ".text"];

/** The real path of `requested` when it is a regular file inside `root`; otherwise a 400. */
export async function resolveAllowedFile(root: string | null, requested: string): Promise<string> {
  if (root === null) {
    throw badRequest("Server-side file builds are off: set RAG_FILES_DIR, or send the documents inline");
  }
  if (requested.includes("\0")) throw badRequest("File path contains a NUL byte");
  const configuredRoot = path.resolve(root);
  const realRoot = await realpath(configuredRoot).catch(() => {
    throw badRequest("RAG_FILES_DIR does not exist on the server");
  });
  // An absolute path may name the folder as configured or by its real path (they differ when
  // RAG_FILES_DIR or one of its parents is a symlink, e.g. /tmp on macOS); the realpath check decides.
  const candidate = path.resolve(configuredRoot, requested);
  const within = (p: string, base: string) => p === base || p.startsWith(base + path.sep);
  const lexicallyInside = within(candidate, configuredRoot) || within(candidate, realRoot);
  const real = lexicallyInside ? await realpath(candidate).catch(() => null) : null;
  if (!lexicallyInside || (real !== null && !real.startsWith(realRoot + path.sep))) {
    throw badRequest(`File "${requested}" is outside RAG_FILES_DIR`);
  }
  if (real === null) throw badRequest(`File "${requested}" does not exist in RAG_FILES_DIR`);
  const info = await stat(real);
  if (!info.isFile()) throw badRequest(`"${requested}" is not a regular file`);
  return real;
}

/** Reads a file into a document whose source is its path relative to RAG_FILES_DIR. */
export async function loadFileDocument(
  root: string | null,
  requested: string,
): Promise<DocumentInput & { source: string }> {
  const real = await resolveAllowedFile(root, requested);
  const relative = path.relative(await realpath(root!), real);
  const extension = path.extname(real).toLowerCase();
  if (!SUPPORTED_TEXT_EXTENSIONS.includes(extension)) {
    throw badRequest(
      `File "${requested}": unsupported type "${extension || "(none)"}"; supported: ${SUPPORTED_TEXT_EXTENSIONS.join(" ")}`,
    );
  }
  const bytes = await readFile(real);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw badRequest(`File "${requested}" is not valid UTF-8 text`);
  }
  return { id: relative, text, title: path.basename(real), metadata: { file: relative }, source: relative };
}
