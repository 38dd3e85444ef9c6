/**
 * JSON request bodies of the /rag routes, parsed as Fastify parses them (secure-json-parse: a key
 * that could reach a prototype is a 400; the route's body limit a 413) but, past INLINE_BYTES, on a
 * worker thread: parsing costs about 10 ms a megabyte, so a 64 MB build would hold the event loop for
 * most of a second. A large body streams to the thread as it arrives (the loop never holds it whole,
 * nor concatenates it) and the parsed value comes back in pieces (search/indexer/pieces.ts), the loop
 * free between them. At most two bodies are parsed off the loop at once (WorkerSlots); the others wait
 * unread, which holds their senders back.
 */
import type { Readable } from "node:stream";
import type { Worker } from "node:worker_threads";
import type { FastifyRequest } from "fastify";
import secureJson from "secure-json-parse";
import { depthExceededAt, tooDeep } from "../../core/json-body.js";
import { receivePieces } from "../search/indexer/pieces.js";
import { DATA_THREAD_LIMITS, startWorker, WorkerSlots } from "../search/indexer/start-worker.js";

/** Bodies up to this size are parsed inline (a few milliseconds). */
export const INLINE_BYTES = 1024 * 1024;

/** Fastify's own choices (core/http.ts): prototype keys are refused, not removed. */
export const JSON_OPTIONS = { protoAction: "error", constructorAction: "error" } as const;

const slots = new WorkerSlots(2);

/** The errors Fastify's own JSON parser gives (core/http.ts words them). */
const fastifyError = (statusCode: number, code: string, message: string, base: Error = new Error(message)) =>
  Object.assign(base, { statusCode, code });
const invalid = () =>
  fastifyError(
    400,
    "FST_ERR_CTP_INVALID_JSON_BODY",
    "",
    new SyntaxError("Body is not valid JSON but content-type is set to 'application/json'"),
  );
const empty = () =>
  fastifyError(
    400,
    "FST_ERR_CTP_EMPTY_JSON_BODY",
    "Body cannot be empty when content-type is set to 'application/json'",
  );
const tooLarge = () => fastifyError(413, "FST_ERR_CTP_BODY_TOO_LARGE", "Request body is too large");

/**
 * The content type parser of `application/json` bodies (given the raw body stream), with the app's
 * nesting limit (MAX_JSON_DEPTH) scanned before the value is built, as core/json-body.ts does.
 */
export function jsonBodyParser(maxDepth: number) {
  return (request: FastifyRequest, payload: Readable) => parseJsonBody(request, payload, maxDepth);
}

async function parseJsonBody(request: FastifyRequest, payload: Readable, maxDepth: number): Promise<unknown> {
  const limit = request.routeOptions.bodyLimit;
  const declared = Number(request.headers["content-length"]);
  if (declared > limit) throw tooLarge();
  const stream = payload[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const head: Buffer[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await stream.next();
    if (done) break;
    size += value.byteLength;
    if (size > limit) throw tooLarge();
    head.push(value);
    if (size > INLINE_BYTES)
      return slots.run(() =>
        parseOffThread(declared > 0 ? declared : 0, head, stream, size, limit, maxDepth),
      );
  }
  if (size === 0) throw empty();
  const text = Buffer.concat(head, size).toString("utf8");
  const deep = depthExceededAt(text, maxDepth);
  if (deep >= 0) throw tooDeep(deep, maxDepth);
  try {
    return secureJson.parse(text, null, JSON_OPTIONS);
  } catch {
    throw invalid();
  }
}

/**
 * Hands a piece of the body to the parsing thread: moved (transferred) when it is a buffer of its own,
 * as the socket's pieces are, so the loop keeps no copy of the body meanwhile; copied otherwise.
 */
function sendPiece(worker: Worker, piece: Buffer): void {
  const owned = piece.byteOffset === 0 && piece.byteLength === piece.buffer.byteLength;
  const data = owned ? piece : new Uint8Array(piece);
  worker.postMessage({ piece: data }, [data.buffer as ArrayBuffer]);
}

/**
 * Streams the body (what was read, and the rest) to a thread that parses it, and receives the value.
 * `expectedBytes`: its declared length (0: unknown), so the thread can gather it in one buffer.
 */
async function parseOffThread(
  expectedBytes: number,
  head: Buffer[],
  rest: AsyncIterator<Buffer>,
  size: number,
  limit: number,
  maxDepth: number,
): Promise<unknown> {
  const worker = startWorker(
    "json-body-worker",
    { resourceLimits: DATA_THREAD_LIMITS, workerData: { maxDepth, expectedBytes } },
    import.meta.url,
  );
  const ended = new Promise<never>((_, reject) => {
    worker.once("error", reject);
    worker.once("exit", (code) =>
      reject(new Error(`JSON body worker exited with code ${code} before answering`)),
    );
  });
  ended.catch(() => undefined);
  try {
    for (const piece of head.splice(0)) sendPiece(worker, piece);
    for (;;) {
      const { done, value } = await rest.next();
      if (done) break;
      size += value.byteLength;
      if (size > limit) throw tooLarge();
      sendPiece(worker, value);
    }
    worker.postMessage({ end: true });
    return await Promise.race([
      new Promise((resolve, reject) => {
        receivePieces(worker, (message) => {
          const deepAt = (message as { deepAt?: number }).deepAt;
          reject(deepAt === undefined ? invalid() : tooDeep(deepAt, maxDepth));
        }).then(resolve, reject);
      }),
      ended,
    ]);
  } finally {
    // Its heap is gone before the body is used (what it held counts in this process's peak).
    await worker.terminate();
  }
}
