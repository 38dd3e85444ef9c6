/**
 * The merge worker thread: runs one merge job (`merger.ts`) and sends the merged segment's bytes and
 * derived arrays back (transferred, not copied).
 */

import { parentPort, workerData } from "node:worker_threads";
import { runMergeJob, type MergeJob } from "./merger.js";

try {
  const output = runMergeJob(workerData as MergeJob);
  const { derived } = output;
  const buffers = [
    output.bytes,
    derived.termIds,
    derived.sortedTermIds,
    derived.sortedLocalTerms,
    derived.termDirectory,
    derived.blockStarts,
    derived.blockMaxima,
    derived.frontierOffsets,
    derived.frontierTf,
    derived.frontierDl,
  ].map((array) => array.buffer as ArrayBuffer);
  parentPort?.postMessage({ output }, buffers);
} catch (error) {
  parentPort?.postMessage({ error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
}
