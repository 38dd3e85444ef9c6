/**
 * A worker thread that parses one large JSON request body (json-body.ts): the body arrives in pieces,
 * gathered in one buffer and decoded once, and the value goes back in pieces.
 */
import { parentPort, workerData } from "node:worker_threads";
import { depthExceededAt } from "../../core/json-body.js";
import secureJson from "secure-json-parse";
import { askedFor, sendInPieces } from "../search/indexer/pieces.js";
import { JSON_OPTIONS } from "./json-body.js";

const port = parentPort!;
const next = askedFor(port);
const { maxDepth, expectedBytes } = workerData as { maxDepth: number; expectedBytes: number };
// The body gathered as bytes, in one buffer of its declared length (grown when there is none), and
// decoded once at the end: decoding piece by piece made a chain of strings that parsing then copied
// flat, twice the body's size in this thread's heap.
let bytes = new Uint8Array(Math.max(expectedBytes, 1024 * 1024));
let length = 0;

port.on("message", (message: { piece?: Uint8Array; end?: boolean }) => {
  if (message.piece) append(message.piece);
  else if (message.end) finish();
});

function append(piece: Uint8Array): void {
  if (length + piece.byteLength > bytes.byteLength) {
    const grown = new Uint8Array(Math.max(bytes.byteLength * 2, length + piece.byteLength));
    grown.set(bytes.subarray(0, length));
    bytes = grown;
  }
  bytes.set(piece, length);
  length += piece.byteLength;
}

function finish(): void {
  let text = new TextDecoder("utf-8").decode(bytes.subarray(0, length));
  bytes = new Uint8Array(0);
  // MAX_JSON_DEPTH, as the app's own parser scans it (core/json-body.ts).
  const deep = depthExceededAt(text, maxDepth);
  if (deep >= 0) {
    port.postMessage({ error: true, deepAt: deep });
    return;
  }
  let value: unknown;
  try {
    value = secureJson.parse(text, null, JSON_OPTIONS);
  } catch {
    port.postMessage({ error: true });
    return;
  }
  text = "";
  void sendInPieces(port, value, next);
}
