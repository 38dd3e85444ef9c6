/**
 * POST /v1/chat/completions on the RAG app: `converse` (answering/ask.ts) in OpenAI's chat shape.
 * `model` names the index; the message ends with the sources its [n] citations refer to, and
 * `citations` lists them. Beside OpenAI's fields: `sources_used` (results the answer was written
 * from), `search_query`, `query_rewritten`. `usage` counts the tokens the model read and wrote for
 * the request (the conversation's rewrite and the answer); `finish_reason` is "length" when the answer
 * was cut at its token limit.
 */
import { randomUUID } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { Type, type Static } from "typebox";
import { actingTenant } from "../../core/auth.js";
import { openAiErrorBody } from "../../core/error-shapes.js";
import { toApiError, type TypedApp } from "../../core/http.js";
import { openEventStream, type EventStream } from "../../core/sse.js";
import { converse, type AnswerRun } from "../answering/ask.js";
import type { ConverseResponse, ResultsEvent } from "../answering/schemas.js";
import { replyGoneSignal } from "./answer-http.js";
import type { OpenAiRagOptions } from "./route-deps.js";
import { IndexName } from "./schemas.js";

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

const NOTHING_FOUND = "The index has nothing on this.";

function textOf(content: ChatCompletionRequest["messages"][number]["content"]): string {
  return typeof content === "string" ? content : content.map((part) => part.text).join("");
}

/** The results an answer rests on, numbered as the answer cites them. */
function citationsOf(results: ResultsEvent["results"]) {
  return results.map((result, index) => ({
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
function sourcesText(results: ResultsEvent["results"]): string {
  if (results.length === 0) return "";
  const lines = results.map(
    (result, index) => `[${index + 1}] ${result.title ?? result.file} (${result.document_id})`,
  );
  return `\n\nSources:\n${lines.join("\n")}`;
}

/** Tokens the model read and wrote for the request: the rewrite's and the answer's. */
function usageOf(response: ConverseResponse) {
  const prompt = (response.generation?.prompt_tokens ?? 0) + (response.rewrite_tokens?.prompt_tokens ?? 0);
  const completion = (response.generation?.tokens ?? 0) + (response.rewrite_tokens?.tokens ?? 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

const finishOf = (response: ConverseResponse) => response.generation?.finish_reason ?? "stop";

export function registerChatCompletions(app: TypedApp, options: OpenAiRagOptions): void {
  app.post(
    "/chat/completions",
    {
      schema: {
        tags: ["openai"],
        summary: "Answer from the index named by `model`, citing its results",
        description:
          "The conversation is handled as POST /rag/chat does. The message ends with the sources its " +
          "[n] citations refer to; `citations` lists them and `sources_used` says how many the answer " +
          "was written from. Streaming sends OpenAI chunks (citations on the first; usage in a last " +
          "chunk with `stream_options.include_usage`).",
        body: ChatCompletionRequest,
      },
    },
    async (request, reply) => {
      const body = request.body;
      const run = converse(
        options,
        {
          key: { tenantId: actingTenant(request, undefined), name: body.model },
          messages: body.messages.map((message) => ({
            role: message.role === "developer" ? ("system" as const) : message.role,
            content: textOf(message.content),
          })),
          top_k: body.top_k,
          min_score: 0,
        },
        { signal: replyGoneSignal(reply), log: request.log },
      );
      const head = {
        id: `chatcmpl-${randomUUID()}`,
        created: Math.floor(Date.now() / 1000),
        model: body.model,
      };
      if (!body.stream) return completion(head, await run.result);
      return streamCompletion(request, reply, run, head, body.stream_options?.include_usage === true);
    },
  );
}

type Head = { id: string; created: number; model: string };

function completion(head: Head, response: ConverseResponse) {
  const content = `${response.answer ?? NOTHING_FOUND}${sourcesText(response.results)}`;
  return {
    ...head,
    object: "chat.completion",
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: finishOf(response) }],
    usage: usageOf(response),
    citations: citationsOf(response.results),
    sources_used: response.sources_used ?? 0,
    search_query: response.search_query,
    query_rewritten: response.query_rewritten,
  };
}

/** The run as OpenAI's chunks: the role with the citations first, the answer's pieces, the finish. */
async function streamCompletion(
  request: FastifyRequest,
  reply: FastifyReply,
  run: AnswerRun<ConverseResponse>,
  head: Head,
  includeUsage: boolean,
) {
  const chunk = (delta: object, finish: string | null, extra: object = {}) => ({
    ...head,
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta, finish_reason: finish }],
    ...extra,
  });
  let events: EventStream | undefined;
  let streamedText = false;
  try {
    for await (const event of run.events) {
      if (event.type === "results") {
        events = openEventStream(request, reply);
        const { results, search_query, query_rewritten, sources_used } = event.data;
        const extra = { citations: citationsOf(results), search_query, query_rewritten, sources_used };
        events.send(chunk({ role: "assistant", content: "" }, null, extra));
      } else if (event.type === "token") {
        streamedText = true;
        events?.send(chunk({ content: event.text }, null));
      } else {
        const response = event.response;
        // An extractive answer (no model) arrives whole; a generative one has streamed already.
        const rest = `${streamedText ? "" : (response.answer ?? NOTHING_FOUND)}${sourcesText(response.results)}`;
        if (rest) events?.send(chunk({ content: rest }, null));
        events?.send(chunk({}, finishOf(response), { sources_used: response.sources_used ?? 0 }));
        if (includeUsage) events?.send({ ...chunk({}, null), choices: [], usage: usageOf(response) });
        events?.send("[DONE]");
      }
    }
  } catch (error) {
    if (!events) throw error;
    events.send(openAiErrorBody(toApiError(error)));
  } finally {
    events?.end();
  }
  return reply;
}
