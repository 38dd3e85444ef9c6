/**
 * POST /rag/chat: answer the last question of a conversation from an index. The conversation is
 * condensed into a standalone question (conversation.ts), the search runs on it, and the answer cites
 * the results it used. Streaming sends the same events as /rag/query: `results` (with what was
 * searched), answer pieces as `{token}`, and `done` with the whole response.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { actingTenant } from "../../core/auth.js";
import { badRequest } from "../../core/errors.js";
import { toApiError, type TypedApp } from "../../core/http.js";
import { openEventStream, type EventStream } from "../../core/sse.js";
import { checkNestingDepth } from "../../core/validation.js";
import { ErrorResponse } from "../../textgen/http/schemas.js";
import { clientGoneSignal, generativeAnswer } from "../answering/compose.js";
import { lastUserTurn, planSearch, type Turn } from "../answering/conversation.js";
import type { RagRouteDeps } from "./route-deps.js";
import { reportedRetrieval, retrievalInput, type RetrievalFields } from "../retrieval/options.js";
import { ChatRequest, ChatResponse } from "./schemas.js";
import type { Metadata } from "../store/types.js";
import type { AnswerMode, QueryResult } from "../service.js";

/** What a conversation request carries, whether sent to /rag/chat or as `messages` to /rag/query. */
export interface ConversationInput {
  index?: string;
  index_name?: string;
  tenant_id?: string;
  messages: Turn[];
  query?: string;
  question?: string;
  top_k: number;
  min_score: number;
  filter?: Record<string, unknown>;
  expand?: boolean;
  retrieval?: RetrievalFields["retrieval"];
  fusion?: RetrievalFields["fusion"];
  rerank?: RetrievalFields["rerank"];
  answer?: AnswerMode;
  stream?: boolean;
}

export interface ConversationHooks {
  signal: AbortSignal;
  /** Called once results are known, before any answer piece. */
  onResults?: (response: ConversationResponse) => void;
  onText?: (piece: string) => void;
}

export type ConversationResponse = Awaited<ReturnType<typeof runConversation>>;

/** Checks the request and finds the index it names (`index`, or `index_name` as on /rag/query). */
function targetOf(request: FastifyRequest, body: ConversationInput) {
  if (body.query !== undefined || body.question !== undefined)
    throw badRequest("Send either query or messages, not both");
  if (body.index !== undefined && body.index_name !== undefined && body.index !== body.index_name)
    throw badRequest("index and index_name differ; send one of them");
  const name = body.index ?? body.index_name;
  if (name === undefined) throw badRequest("Send the index to answer from as index", [{ path: "/index" }]);
  checkNestingDepth(body.filter, 32, "filter");
  const question = lastUserTurn(body.messages);
  if (typeof question !== "string") throw badRequest(question.problem, [{ path: "/messages" }]);
  return { key: { tenantId: actingTenant(request, body.tenant_id), name }, question };
}

/** Plans the search, searches, and answers; the response as /rag/chat returns it. */
export async function runConversation(
  deps: RagRouteDeps,
  request: FastifyRequest,
  body: ConversationInput,
  hooks: ConversationHooks,
) {
  const { key, question } = targetOf(request, body);
  const port = deps.answerWriter?.port ?? null;
  const plan = await planSearch(body.messages, question, port, hooks.signal);
  const { results, elapsedMs, retrieval, loaded } = await deps.service.query({
    key,
    query: plan.searchQuery,
    topK: body.top_k,
    minScore: body.min_score,
    filter: body.filter as Metadata | undefined,
    expand: body.expand,
    ...retrievalInput(deps.retrievers, body, hooks.signal),
  });
  const mode: AnswerMode = body.answer ?? (deps.answerWriter ? "generative" : "extractive");
  deps.metrics.queries.inc({ answer_mode: mode });
  deps.metrics.queryDuration.observe(elapsedMs / 1000);
  const response = {
    query: question,
    search_query: plan.searchQuery,
    query_rewritten: plan.queryRewritten,
    standalone_question: plan.standaloneQuestion,
    ...(plan.rewriteSkippedReason !== undefined && { rewrite_skipped_reason: plan.rewriteSkippedReason }),
    results: results as QueryResult[],
    count: results.length,
    ...reportedRetrieval(body, retrieval),
    elapsed_ms: elapsedMs,
    answer: null as string | null,
    answer_mode: mode as AnswerMode,
  };
  hooks.onResults?.(response);
  if (mode === "none") return response;
  if (mode === "extractive")
    return { ...response, answer: deps.service.extractive(plan.searchQuery, results, loaded) };
  const answered = await generativeAnswer(
    deps,
    // The model answers the standalone question when there is one; the extractive fallback picks
    // sentences matching everything searched.
    { question: plan.standaloneQuestion ?? question, extractiveQuery: plan.searchQuery, results, loaded },
    { signal: hooks.signal, onText: hooks.onText, log: request.log },
  );
  return { ...response, ...answered };
}

/** Answers a conversation as JSON, or as server-sent events when `stream` is set. */
export async function answerConversation(
  deps: RagRouteDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  body: ConversationInput,
) {
  const signal = clientGoneSignal(reply);
  if (!body.stream) return runConversation(deps, request, body, { signal });
  let events: EventStream | undefined;
  try {
    const whole = await runConversation(deps, request, body, {
      signal,
      onResults: (response) => {
        events = openEventStream(request, reply);
        events.send(
          {
            results: response.results,
            count: response.count,
            elapsed_ms: response.elapsed_ms,
            search_query: response.search_query,
            query_rewritten: response.query_rewritten,
            standalone_question: response.standalone_question,
          },
          "results",
        );
      },
      onText: (piece) => events?.send({ token: piece }),
    });
    events?.send(whole, "done");
  } catch (error) {
    // Before the stream opened, the error handler answers with a status; after, an `error` event.
    if (!events) throw error;
    request.log.error({ err: error }, "conversation failed after its stream opened");
    events.send(toApiError(error).toBody(), "error");
  } finally {
    events?.end();
  }
  return reply;
}

/** POST /rag/chat, as a Fastify plugin (registered in the /rag scope by routes.ts). */
export const chatRoutes: FastifyPluginAsync<RagRouteDeps> = async (instance, deps) => {
  const app: TypedApp = instance.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    "/rag/chat",
    {
      schema: {
        tags: ["query"],
        summary: "Answer the last question of a conversation from an index",
        description:
          "The conversation is condensed into a standalone question by the generation model (when there " +
          "is one), the index is searched for it, and the answer cites the results it used. " +
          "`search_query` and `query_rewritten` say what was searched. With `stream`: the events " +
          "`results`, then `{token}` pieces, then `done` with this whole response.",
        body: ChatRequest,
        response: { 200: ChatResponse, "4xx": ErrorResponse, "5xx": ErrorResponse },
      },
    },
    async (request, reply) => answerConversation(deps, request, reply, request.body),
  );
};
