/**
 * The OpenAI-style routes under /v1, for the official `openai` client and everything built on it:
 * models and embeddings here; chat, completions and Responses are dialects (dialects/). Installed
 * through the dialect plugin factory: OpenAI's error shape, tolerant reading.
 */
import type { TypedApp } from "../../core/http.js";
import { Type } from "typebox";
import { badRequest, notFound } from "../../core/errors.js";
import type { Config } from "../../core/config.js";
import type { TextgenService } from "../engine/service.js";
import { priorityOf } from "../../core/internal-call.js";
import { findModelObject, modelList } from "./models-routes.js";
import { anthropicModelList, anthropicModelObject, isAnthropicRequest } from "./dialects/anthropic-models.js";
import { dialectPlugin } from "../../core/dialect-plugin.js";
import { clientGoneSignal, validationLimits, type LimitsConfig } from "./dialects/run.js";
import { truncated } from "./dialects/embedding-shape.js";
import { openAiDialect } from "./dialects/openai-shared.js";
import { registerChatCompletions } from "./dialects/openai-chat.js";
import { registerCompletions } from "./dialects/openai-completions.js";
import { registerResponses, type ResponsesStore } from "./dialects/openai-responses.js";
import type { FileSearchPort } from "./dialects/file-search.js";

export { openAiErrorBody, DEFAULT_CHAT_MAX_TOKENS } from "./dialects/openai-shared.js";

export interface OpenAiRouteOptions {
  service: TextgenService;
  /** MAX_NEW_TOKENS, EMBEDDING_MAX_INPUTS and SCHEMA_MAX_*. */
  limits: LimitsConfig & Pick<Config["limits"], "embeddingMaxInputs">;
  /** Where Responses are kept for `previous_response_id` and `item_reference` (none: nothing is kept). */
  responsesStore?: ResponsesStore;
  /** Where the Responses file_search tool searches (none: a request with it is a 400). */
  fileSearch?: FileSearchPort;
}

export const openAiRoutes = dialectPlugin<OpenAiRouteOptions>(openAiDialect, (app, options) => {
  const { service } = options;
  const limits = validationLimits(options.limits);
  registerModelObjects(app, service);
  registerChatCompletions(app, service, limits);
  registerCompletions(app, service, limits);
  registerResponses(app, service, limits, options.responsesStore, options.fileSearch);
  registerEmbeddings(app, service, options.limits.embeddingMaxInputs);
});

/** GET /v1/models and /v1/models/{id}, in OpenAI's shape or Anthropic's (with anthropic-version). */
function registerModelObjects(app: TypedApp, service: TextgenService): void {
  app.get(
    "/models",
    {
      schema: {
        tags: ["openai"],
        summary: "Every model: status, role, size (Anthropic's shape when the request has anthropic-version)",
        querystring: Type.Object({
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
          after_id: Type.Optional(Type.String()),
          before_id: Type.Optional(Type.String()),
        }),
      },
    },
    async (request) =>
      isAnthropicRequest(request) ? anthropicModelList(service, request.query) : modelList(service),
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
    async (request, reply) => {
      const model = findModelObject(service, request.params.id);
      if (isAnthropicRequest(request)) {
        if (model) return anthropicModelObject(model);
        return reply.status(404).send({
          type: "error",
          error: { type: "not_found_error", message: `model: ${request.params.id}` },
        });
      }
      if (!model)
        throw notFound(
          `The model "${request.params.id}" does not exist; known models: ${modelList(service)
            .data.map((m) => m.id)
            .join(", ")}`,
        );
      return model;
    },
  );
}

/** POST /v1/embeddings. */
function registerEmbeddings(app: TypedApp, service: TextgenService, embeddingMaxInputs: number): void {
  app.post(
    "/embeddings",
    {
      schema: {
        tags: ["openai"],
        summary:
          "Embed texts (EMBEDDING_MODEL_PATH's model, else the served model); vectors L2-normalised, `dimensions` truncates",
        body: Type.Object({
          input: Type.Union([
            Type.String(),
            Type.Array(Type.String()),
            Type.Array(Type.Integer()),
            Type.Array(Type.Array(Type.Integer())),
          ]),
          model: Type.Optional(
            Type.String({ description: "the embedding model (GET /v1/models); the default when absent" }),
          ),
          keep_alive: Type.Optional(Type.Union([Type.String(), Type.Number()])),
          encoding_format: Type.Optional(Type.Union([Type.Literal("float"), Type.Literal("base64")])),
          dimensions: Type.Optional(
            Type.Integer({
              minimum: 1,
              description:
                "fewer than the model's: the first `dimensions` values, renormalised to unit length (Matryoshka-style)",
            }),
          ),
          user: Type.Optional(Type.String({ description: "an end-user id; accepted, no effect" })),
        }),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const target = service.resolveModel(body.model, "embed", { keepAlive: body.keep_alive });
      const inputs = await embeddingInputs(body.input, embeddingMaxInputs, () => target.tokenizer());
      const { vectors, promptTokens } = await target.embed(
        inputs,
        clientGoneSignal(request, reply),
        priorityOf(request),
      );
      const size = vectors[0]?.length ?? 0;
      if (body.dimensions !== undefined && body.dimensions > size)
        throw badRequest(
          `dimensions ${body.dimensions} is more than this model's ${size} dimensions; ask for ${size} or fewer`,
          [{ path: "/dimensions" }],
        );
      const shaped = vectors.map((vector) => truncated(vector, body.dimensions));
      return {
        object: "list",
        data: shaped.map((vector, index) => ({
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
}

/** The inputs as texts: token ids are detokenized (local models only). */
async function embeddingInputs(
  input: string | string[] | number[] | number[][],
  maxInputs: number,
  tokenizer: () => Promise<{ detokenize(tokens: readonly number[]): string }>,
): Promise<string[]> {
  let texts: string[];
  if (typeof input === "string") texts = [input];
  else if (input.length > 0 && typeof input[0] === "number")
    texts = [(await tokenizer()).detokenize(input as number[])];
  else if (input.length > 0 && Array.isArray(input[0])) {
    const model = await tokenizer();
    texts = (input as number[][]).map((tokens) => model.detokenize(tokens));
  } else texts = input as string[];
  if (texts.length === 0 || texts.length > maxInputs)
    throw badRequest(`input takes 1 to ${maxInputs} texts (EMBEDDING_MAX_INPUTS)`, [{ path: "/input" }]);
  const empty = texts.findIndex((text) => text === "");
  if (empty !== -1) throw badRequest(`input ${empty} is empty`, [{ path: "/input" }]);
  return texts;
}
