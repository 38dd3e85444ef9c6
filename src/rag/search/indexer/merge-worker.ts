/**
 * The merge worker thread: runs merge jobs (`merger.ts`) one message at a time and sends each merged
 * segment's bytes and derived arrays back (transferred, not copied). It stays up between jobs (see
 * `MergeWorker` in merge.ts).
 */

import { parentPort } from "node:worker_threads";
import { postingsArrays } from "../core/segment.js";
import { runMergeJob, type MergeJob } from "./merger.js";

parentPort?.on("message", ({ id, job }: { id: number; job: MergeJob }) => {
  try {
    const output = runMergeJob(job);
    const { derived } = output;
    const buffers = [
      output.bytes,
      derived.termIds,
      derived.sortedLocalTerms,
      derived.termDirectory,
      ...postingsArrays(derived),
      ...(output.vectors === null ? [] : [output.vectors]),
    ].map((array) => array.buffer as ArrayBuffer);
    parentPort?.postMessage({ id, output }, buffers);
  } catch (error) {
    parentPort?.postMessage({
      id,
      error: error instanceof Error ? (error.stack ?? error.message) : String(error),
    });
  }
});
