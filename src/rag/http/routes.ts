/**
 * The RAG app's routes, a Fastify plugin: /health and / here, and the /rag route groups, each a
 * plugin of its own (one file per group) in one scope. The plugins validate (schemas), call the
 * service or the answering use case, and shape replies; no rule of the domain is written in them.
 */
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import multipart from "@fastify/multipart";
import type { FastifyPluginAsync } from "fastify";
import { rootMessage } from "../../core/http.js";
import { buildRoutes } from "./build-routes.js";
import { documentRoutes } from "./document-routes.js";
import { indexRoutes } from "./index-routes.js";
import { jsonBodyParser } from "./json-body.js";
import { queryRoutes } from "./query-routes.js";
import type { RagRouteDeps } from "./route-deps.js";
import { syncRoutes } from "./sync-routes.js";

export const RAG_SERVICE_NAME = "RAG";

export type { RagRouteDeps };

export const ragRoutes: FastifyPluginAsync<RagRouteDeps> = async (instance, deps) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  app.get("/health", { schema: { tags: ["service"], summary: "Readiness" } }, async () => ({
    status: "healthy",
    storage: deps.service.store.kind,
  }));
  app.get("/", { schema: { tags: ["service"], summary: "Service name and version" } }, async () =>
    rootMessage(RAG_SERVICE_NAME),
  );
  // The /rag routes live in a scope of their own with the multipart parser, whose hooks would
  // otherwise run on every request of the app (health checks and metrics scrapes included).
  await app.register(async (scope) => {
    await scope.register(multipart, {
      limits: {
        fileSize: deps.largeBodyLimit,
        files: deps.maxBuildDocuments,
        fields: 32,
        fieldSize: 64 * 1024,
      },
    });
    // Large JSON bodies (builds, appends) are parsed off the event loop.
    scope.removeContentTypeParser("application/json");
    scope.addContentTypeParser("application/json", jsonBodyParser(deps.maxJsonDepth));
    for (const group of [buildRoutes, queryRoutes, indexRoutes, documentRoutes, syncRoutes])
      await scope.register(group, deps);
  });
};
