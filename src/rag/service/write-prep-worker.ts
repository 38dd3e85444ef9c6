/**
 * A worker thread that prepares one large write's documents (write-prep.ts): it receives them in runs,
 * then sends the result back in pieces (search/indexer/pieces.ts). When every document names its id
 * (`streamed`), each run is prepared as it arrives and let go, and the next one is asked for
 * (`more`), so the thread holds one run of text at a time rather than the whole write.
 */
import { parentPort, workerData } from "node:worker_threads";
import { DomainError } from "../../core/errors.js";
import { askedFor, sendInPieces } from "../search/indexer/pieces.js";
import type { DocumentInput } from "./types.js";
import {
  DocumentsPreparation,
  resultTransferables,
  runDocumentsJob,
  type DocumentsJob,
  type DocumentsJobResult,
} from "./write-prep.js";

const port = parentPort!;
const next = askedFor(port);
const settings = workerData as Omit<DocumentsJob, "inputs"> & { streamed: boolean };
const inputs: DocumentInput[] = [];
const preparation = settings.streamed ? new DocumentsPreparation(settings) : null;
let failed = false;

function report(error: unknown): void {
  failed = true;
  if (error instanceof DomainError)
    port.postMessage({ error: { kind: error.kind, message: error.message, details: error.details } });
  else port.postMessage({ failure: error instanceof Error ? (error.stack ?? error.message) : String(error) });
}

function finish(): void {
  let result: DocumentsJobResult;
  try {
    result = preparation ? preparation.finish() : runDocumentsJob({ ...settings, inputs, release: true });
  } catch (error) {
    report(error);
    return;
  }
  inputs.length = 0;
  void sendInPieces(port, result, next, resultTransferables(result));
}

port.on("message", (message: { inputs?: DocumentInput[]; base?: number; go?: boolean }) => {
  if (failed) return;
  if (message.inputs && preparation) {
    try {
      preparation.addInOrder(message.inputs, message.base!);
    } catch (error) {
      report(error);
      return;
    }
    port.postMessage({ more: true });
  } else if (message.inputs) for (const input of message.inputs) inputs.push(input);
  else if (message.go) finish();
});
