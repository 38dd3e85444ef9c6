/**
 * OpenAI's API on the RAG app, so any OpenAI client can use the indices: GET /v1/models lists the
 * tenant's indices as models, POST /v1/chat/completions with `model` naming an index answers from it
 * (openai-chat-routes.ts), and the vector stores and files APIs (vector-store-routes.ts). Auth is our
 * API keys and tenants; errors are in OpenAI's shape.
 */
import multipart from "@fastify/multipart";
import { Type } from "typebox";
import { actingTenant, listingTenant } from "../../core/auth.js";
import { openAiErrorBody } from "../../core/error-shapes.js";
import { dialectPlugin } from "../../core/dialect-plugin.js";
import { type TypedApp } from "../../core/http.js";
import type { IndexMeta } from "../store/types.js";
import { registerChatCompletions } from "./openai-chat-routes.js";
import type { OpenAiRagOptions } from "./route-deps.js";
import { IndexName } from "./schemas.js";
import { registerVectorStoreRoutes } from "./vector-store-routes.js";

export type { OpenAiRagOptions };

/** OpenAI's error shape through the dialect factory both apps use; fields stay strict here. */
export const openAiRagRoutes = dialectPlugin<OpenAiRagOptions>(
  { errorShape: openAiErrorBody, tolerant: false },
  async (app, options) => {
    await app.register(multipart, {
      limits: { fileSize: options.largeBodyLimit, files: 1, fields: 16, fieldSize: 64 * 1024 },
    });
    registerModelRoutes(app, options);
    registerChatCompletions(app, options);
    registerVectorStoreRoutes(app, options);
  },
);

/** GET /v1/models and /v1/models/{index}: the tenant's indices as models. */
function registerModelRoutes(app: TypedApp, options: OpenAiRagOptions): void {
  app.get(
    "/models",
    { schema: { tags: ["openai"], summary: "The tenant's indices, as models to chat with" } },
    async (request) => {
      const indices = await options.service.listIndices(listingTenant(request, undefined));
      return { object: "list", data: indices.map(modelObject) };
    },
  );

  app.get(
    "/models/:model",
    {
      schema: {
        tags: ["openai"],
        summary: "One index, as a model",
        params: Type.Object({ model: IndexName }),
      },
    },
    async (request) => {
      const key = { tenantId: actingTenant(request, undefined), name: request.params.model };
      return modelObject(await options.service.requireMeta(key));
    },
  );
}

function modelObject(meta: IndexMeta) {
  return {
    id: meta.name,
    object: "model",
    created: Math.floor(Date.parse(meta.createdAt) / 1000),
    owned_by: meta.tenantId,
  };
}
