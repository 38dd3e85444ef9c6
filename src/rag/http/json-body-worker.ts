/**
 * A worker thread that parses one large JSON request body (json-body.ts): the body arrives in pieces,
 * decoded as they come (no whole copy of the bytes is made), and the value goes back in pieces.
 */
import { parentPort } from "node:worker_threads";
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
