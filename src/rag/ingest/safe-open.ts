/**
 * Reads a server-side file once, safely (issue #23): whatever a path named when it was listed or
 * checked, the bytes read are those of the descriptor opened here, and that descriptor must be a
 * regular file inside the root and no larger than the limit.
 *
 * - `O_NOFOLLOW`: a file swapped for a symlink after the check fails to open (ELOOP) instead of
 *   following the link (to a file outside the root, or to /dev/zero).
 * - `O_NONBLOCK`: opening a FIFO returns at once instead of holding a libuv thread until a writer
 *   comes (which hung the sync and then SIGTERM); `fstat` then refuses it. No effect on regular files.
 * - The descriptor's real path (Linux: /proc/self/fd/N) must lie inside the root: a parent folder
 *   swapped for a symlink between the check and the open is caught here.
 * - The size comes from `fstat` and is checked before a byte is read; the read stops at the limit
 *   too, so a file growing meanwhile cannot take more.
 * - A file with more than one hard link (`st_nlink` > 1) is refused unless allowed: a hard link made
 *   inside the root to a file outside it has a real path inside, and cannot be told apart.
 */
import { constants } from "node:fs";
import { open, readlink, type FileHandle } from "node:fs/promises";
import path from "node:path";
import type { DomainError } from "../../core/errors.js";
import { badRequest } from "../../core/errors.js";
import { fileTooLarge } from "./limits.js";

/** Whether path `p` is `base` or lies below it (both absolute and normalised). */
export const within = (p: string, base: string) => p === base || p.startsWith(base + path.sep);

const READ_FLAGS =
  constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0) | (constants.O_NOCTTY ?? 0);

/** Reads at most this much per call: one allocation for small files, bounded pieces for large ones. */
const READ_PIECE = 1024 * 1024;

export interface SafeReadOptions {
  /** Bytes the file may have (MAX_BODY_BYTES: a server-side file may be as large as an upload). */
  maxBytes: number;
  /** The name errors give (the path relative to the root). */
  name: string;
  /** Read files with more than one hard link (RAG_FILES_HARD_LINKS); default false. */
  allowHardLinks?: boolean;
}

function refusal(name: string, code: string | undefined): DomainError {
  if (code === "ELOOP" || code === "EMLINK") {
    return badRequest(`File "${name}" is a symbolic link; links are not read (it may have been swapped)`);
  }
  if (code === "ENOENT") return badRequest(`File "${name}" does not exist in RAG_FILES_DIR`);
  // A socket cannot be opened (ENXIO); a folder can be, but fails on read (EISDIR).
  if (code === "ENXIO" || code === "EISDIR") return badRequest(`"${name}" is not a regular file`);
  if (code === "EACCES" || code === "EPERM")
    return badRequest(`File "${name}" cannot be read (permission denied)`);
  return badRequest(`File "${name}" cannot be opened (${code ?? "error"})`);
}

/** Where the descriptor really points, when the system says (Linux /proc); null elsewhere. */
async function descriptorPath(handle: FileHandle): Promise<string | null> {
  if (process.platform !== "linux") return null;
  return readlink(`/proc/self/fd/${handle.fd}`).catch(() => null);
}

/**
 * The bytes of the regular file `file` (an absolute path that was checked to lie inside `root`, the
 * root's real path), read through one descriptor. 400 for a link, FIFO, device, socket or folder, or
 * a file that turns out to lie outside the root; 413 for a file over `maxBytes`, before reading it.
 */
export async function readRegularFileInside(
  root: string,
  file: string,
  options: SafeReadOptions,
): Promise<Buffer> {
  const { name, maxBytes } = options;
  let handle: FileHandle;
  try {
    handle = await open(file, READ_FLAGS);
  } catch (error) {
    throw refusal(name, (error as NodeJS.ErrnoException).code);
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) {
      const kind = info.isFIFO()
        ? "a FIFO"
        : info.isCharacterDevice() || info.isBlockDevice()
          ? "a device"
          : info.isSocket()
            ? "a socket"
            : info.isDirectory()
              ? "a folder"
              : "not a regular file";
      throw badRequest(`"${name}" is ${kind}; only regular files are read`);
    }
    const real = await descriptorPath(handle);
    if (real !== null && !within(real, root)) {
      throw badRequest(`File "${name}" is outside RAG_FILES_DIR`);
    }
    if (info.nlink > 1 && !options.allowHardLinks) {
      throw badRequest(
        `File "${name}" has ${info.nlink} hard links; such files are not read, since a link to a file outside RAG_FILES_DIR looks like one inside (RAG_FILES_HARD_LINKS=allow reads them)`,
      );
    }
    if (info.size > maxBytes) {
      throw fileTooLarge(name, `${info.size} bytes`, "MAX_BODY_BYTES", maxBytes);
    }
    return await readBounded(handle, name, info.size, maxBytes);
  } finally {
    await handle.close();
  }
}

/** Reads to the end through `handle`, refusing (413) a file that grew past `maxBytes` meanwhile. */
async function readBounded(
  handle: FileHandle,
  name: string,
  size: number,
  maxBytes: number,
): Promise<Buffer> {
  const pieces: Buffer[] = [];
  let total = 0;
  // One byte past the limit is enough to know the file grew beyond it.
  let want = Math.min(size, maxBytes) + 1;
  for (;;) {
    const piece = Buffer.allocUnsafe(Math.min(want, READ_PIECE));
    const { bytesRead } = await handle.read(piece, 0, piece.length, total);
    if (bytesRead === 0) break;
    pieces.push(bytesRead === piece.length ? piece : piece.subarray(0, bytesRead));
    total += bytesRead;
    if (total > maxBytes) throw fileTooLarge(name, `more than ${maxBytes} bytes`, "MAX_BODY_BYTES", maxBytes);
    want = Math.max(1, maxBytes + 1 - total);
  }
  return pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces, total);
}
