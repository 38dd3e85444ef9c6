/**
 * POST /rag/query: `ask` (answering/ask.ts) over HTTP, or `converse` when the body carries
 * `messages` (the conversation searched as POST /rag/chat does). A Fastify plugin, registered in the
 * /rag scope by routes.ts.
 */
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { errorResponses } from "../../core/error-shapes.js";
import { badRequest } from "../../core/errors.js";
import { answerModeOf, ask, converse } from "../answering/ask.js";
import { replyGoneSignal, sendAnswer, targetOf } from "./answer-http.js";
import type { RagRouteDeps } from "./route-deps.js";
import { QueryRequest, QueryResponse } from "./schemas.js";

type QueryRoute = { Body: QueryRequest };

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
          "as fit the model's context per request (`sources_used`). With `stream` and a generative " +
          "answer: the events `results`, then `{token}` pieces, then `done` with this whole response.",
        body: QueryRequest,
        response: { 200: QueryResponse, ...errorResponses },
      },
    },
    (request, reply) => query(deps, request, reply),
  );
};

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
