/**
 * Who may manage the models (issue #35), decided here for every API: loading, unloading, pulling
 * and deleting models, and a `keep_alive` of 0 (which unloads a model for everyone), are a model
 * administrator's. With keys on, that is a key with the `admin` scope; with keys off, a client on
 * this machine (a loopback address that no proxy relayed, see `isLocalClient`), since anyone who can
 * reach the port could otherwise unload the model everyone uses or fill the disk. Other keep_alive
 * values may only lengthen a model's stay (ModelRegistry's `longerStay`), so they need no permission.
 *
 * Routes call `requireModelAdmin`; `keep_alive` is checked once for every route whose body schema has
 * it (`registerKeepAliveCheck`), so no dialect carries its own copy of the rule.
 */
import type { FastifyInstance, FastifyRequest, preHandlerHookHandler } from "fastify";
import { forbidden } from "../../core/errors.js";
import { parseKeepAlive } from "../engine/model-registry.js";

const LOOPBACK = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3})$/;

/**
 * A client on this machine: its address (X-Forwarded-For's only behind a proxy TRUST_PROXY names) is
 * a loopback one, and no proxy that is not trusted relayed it (a proxy on this machine would make
 * every remote client look local).
 */
export function isLocalClient(request: FastifyRequest): boolean {
  if (!LOOPBACK.test(request.ip)) return false;
  const relayed = request.headers["x-forwarded-for"] !== undefined || request.headers.forwarded !== undefined;
  return !relayed || request.ip !== request.socket.remoteAddress;
}

/** Whether the request may manage models: an admin key, or with keys off a local client. */
export function isModelAdmin(request: FastifyRequest): boolean {
  const principal = request.principal;
  return principal ? principal.admin : isLocalClient(request);
}

/** What a refused request is told it needs. */
const NEEDS = "an API key with the admin scope (keys on) or a client on this machine (keys off)";

/** 403 unless the request may manage models; `action` says what was refused ("pull models"). */
export function requireModelAdmin(request: FastifyRequest, action: string): void {
  if (!isModelAdmin(request))
    throw forbidden(`Only a model administrator may ${action}: that needs ${NEEDS}`);
}

/** Whether a body schema (TypeBox/JSON Schema) has a `keep_alive` property, in any alternative. */
function hasKeepAlive(schema: unknown): boolean {
  if (schema === null || typeof schema !== "object") return false;
  const node = schema as { properties?: Record<string, unknown>; anyOf?: unknown[]; oneOf?: unknown[] };
  if (node.properties?.keep_alive !== undefined) return true;
  return [...(node.anyOf ?? []), ...(node.oneOf ?? [])].some(hasKeepAlive);
}

/** Refuses a `keep_alive` that unloads (0) from anyone but a model administrator. */
const checkKeepAlive: preHandlerHookHandler = (request, _reply, done) => {
  const value = (request.body as { keep_alive?: unknown } | null | undefined)?.keep_alive;
  if ((typeof value !== "string" && typeof value !== "number") || isModelAdmin(request)) {
    done();
    return;
  }
  let ms: number;
  try {
    ms = parseKeepAlive(value);
  } catch {
    // Not a duration: the route answers its own 400.
    done();
    return;
  }
  if (ms !== 0) {
    done();
    return;
  }
  done(
    forbidden(
      `keep_alive 0 unloads the model for every client, which needs ${NEEDS}; send no keep_alive, or a longer one`,
      [{ path: "/keep_alive" }],
    ),
  );
};

/**
 * Adds the keep_alive check to every route registered after this call whose body has `keep_alive`
 * (Ollama's, and the OpenAI-compatible routes that accept it). Call before the routes.
 */
export function registerKeepAliveCheck(app: FastifyInstance): void {
  app.addHook("onRoute", (route) => {
    if (!hasKeepAlive(route.schema?.body)) return;
    const existing = route.preHandler === undefined ? [] : [route.preHandler].flat();
    route.preHandler = [checkKeepAlive, ...existing] as typeof route.preHandler;
  });
}
