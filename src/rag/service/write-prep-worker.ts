/**
 * A worker thread that prepares one large write's documents (write-prep.ts): it receives them in runs,
 * then sends the result back in pieces (search/indexer/pieces.ts).
 */
import { parentPort, workerData } from "node:worker_threads";
import { DomainError } from "../../core/errors.js";
import { askedFor, sendInPieces } from "../search/indexer/pieces.js";
import type { DocumentInput } from "./types.js";
import { resultTransferables, runDocumentsJob, type DocumentsJob } from "./write-prep.js";

const port = parentPort!;
const next = askedFor(port);
const inputs: DocumentInput[] = [];

function run(): void {
  try {
    const result = runDocumentsJob({
      ...(workerData as Omit<DocumentsJob, "inputs">),
      inputs,
      release: true,
    });
    inputs.length = 0;
    void sendInPieces(port, result, next, resultTransferables(result));
  } catch (error) {
    if (error instanceof DomainError)
      port.postMessage({ error: { kind: error.kind, message: error.message, details: error.details } });
    else
      port.postMessage({ failure: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  }
}

port.on("message", (message: { inputs?: DocumentInput[]; go?: boolean }) => {
  if (message.inputs) for (const input of message.inputs) inputs.push(input);
  else if (message.go) run();
});
