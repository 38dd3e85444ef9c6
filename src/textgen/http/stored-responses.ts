/**
 * What a Responses store serves beyond `POST /v1/responses` (dialects/openai-responses.ts): stored
 * responses (`GET`/`DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`) and OpenAI's
 * Conversations API (`/v1/conversations` and its items). Installed through the dialect plugin
 * factory with OpenAI's error shape and tolerant reading; the store (textgen/store/) keeps it all
 * per tenant, and an id it does not have (never kept, another tenant's, deleted, past its TTL or
 * evicted for room) is a 404 in OpenAI's shape.
 */
import type { FastifyRequest } from "fastify";
import { Type } from "typebox";
import { badRequest, notFound } from "../../core/errors.js";
import type { TypedApp } from "../../core/http.js";
import type { DurableResponsesStore } from "../store/responses-store.js";
import type { PageQuery } from "../store/types.js";
import type { ResponseItem } from "./dialects/openai-responses.js";
import { dialectPlugin, noEffect } from "../../core/dialect-plugin.js";
import { openAiDialect } from "./dialects/openai-shared.js";

const Id = Type.Object({ id: Type.String() });
const ItemIds = Type.Object({ id: Type.String(), item_id: Type.String() });
const Include = Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], noEffect("include")));

const ListQuery = Type.Object({
  after: Type.Optional(Type.String({ description: "an item id: the items after it" })),
  before: Type.Optional(Type.String({ description: "an item id: the items before it" })),
  limit: Type.Optional(Type.Integer({ description: "1…100 (clamped); 20 when absent" })),
  order: Type.Optional(
    Type.Union([Type.Literal("asc"), Type.Literal("desc")], { description: "desc when absent" }),
  ),
  include: Include,
});

/** Any item, as the Responses API's input takes them (the decoder reads them when a response runs). */
const Item = Type.Object(
  {
    type: Type.Optional(Type.String()),
    role: Type.Optional(Type.String()),
    id: Type.Optional(Type.String()),
    content: Type.Optional(
      Type.Union([Type.String(), Type.Array(Type.Record(Type.String(), Type.Unknown()))]),
    ),
  },
  { additionalProperties: true },
);

/** OpenAI's metadata: up to 16 pairs, keys up to 64 characters, values up to 512. */
const Metadata = Type.Union([
  Type.Record(Type.String(), Type.String({ maxLength: 512 }), {
    maxProperties: 16,
    propertyNames: { maxLength: 64 },
  }),
  Type.Null(),
]);

/** OpenAI's page bounds: `limit` clamped to 1…100, 20 when absent; newest first unless `order=asc`. */
function pageOf(query: {
  after?: string;
  before?: string;
  limit?: number;
  order?: "asc" | "desc";
}): PageQuery {
  return {
    after: query.after,
    before: query.before,
    limit: Math.min(100, Math.max(1, query.limit ?? 20)),
    order: query.order ?? "desc",
  };
}

const responseGone = (id: string) => notFound(`Response with id '${id}' not found.`);
const conversationGone = (id: string) => notFound(`Conversation with id '${id}' not found.`);

function registerResponseRoutes(app: TypedApp, store: DurableResponsesStore): void {
  app.get(
    "/responses/:id",
    {
      schema: {
        tags: ["openai"],
        summary: "A stored response (store: true, the default), as it was answered",
        params: Id,
        querystring: Type.Object({
          include: Include,
          include_obfuscation: Type.Optional(Type.Boolean(noEffect("stream obfuscation"))),
          starting_after: Type.Optional(Type.Integer(noEffect("a stream replay's start"))),
          stream: Type.Optional(
            Type.Boolean({ description: "true is refused: every response is answered whole" }),
          ),
        }),
      },
    },
    async (request) => {
      if (request.query.stream === true)
        throw badRequest(
          "stream: true replays a background response; this server answers every response in the foreground, so retrieve it whole",
          [{ path: "/stream" }],
        );
      const response = await store.retrieve(request, request.params.id);
      if (!response) throw responseGone(request.params.id);
      return response;
    },
  );

  app.delete(
    "/responses/:id",
    { schema: { tags: ["openai"], summary: "Deletes a stored response and its items", params: Id } },
    async (request) => {
      if (!(await store.deleteResponse(request, request.params.id))) throw responseGone(request.params.id);
      return { id: request.params.id, object: "response.deleted", deleted: true };
    },
  );

  app.get(
    "/responses/:id/input_items",
    {
      schema: {
        tags: ["openai"],
        summary: "The input items a stored response answered (its own; its predecessors' are theirs)",
        params: Id,
        querystring: ListQuery,
      },
    },
    async (request) => {
      const page = await store.items(request, "response", request.params.id, pageOf(request.query));
      if (!page) throw responseGone(request.params.id);
      return page;
    },
  );
}

function registerConversationRoutes(app: TypedApp, store: DurableResponsesStore): void {
  const existing = async (request: FastifyRequest, id: string) => {
    const conversation = await store.getConversation(request, id);
    if (!conversation) throw conversationGone(id);
    return conversation;
  };

  app.post(
    "/conversations",
    {
      // Every field is optional: a request with no body at all creates an empty conversation.
      preValidation: async (request) => {
        request.body ??= {};
      },
      schema: {
        tags: ["openai"],
        summary: "Creates a conversation, with its first items",
        body: Type.Object({
          items: Type.Optional(Type.Union([Type.Array(Item), Type.Null()])),
          metadata: Type.Optional(Metadata),
        }),
      },
    },
    async (request) =>
      store.createConversation(
        request,
        (request.body.items ?? []) as ResponseItem[],
        request.body.metadata ?? {},
      ),
  );

  app.get(
    "/conversations/:id",
    { schema: { tags: ["openai"], summary: "A conversation", params: Id } },
    async (request) => existing(request, request.params.id),
  );

  app.post(
    "/conversations/:id",
    {
      schema: {
        tags: ["openai"],
        summary: "Replaces a conversation's metadata",
        params: Id,
        body: Type.Object({ metadata: Metadata }),
      },
    },
    async (request) => {
      const updated = await store.updateConversation(request, request.params.id, request.body.metadata ?? {});
      if (!updated) throw conversationGone(request.params.id);
      return updated;
    },
  );

  app.delete(
    "/conversations/:id",
    {
      schema: {
        tags: ["openai"],
        summary: "Deletes a conversation and its items (the responses that joined it stay)",
        params: Id,
      },
    },
    async (request) => {
      if (!(await store.deleteConversation(request, request.params.id)))
        throw conversationGone(request.params.id);
      return { id: request.params.id, object: "conversation.deleted", deleted: true };
    },
  );
}

function registerConversationItemRoutes(app: TypedApp, store: DurableResponsesStore): void {
  app.post(
    "/conversations/:id/items",
    {
      schema: {
        tags: ["openai"],
        summary: "Adds items to a conversation",
        params: Id,
        querystring: Type.Object({ include: Include }),
        body: Type.Object({ items: Type.Array(Item) }),
      },
    },
    async (request) => {
      const added = await store.addItems(request, request.params.id, request.body.items as ResponseItem[]);
      if (!added) throw conversationGone(request.params.id);
      return added;
    },
  );

  app.get(
    "/conversations/:id/items",
    {
      schema: {
        tags: ["openai"],
        summary: "A conversation's items, a page at a time",
        params: Id,
        querystring: ListQuery,
      },
    },
    async (request) => {
      const page = await store.items(request, "conversation", request.params.id, pageOf(request.query));
      if (!page) throw conversationGone(request.params.id);
      return page;
    },
  );

  app.get(
    "/conversations/:id/items/:item_id",
    {
      schema: {
        tags: ["openai"],
        summary: "One item of a conversation",
        params: ItemIds,
        querystring: Type.Object({ include: Include }),
      },
    },
    async (request) => {
      const { id, item_id: itemId } = request.params;
      const item = await store.conversationItem(request, id, itemId);
      if (item) return item;
      if (!(await store.getConversation(request, id))) throw conversationGone(id);
      throw notFound(`Item with id '${itemId}' not found.`);
    },
  );

  app.delete(
    "/conversations/:id/items/:item_id",
    {
      schema: {
        tags: ["openai"],
        summary: "Deletes an item of a conversation: the conversation after it",
        params: ItemIds,
      },
    },
    async (request) => {
      const conversation = await store.deleteItem(request, request.params.id, request.params.item_id);
      if (!conversation) throw conversationGone(request.params.id);
      return conversation;
    },
  );
}

export interface StoredResponseRouteOptions {
  store: DurableResponsesStore;
}

/** Under /v1 beside the OpenAI routes, which answer unknown routes there (so this plugin does not). */
export const storedResponseRoutes = dialectPlugin<StoredResponseRouteOptions>(
  { ...openAiDialect, notFound: false },
  (app, { store }) => {
    registerResponseRoutes(app, store);
    registerConversationRoutes(app, store);
    registerConversationItemRoutes(app, store);
  },
);
