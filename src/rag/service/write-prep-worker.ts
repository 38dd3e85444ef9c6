/** A worker thread that prepares one large write's documents (write-prep.ts) and sends them back. */
import { parentPort, workerData } from "node:worker_threads";
import { DomainError } from "../../core/errors.js";
import { resultTransferables, runDocumentsJob, type DocumentsJob } from "./write-prep.js";

try {
  const result = runDocumentsJob(workerData as DocumentsJob);
  parentPort?.postMessage({ result }, resultTransferables(result));
} catch (error) {
  if (error instanceof DomainError)
    parentPort?.postMessage({ error: { kind: error.kind, message: error.message, details: error.details } });
  else
    parentPort?.postMessage({
      failure: error instanceof Error ? (error.stack ?? error.message) : String(error),
    });
}
