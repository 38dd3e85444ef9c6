/**
 * `GET /v1/models` and `/v1/models/{id}` in Anthropic's shape, for requests that carry
 * `anthropic-version` (every Anthropic client sends it; OpenAI's never do). The paths are shared with
 * OpenAI's model list, so the OpenAI plugin asks here which shape to answer in.
 */
import type { FastifyRequest } from "fastify";
import type { TextgenService } from "../../engine/service.js";
import { modelList, type modelObject } from "../models-routes.js";

export function isAnthropicRequest(request: FastifyRequest): boolean {
  return request.headers["anthropic-version"] !== undefined;
}

type ModelObject = ReturnType<typeof modelObject>;

export function anthropicModelObject(model: ModelObject) {
  return {
    type: "model" as const,
    id: model.id,
    display_name: model.id,
    created_at: new Date(model.created * 1000).toISOString(),
  };
}

/** Anthropic's page: `limit` (default 20), `after_id`/`before_id` cursors, `has_more`, first/last ids. */
export function anthropicModelList(
  service: TextgenService,
  query: { limit?: number; after_id?: string; before_id?: string },
) {
  const all = modelList(service).data.map(anthropicModelObject);
  const limit = query.limit ?? 20;
  let start = 0;
  let end = all.length;
  if (query.after_id !== undefined) start = all.findIndex((model) => model.id === query.after_id) + 1;
  if (query.before_id !== undefined) {
    const at = all.findIndex((model) => model.id === query.before_id);
    end = at === -1 ? all.length : at;
    start = Math.max(start, end - limit);
  }
  const page = all.slice(start, Math.min(end, start + limit));
  return {
    data: page,
    has_more: start + page.length < end,
    first_id: page[0]?.id ?? null,
    last_id: page.at(-1)?.id ?? null,
  };
}
