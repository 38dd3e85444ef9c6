/**
 * The one error type of both apps. Everything a client may see goes through `ApiError`; the
 * error handler turns it into the contract's shape `{"error":{"code","message","details"}}`.
 */

/** A bad configuration value: start-up stops with a message naming the variable (exit 78). */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
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
