/**
 * A worker thread that builds one write's segment vectors (normalised, quantised, their HNSW graph) and
 * sends back their encoded bytes (vector-build.ts). One job per thread.
 */
import { parentPort, workerData } from "node:worker_threads";

import { buildSegmentVectors } from "../core/dense.js";
import type { VectorIndexOptions } from "../types.js";
import { encodeVectors } from "../vectors/vector-codec.js";

const { options, rows } = workerData as { options: VectorIndexOptions; rows: Float32Array };
try {
  const { dimension } = options;
  const vectors = Array.from({ length: rows.length / dimension }, (_, d) =>
    rows.subarray(d * dimension, (d + 1) * dimension),
  );
  const bytes = encodeVectors(buildSegmentVectors(options, vectors));
  const whole = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  const sent = whole ? bytes : bytes.slice();
  parentPort?.postMessage({ bytes: sent }, [sent.buffer as ArrayBuffer]);
} catch (error) {
  parentPort?.postMessage({ error: error instanceof Error ? error.message : String(error) });
}
