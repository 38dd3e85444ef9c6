/**
 * The answering routes (the "query" group): POST /rag/query, `ask` (answering/ask.ts) over HTTP, or
 * `converse` when the body carries `messages`; POST /rag/chat, `converse`: the conversation condensed
 * into a standalone question (answering/conversation.ts), the search run on it, the answer citing the
 * results it used. Streaming sends `results` (with what was searched), answer pieces as `{token}`, and
 * `done` with the whole response. A Fastify plugin, registered in the /rag scope by routes.ts.
 */
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { errorResponses } from "../../core/error-shapes.js";
import { badRequest } from "../../core/errors.js";
import { answerModeOf, ask, converse } from "../answering/ask.js";
import { replyGoneSignal, sendAnswer, targetOf } from "./answer-http.js";
import type { RagRouteDeps } from "./route-deps.js";
import { ChatRequest, ChatResponse, QueryRequest, QueryResponse } from "./schemas.js";

type QueryRoute = { Body: QueryRequest };
type ChatRoute = { Body: ChatRequest };

const STREAM_EVENTS =
  "With `stream`: the events `results`, then `{token}` pieces, then `done` with this whole response.";

export const queryRoutes: FastifyPluginAsync<RagRouteDeps> = async (instance, deps) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  app.post<QueryRoute>(
    "/rag/query",
    {
      schema: {
        tags: ["query"],
        summary: "Search an index and compose an answer from the best chunks",
        description:
          "The index is `index_name` (or `index`). A generative answer is written from as many results " +
          `as fit the model's context per request (\`sources_used\`). ${STREAM_EVENTS} (only a generative answer streams)`,
        body: QueryRequest,
        response: { 200: QueryResponse, ...errorResponses },
      },
    },
    (request, reply) => query(deps, request, reply),
  );
  app.post<ChatRoute>(
    "/rag/chat",
    {
      schema: {
        tags: ["query"],
        summary: "Answer the last question of a conversation from an index",
        description:
          "The conversation is condensed into a standalone question by the generation model (when there " +
          "is one), the index is searched for it, and the answer cites the results it used, written from " +
          "as many as fit the model's context per request (`sources_used`). `search_query` and " +
          `\`query_rewritten\` say what was searched. ${STREAM_EVENTS}`,
        body: ChatRequest,
        response: { 200: ChatResponse, ...errorResponses },
      },
    },
    (request, reply) => chat(deps, request, reply),
  );
};

async function chat(deps: RagRouteDeps, request: FastifyRequest<ChatRoute>, reply: FastifyReply) {
  const { stream, ...target } = request.body;
  const { key, fields } = targetOf(request, target);
  const run = converse(deps, { ...fields, key }, { signal: replyGoneSignal(reply), log: request.log });
  return sendAnswer(request, reply, run, stream === true);
}

async function query(deps: RagRouteDeps, request: FastifyRequest<QueryRoute>, reply: FastifyReply) {
  const { query: text, question, messages, stream, ...target } = request.body;
  const options = { signal: replyGoneSignal(reply), log: request.log };
  if (messages) {
    if (text !== undefined || question !== undefined)
      throw badRequest("Send either query or messages, not both");
    const { key, fields } = targetOf(request, target);
    return sendAnswer(request, reply, converse(deps, { ...fields, key, messages }, options), stream === true);
  }
  const asked = text ?? question;
  if (asked === undefined) throw badRequest("Send the question as query (or question)");
  if (text !== undefined && question !== undefined && text !== question)
    throw badRequest("query and question differ; send one of them");
  const { key, fields } = targetOf(request, target);
  // Only a generative answer streams; the others come whole, at once.
  const streams = stream === true && answerModeOf(deps, fields.answer) === "generative";
  return sendAnswer(request, reply, ask(deps, { ...fields, key, query: asked }, options), streams);
}
