/**
 * CORS for both apps: the configured origins (CORS_ORIGINS, `*` for any), plus the sibling app on the
 * same host (so the playground served by one app can call the other). Any other origin gets no CORS
 * headers, and its preflight a 404.
 *
 * Done here rather than with @fastify/cors, and without a hook: only browsers send `Origin`, so most
 * requests need no CORS work at all, and an onRequest hook would cost every request a hook run (a few
 * per cent of a GET /health; see bench/http-floor.ts). The response headers are added where each
 * request enters (RequestLifecycle, src/core/request-lifecycle.ts); preflights are answered by an
 * OPTIONS route, which auth and rate limits let through (isPreflight).
 *
 * CSRF (issue #23): a browser sends a cross-origin form POST (urlencoded, multipart, text/plain)
 * without a preflight, and CORS only hides the answer, not the effect. So state-changing routes
 * (POST, PUT, PATCH, DELETE) refuse with 403 a request whose Origin is neither this app's own nor
 * allowed above, auth on or off. "Own" comes from the configuration (hosts.ts: loopback names and the
 * bind address on the port the request reached, ALLOWED_HOSTS), not from the request's Host header,
 * which a DNS-rebinding page controls (issue #35). Requests without Origin (curl, SDKs, servers) are
 * unaffected: only browsers send it, and a browser always sends it on these methods. The check is a
 * route-level hook on those routes only, so GET /health runs no hook.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from "fastify";
import { ApiError } from "./errors.js";
import type { HostPolicy } from "./hosts.js";

export interface CorsOptions {
  /** Allowed origins; `*` allows any. */
  origins: readonly string[];
  /** Also allow an allowed host name on this port (the sibling app's playground); null: no. */
  siblingPort: number | null;
  /** The host names this server answers to (ALLOWED_HOSTS and the bind address). */
  hosts: HostPolicy;
  /** This app's configured port: its own origins' port where the connection does not say. */
  port: number;
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

/** A browser's CORS preflight: OPTIONS with Origin and Access-Control-Request-Method, sent without credentials. */
export function isPreflight(request: FastifyRequest): boolean {
  return (
    request.method === "OPTIONS" &&
    request.headers.origin !== undefined &&
    request.headers["access-control-request-method"] !== undefined
  );
}

const STATE_CHANGING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export class CorsPolicy {
  readonly #any: boolean;
  readonly #origins: ReadonlySet<string>;
  readonly #siblingPort: number | null;
  readonly #hosts: HostPolicy;
  readonly #port: number;

  constructor(options: CorsOptions) {
    this.#any = options.origins.includes("*");
    this.#origins = new Set(options.origins);
    this.#siblingPort = options.siblingPort;
    this.#hosts = options.hosts;
    this.#port = options.port;
  }

  allows(origin: string): boolean {
    return (
      this.#any ||
      this.#origins.has(origin) ||
      (this.#siblingPort !== null && this.#hosts.isOriginOnPort(origin, this.#siblingPort))
    );
  }

  /**
   * Whether a request with this Origin may change state: the app's own origin, or one CORS allows.
   * The port the connection reached is this app's (a configured port of 0 means a random one).
   */
  allowsWrite(origin: string, request: FastifyRequest): boolean {
    const port = request.raw.socket?.localPort ?? this.#port;
    return this.#hosts.isOwnOrigin(origin, request.headers.host, port) || this.allows(origin);
  }

  /**
   * Adds the CSRF check to every state-changing route registered after this call (see the top of the
   * file). Call before any route is registered.
   */
  registerCsrfCheck(app: FastifyInstance): void {
    const check: onRequestHookHandler = (request, _reply, done) => {
      const origin = request.headers.origin;
      if (origin === undefined || this.allowsWrite(origin, request)) {
        done();
        return;
      }
      done(
        new ApiError(
          403,
          "forbidden",
          `Origin ${JSON.stringify(origin)} may not change anything here: only this app's own origin and those in CORS_ORIGINS may (cross-site request refused)`,
        ),
      );
    };
    app.addHook("onRoute", (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      if (!methods.some((method) => STATE_CHANGING.has(method.toUpperCase()))) return;
      const existing = route.onRequest === undefined ? [] : [route.onRequest].flat();
      route.onRequest = [check, ...existing] as typeof route.onRequest;
    });
  }

  /** The CORS headers of any answer to `request`; nothing for requests without Origin. */
  addResponseHeaders(request: FastifyRequest, reply: FastifyReply): void {
    const origin = request.headers.origin;
    if (origin === undefined) return;
    // The answer depends on Origin: shared caches must not serve one origin's answer to another.
    addVary(reply, "Origin");
    if (!this.allows(origin)) return;
    void reply.header("access-control-allow-origin", origin);
    void reply.header("access-control-expose-headers", EXPOSE_HEADERS);
  }

  /**
   * Answers preflights on every path: 204 with the allowed methods and the asked headers for an allowed
   * origin; a 404, as for any unknown route, for other origins and OPTIONS requests without Origin; a
   * 400 for an allowed origin's OPTIONS that names no method.
   */
  registerPreflightRoute(app: FastifyInstance): void {
    app.options("*", { schema: { hide: true } }, (request, reply) => {
      const origin = request.headers.origin;
      if (origin === undefined || !this.allows(origin)) {
        reply.callNotFound();
        return reply;
      }
      if (request.headers["access-control-request-method"] === undefined) {
        throw new ApiError(
          400,
          "invalid_request",
          "Invalid preflight request: no Access-Control-Request-Method",
        );
      }
      void reply.header("access-control-allow-methods", ALLOW_METHODS);
      addVary(reply, "Access-Control-Request-Headers");
      const requested = request.headers["access-control-request-headers"];
      if (requested !== undefined) void reply.header("access-control-allow-headers", requested);
      // Safari waits for a body on a 204 without Content-Length.
      return reply.code(204).header("content-length", "0").send();
    });
  }
}
