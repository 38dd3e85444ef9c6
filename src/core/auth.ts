/**
 * API keys and tenants. With API_KEYS_FILE set, every route but the public ones needs
 * `Authorization: Bearer <key>` (or `x-api-key: <key>`, as Anthropic's clients send it); a key acts for its own tenant only, scope `admin` for all, scope
 * `metrics` may read /metrics. Keys are kept only as SHA-256 digests and compared in constant time
 * against every stored digest, so neither a match nor its position leaks through timing.
 *
 * Access is decided on the normalised path (escapes decoded, `//` collapsed, dot segments resolved)
 * and on the route the router picked, so `/%6detrics` is /metrics here too. A request refused with
 * 401 counts against AUTH_FAILURES_PER_MINUTE (30 by default) for its client address: the
 * connection's, or X-Forwarded-For's behind a proxy TRUST_PROXY names, so clients behind one proxy are
 * not counted as one. Past the limit a wrong or missing key gets 429 instead of 401; a valid key is
 * never limited (issue #35: with a shared address, one client guessing would lock out every other).
 * The limit thus bounds the 401s (and their log lines) an address can cause; keys themselves must be
 * long random strings, which no rate of guessing finds.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { isPreflight } from "./cors.js";
import { internalCallOf } from "./internal-call.js";
import type { Principal } from "./principal.js";
import { ApiError, ConfigError, parseConfigJson } from "./errors.js";
import { normalisedPath, pathOf } from "./url-path.js";

export type { Principal };

interface StoredKey {
  digest: Buffer;
  principal: Principal;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated key's principal; null when auth is off or on public routes. */
    principal: Principal | null;
  }
}

const TENANT = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,128}$/;
const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest();

export class KeyRing {
  private constructor(private readonly keys: StoredKey[]) {}

  get size(): number {
    return this.keys.length;
  }

  /** Reads `<key> <tenant> [scope,scope]` lines (`#` comments) or JSON `[{key, tenant, scopes}]`. */
  static parse(text: string, source = "API_KEYS_FILE"): KeyRing {
    const entries: Array<{ key: string; tenant: string; scopes: string[]; where: string }> = [];
    const trimmed = text.trim();
    if (trimmed.startsWith("[")) {
      const parsed = parseConfigJson(trimmed, source);
      if (!Array.isArray(parsed)) throw new ConfigError(`${source} must hold a JSON array`);
      parsed.forEach((item: { key?: unknown; tenant?: unknown; scopes?: unknown }, index) => {
        if (typeof item?.key !== "string" || typeof item.tenant !== "string") {
          throw new ConfigError(`${source}: entry ${index} needs string "key" and "tenant"`);
        }
        const scopes = Array.isArray(item.scopes) ? item.scopes.map(String) : [];
        entries.push({ key: item.key, tenant: item.tenant, scopes, where: `entry ${index}` });
      });
    } else {
      text.split(/\r?\n/).forEach((line, index) => {
        const content = line.replace(/#.*$/, "").trim();
        if (!content) return;
        const [key, tenant, scopes, extra] = content.split(/\s+/);
        if (!key || !tenant || extra !== undefined) {
          throw new ConfigError(`${source}: line ${index + 1} must be "<key> <tenant> [scope,scope]"`);
        }
        entries.push({
          key,
          tenant,
          scopes: scopes ? scopes.split(",").filter(Boolean) : [],
          where: `line ${index + 1}`,
        });
      });
    }
    const keys = entries.map(({ key, tenant, scopes, where }): StoredKey => {
      if (!TENANT.test(tenant))
        throw new ConfigError(`${source}: ${where}: tenant "${tenant}" is not a valid tenant id`);
      let digest: Buffer;
      if (key.startsWith("sha256:")) {
        const hex = key.slice(7);
        if (!/^[0-9a-fA-F]{64}$/.test(hex))
          throw new ConfigError(`${source}: ${where}: sha256: needs 64 hex digits`);
        digest = Buffer.from(hex, "hex");
      } else {
        if (key.length < 8) throw new ConfigError(`${source}: ${where}: keys must be at least 8 characters`);
        digest = sha256(key);
      }
      const scopeSet = new Set(scopes);
      return {
        digest,
        principal: {
          tenant,
          scopes: scopeSet,
          admin: scopeSet.has("admin"),
          keyId: digest.toString("hex").slice(0, 12),
        },
      };
    });
    if (keys.length === 0) throw new ConfigError(`${source} holds no keys`);
    return new KeyRing(keys);
  }

  static load(file: string): KeyRing {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const where = path.resolve(file);
      const why: Record<string, string> = {
        ENOENT: "does not exist",
        EACCES: "is not readable by this process (permission denied)",
        EISDIR: "is a folder, not a file",
      };
      throw new ConfigError(
        `API_KEYS_FILE cannot be read: ${where} ${why[code ?? ""] ?? `(${code ?? String(error)})`}`,
      );
    }
    return KeyRing.parse(text);
  }

  /** The principal of a presented key, or null. Compares against every key, always. */
  authenticate(presented: string): Principal | null {
    const digest = sha256(presented);
    let found: Principal | null = null;
    for (const key of this.keys) {
      if (timingSafeEqual(key.digest, digest) && found === null) found = key.principal;
    }
    return found;
  }
}

const PUBLIC_PATHS = new Set(["/", "/health", "/livez", "/openapi.json", "/docs", "/ui"]);

const isPublic = (path: string) =>
  PUBLIC_PATHS.has(path) || path.startsWith("/docs/") || path.startsWith("/ui/");

/**
 * Routes anyone may call even with keys on: public as written and once normalised, so neither
 * `/ui/../rag/indices` nor an escaped form of a protected path counts as public.
 */
export function isPublicPath(url: string): boolean {
  return isPublic(pathOf(url)) && isPublic(normalisedPath(url));
}

/** Whether a request reaches /metrics, however its path is written. */
function isMetricsRequest(request: FastifyRequest): boolean {
  return (
    request.routeOptions.url === "/metrics" || normalisedPath(request.url).replace(/\/+$/, "") === "/metrics"
  );
}

/**
 * 401s per client address in a fixed one-minute window. Memory is bounded: expired entries are swept
 * as the map grows, and past MAX_TRACKED addresses the oldest is forgotten.
 */
class FailedAttempts {
  private static readonly MAX_TRACKED = 100_000;
  private readonly byAddress = new Map<string, { count: number; resetAt: number }>();

  constructor(
    private readonly limit: number,
    private readonly windowMs = 60_000,
  ) {}

  /** Seconds until `address` may try again, or 0 when it may now. */
  retryAfter(address: string, now: number): number {
    const entry = this.byAddress.get(address);
    if (!entry || entry.resetAt <= now || entry.count < this.limit) return 0;
    return Math.max(1, Math.ceil((entry.resetAt - now) / 1000));
  }

  record(address: string, now: number): void {
    const entry = this.byAddress.get(address);
    if (entry && entry.resetAt > now) {
      entry.count++;
      return;
    }
    this.byAddress.delete(address);
    if (this.byAddress.size >= FailedAttempts.MAX_TRACKED) this.sweep(now);
    this.byAddress.set(address, { count: 1, resetAt: now + this.windowMs });
  }

  private sweep(now: number): void {
    for (const [address, entry] of this.byAddress) if (entry.resetAt <= now) this.byAddress.delete(address);
    const oldest = this.byAddress.keys().next();
    if (this.byAddress.size >= FailedAttempts.MAX_TRACKED && !oldest.done)
      this.byAddress.delete(oldest.value);
  }
}

export interface AuthOptions {
  /** 401s one client address may get per minute before 429 (AUTH_FAILURES_PER_MINUTE); 0: no limit. */
  failuresPerMinute?: number;
}

/** Adds the bearer-key check to every non-public route when a key ring is given. */
export function registerAuth(app: FastifyInstance, keys: KeyRing | null, options: AuthOptions = {}): void {
  app.decorateRequest("principal", null);
  if (!keys) return;
  const failures = options.failuresPerMinute ? new FailedAttempts(options.failuresPerMinute) : null;
  app.addHook("onRequest", async (request: FastifyRequest) => {
    // A browser sends its CORS preflight without credentials; the OPTIONS route answers it (cors.ts).
    if (isPublicPath(request.url) || isPreflight(request)) return;
    // A batch line the server runs for a batch's owner (internal-call.ts) acts as that owner.
    const internal = internalCallOf(request);
    if (internal) {
      request.principal = internal.principal;
      return;
    }
    // Anthropic's clients send the key as `x-api-key`; it is accepted the same way.
    const apiKeyHeader = request.headers["x-api-key"];
    const header =
      request.headers.authorization ??
      (typeof apiKeyHeader === "string" ? `Bearer ${apiKeyHeader}` : undefined);
    const match = typeof header === "string" ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    const principal = match ? keys.authenticate(match[1]!) : null;
    if (!principal) {
      const now = Date.now();
      const wait = failures?.retryAfter(request.ip, now) ?? 0;
      if (wait > 0) {
        throw new ApiError(
          429,
          "rate_limited",
          `Too many requests without a valid API key from this address (AUTH_FAILURES_PER_MINUTE); retry after ${wait} s`,
          [],
          { "retry-after": String(wait) },
        );
      }
      failures?.record(request.ip, now);
      throw new ApiError(
        401,
        "unauthorized",
        header ? "The API key is not valid" : "This route needs an API key: send Authorization: Bearer <key>",
        [],
        { "www-authenticate": 'Bearer realm="lectern"' },
      );
    }
    request.principal = principal;
    if (isMetricsRequest(request) && !principal.admin && !principal.scopes.has("metrics")) {
      throw new ApiError(
        403,
        "forbidden",
        'Reading /metrics needs a key with the "metrics" or "admin" scope',
      );
    }
  });
}

/**
 * The tenant whose folder under RAG_FILES_DIR a request may read: a key that is not admin reads
 * RAG_FILES_DIR/<its tenant> only; admin keys, and everyone with auth off, all of RAG_FILES_DIR
 * (undefined). Also the tenant whose share of /rag/stats a key sees.
 */
export function confinedTenant(request: FastifyRequest): string | undefined {
  const principal = request.principal;
  return principal && !principal.admin ? principal.tenant : undefined;
}

/**
 * `?tenant_id=` in the query string of a route whose tenant travels in the body (POSTs, multipart
 * included): taken when the body names none, 400 when it names another or the value is not a tenant
 * id, so it is never silently ignored.
 */
function tenantInQuery(request: FastifyRequest, requested: string | undefined): string | undefined {
  const query = request.query as Record<string, unknown> | null | undefined;
  const value = query?.tenant_id;
  if (value === undefined || value === requested) return requested;
  if (typeof value !== "string" || !TENANT.test(value)) {
    throw new ApiError(
      400,
      "invalid_request",
      "Invalid request: querystring.tenant_id is not a valid tenant id",
    );
  }
  if (requested !== undefined) {
    throw new ApiError(
      400,
      "invalid_request",
      `tenant_id "${requested}" in the body and "${value}" in the query string differ; send one`,
    );
  }
  return value;
}

/**
 * The tenant a request acts for: the one asked for, else the key's own (or "default" with auth off).
 * A key asking for another tenant gets 403, unless it is an admin key.
 */
export function actingTenant(
  request: FastifyRequest,
  requested: string | undefined,
  fallback = "default",
): string {
  return principalTenant(request.principal, tenantInQuery(request, requested), fallback);
}

/** actingTenant's rule for a principal known without a request (the MCP server's tools). */
export function principalTenant(
  principal: Principal | null,
  requested: string | undefined,
  fallback = "default",
): string {
  if (!principal) return requested ?? fallback;
  if (requested === undefined || requested === principal.tenant) return principal.tenant;
  if (principal.admin) return requested;
  throw new ApiError(403, "forbidden", `This key acts for tenant "${principal.tenant}" only`);
}

/** For listings: null (all tenants) for an admin key asking for none, else the acting tenant. */
export function listingTenant(request: FastifyRequest, requested: string | undefined): string | null {
  if (request.principal?.admin && requested === undefined) return null;
  return actingTenant(request, requested);
}

/** listingTenant's rule for a principal known without a request. */
export function principalListingTenant(
  principal: Principal | null,
  requested: string | undefined,
  fallback = "default",
): string | null {
  if (principal?.admin && requested === undefined) return null;
  return principalTenant(principal, requested, fallback);
}

/**
 * Whether a principal may write through the MCP server (`add_document`): keys with the `write` or
 * `admin` scope, and everyone when auth is off (no principal).
 */
export function mayWrite(principal: Principal | null): boolean {
  return principal === null || principal.admin || principal.scopes.has("write");
}
