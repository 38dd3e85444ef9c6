/**
 * The worker thread that owns the SQLite Responses store (why a worker: sqlite-backend.ts). It opens
 * the database at start (a failure ends the worker with that error, which fails the calls waiting)
 * and answers one call at a time, in the order they came, so a read after a save sees the save.
 */
import { parentPort, workerData } from "node:worker_threads";
import { SqliteResponsesBackend } from "./sqlite-backend.js";
import type { StoreLimits } from "./types.js";
import type { WorkerCall, WorkerAnswer } from "./worker-backend.js";

const { dataDir, limits } = workerData as { dataDir: string; limits: StoreLimits };
const backend = SqliteResponsesBackend.open(dataDir, limits);
const port = parentPort!;

port.on("message", (call: WorkerCall | "close") => {
  if (call === "close") {
    void backend.close().then(() => port.close());
    return;
  }
  const method = backend[call.method] as (...args: unknown[]) => Promise<unknown>;
  method.apply(backend, call.args).then(
    (result) => port.postMessage({ id: call.id, result } satisfies WorkerAnswer),
    (error: unknown) => {
      const { message, code } = error as { message?: string; code?: string };
      port.postMessage({
        id: call.id,
        error: { message: message ?? String(error), code },
      } satisfies WorkerAnswer);
    },
  );
});
