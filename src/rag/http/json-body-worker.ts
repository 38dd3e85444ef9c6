/** A worker thread that parses one large JSON request body (json-body.ts) and sends it back. */
import { parentPort, workerData } from "node:worker_threads";
import secureJson from "secure-json-parse";
import { JSON_OPTIONS } from "./json-body.js";

const bytes = workerData as Uint8Array;
try {
  const value: unknown = secureJson.parse(
    Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    null,
    JSON_OPTIONS,
  );
  parentPort?.postMessage({ value });
} catch {
  parentPort?.postMessage({ error: true });
}
