/**
 * Ollama's model management routes, `/api/pull` and `/api/delete`: a model administrator's only
 * (model-access.ts). A pull is hardened in engine/model-pull.ts (https and `hf:` only, allowed hosts,
 * size cap, timeout, GGUF check, nothing left on disk); its progress streams as NDJSON by default.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type } from "typebox";
import { badRequest } from "../../../core/errors.js";
import type { TypedApp } from "../../../core/http.js";
import { toApiError } from "../../../core/http.js";
import { planPull } from "../../engine/model-pull.js";
import { requireModelAdmin } from "../model-access.js";
import { clientGoneSignal } from "./run.js";
import type { ModelCatalog } from "./model-catalog.js";
import { openLineStream } from "./ndjson.js";

const strict = { additionalProperties: false } as const;

/** The model a management route names: `model`, or `name`, its older spelling that ollama-js sends. */
export const modelNameFields = {
  model: Type.Optional(Type.String({ minLength: 1 })),
  name: Type.Optional(
    Type.String({ minLength: 1, description: "older name of `model` (ollama-js sends it)" }),
  ),
};

export function namedModel(body: { model?: string; name?: string }): string {
  const name = body.model ?? body.name;
  if (name === undefined) throw badRequest("model is required");
  return name;
}

const PullBody = Type.Object(
  {
    ...modelNameFields,
    insecure: Type.Optional(Type.Boolean({ description: "accepted; pulls are always over https" })),
    stream: Type.Optional(Type.Boolean({ default: true })),
  },
  strict,
);

export function registerOllamaModelManagement(app: TypedApp, catalog: ModelCatalog): void {
  app.post(
    "/pull",
    {
      schema: {
        tags: ["ollama"],
        summary:
          "Download a model (hf:<owner>/<repo>/<file>.gguf or an https URL on MODELS_PULL_HOSTS) into MODELS_DIR; admin only",
        body: PullBody,
      },
    },
    async (request, reply) => {
      requireModelAdmin(request, "pull models");
      const reference = namedModel(request.body);
      // Checked before the stream opens, so a bad reference is a plain 400.
      planPull(reference);
      const signal = clientGoneSignal(request, reply);
      if (request.body.stream === false) {
        await catalog.pull(reference, () => undefined, signal);
        return { status: "success" };
      }
      return streamPull(request, reply, catalog, reference, signal);
    },
  );

  app.delete(
    "/delete",
    {
      schema: {
        tags: ["ollama"],
        summary: "Delete a downloaded model's file; admin only",
        body: Type.Object(modelNameFields, strict),
      },
    },
    async (request, reply) => {
      requireModelAdmin(request, "delete models");
      await catalog.remove(namedModel(request.body));
      return reply.status(200).send();
    },
  );
}

/** The pull as Ollama streams it: status lines, progress at most once per percent, then success or an error line. */
async function streamPull(
  request: FastifyRequest,
  reply: FastifyReply,
  catalog: ModelCatalog,
  reference: string,
  signal: AbortSignal,
): Promise<FastifyReply> {
  const lines = openLineStream(request, reply);
  lines.send({ status: "pulling manifest" });
  try {
    let last = -1;
    const model = await catalog.pull(
      reference,
      ({ completed, total }) => {
        const percent = total > 0 ? Math.floor((completed / total) * 100) : 0;
        if (percent === last) return;
        last = percent;
        lines.send({ status: `pulling ${reference}`, digest: reference, total, completed });
      },
      signal,
    );
    lines.send({ status: "verifying sha256 digest", digest: model.digest });
    lines.send({ status: "success" });
  } catch (error) {
    // Ollama's error shape, as a last line: the status (200) is sent already.
    lines.send({ error: toApiError(error).message });
  } finally {
    lines.end();
  }
  return reply;
}
