/**
 * Logging shared by both apps: pino JSON lines with secrets redacted before they reach a log, and one
 * access-log line per request.
 */
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from "fastify";
import type { LoggerOptions } from "pino";
import { pathOf } from "./url-path.js";

/**
 * Where secrets can sit in what we log. Exact paths only: a wildcard path ("*.apiKey") makes pino run
 * its redaction over every key of every line it writes; an exact path costs nothing unless the logged
 * object has its first key.
 */
export const REDACT_PATHS = [
  "req.headers.authorization",
  "req.headers['x-api-key']",
  "headers.authorization",
  "headers['x-api-key']",
  "authorization",
  "apiKey",
  "api_key",
  "generationApiKey",
  "config.apiKey",
  "config.generationApiKey",
  "options.apiKey",
];

export function loggerOptions(level: string): LoggerOptions {
  return { level, redact: { paths: REDACT_PATHS, censor: "[redacted]" } };
}

/**
 * Probes and scrapes: at info level they would be most of the log (a load balancer polls /health every
 * few seconds), so their access lines are written at debug.
 */
const QUIET_PATHS = new Set(["/health", "/livez", "/metrics"]);

/** pino's level numbers; a logger writes the levels at or above its own. */
const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

/** Whether `log` writes lines of `level`; checked first so a dropped line costs no object. */
function writes(log: FastifyBaseLogger, level: "debug" | "info"): boolean {
  return (LEVELS[log.level] ?? Infinity) <= LEVELS[level]!;
}

/**
 * One access-log line per request, written when the response has been sent, instead of Fastify's two
 * ("incoming request", "request completed"): half the log volume and serialisation per request. The
 * request id is in every line already (the request logger's `reqId`). Fastify's other request-scoped
 * lines (stream errors, …) are kept, which `disableRequestLogging` would have turned off too.
 */
export class AccessLogController extends LogController {
  /** At debug the arrival is logged too, to find requests that never complete. */
  override incomingRequest(request: FastifyRequest): void {
    if (writes(request.log, "debug")) request.log.debug({ req: request }, "incoming request");
  }

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    const log = reply.log;
    const url = request.url;
    if (error) {
      log.error(
        {
          method: request.method,
          url,
          statusCode: reply.statusCode,
          responseTime: reply.elapsedTime,
          err: error,
        },
        "request errored",
      );
      return;
    }
    const quiet = QUIET_PATHS.has(pathOf(url));
    if (!writes(log, quiet ? "debug" : "info")) return;
    const line = {
      method: request.method,
      url,
      statusCode: reply.statusCode,
      responseTime: reply.elapsedTime,
    };
    if (quiet) log.debug(line, "request completed");
    else log.info(line, "request completed");
  }
}
