/**
 * What every request gets where it enters and where it ends, done in the two places Fastify calls
 * for each request anyway (a LogController's incomingRequest and requestCompleted), not in hooks: each
 * hook an app has costs every request a hook run (runner closures and calls). One empty onRequest
 * hook measured 0.97–1.0 × bare Fastify in bench/http-floor.ts, a few per cent at most, but /health
 * now runs none.
 *
 * On entry: the X-Request-Id response header, CORS response headers (cors.ts), and at debug an
 * arrival line. On completion: the listeners (the HTTP metrics, metrics.ts), then one access-log line.
 * Fastify calls incomingRequest for every request it makes a Request for, bad URLs and 404s included.
 */
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from "fastify";
import type { CorsPolicy } from "./cors.js";
import { pathOf } from "./url-path.js";

/**
 * Probes and scrapes: at info level they would be most of the log (a load balancer polls /health every
 * few seconds), so their access lines are written at debug.
 */
const QUIET_PATHS = new Set(["/health", "/livez", "/metrics"]);

/** pino's level numbers; a logger writes the levels at or above its own. */
const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

/**
 * Whether `log` writes lines of `level`; checked first so a dropped line costs no object. pino's
 * numeric `levelVal` when there is one: its `level` getter looks the name up on every call.
 */
function writes(log: FastifyBaseLogger, level: "debug" | "info"): boolean {
  const value = (log as { levelVal?: number }).levelVal ?? LEVELS[log.level] ?? Infinity;
  return value <= LEVELS[level]!;
}

/** Told of every answered request once its response has been sent (or has failed). */
export type RequestCompletedListener = (request: FastifyRequest, reply: FastifyReply) => void;

/**
 * One access-log line per request, written when the response has been sent, instead of Fastify's two
 * ("incoming request", "request completed"): half the log volume and serialisation per request. The
 * request id is in every line already (the request logger's `reqId`). Fastify's other request-scoped
 * lines (stream errors, …) are kept, which `disableRequestLogging` would have turned off too.
 */
export class RequestLifecycle extends LogController {
  readonly #listeners: RequestCompletedListener[] = [];
  readonly #cors: CorsPolicy | null;

  constructor(options: { cors: CorsPolicy | null }) {
    super();
    this.#cors = options.cors;
  }

  addCompletedListener(listener: RequestCompletedListener): void {
    this.#listeners.push(listener);
  }

  override incomingRequest(request: FastifyRequest, reply: FastifyReply): void {
    // Every answer carries its request id (the client's X-Request-Id, else a new UUID), errors included.
    void reply.header("x-request-id", request.id);
    this.#cors?.addResponseHeaders(request, reply);
    // At debug the arrival is logged too, to find requests that never complete.
    if (writes(request.log, "debug")) request.log.debug({ req: request }, "incoming request");
  }

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    const log = reply.log;
    for (const listener of this.#listeners) {
      // Fastify calls this from the response's "finish" event: a throw here would crash the process.
      try {
        listener(request, reply);
      } catch (listenerError) {
        log.error({ err: listenerError }, "request-completed listener failed");
      }
    }
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
