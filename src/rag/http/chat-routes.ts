/**
 * POST /rag/chat: `converse` (answering/ask.ts) over HTTP. The conversation is condensed into a
 * standalone question (answering/conversation.ts), the search runs on it, and the answer cites the
 * results it used. Streaming sends the same events as /rag/query: `results` (with what was
 * searched), answer pieces as `{token}`, and `done` with the whole response. A Fastify plugin,
 * registered in the /rag scope by routes.ts.
 */
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyPluginAsync } from "fastify";
import { errorResponses } from "../../core/error-shapes.js";
import { converse } from "../answering/ask.js";
import { replyGoneSignal, sendAnswer, targetOf } from "./answer-http.js";
import type { RagRouteDeps } from "./route-deps.js";
import { ChatRequest, ChatResponse } from "./schemas.js";

export const chatRoutes: FastifyPluginAsync<RagRouteDeps> = async (instance, deps) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    "/rag/chat",
    {
      schema: {
        tags: ["query"],
        summary: "Answer the last question of a conversation from an index",
        description:
          "The conversation is condensed into a standalone question by the generation model (when there " +
          "is one), the index is searched for it, and the answer cites the results it used, written from " +
          "as many as fit the model's context per request (`sources_used`). `search_query` and " +
          "`query_rewritten` say what was searched. With `stream`: the events `results`, then `{token}` " +
          "pieces, then `done` with this whole response.",
        body: ChatRequest,
        response: { 200: ChatResponse, ...errorResponses },
      },
    },
    async (request, reply) => {
      const { stream, ...target } = request.body;
      const { key, fields } = targetOf(request, target);
      const run = converse(deps, { ...fields, key }, { signal: replyGoneSignal(reply), log: request.log });
      return sendAnswer(request, reply, run, stream === true);
    },
  );
};
