/**
 * An embeddings answer's bytes turned into vectors without holding the event loop: parsing JSON and
 * copying floats costs about a second per 100 MB, so an answer larger than INLINE_BYTES is parsed and
 * decoded (embedding-answer.ts) on a worker thread of its own, which sends the rows back transferred,
 * not copied. Smaller answers (the usual batch: 64 × 1024 floats, about 1.5 MB) are decoded inline.
 */
import { DATA_THREAD_LIMITS, startWorker, WorkerSlots } from "../search/indexer/start-worker.js";
import { decodeEmbeddings, type DecodedEmbeddings, type EmbeddingsFailure } from "./embedding-answer.js";

/** Answers up to this size are parsed on the event loop (a few milliseconds). */
export const INLINE_BYTES = 4 * 1024 * 1024;

/** What the worker sends back: the decoded rows, why they could not be, or that the bytes were not JSON. */
export type DecodeReply = DecodedEmbeddings | EmbeddingsFailure | { notJson: string };

/** Parses and decodes (embedding-answer.ts), reporting bytes that are not JSON with their first 80 characters. */
export function parseAndDecode(
  bytes: Uint8Array,
  count: number,
  known: number | undefined,
  maxDimension: number,
): DecodeReply {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    return { notJson: text.slice(0, 80) };
  }
  return decodeEmbeddings(answer, count, known, maxDimension);
}

/** Decodes inline, or on a worker thread past INLINE_BYTES (the bytes are handed over, not copied). */
export function decodeAnswer(
  bytes: Buffer,
  count: number,
  known: number | undefined,
  maxDimension: number,
): Promise<DecodeReply> {
  if (bytes.byteLength <= INLINE_BYTES)
    return Promise.resolve(parseAndDecode(bytes, count, known, maxDimension));
  return slots.run(() => decodeOffThread(bytes, count, known, maxDimension));
}

/** Large answers decoded at once (each thread holds its answer and its parse); the others wait. */
const slots = new WorkerSlots(2);

function decodeOffThread(
  bytes: Buffer,
  count: number,
  known: number | undefined,
  maxDimension: number,
): Promise<DecodeReply> {
  // Handed over, not copied, unless the Buffer shares its memory with others.
  const whole = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  const owned = whole ? bytes : new Uint8Array(bytes);
  const worker = startWorker(
    "embedding-decode-worker",
    {
      workerData: { bytes: owned, count, known, maxDimension },
      transferList: [owned.buffer as ArrayBuffer],
      // Parsing takes a few times the answer's size; the answer is at most UPSTREAM_MAX_BODY_BYTES.
      resourceLimits: { ...DATA_THREAD_LIMITS, maxOldGenerationSizeMb: 1024 },
    },
    import.meta.url,
  );
  return new Promise<DecodeReply>((resolve, reject) => {
    let settled = false;
    worker.once("message", (reply: DecodeReply) => {
      settled = true;
      resolve(reply);
    });
    worker.once("error", (error) => {
      settled = true;
      reject(error);
    });
    worker.once("exit", (code) => {
      if (!settled) reject(new Error(`embedding decode worker exited with code ${code} before answering`));
    });
  });
}
