/**
 * The one error type of both apps. Everything a client may see goes through `ApiError`; the
 * error handler turns it into the contract's shape `{"error":{"code","message","details"}}`.
 */

export type ErrorCode =
  | "invalid_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "payload_too_large"
  | "unsupported_media_type"
  | "rate_limited"
  | "queue_full"
  | "timeout"
  | "model_not_ready"
  | "not_ready"
  | "upstream_error"
  | "insufficient_storage"
  | "internal_error";

export interface ErrorBody {
  error: { code: ErrorCode | string; message: string; details: unknown[] };
}

export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: ErrorCode,
    message: string,
    readonly details: unknown[] = [],
    /** Extra response headers, e.g. Retry-After. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }

  toBody(): ErrorBody {
    return { error: { code: this.code, message: this.message, details: this.details } };
  }
}

export const badRequest = (message: string, details: unknown[] = []) =>
  new ApiError(400, "invalid_request", message, details);
export const notFound = (message: string) => new ApiError(404, "not_found", message);
export const conflict = (message: string) => new ApiError(409, "conflict", message);
export const notReady = (message: string, code: ErrorCode = "not_ready") => new ApiError(503, code, message);

/**
 * Whether an error means the disk (or database) is full: ENOSPC or EDQUOT from the file system,
 * SQLITE_FULL from SQLite, 53100 (disk_full) from PostgreSQL. Looks through `cause` chains.
 */
export function isStorageFull(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (code === "ENOSPC" || code === "EDQUOT" || code === "SQLITE_FULL" || code === "53100") return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** 507: the server has no room left; what the client sent was not written. */
export const storageFull = (why?: string) =>
  new ApiError(
    507,
    "insufficient_storage",
    `The server's storage is full${why ? ` (${why})` : ""}: nothing was written. Deletes still work; free space or delete indices or documents, then retry.`,
  );
