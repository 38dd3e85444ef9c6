/**
 * Errors. `DomainError` (below) is what the code throws; `ApiError` is its HTTP form, made at the edge
 * only (core/http.ts `toApiError`, the routes, the auth and CORS hooks; eslint.config.js keeps it so),
 * which the error handler turns into the contract's shape `{"error":{"code","message","details"}}`.
 */

/** A bad configuration value: start-up stops with a message naming the variable (exit 78). */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/** A configuration file's JSON, or a ConfigError that names it (`what`: the setting and its file). */
export function parseConfigJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`${what} is not valid JSON: ${(error as Error).message}`);
  }
}

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

/**
 * What went wrong, said in the domain's words. Services, stores, the engine, the scheduler and the CLI
 * throw these; none knows HTTP. The edge maps each kind to a status once (core/http.ts `toApiError`,
 * as TGI maps InferError in its server), and each API's error shape is built from that.
 */
export type ErrorKind =
  /** The caller's input cannot be used (bad value, bad file, bad folder). */
  | "invalid"
  /** Well-formed input that cannot be processed (a file that fails to parse, or past its parse time). */
  | "unprocessable"
  | "not_found"
  /** The caller may not do this (a key's scope, a client that is not local; issue #35). */
  | "forbidden"
  /** The state does not allow it (already exists, changed by another writer). */
  | "conflict"
  /** Bigger than a configured limit. */
  | "too_large"
  /** Too much work queued right now; try again later. */
  | "busy"
  /** A dependency (a model, the store) is not ready or not reachable. */
  | "not_ready"
  | "timeout"
  /** The caller went away before the work began. */
  | "cancelled"
  /** A service this one calls answered with an error. */
  | "upstream"
  /** A broken invariant: stored or computed state that cannot be (a bug or damaged data). */
  | "corrupt"
  /** The disk (or database) is full: nothing was written; deletes still work. */
  | "storage_full";

export interface DomainErrorOptions {
  details?: unknown[];
  /** When trying again makes sense: seconds (or what an upstream said), for busy, conflict, not_ready. */
  retryAfter?: string;
  /** The contract's error code where a kind has several (e.g. "model_not_ready" for `not_ready`). */
  code?: ErrorCode;
}

export class DomainError extends Error {
  readonly details: unknown[];
  readonly retryAfter: string | undefined;
  readonly code: ErrorCode | undefined;
  constructor(
    readonly kind: ErrorKind,
    message: string,
    options: DomainErrorOptions = {},
  ) {
    super(message);
    this.name = "DomainError";
    this.details = options.details ?? [];
    this.retryAfter = options.retryAfter;
    this.code = options.code;
  }
}

export const badRequest = (message: string, details: unknown[] = []) =>
  new DomainError("invalid", message, { details });
export const notFound = (message: string) => new DomainError("not_found", message);
export const forbidden = (message: string, details: unknown[] = []) =>
  new DomainError("forbidden", message, { details });
export const conflict = (message: string, options: DomainErrorOptions = {}) =>
  new DomainError("conflict", message, options);
export const notReady = (message: string, code: ErrorCode = "not_ready") =>
  new DomainError("not_ready", message, { code });
export const tooLarge = (message: string, details: unknown[] = []) =>
  new DomainError("too_large", message, { details });
export const busy = (message: string, retryAfterSeconds: number) =>
  new DomainError("busy", message, { retryAfter: String(retryAfterSeconds) });
/** A broken invariant (answered as a 500 with its message: it names what is damaged). */
export const corrupt = (message: string) => new DomainError("corrupt", message);

/**
 * Whether an error means the disk is full: a `storage_full` DomainError (each store reports its
 * database's own code so: SQLite's SQLITE_FULL, PostgreSQL's 53100), or ENOSPC or EDQUOT from the file
 * system. Looks through `cause` chains.
 */
export function isStorageFull(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 5; depth++) {
    if (current instanceof DomainError && current.kind === "storage_full") return true;
    const code = (current as { code?: unknown }).code;
    if (code === "ENOSPC" || code === "EDQUOT") return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** 507: the server has no room left; what the client sent was not written. */
export const storageFull = (why?: string) =>
  new DomainError(
    "storage_full",
    `The server's storage is full${why ? ` (${why})` : ""}: nothing was written. Deletes still work; free space or delete indices or documents, then retry.`,
  );
