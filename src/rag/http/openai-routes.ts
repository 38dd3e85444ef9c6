/**
 * OpenAI's API on the RAG app, so any OpenAI client can use the indices: GET /v1/models lists the
 * tenant's indices as models, POST /v1/chat/completions with `model` naming an index answers from it
 * (the conversation handled as POST /rag/chat does), and the vector stores and files APIs
 * (vector-store-routes.ts). Auth is our API keys and tenants; errors are in OpenAI's shape.
 */
import { randomUUID } from "node:crypto";
import multipart from "@fastify/multipart";
import { Type, type Static } from "typebox";
import { actingTenant, listingTenant } from "../../core/auth.js";
import { toApiError, type TypedApp } from "../../core/http.js";
import { openEventStream, type EventStream } from "../../core/sse.js";
import { dialectPlugin } from "../../textgen/http/dialects/plugin.js";
import { openAiErrorBody } from "../../textgen/http/openai.js";
import { clientGoneSignal } from "../answering/compose.js";
import { runConversation, type ConversationResponse } from "./chat-routes.js";
import type { OpenAiRagOptions } from "./route-deps.js";
export type { OpenAiRagOptions };
import { IndexName } from "./schemas.js";
import { registerVectorStoreRoutes } from "./vector-store-routes.js";

const ChatMessage = Type.Object({
  role: Type.Union([
    Type.Literal("system"),
    Type.Literal("developer"),
    Type.Literal("user"),
    Type.Literal("assistant"),
  ]),
  content: Type.Union([
    Type.String({ maxLength: 16_384 }),
    Type.Array(Type.Object({ type: Type.Literal("text"), text: Type.String({ maxLength: 16_384 }) }), {
      minItems: 1,
      maxItems: 64,
    }),
  ]),
  name: Type.Optional(Type.String()),
});

/** The fields a client may send; generation settings other clients send are accepted and ignored. */
const ChatCompletionRequest = Type.Object(
  {
    model: { ...IndexName, description: "the index to answer from" },
    messages: Type.Array(ChatMessage, { minItems: 1, maxItems: 100 }),
    stream: Type.Boolean({ default: false }),
    stream_options: Type.Optional(
      Type.Union([Type.Object({ include_usage: Type.Optional(Type.Boolean()) }), Type.Null()]),
    ),
    max_tokens: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
    max_completion_tokens: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
    temperature: Type.Optional(Type.Union([Type.Number({ minimum: 0, maximum: 2 }), Type.Null()])),
    top_p: Type.Optional(Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()])),
    n: Type.Optional(Type.Integer({ minimum: 1, maximum: 1 })),
    user: Type.Optional(Type.String()),
    top_k: Type.Integer({ minimum: 1, maximum: 100, default: 5, description: "results to answer from" }),
  },
  { additionalProperties: false },
);
type ChatCompletionRequest = Static<typeof ChatCompletionRequest>;

function textOf(content: ChatCompletionRequest["messages"][number]["content"]): string {
  return typeof content === "string" ? content : content.map((part) => part.text).join("");
}

/** The results an answer rests on, numbered as the answer cites them. */
function citationsOf(response: ConversationResponse) {
  return response.results.map((result, index) => ({
    index: index + 1,
    document_id: result.document_id,
    chunk_id: result.chunk_id,
    file: result.file,
    title: result.title,
    score: result.score,
    text: result.text,
  }));
}

/** The sources line appended to the message: what "[1]" and "[2]" refer to. */
function sourcesText(response: ConversationResponse): string {
  if (response.results.length === 0) return "";
  const lines = response.results.map(
    (result, index) => `[${index + 1}] ${result.title ?? result.file} (${result.document_id})`,
  );
  return `\n\nSources:\n${lines.join("\n")}`;
}

/** OpenAI's error shape through the dialect factory the text generation app uses; fields stay strict here. */
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
      return {
        object: "list",
        data: indices.map((meta) => ({
          id: meta.name,
          object: "model",
          created: Math.floor(Date.parse(meta.createdAt) / 1000),
          owned_by: meta.tenantId,
        })),
      };
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
      const meta = await options.service.requireMeta({
        tenantId: actingTenant(request, undefined),
        name: request.params.model,
      });
      return {
        id: meta.name,
        object: "model",
        created: Math.floor(Date.parse(meta.createdAt) / 1000),
        owned_by: meta.tenantId,
      };
    },
  );
}

/** POST /v1/chat/completions: `model` names the index; the conversation as /rag/chat handles it. */
function registerChatCompletions(app: TypedApp, options: OpenAiRagOptions): void {
  app.post(
    "/chat/completions",
    {
      schema: {
        tags: ["openai"],
        summary: "Answer from the index named by `model`, citing its results",
        description:
          "The conversation is handled as POST /rag/chat does. The message ends with the sources its " +
          "[n] citations refer to; `citations` lists them. Streaming sends OpenAI chunks (citations on the first).",
        body: ChatCompletionRequest,
      },
    },
    async (request, reply) => {
      const body = request.body;
      const turns = body.messages.map((message) => ({
        role: message.role === "developer" ? ("system" as const) : message.role,
        content: textOf(message.content),
      }));
      const id = `chatcmpl-${randomUUID()}`;
      const created = Math.floor(Date.now() / 1000);
      const input = { index: body.model, messages: turns, top_k: body.top_k, min_score: 0 };
      const signal = clientGoneSignal(reply);
      const chunk = (delta: object, finish: string | null, extra: object = {}) => ({
        id,
        object: "chat.completion.chunk",
        created,
        model: body.model,
        choices: [{ index: 0, delta, finish_reason: finish }],
        ...extra,
      });
      if (!body.stream) {
        const response = await runConversation(options, request, input, { signal });
        const content = `${response.answer ?? "The index has nothing on this."}${sourcesText(response)}`;
        return {
          id,
          object: "chat.completion",
          created,
          model: body.model,
          choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
          usage: {
            prompt_tokens: 0,
            completion_tokens: (response as { generation?: { tokens: number } }).generation?.tokens ?? 0,
            total_tokens: 0,
          },
          citations: citationsOf(response),
          search_query: response.search_query,
          query_rewritten: response.query_rewritten,
        };
      }
      let events: EventStream | undefined;
      let streamedText = false;
      try {
        const response = await runConversation(options, request, input, {
          signal,
          onResults: (found) => {
            events = openEventStream(request, reply);
            events.send(
              chunk({ role: "assistant", content: "" }, null, {
                citations: citationsOf(found),
                search_query: found.search_query,
                query_rewritten: found.query_rewritten,
              }),
            );
          },
          onText: (piece) => {
            streamedText = true;
            events?.send(chunk({ content: piece }, null));
          },
        });
        // An extractive answer (no model) arrives whole; a generative one has streamed already.
        const rest = `${streamedText ? "" : (response.answer ?? "The index has nothing on this.")}${sourcesText(response)}`;
        if (rest) events?.send(chunk({ content: rest }, null));
        events?.send(chunk({}, "stop"));
        events?.send("[DONE]");
      } catch (error) {
        if (!events) throw error;
        events.send(openAiErrorBody(toApiError(error)));
      } finally {
        events?.end();
      }
      return reply;
    },
  );
}
