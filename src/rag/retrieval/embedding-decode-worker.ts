/** A worker thread that parses and decodes one large embeddings answer (embedding-decode.ts). */
import { parentPort, workerData } from "node:worker_threads";
import { parseAndDecode } from "./embedding-decode.js";

const { bytes, count, known } = workerData as { bytes: Uint8Array; count: number; known?: number };
const reply = parseAndDecode(bytes, count, known);
parentPort?.postMessage(reply, "rows" in reply ? [reply.rows.buffer as ArrayBuffer] : []);
