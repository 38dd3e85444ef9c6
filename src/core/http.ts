/**
 * The Fastify base shared by both apps: TypeBox type provider, the one JSON error shape, request ids,
 * body limits, and the OpenAPI document with an offline Swagger UI at /docs. Each app adds its own
 * routes to the instance this returns; nothing here listens, so tests use `app.inject()`.
 */
import { randomUUID } from "node:crypto";
import type { Duplex } from "node:stream";
import type { Server } from "node:http";
import Fastify, {
  type FastifyError,
  type FastifyHttpOptions,
  type FastifyInstance,
  type FastifyReply,
  type RouteOptions,
} from "fastify";
import type { DestinationStream } from "pino";
import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import {
  ApiError,
  DomainError,
  isStorageFull,
  storageFull,
  tooLarge,
  type ErrorCode,
  type ErrorKind,
} from "./errors.js";
import { lazyRequestLogger, logDestination, loggerOptions } from "./logger.js";
import { RequestLifecycle, type RequestCompletedListener } from "./request-lifecycle.js";
import rateLimit from "@fastify/rate-limit";
import { CorsPolicy, isPreflight } from "./cors.js";
import { HostPolicy } from "./hosts.js";
import { registerJsonBodyParser } from "./json-body.js";
import { isPublicPath, KeyRing, registerAuth } from "./auth.js";
import { registerUi } from "./ui.js";
import type { Config } from "./config.js";
import { PRODUCT_NAME, VERSION } from "./version.js";
import { pathOf } from "./url-path.js";
import { NAME_PATTERN, NAME_RULE } from "./validation.js";

declare module "fastify" {
  interface FastifyInstance {
    /**
     * Calls `listener` once per request when its response is done (apps built by createHttpApp; see
     * RequestLifecycle). Absent on other Fastify instances.
     */
    onRequestCompleted?: (listener: RequestCompletedListener) => void;
  }
}

export type HttpApp = FastifyInstance & { withTypeProvider: FastifyInstance["withTypeProvider"] };

export interface HttpAppOptions {
  /** Service name as shown in `GET /` and the OpenAPI title, e.g. "Text Generation". */
  service: string;
  description: string;
  config: {
    server: Pick<Config["server"], "host" | "logLevel" | "httpRequestTimeoutMs" | "textgenPort" | "ragPort"> &
      Partial<Pick<Config["server"], "logFormat">>;
    auth: Config["auth"];
    limits: Pick<Config["limits"], "maxBodyBytes" | "maxJsonDepth">;
  };
  /** Serve the web playground at /ui, as this app; `config`: what else the page reads of it. */
  ui?: { service: "textgen" | "rag"; config?: Record<string, unknown> };
  /** OpenAPI tags, in the order /docs shows them. */
  tags?: Array<{ name: string; description: string }>;
  /** Where log lines go instead of stdout (tests read them). */
  logStream?: DestinationStream;
  /** Told of every route as it is registered, hidden ones too (the fuzz suites check they cover all). */
  onRoute?: (route: RouteOptions) => void;
}

const codeByStatus: Record<number, ErrorCode> = {
  400: "invalid_request",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "invalid_request",
  406: "invalid_request",
  409: "conflict",
  413: "payload_too_large",
  415: "unsupported_media_type",
  422: "invalid_request",
  429: "rate_limited",
  503: "not_ready",
  504: "timeout",
};

/**
 * What is wrong with the first invalid value, from schema validation errors. A choice of constants
 * ("tfidf" | "bm25") fails once per alternative with "must be equal to constant": the allowed values
 * are named in the message itself, so a client that sent "BM25" reads what to send.
 */
export function validationProblem(
  errors: ReadonlyArray<{ path?: string; instancePath?: string; message?: string; params?: unknown }>,
): string {
  const pathOf = (error: { path?: string; instancePath?: string }) => error.path ?? error.instancePath ?? "";
  const first = errors[0];
  if (first === undefined) return "is invalid";
  const params = first.params as { additionalProperty?: string; pattern?: string } | undefined;
  if (params?.additionalProperty !== undefined)
    return `has an unknown field "${params.additionalProperty}" (see /docs for the fields it takes)`;
  if (params?.pattern === NAME_PATTERN) return `must be ${NAME_RULE}`;
  const allowed = errors
    .filter((error) => pathOf(error) === pathOf(first))
    .map((error) => (error.params as { allowedValue?: unknown } | undefined)?.allowedValue)
    .filter((value) => value !== undefined);
  if (allowed.length === 0) return first.message ?? "is invalid";
  return `must be one of ${allowed.map((value) => JSON.stringify(value)).join(", ")} (exactly, case included)`;
}

/** Each domain error kind as HTTP: its status and the contract's code (a DomainError may name another). */
const HTTP_OF_KIND: Readonly<Record<ErrorKind, { status: number; code: ErrorCode }>> = {
  invalid: { status: 400, code: "invalid_request" },
  unprocessable: { status: 422, code: "invalid_request" },
  not_found: { status: 404, code: "not_found" },
  forbidden: { status: 403, code: "forbidden" },
  conflict: { status: 409, code: "conflict" },
  too_large: { status: 413, code: "payload_too_large" },
  busy: { status: 429, code: "queue_full" },
  // 499 (nginx's "client closed request"): nobody reads it, but logs and metrics tell it from a 4xx.
  cancelled: { status: 499, code: "invalid_request" },
  corrupt: { status: 500, code: "internal_error" },
  upstream: { status: 502, code: "upstream_error" },
  not_ready: { status: 503, code: "not_ready" },
  timeout: { status: 504, code: "timeout" },
  storage_full: { status: 507, code: "insufficient_storage" },
};

/**
 * Any error as the API error a client sees: the one place domain errors become HTTP. Unexpected
 * errors lose their details (the log has them).
 */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof DomainError) {
    const { status, code } = HTTP_OF_KIND[error.kind];
    const headers: Record<string, string> =
      error.retryAfter === undefined ? {} : { "retry-after": error.retryAfter };
    return new ApiError(status, error.code ?? code, error.message, error.details, headers);
  }
  // A full file system (ENOSPC, EDQUOT) is a state, not a bug: 507 says what to do. (Stores report a
  // full database as a storage_full DomainError, mapped above.)
  if (isStorageFull(error)) return toApiError(storageFull());
  const err = error as Partial<FastifyError> & { validation?: unknown[]; validationContext?: string };
  if (Array.isArray(err.validation)) {
    const details = err.validation.map((v) => {
      const item = v as { instancePath?: string; message?: string; params?: unknown };
      return { path: item.instancePath ?? "", message: item.message ?? "invalid", params: item.params };
    });
    const where = err.validationContext ?? "body";
    const first = details[0];
    const field = first?.path ? `${where}${first.path.replace(/\//g, ".")}` : where;
    return new ApiError(
      400,
      "invalid_request",
      `Invalid request: ${field} ${validationProblem(details)}`,
      details,
    );
  }
  const status = typeof err.statusCode === "number" ? err.statusCode : 500;
  if (status >= 400 && status < 500) {
    let message = err.message ?? "Bad request";
    // A body without Content-Length that grew past the limit (refuseOversizedBodies says the sizes).
    if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE")
      message = "Request body is larger than this route takes (MAX_BODY_BYTES sets the limits)";
    else if (err.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE")
      message = `Unsupported content type; send application/json`;
    else if (error instanceof SyntaxError || err.code === "FST_ERR_CTP_INVALID_JSON_BODY")
      message = `Malformed JSON body: ${err.message}`;
    return new ApiError(status, codeByStatus[status] ?? "invalid_request", message);
  }
  return new ApiError(500, "internal_error", "Internal server error; the server log has the details");
}

/**
 * A body whose Content-Length is over its route's limit is a 413 that says the limit in bytes and
 * the setting behind it, before a byte is read; Fastify's own error says neither. Multipart uploads
 * are bounded per file by their own parser (rag/http/uploads.ts), not by the route's body limit.
 */
function refuseOversizedBodies(app: FastifyInstance, smallLimit: number): void {
  app.addHook("preParsing", async (request) => {
    const length = Number(request.headers["content-length"]);
    const limit = request.routeOptions.bodyLimit;
    if (!Number.isFinite(length) || limit === undefined || length <= limit) return;
    if (String(request.headers["content-type"] ?? "").startsWith("multipart/")) return;
    const mib = (bytes: number) => `${Number((bytes / 1024 ** 2).toFixed(2))} MiB`;
    const setting =
      limit > smallLimit
        ? "MAX_BODY_BYTES"
        : "the limit of every route but /rag/build and the document routes: 1 MiB, or MAX_BODY_BYTES when smaller";
    throw tooLarge(
      `Request body is ${length} bytes; this route takes at most ${limit} bytes (${mib(limit)}; ${setting})`,
      [{ limit_bytes: limit, body_bytes: length }],
    );
  });
}

export function sendError(reply: FastifyReply, apiError: ApiError): FastifyReply {
  for (const [name, value] of Object.entries(apiError.headers)) void reply.header(name, value);
  return reply.status(apiError.statusCode).type("application/json").send(apiError.toBody());
}

export async function createHttpApp(options: HttpAppOptions) {
  const { config } = options;
  const hosts = new HostPolicy({ bindAddress: config.server.host, allowedHosts: config.auth.allowedHosts });
  const cors = corsPolicyOf(options, hosts);
  // Request id and CORS headers on entry, metrics and the access line on completion (no hooks).
  const lifecycle = new RequestLifecycle({ cors });
  const logStream = options.logStream ?? (await logDestination(config.server.logFormat ?? "json"));
  const app = Fastify(
    fastifyOptions(options, lifecycle, hosts, logStream),
  ).withTypeProvider<TypeBoxTypeProvider>();
  // Before any route, so that it sees them all (plugins registered later inherit the hook).
  if (options.onRoute) app.addHook("onRoute", options.onRoute);

  // First, so no other check answers in its place (a refused Host is a 403 that says why).
  hosts.registerRefusal(app);
  // Before any other route: state-changing routes get the CSRF check (cors.ts).
  cors.registerCsrfCheck(app);
  refuseOversizedBodies(app, config.limits.maxBodyBytes);
  app.decorate("onRequestCompleted", (listener: RequestCompletedListener) =>
    lifecycle.addCompletedListener(listener),
  );
  // Bodies are JSON (or multipart where a route says so); Fastify's default text/plain parser would let
  // unvalidated strings reach handlers, so such bodies are a 415 instead.
  app.removeContentTypeParser("text/plain");
  registerJsonBodyParser(app, config.limits.maxJsonDepth);
  readEmptyBodiesAsNone(app);
  coerceQueryScalars(app);
  registerErrorHandlers(app);
  cors.registerPreflightRoute(app);
  const keysOn = await registerAccess(app, config);
  await registerDocs(app, options, keysOn);
  if (options.ui) await registerUi(app, { ...options.ui, appConfig: options.ui.config ?? {}, config });
  // Liveness: the process answers. Readiness is /health, which each app defines.
  app.get("/livez", { schema: { tags: ["service"], summary: "Liveness (the process is up)" } }, async () => ({
    status: "alive",
  }));
  return app;
}

/**
 * CORS: the configured origins, plus the sibling app on an allowed host (so the playground served by
 * one app can call the other). This app's own port is the one its playground would be served on.
 */
function corsPolicyOf(options: HttpAppOptions, hosts: HostPolicy): CorsPolicy {
  const { server } = options.config;
  const service = options.ui?.service;
  const siblingPort =
    service === undefined ? null : service === "textgen" ? server.ragPort : server.textgenPort;
  const port = service === "rag" ? server.ragPort : server.textgenPort;
  return new CorsPolicy({ origins: options.config.auth.corsOrigins, siblingPort, hosts, port });
}

/** Fastify's own options: logging, limits, timeouts, the client address and the Host check. */
function fastifyOptions(
  options: HttpAppOptions,
  lifecycle: RequestLifecycle,
  hosts: HostPolicy,
  logStream: DestinationStream | undefined,
): FastifyHttpOptions<Server> {
  const { server, limits, auth } = options.config;
  const hops = auth.trustProxy;
  return {
    logger: {
      ...loggerOptions(server.logLevel),
      ...(logStream ? { stream: logStream } : {}),
    },
    // One access-log line per request instead of Fastify's two, and the per-request duties above.
    logController: lifecycle,
    // A request's child logger is made only when something logs through it (see logger.ts).
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: limits.maxBodyBytes,
    requestTimeout: server.httpRequestTimeoutMs,
    // Node checks for timed-out requests every 30 s by default: check often enough that the 408
    // comes close to HTTP_REQUEST_TIMEOUT_MS; and with a headers timeout (60 s by default) longer than
    // the request timeout, Node answers a stalled body only at the headers timeout: bound it too.
    http: {
      connectionsCheckingInterval: Math.min(30_000, Math.max(250, server.httpRequestTimeoutMs / 4)),
      headersTimeout: Math.min(60_000, server.httpRequestTimeoutMs),
    },
    // request.ip is X-Forwarded-For's client only behind the proxies TRUST_PROXY names.
    // A number of proxies: the address that many hops before the connection's (as proxy-addr does).
    trustProxy: typeof hops === "number" ? (_address: string, hop: number) => hop < hops : hops,
    // A Host that is not ours is routed to a 403 (DNS rebinding; hosts.ts), without a hook.
    rewriteUrl: (request) => hosts.rewrite(request),
    // JSON keys that could reach a prototype are refused (400), never merged.
    onProtoPoisoning: "error",
    onConstructorPoisoning: "error",
    // Index names (128) and document ids (512) travel in paths; the default 100 would turn them away.
    routerOptions: { maxParamLength: 2048 },
    // Errors raised before routing (bad percent-encoding…) still get the contract's shape.
    frameworkErrors: (error, _request, reply) => sendError(reply, toApiError(error)),
    // Requests Node's HTTP parser rejects never reach Fastify: answer them in the contract's shape too.
    clientErrorHandler: answerClientError,
    requestIdHeader: "x-request-id",
    genReqId: () => randomUUID(),
    ajv: {
      // Wrong types are the client's error to fix, not something to coerce silently.
      customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false },
    },
    return503OnClosing: true,
  };
}

/** Answers a request Node's HTTP parser rejected (or that timed out) on the raw socket. */
function answerClientError(error: Error, socket: Duplex): void {
  // A response already begun (headers sent) cannot be replaced by an error: only closed.
  const started = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent;
  if (!socket.writable || started) {
    socket.destroy(error);
    return;
  }
  // HTTP_REQUEST_TIMEOUT_MS passed before the whole request arrived: 408, as Node itself answers.
  // Routes that write wait for the whole body first, so this never follows a commit.
  const timedOut = (error as { code?: string }).code === "ERR_HTTP_REQUEST_TIMEOUT";
  const [status, reason] = timedOut ? [408, "Request Timeout"] : [400, "Bad Request"];
  const body = JSON.stringify(
    new ApiError(
      status,
      "invalid_request",
      timedOut
        ? "The request was not received in time (HTTP_REQUEST_TIMEOUT_MS); nothing was done"
        : "Malformed HTTP request; check the request line, path and headers",
    ).toBody(),
  );
  // A HEAD request gets the headers only: a body there would break the client's parser.
  const raw = (error as unknown as { rawPacket?: Buffer }).rawPacket;
  const isHead = raw !== undefined && raw.subarray(0, 5).toString("latin1") === "HEAD ";
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${isHead ? "" : body}`,
  );
}

/** Every error as the contract's JSON (logged by kind), and unknown routes as a 404 that says so. */
function registerErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    const apiError = toApiError(error);
    // A 5xx the code chose (not ready, timed out, upstream down) is a state, not a bug: one warning
    // line. Only an unexpected error is logged as an error with its stack.
    if (!(error instanceof ApiError || error instanceof DomainError) && apiError.statusCode >= 500) {
      request.log.error({ err: error }, "request failed");
    } else if (apiError.statusCode >= 500) {
      request.log.warn({ code: apiError.code, msg: apiError.message }, "request refused");
    } else request.log.info({ code: apiError.code, msg: apiError.message }, "request rejected");
    return sendError(reply, apiError);
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(
      reply,
      new ApiError(404, "not_found", `No route ${request.method} ${pathOf(request.url)}; see /docs`),
    ),
  );
}

/** Keys (auth.ts) and RATE_LIMIT_PER_MINUTE; whether keys are on. */
async function registerAccess(app: FastifyInstance, config: HttpAppOptions["config"]): Promise<boolean> {
  // Read here, where the app is built: the config only parses values (a bad file is a ConfigError still).
  const apiKeys = config.auth.apiKeysFile === null ? null : KeyRing.load(config.auth.apiKeysFile);
  registerAuth(app, apiKeys, { failuresPerMinute: config.auth.authFailuresPerMinute });
  if (config.auth.rateLimitPerMinute === 0) return apiKeys !== null;
  await app.register(rateLimit, {
    max: config.auth.rateLimitPerMinute,
    timeWindow: 60_000,
    // Per key when keys are on, per client address otherwise; health checks are never limited.
    keyGenerator: (request) => request.principal?.keyId ?? request.ip,
    allowList: (request) => isPublicPath(request.url) || isPreflight(request),
    errorResponseBuilder: (_request, context) =>
      new ApiError(
        429,
        "rate_limited",
        `Rate limit of ${context.max} requests per minute reached; retry after ${Math.ceil(context.ttl / 1000)} s`,
        [],
        { "retry-after": String(Math.ceil(context.ttl / 1000)) },
      ),
  });
  return apiKeys !== null;
}

/** The OpenAPI document, /openapi.json and the offline Swagger UI at /docs. */
async function registerDocs(app: FastifyInstance, options: HttpAppOptions, keysOn: boolean): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: "3.0.3",
      info: {
        title: `${PRODUCT_NAME} ${options.service} API`,
        version: VERSION,
        description: options.description,
      },
      tags: options.tags ?? [],
      components: {
        securitySchemes: {
          bearer: { type: "http", scheme: "bearer", description: "API key from API_KEYS_FILE" },
        },
      },
      // Shown as the Authorize button in /docs; public routes need no key even when keys are on.
      ...(keysOn ? { security: [{ bearer: [] }] } : {}),
    },
  });
  // Swagger UI's assets ship inside the package; validatorUrl null keeps the page from calling out.
  await app.register(swaggerUi, { routePrefix: "/docs", uiConfig: { validatorUrl: null }, staticCSP: true });
  app.get("/openapi.json", { schema: { hide: true } }, async () => app.swagger());
}

export type TypedApp = Awaited<ReturnType<typeof createHttpApp>>;

export function rootMessage(service: string) {
  return { message: `${PRODUCT_NAME} ${service} API v${VERSION}`, docs: "/docs" };
}

/**
 * A request that says `content-type: application/json` and carries no body (every DELETE of the
 * Python SDKs) is read as having no body, as if it had no content type, instead of failing to parse.
 */
function readEmptyBodiesAsNone(app: FastifyInstance): void {
  app.addHook("onRequest", async (request) => {
    const headers = request.headers;
    if (headers["content-type"] === undefined || headers["transfer-encoding"] !== undefined) return;
    const length = headers["content-length"];
    if (length === undefined || length === "0") delete headers["content-type"];
  });
}

/**
 * Query strings are text: `?limit=5` is read as the integer, number or boolean the route's
 * querystring schema declares (bodies are never coerced: a wrong type there is the client's to fix).
 */
function coerceQueryScalars(app: FastifyInstance): void {
  app.addHook("preValidation", async (request) => {
    const schema = request.routeOptions.schema?.querystring as
      { properties?: Record<string, { type?: unknown }> } | undefined;
    const query = request.query as Record<string, unknown> | undefined;
    if (!schema?.properties || !query) return;
    for (const [name, property] of Object.entries(schema.properties)) {
      const value = query[name];
      if (typeof value !== "string") continue;
      if (
        (property.type === "integer" && /^-?\d+$/.test(value)) ||
        (property.type === "number" && value.trim() !== "" && Number.isFinite(Number(value)))
      )
        query[name] = Number(value);
      else if (property.type === "boolean" && (value === "true" || value === "false"))
        query[name] = value === "true";
    }
  });
}
