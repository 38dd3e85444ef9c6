/**
 * The Ollama API on the text generation port (`/api/*`), for ollama-js, Open WebUI, Continue,
 * LangChain's ChatOllama and the rest. Streams NDJSON by default; errors are `{"error":"…"}` strings.
 * Generation (chat, generate) is ollama-generation.ts; embeddings and the model routes are here.
 */
import { Type } from "typebox";
import { badRequest } from "../../../core/errors.js";
import type { TypedApp } from "../../../core/http.js";
import { VERSION } from "../../../core/version.js";
import type { Config } from "../../../core/config.js";
import { parseJsonText } from "../../../core/json-body.js";
import type { ModelRole } from "../../engine/gguf-check.js";
import type { ServedModel, TextgenService } from "../../engine/service.js";
import type { CatalogModel, ModelCatalog } from "./model-catalog.js";
import { modelNameFields, namedModel, registerOllamaModelManagement } from "./ollama-models.js";
import { truncated } from "./embedding-shape.js";
import { keepAlive, ollamaErrorBody, Options, registerGeneration } from "./ollama-generation.js";
import { dialectPlugin, type Dialect } from "../../../core/dialect-plugin.js";
import { clientGoneSignal, validationLimits, type LimitsConfig } from "./run.js";

export { ollamaErrorBody } from "./ollama-generation.js";

/** Ollama's API: `{"error": "…"}`, unknown fields ignored as Ollama ignores them. */
export const ollamaDialect: Dialect = { errorShape: ollamaErrorBody, tolerant: true };

/** Kept for the model routes' bodies: every field is declared (unknown ones are ignored, by name). */
const strict = { additionalProperties: false } as const;

/** The model a request names; `name:latest` is `name`, as in Ollama (its clients add the tag). */
function ollamaModel(
  service: TextgenService,
  name: string,
  keepAlive: string | number | undefined,
  role: ModelRole = "generate",
): ServedModel {
  const known = service.models.find(name) !== undefined || !name.endsWith(":latest");
  return service.resolveModel(
    known ? name : name.slice(0, -":latest".length),
    role,
    keepAlive === undefined ? {} : { keepAlive },
  );
}

export interface OllamaRouteOptions {
  service: TextgenService;
  catalog: ModelCatalog;
  /** MAX_NEW_TOKENS, EMBEDDING_MAX_INPUTS and SCHEMA_MAX_*. */
  limits: LimitsConfig & Pick<Config["limits"], "embeddingMaxInputs" | "maxJsonDepth">;
}

const nanoseconds = (ms: number) => Math.round(ms * 1e6);

function modelEntry(model: CatalogModel) {
  return {
    name: model.name,
    model: model.name,
    modified_at: model.modifiedAt.toISOString(),
    size: model.size,
    digest: model.digest,
  };
}

/** Ollama's `details` of a model. */
async function detailsOf(catalog: ModelCatalog, model: CatalogModel) {
  const details = await catalog.details(model);
  return {
    parent_model: "",
    format: "gguf",
    family: details.architecture,
    families: [details.architecture],
    parameter_size: details.parameterSize,
    quantization_level: details.quantization,
  };
}

export const ollamaRoutes = dialectPlugin<OllamaRouteOptions>(ollamaDialect, (app, options) => {
  const { service, catalog } = options;
  // Ollama reads every body as JSON, and its documented curl examples send none of a content type
  // (curl then says form-urlencoded): read those as JSON here too.
  app.addContentTypeParser(
    ["application/x-www-form-urlencoded", "text/plain"],
    { parseAs: "string" },
    (_request, body, done) => {
      try {
        done(null, parseJsonText(body as string, options.limits.maxJsonDepth));
      } catch (error) {
        done(error as Error, undefined);
      }
    },
  );

  registerGeneration(app, service, validationLimits(options.limits), (name, keepAliveValue) =>
    ollamaModel(service, name, keepAliveValue),
  );
  registerEmbeddings(app, service, options.limits.embeddingMaxInputs);
  registerModels(app, catalog);
  registerOllamaModelManagement(app, catalog);
});

function registerEmbeddings(app: TypedApp, service: TextgenService, maxEmbeddingInputs: number): void {
  app.post(
    "/embed",
    {
      schema: {
        tags: ["ollama"],
        summary: "Embed texts with the model named (an embedding model, or EMBEDDING_MODEL_PATH's)",
        body: Type.Object(
          {
            model: Type.String({ minLength: 1 }),
            input: Type.Union([
              Type.String({ minLength: 1 }),
              Type.Array(Type.String({ minLength: 1 }), {
                minItems: 1,
                maxItems: maxEmbeddingInputs,
              }),
            ]),
            truncate: Type.Optional(Type.Boolean()),
            dimensions: Type.Optional(Type.Integer({ minimum: 1 })),
            options: Type.Optional(Options),
            keep_alive: keepAlive,
          },
          strict,
        ),
      },
    },
    async (request, reply) => {
      const started = performance.now();
      const body = request.body;
      const inputs = typeof body.input === "string" ? [body.input] : body.input;
      const target = ollamaModel(service, body.model, body.keep_alive, "embed");
      const { vectors, promptTokens } = await target.embed(inputs, clientGoneSignal(request, reply));
      const size = vectors[0]?.length ?? 0;
      if (body.dimensions !== undefined && body.dimensions > size)
        throw badRequest(`dimensions ${body.dimensions} is more than this model's ${size}`);
      return {
        model: target.name,
        // Fewer dimensions: the first ones, renormalised, as /v1/embeddings does.
        embeddings: vectors.map((vector) => Array.from(truncated(vector, body.dimensions))),
        total_duration: nanoseconds(performance.now() - started),
        load_duration: 0,
        prompt_eval_count: promptTokens,
      };
    },
  );

  app.post(
    "/embeddings",
    {
      schema: {
        tags: ["ollama"],
        summary: "Ollama's older embedding route: one text",
        body: Type.Object(
          {
            model: Type.String({ minLength: 1 }),
            prompt: Type.String({ minLength: 1 }),
            options: Type.Optional(Options),
            keep_alive: keepAlive,
          },
          strict,
        ),
      },
    },
    async (request, reply) => {
      const { model, prompt, keep_alive } = request.body;
      const target = ollamaModel(service, model, keep_alive, "embed");
      const { vectors } = await target.embed([prompt], clientGoneSignal(request, reply));
      return { embedding: Array.from(vectors[0] ?? []) };
    },
  );
}

function registerModels(app: TypedApp, catalog: ModelCatalog): void {
  app.get("/version", { schema: { tags: ["ollama"], summary: "This server's version" } }, async () => ({
    version: VERSION,
  }));

  app.get("/tags", { schema: { tags: ["ollama"], summary: "The models that can be served" } }, async () => ({
    models: await Promise.all(
      (await catalog.list()).map(async (model) => ({
        ...modelEntry(model),
        details: await detailsOf(catalog, model),
      })),
    ),
  }));

  app.get("/ps", { schema: { tags: ["ollama"], summary: "The models in memory" } }, async () => ({
    models: await Promise.all(
      (await catalog.loaded()).map(async (model) => {
        const details = await catalog.details(model);
        return {
          ...modelEntry(model),
          // In memory: weights and KV cache, as Ollama's ps reports.
          size: model.memoryBytes,
          details: await detailsOf(catalog, model),
          // When its keep_alive ends; a model kept for ever (-1, the default model) never expires.
          expires_at: model.expiresAt?.toISOString() ?? "9999-12-31T23:59:59Z",
          size_vram: 0,
          ...(details.contextLength !== undefined && { context_length: details.contextLength }),
        };
      }),
    ),
  }));

  app.post(
    "/show",
    {
      schema: {
        tags: ["ollama"],
        summary: "A model's details, GGUF metadata and capabilities",
        body: Type.Object(
          {
            ...modelNameFields,
            verbose: Type.Optional(Type.Boolean()),
          },
          strict,
        ),
      },
    },
    async (request) => {
      const name = namedModel(request.body);
      const model = await catalog.find(name);
      const details = await catalog.details(model);
      const reasons = details.chatTemplate?.includes("<think>") === true;
      const generates = model.roles.includes("generate");
      const capabilities = generates
        ? ["completion", "tools", ...(reasons ? ["thinking"] : [])]
        : model.roles.includes("embed")
          ? ["embedding"]
          : [];
      return {
        modelfile: "",
        parameters: "",
        template: details.chatTemplate ?? "",
        details: await detailsOf(catalog, model),
        model_info: details.info,
        capabilities,
        modified_at: model.modifiedAt.toISOString(),
      };
    },
  );
}
