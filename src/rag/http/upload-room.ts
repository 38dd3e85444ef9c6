/**
 * Uploads honour DISK_RESERVE_BYTES (issue #35): a multipart upload (`/rag/build`, the document
 * routes, `/v1/files`) is refused with 507 before a byte of it is spooled when the disks it is
 * written to would keep less than the reserve free after it: the spool folder (the OS temporary
 * folder) and DATA_DIR, where the store and uploaded files live. The same watermark the SQLite store
 * keeps (store/reserve.ts), so an upload cannot fill the disk the store's deletes need room on. A
 * disk that fills anyway while a file is spooled is a 507 too (uploads.ts), never a "malformed" 400.
 *
 * Added per route (POST only) where routes are registered, like the CSRF check, so GET /health runs
 * no hook.
 */
import { statfs } from "node:fs/promises";
import path from "node:path";
import type { FastifyInstance, onRequestHookHandler } from "fastify";
import { storageFull } from "../../core/errors.js";

export interface UploadRoomOptions {
  /** DISK_RESERVE_BYTES; 0 turns the check off. */
  reserveBytes: number;
  /** Folders uploads are written under (the spool folder, DATA_DIR); made later if missing. */
  folders: string[];
}

/** Bytes this process may still write on the file system holding `folder` (or its nearest parent). */
async function freeBytes(folder: string): Promise<number> {
  for (let current = path.resolve(folder); ; current = path.dirname(current)) {
    try {
      const info = await statfs(current);
      return info.bavail * info.bsize;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT" || current === path.dirname(current))
        throw error;
    }
  }
}

/** Adds the check to every POST route registered after this call. */
export function registerUploadRoomCheck(app: FastifyInstance, options: UploadRoomOptions): void {
  if (options.reserveBytes === 0) return;
  const check: onRequestHookHandler = async (request) => {
    if (!request.headers["content-type"]?.toLowerCase().startsWith("multipart/")) return;
    const incoming = Number(request.headers["content-length"] ?? 0) || 0;
    for (const folder of options.folders) {
      const free = await freeBytes(folder);
      if (free - incoming < options.reserveBytes)
        throw storageFull(
          `${free} bytes free where uploads are written, less than this upload (${incoming} bytes) and DISK_RESERVE_BYTES (${options.reserveBytes}) need`,
        );
    }
  };
  app.addHook("onRoute", (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (!methods.some((method) => method.toUpperCase() === "POST")) return;
    const existing = route.onRequest === undefined ? [] : [route.onRequest].flat();
    route.onRequest = [...existing, check] as typeof route.onRequest;
  });
}
