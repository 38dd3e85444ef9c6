/**
 * A worker thread that parses one large JSON request body (json-body.ts): the body arrives in pieces,
 * decoded as they come (no whole copy of the bytes is made), and the value goes back in pieces.
 */
import { parentPort, workerData } from "node:worker_threads";
import { depthExceededAt } from "../../core/json-body.js";
import secureJson from "secure-json-parse";
import { askedFor, sendInPieces } from "../search/indexer/pieces.js";
import { JSON_OPTIONS } from "./json-body.js";

const port = parentPort!;
const next = askedFor(port);
const decoder = new TextDecoder("utf-8");
let text = "";

port.on("message", (message: { piece?: Uint8Array; end?: boolean }) => {
  if (message.piece) text += decoder.decode(message.piece, { stream: true });
  else if (message.end) finish();
});

function finish(): void {
  text += decoder.decode();
  // MAX_JSON_DEPTH, as the app's own parser scans it (core/json-body.ts).
  const deep = depthExceededAt(text, (workerData as { maxDepth: number }).maxDepth);
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
