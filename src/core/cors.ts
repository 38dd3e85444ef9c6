/**
 * CORS for both apps: the configured origins (CORS_ORIGINS, `*` for any), plus the sibling app on the
 * same host (so the playground served by one app can call the other). Any other origin gets no CORS
 * headers, and its preflight a 404.
 *
 * Done here rather than with @fastify/cors: its per-request options (needed for the sibling origin)
 * rebuilt and merged its options objects on every request, browser or not, one of the largest costs of
 * a request to /health. Only browsers send `Origin`, so requests without it skip CORS entirely.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from "fastify";
import { ApiError } from "./errors.js";
import { isSiblingOrigin } from "./ui.js";

export interface CorsOptions {
  /** Allowed origins; `*` allows any. */
  origins: readonly string[];
  /** Also allow the same host name as the request's `Host` on this port (the sibling app); null: no. */
  siblingPort: number | null;
}

const ALLOW_METHODS = "GET, HEAD, POST, PUT, PATCH, DELETE";
/** Response headers a browser script may read besides the safelisted ones. */
const EXPOSE_HEADERS = "x-request-id, retry-after";

/** Appends `value` to the Vary header unless it is there already (or Vary is `*`). */
function addVary(reply: FastifyReply, value: string): void {
  const current = reply.getHeader("vary");
  if (current === undefined) {
    void reply.header("vary", value);
    return;
  }
  const list = String(current);
  const names = list.split(",").map((name) => name.trim().toLowerCase());
  if (names.includes("*") || names.includes(value.toLowerCase())) return;
  void reply.header("vary", `${list}, ${value}`);
}

export function registerCors(app: FastifyInstance, options: CorsOptions): void {
  const any = options.origins.includes("*");
  const origins = new Set(options.origins);
  const { siblingPort } = options;
  const allowed = (origin: string, host: string | undefined): boolean =>
    any || origins.has(origin) || (siblingPort !== null && isSiblingOrigin(origin, host, siblingPort));

  // onRequest, so preflights are answered before auth or rate limits, which a browser's preflight
  // (sent without credentials) would fail.
  app.addHook("onRequest", (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const origin = request.headers.origin;
    if (origin === undefined) {
      done();
      return;
    }
    // The answer depends on Origin: shared caches must not serve one origin's answer to another.
    addVary(reply, "Origin");
    if (!allowed(origin, request.headers.host)) {
      done();
      return;
    }
    void reply.header("access-control-allow-origin", origin);
    void reply.header("access-control-expose-headers", EXPOSE_HEADERS);
    if (request.method !== "OPTIONS") {
      done();
      return;
    }
    const method = request.headers["access-control-request-method"];
    if (method === undefined) {
      done(
        new ApiError(400, "invalid_request", "Invalid preflight request: no Access-Control-Request-Method"),
      );
      return;
    }
    void reply.header("access-control-allow-methods", ALLOW_METHODS);
    addVary(reply, "Access-Control-Request-Headers");
    const requested = request.headers["access-control-request-headers"];
    if (requested !== undefined) void reply.header("access-control-allow-headers", requested);
    // Safari waits for a body on a 204 without Content-Length.
    void reply.code(204).header("content-length", "0").send();
  });

  // Lets an OPTIONS request reach the hook on every path; what the hook did not answer (no or a
  // refused Origin) is a 404, as for any unknown route.
  app.options("*", { schema: { hide: true } }, (_request, reply) => {
    reply.callNotFound();
  });
}
