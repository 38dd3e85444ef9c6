/**
 * The OpenAI-style routes under /v1, for the official `openai` client and everything built on it:
 * models and embeddings here; chat, completions and Responses are dialect adapters (dialects/).
 * This plugin is encapsulated so its error handler answers in OpenAI's error shape while the rest of
 * the app keeps the contract's shape.
 */
import type { FastifyPluginAsync } from "fastify";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { badRequest, notFound } from "../../core/errors.js";
import type { Config } from "../../core/config.js";
import type { TextgenService } from "../engine/service.js";
import { findModelObject, modelList } from "./models-routes.js";
import { clientGoneSignal, strict, useErrorShape } from "./dialects/common.js";
import { openAiErrorBody } from "./dialects/openai-shared.js";
import { registerChatCompletions } from "./dialects/openai-chat.js";
import { registerCompletions } from "./dialects/openai-completions.js";
import { registerResponses } from "./dialects/openai-responses.js";

export { openAiErrorBody, DEFAULT_CHAT_MAX_TOKENS } from "./dialects/openai-shared.js";

export interface OpenAiRouteOptions {
  service: TextgenService;
  /** MAX_NEW_TOKENS and EMBEDDING_MAX_INPUTS. */
  limits: Pick<Config["limits"], "maxNewTokens" | "embeddingMaxInputs">;
}

export const openAiRoutes: FastifyPluginAsync<OpenAiRouteOptions> = async (instance, options) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  const { service } = options;
  useErrorShape(app, openAiErrorBody);

  // A field sent as null means "not set" to OpenAI's API, and some clients send every field that way:
  // an undeclared null field is dropped before validation; with a value it is still a 400 naming it.
  app.addHook("preValidation", async (request) => {
    const body = request.body;
    const declared = (
      request.routeOptions.schema?.body as { properties?: Record<string, unknown> } | undefined
    )?.properties;
    if (!declared || typeof body !== "object" || body === null || Array.isArray(body)) return;
    for (const [key, value] of Object.entries(body))
      if (value === null && !(key in declared)) delete (body as Record<string, unknown>)[key];
  });

  app.get("/models", { schema: { tags: ["openai"], summary: "Every model: status, role, size" } }, async () =>
    modelList(service),
  );

  app.get<{ Params: { id: string } }>(
    "/models/:id",
    {
      schema: {
        tags: ["openai"],
        summary: "One model, by id or alias",
        params: Type.Object({ id: Type.String() }),
      },
    },
    async (request) => {
      const model = findModelObject(service, request.params.id);
      if (!model)
        throw notFound(
          `The model "${request.params.id}" does not exist; known models: ${modelList(service)
            .data.map((m) => m.id)
            .join(", ")}`,
        );
      return model;
    },
  );

  registerChatCompletions(app, service, options.limits.maxNewTokens);
  registerCompletions(app, service, options.limits.maxNewTokens);
  registerResponses(app, service, options.limits.maxNewTokens);

  app.post(
    "/embeddings",
    {
      schema: {
        tags: ["openai"],
        summary: "Embed texts (EMBEDDING_MODEL_PATH's model, else the served model); vectors L2-normalised",
        body: Type.Object(
          {
            input: Type.Union([
              Type.String({ minLength: 1 }),
              Type.Array(Type.String({ minLength: 1 }), {
                minItems: 1,
                maxItems: options.limits.embeddingMaxInputs,
              }),
            ]),
            model: Type.Optional(
              Type.String({ description: "the embedding model (GET /v1/models); the default when absent" }),
            ),
            keep_alive: Type.Optional(Type.Union([Type.String(), Type.Number()])),
            encoding_format: Type.Optional(Type.Union([Type.Literal("float"), Type.Literal("base64")])),
            dimensions: Type.Optional(
              Type.Integer({ minimum: 1, description: "only the model's own size is supported" }),
            ),
            user: Type.Optional(
              Type.String({ description: "an end-user id, for the caller's own logs; no effect" }),
            ),
          },
          strict,
        ),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const inputs = typeof body.input === "string" ? [body.input] : body.input;
      const signal = clientGoneSignal(request, reply);
      const target = service.resolveModel(body.model, "embed", { keepAlive: body.keep_alive });
      const { vectors, promptTokens } = await target.embed(inputs, signal);
      const size = vectors[0]?.length ?? 0;
      if (body.dimensions !== undefined && body.dimensions !== size)
        throw badRequest(
          `dimensions ${body.dimensions} is not supported: this model's embeddings have ${size} dimensions and are not shortened`,
          [{ path: "/dimensions" }],
        );
      return {
        object: "list",
        data: vectors.map((vector, index) => ({
          object: "embedding",
          index,
          embedding:
            body.encoding_format === "base64"
              ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString("base64")
              : Array.from(vector),
        })),
        model: target.name,
        usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
      };
    },
  );
};
