/**
 * The answering use case (answering/ask.ts) over HTTP, for /rag/query and /rag/chat: the index a
 * request names, the signal that stops the work when the client leaves, and a run sent as JSON or as
 * server-sent events (`results`, the answer's pieces as `{token}`, `done` with the whole response).
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import { actingTenant } from "../../core/auth.js";
import { badRequest } from "../../core/errors.js";
import { toApiError } from "../../core/http.js";
import { openEventStream, type EventStream } from "../../core/sse.js";
import type { AnswerRun } from "../answering/ask.js";
import type { IndexKey } from "../store/types.js";

/** Aborts when the client goes away before the response is done (stops the search and the model). */
export function replyGoneSignal(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.on("close", () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}

interface IndexTarget {
  index?: string;
  index_name?: string;
  tenant_id?: string;
}

/**
 * The index a request names (`index_name`, or its alias `index`: both given must agree) as the acting
 * tenant's, and the request's other fields.
 */
export function targetOf<Body extends IndexTarget>(
  request: FastifyRequest,
  body: Body,
): { key: IndexKey; fields: Omit<Body, keyof IndexTarget> } {
  const { index, index_name, tenant_id, ...fields } = body;
  if (index !== undefined && index_name !== undefined && index !== index_name)
    throw badRequest("index and index_name differ; send one of them");
  const name = index_name ?? index;
  if (name === undefined)
    throw badRequest("Send the index to answer from as index_name (or index)", [{ path: "/index_name" }]);
  return { key: { tenantId: actingTenant(request, tenant_id), name }, fields };
}

/** The run's response, as JSON or (with `stream`) as server-sent events. */
export async function sendAnswer<Response>(
  request: FastifyRequest,
  reply: FastifyReply,
  run: AnswerRun<Response>,
  stream: boolean,
): Promise<Response | FastifyReply> {
  if (!stream) return run.result;
  let events: EventStream | undefined;
  try {
    for await (const event of run.events) {
      events ??= openEventStream(request, reply);
      if (event.type === "results") events.send(event.data, "results");
      else if (event.type === "token") events.send({ token: event.text });
      else events.send(event.response, "done");
    }
  } catch (error) {
    // Before the stream opened, the error handler answers with a status; after, an `error` event.
    if (!events) throw error;
    request.log.error({ err: error }, "answer failed after its stream opened");
    events.send(toApiError(error).toBody(), "error");
  } finally {
    events?.end();
  }
  return reply;
}
