/** A worker thread that parses and decodes one large embeddings answer (embedding-decode.ts). */
import { parentPort, workerData } from "node:worker_threads";
import { parseAndDecode } from "./embedding-decode.js";

const { bytes, count, known, maxDimension } = workerData as {
  bytes: Uint8Array;
  count: number;
  known?: number;
  maxDimension: number;
};
const reply = parseAndDecode(bytes, count, known, maxDimension);
parentPort?.postMessage(reply, "rows" in reply ? [reply.rows.buffer as ArrayBuffer] : []);
