/**
 * The models served: llama-server's router endpoints (`GET /models`, `POST /models/load`,
 * `POST /models/unload`, same shapes), and the model objects `GET /v1/models` lists (OpenAI's
 * fields plus status, roles and size, for clients and the playground's model picker).
 */
import { Type } from "typebox";
import { badRequest } from "../../core/errors.js";
import type { TypedApp } from "../../core/http.js";
import { ErrorResponse } from "./schemas.js";
import { requireModelAdmin } from "./model-access.js";
import type { ModelInfo } from "../engine/model-registry.js";
import type { TextgenService } from "../engine/service.js";

/** When this process started serving: the `created` of every model object, stable across requests. */
const servedSince = Math.floor(Date.now() / 1000);

export const ModelObject = Type.Object({
  id: Type.String(),
  object: Type.Literal("model"),
  created: Type.Integer(),
  owned_by: Type.String(),
  status: Type.Union([
    Type.Literal("loaded"),
    Type.Literal("loading"),
    Type.Literal("unloaded"),
    Type.Literal("failed"),
  ]),
  reason: Type.Optional(Type.String({ description: "why the last load failed" })),
  role: Type.Union([Type.Literal("generate"), Type.Literal("embed"), Type.Literal("rerank")], {
    description: "what the model is for; a generation model also embeds",
  }),
  roles: Type.Array(Type.String()),
  aliases: Type.Array(Type.String()),
  size_bytes: Type.Union([Type.Integer(), Type.Null()], {
    description: "the GGUF file; null until downloaded",
  }),
  memory_bytes: Type.Union([Type.Integer(), Type.Null()], {
    description: "estimated when loaded: file + KV cache",
  }),
  default: Type.Boolean({ description: "answers requests that name no model" }),
  architecture: Type.Union([Type.String(), Type.Null()], {
    description: "the GGUF's general.architecture; null until the file has been read",
  }),
  max_model_len: Type.Union([Type.Integer(), Type.Null()], {
    description:
      "tokens one request may hold, prompt and answer together (vLLM's field); null until the model is loaded",
  }),
});

/** Tokens one request to a loaded model may hold; null while it is not loaded. */
function maxModelLength(service: TextgenService, id: string): number | null {
  return service.generatorOf(id)?.contextPerSequence?.() ?? null;
}

/** One model as GET /v1/models lists it; `id` is the name to send as `model`. */
export function modelObject(service: TextgenService, info: ModelInfo) {
  return {
    id: service.nameOf(info.id),
    object: "model" as const,
    created: servedSince,
    owned_by: "lectern",
    status: info.status,
    ...(info.reason !== undefined && { reason: info.reason }),
    role: info.roles[0]!,
    roles: info.roles,
    aliases: info.aliases,
    size_bytes: info.sizeBytes,
    memory_bytes: info.memoryBytes,
    default: info.default,
    architecture: info.architecture,
    max_model_len: maxModelLength(service, info.id),
  };
}

/** Every model, for GET /v1/models. */
export function modelList(service: TextgenService) {
  return { object: "list" as const, data: service.models.list().map((info) => modelObject(service, info)) };
}

/** One model by id or alias (GET /v1/models/{id}); undefined when unknown. */
export function findModelObject(service: TextgenService, id: string) {
  const info =
    service.models.get(id) ?? (service.multiModel ? undefined : service.models.get(service.models.defaultId));
  if (!info) return undefined;
  const object = modelObject(service, info);
  return service.multiModel || object.id === id || info.id === id ? object : undefined;
}

const ModelName = Type.Object({ model: Type.String({ minLength: 1 }) }, { additionalProperties: false });
const Success = Type.Object({ success: Type.Boolean() });

export function registerModelRoutes(app: TypedApp, service: TextgenService): void {
  app.get(
    "/models",
    { schema: { tags: ["models"], summary: "Every model and its status (llama-server router's shape)" } },
    async () => ({
      object: "list",
      data: service.models.list().map((info) => ({
        id: service.nameOf(info.id),
        object: "model",
        architecture: info.architecture,
        owned_by: "lectern",
        created: servedSince,
        aliases: info.aliases,
        in_cache: info.sizeBytes !== null,
        path: info.reference,
        status: {
          value: info.status === "failed" ? "unloaded" : info.status,
          ...(info.status === "failed" && { failed: true, reason: info.reason }),
        },
      })),
    }),
  );

  registerLoadRoute(
    app,
    service,
    {
      path: "/models/load",
      summary: "Load a model now; answers once it is loaded (or failed, saying why); admin only",
      action: "load models",
    },
    (id) => service.models.load(id),
  );
  registerLoadRoute(
    app,
    service,
    {
      path: "/models/unload",
      summary: "Unload a model (after its running requests finish); admin only",
      action: "unload models",
    },
    async (id) => {
      if (!(await service.models.unload(id)))
        throw badRequest(`The model "${id}" is not loaded`, [{ path: "/model" }]);
    },
  );
}

/** The registry id a load or unload names: any model by id or alias (a 404 listing the known names). */
function modelIdOf(service: TextgenService, name: string): string {
  return service.models.find(name)?.id ?? service.resolveModel(name, "generate").id;
}

/**
 * /models/load and /models/unload (the llama.cpp server router's): a model name in, success out; a
 * model administrator's only (model-access.ts). `act` does the work on the registry id the name gives.
 */
function registerLoadRoute(
  app: TypedApp,
  service: TextgenService,
  route: { path: string; summary: string; action: string },
  act: (id: string) => Promise<unknown>,
): void {
  app.post(
    route.path,
    {
      schema: {
        tags: ["models"],
        summary: route.summary,
        body: ModelName,
        response: { 200: Success, "4xx": ErrorResponse, "5xx": ErrorResponse },
      },
    },
    async (request) => {
      requireModelAdmin(request, route.action);
      await act(modelIdOf(service, request.body.model));
      return { success: true };
    },
  );
}

const LoraAdapter = Type.Object({
  id: Type.Integer(),
  path: Type.String(),
  scale: Type.Number({
    description: "the scale a request that names no adapters gets (0: loaded, not applied)",
  }),
});

/**
 * GET /lora-adapters, llama.cpp server's: the adapters a request's `lora` can name by id (a preset's
 * `lora`); an empty list for a model without any. `?model=` names another model than the default.
 */
export function registerLoraRoutes(app: TypedApp, service: TextgenService): void {
  app.get<{ Querystring: { model?: string } }>(
    "/lora-adapters",
    {
      schema: {
        tags: ["models"],
        summary: "The model's LoRA adapters, ids as a request's `lora` names them (llama.cpp server's shape)",
        querystring: Type.Object({ model: Type.Optional(Type.String({ minLength: 1 })) }),
        response: { 200: Type.Array(LoraAdapter), "4xx": ErrorResponse },
      },
    },
    async (request) =>
      service.loraAdapters(request.query.model).map(({ id, path, scale }) => ({ id, path, scale })),
  );
}
