/**
 * The one way a dialect is installed, in either app: a plugin factory that gives every route of the
 * dialect its error shape (validation, auth, scheduler, unknown routes: the same body whatever raised
 * it) and, for the foreign dialects, tolerant reading (tolerant.ts): undeclared fields ignored and
 * named in `x-lectern-ignored-fields`. Our own routes stay strict: an undeclared field is a 400 naming
 * it. A new dialect is a decoder, an encoder and an error shape; this is where the shape goes.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { Static, TSchema } from "typebox";
import { badRequest, notFound as routeNotFound, type ApiError } from "./errors.js";
import { toApiError, type TypedApp } from "./http.js";
import { pathOf } from "./url-path.js";
import { headerList, IGNORED_FIELDS_HEADER, readTolerantly, UNENFORCED_HEADER } from "./tolerant.js";

export interface Dialect {
  /** The error body in the dialect's shape. */
  errorShape: (error: ApiError) => object;
  /** Ignore fields the routes' schemas do not declare (foreign dialects), instead of a 400. */
  tolerant: boolean;
  /** Answer unknown routes under the prefix in this shape (one dialect per prefix does). */
  notFound?: boolean;
}

/** Ignored fields of a request, kept for the encoders (a stream's headers are written at its start). */
const ignoredOf = new WeakMap<FastifyRequest, string[]>();

/** The description of a field a tolerant dialect takes only so that clients sending it are not refused. */
export const noEffect = (what: string) => ({ description: `${what}; accepted, no effect` });

/** The fields tolerant reading ignored in this request. */
export function ignoredFields(request: FastifyRequest): readonly string[] {
  return ignoredOf.get(request) ?? [];
}

/**
 * Names more ignored fields (hosted tools not offered, unknown content blocks): in the header, which
 * must be set before the reply starts, and in the debug line.
 */
export function noteIgnored(request: FastifyRequest, reply: FastifyReply, paths: readonly string[]): void {
  if (paths.length === 0) return;
  const all = [...ignoredFields(request), ...paths];
  ignoredOf.set(request, all);
  void reply.header(IGNORED_FIELDS_HEADER, headerList(all));
  request.log.debug({ ignored: paths }, "fields ignored");
}

/** Names schema keywords the grammar does not enforce (dropped, not refused). */
export function noteUnenforced(reply: FastifyReply, paths: readonly string[]): void {
  if (paths.length > 0) void reply.header(UNENFORCED_HEADER, headerList(paths));
}

/** A validation error for a field a strict dialect does not declare names the field. */
function unknownFieldError(error: unknown): ApiError | undefined {
  const validation = (
    error as {
      validation?: { keyword?: string; instancePath?: string; params?: { additionalProperty?: string } }[];
    }
  ).validation;
  const first = validation?.[0];
  if (first?.keyword !== "additionalProperties" || !first.params?.additionalProperty) return undefined;
  const field = first.params.additionalProperty;
  const at = first.instancePath ?? "";
  const where = at === "" ? field : `${at.slice(1).replace(/\//g, ".")}.${field}`;
  return toApiError(
    badRequest(`Unsupported field "${where}": this server does not implement it (see /docs)`, [
      { path: `${at}/${field}` },
    ]),
  );
}

/** Installs the dialect on an encapsulated instance (its prefix). */
export function installDialect(app: FastifyInstance, dialect: Dialect): void {
  app.setErrorHandler((error, request, reply) => {
    const apiError = unknownFieldError(error) ?? toApiError(error);
    if (apiError.statusCode >= 500) request.log.error({ err: error }, "request failed");
    for (const [name, value] of Object.entries(apiError.headers)) void reply.header(name, value);
    return reply.status(apiError.statusCode).send(dialect.errorShape(apiError));
  });
  if (dialect.notFound !== false)
    app.setNotFoundHandler((request, reply) =>
      reply
        .status(404)
        .send(
          dialect.errorShape(
            toApiError(routeNotFound(`No route ${request.method} ${pathOf(request.url)}; see /docs`)),
          ),
        ),
    );
  if (!dialect.tolerant) return;
  app.addHook("preValidation", async (request, reply) => {
    const schema = request.routeOptions.schema?.body;
    if (schema === undefined || typeof request.body !== "object" || request.body === null) return;
    noteIgnored(request, reply, readTolerantly(schema, request.body));
  });
}

/**
 * A dialect's plugin: `routes` registered on an instance of their own with the dialect installed.
 * Both apps build their dialects with it (the RAG app's OpenAI routes too).
 */
export function dialectPlugin<Options extends object>(
  dialect: Dialect,
  routes: (app: TypedApp, options: Options) => void | Promise<void>,
): FastifyPluginAsync<Options> {
  return async (instance, options) => {
    const app = instance.withTypeProvider<TypeBoxTypeProvider>();
    installDialect(app, dialect);
    await routes(app as unknown as TypedApp, options);
  };
}

/**
 * A dialect's POST route with a JSON body: the OpenAPI tags and summary, the body's schema, and a
 * handler that receives the validated body (its type is the schema's).
 */
export function dialectPost<Body extends TSchema>(
  app: TypedApp,
  url: string,
  schema: { tags: string[]; summary: string; body: Body },
  handler: (body: Static<Body>, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>,
): void {
  app.post(url, { schema }, (request, reply) => handler(request.body as Static<Body>, request, reply));
}
