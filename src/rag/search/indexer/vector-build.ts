/**
 * A write's segment vectors built on a worker thread: at 10,000 vectors and more a segment gets an HNSW
 * graph, and building it takes seconds (about 15 s for 100k × 384-d on 2 cores), time the event loop
 * must keep for queries and health checks, as merges keep it (their graphs are built on the merge
 * worker). Not the merge worker itself: a write must not wait behind a long merge. A thread per job: its
 * start-up is small next to a graph build, and nothing stays alive between writes.
 */
import { DEFAULT_GRAPH_THRESHOLD } from "../vectors/segment-vectors.js";
import type { VectorIndexOptions } from "../types.js";
import { startWorker } from "./start-worker.js";

/** Whether a write of `count` vectors builds a graph (and is worth a worker thread). */
export function buildsGraph(options: VectorIndexOptions, count: number): boolean {
  return count >= Math.max(1, options.graphThreshold ?? DEFAULT_GRAPH_THRESHOLD);
}

/**
 * The encoded vectors (vector-codec.ts) of one write, built on a worker thread; for IndexWriter.prepare's
 * `encodedVectors`. Vectors of the wrong dimension are refused here, before the thread starts.
 */
export function encodeVectorsOffThread(
  options: VectorIndexOptions,
  vectors: ReadonlyArray<ArrayLike<number>>,
): Promise<Uint8Array> {
  const { dimension } = options;
  const rows = new Float32Array(vectors.length * dimension);
  vectors.forEach((vector, i) => {
    if (vector.length !== dimension)
      throw new RangeError(`vector ${i} has ${vector.length} dimensions, the index ${dimension}`);
    rows.set(vector, i * dimension);
  });
  const worker = startWorker("vector-build-worker", {
    workerData: { options: { ...options }, rows },
    transferList: [rows.buffer],
  });
  return new Promise<Uint8Array>((resolve, reject) => {
    let settled = false;
    worker.once("message", (reply: { bytes?: Uint8Array; error?: string }) => {
      settled = true;
      if (reply.bytes !== undefined) resolve(reply.bytes);
      else reject(new RangeError(reply.error ?? "vector build failed"));
    });
    worker.once("error", (error) => {
      settled = true;
      reject(error);
    });
    worker.once("exit", (code) => {
      if (!settled) reject(new Error(`vector build worker exited with code ${code} before answering`));
    });
  });
}
