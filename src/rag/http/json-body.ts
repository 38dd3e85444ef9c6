/**
 * JSON request bodies of the /rag routes, parsed as Fastify parses them (secure-json-parse: a key
 * that could reach a prototype is a 400) but, past INLINE_BYTES, on a worker thread: parsing costs
 * about 10 ms a megabyte, so a 64 MB build would hold the event loop for most of a second. The parsed
 * body comes back structured-cloned, which for the large strings such bodies hold is a copy, not a
 * parse. At most two bodies are parsed off the loop at once (WorkerSlots); the others wait.
 */
import type { FastifyRequest } from "fastify";
import secureJson from "secure-json-parse";
import { startWorker, WorkerSlots } from "../search/indexer/start-worker.js";

/** Bodies up to this size are parsed inline (a few milliseconds). */
export const INLINE_BYTES = 1024 * 1024;

/** Fastify's own choices (core/http.ts): prototype keys are refused, not removed. */
export const JSON_OPTIONS = { protoAction: "error", constructorAction: "error" } as const;

const slots = new WorkerSlots(2);

/** A malformed body (or one with prototype keys) as Fastify's own parser reports it: a 400. */
function invalid(): Error {
  return Object.assign(
    new SyntaxError("Body is not valid JSON but content-type is set to 'application/json'"),
    {
      statusCode: 400,
      code: "FST_ERR_CTP_INVALID_JSON_BODY",
    },
  );
}

/** The content type parser of `application/json` bodies (`parseAs: "buffer"`). */
export async function parseJsonBody(_request: FastifyRequest, body: Buffer): Promise<unknown> {
  if (body.byteLength === 0)
    throw Object.assign(new Error("Body cannot be empty when content-type is set to 'application/json'"), {
      statusCode: 400,
      code: "FST_ERR_CTP_EMPTY_JSON_BODY",
    });
  if (body.byteLength > INLINE_BYTES) return slots.run(() => parseOffThread(body));
  try {
    return secureJson.parse(body, null, JSON_OPTIONS);
  } catch {
    throw invalid();
  }
}

function parseOffThread(body: Buffer): Promise<unknown> {
  // Handed over, not copied, unless the Buffer shares its memory with others.
  const whole = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength;
  const bytes = whole ? body : new Uint8Array(body);
  const worker = startWorker(
    "json-body-worker",
    { workerData: bytes, transferList: [bytes.buffer as ArrayBuffer] },
    import.meta.url,
  );
  return new Promise((resolve, reject) => {
    let settled = false;
    worker.once("message", (reply: { value: unknown } | { error: true }) => {
      settled = true;
      if ("value" in reply) resolve(reply.value);
      else reject(invalid());
    });
    worker.once("error", (error) => {
      settled = true;
      reject(error);
    });
    worker.once("exit", (code) => {
      if (!settled) reject(new Error(`JSON body worker exited with code ${code} before answering`));
    });
  });
}
