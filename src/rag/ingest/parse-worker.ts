/**
 * A parse worker thread (see parse-pool.ts): turns one file at a time into text with `loadFile`, so a
 * hostile file costs this thread's heap and time, both bounded by the pool, never the event loop's.
 */
import { readFile } from "node:fs/promises";
import { parentPort } from "node:worker_threads";
import { getResolvedPDFJS } from "unpdf";
import { DomainError } from "../../core/errors.js";
import type { IngestLimits } from "./limits.js";
import { loadFile } from "./loaders.js";

export interface ParseJob {
  id: number;
  name: string;
  /** The file's bytes, or the path of a file holding them (an upload spooled to disk). */
  bytes?: Uint8Array;
  path?: string;
  limits: IngestLimits;
}

parentPort?.on("message", (job: ParseJob) => {
  void (async () => {
    try {
      const bytes = job.bytes ?? (await readFile(job.path!));
      const loaded = await loadFile(job.name, bytes, job.limits);
      parentPort?.postMessage({ id: job.id, loaded });
    } catch (error) {
      const refusal =
        error instanceof DomainError
          ? { kind: error.kind, code: error.code, message: error.message, details: error.details }
          : {
              kind: "unprocessable",
              message: `File "${job.name}" could not be parsed: ${(error as Error).message}`,
            };
      parentPort?.postMessage({ id: job.id, refusal });
    }
  })();
});
// The parsers are loaded (pdf.js, which unpdf loads on first use, too): the time limit of the first
// job starts now, not while modules compile.
await getResolvedPDFJS();
parentPort?.postMessage({ ready: true });
