/**
 * Child process of the RAG crash test. Usage:
 *   node --import tsx test/helpers/rag-crash-builder.ts <dataDir> <documents>
 * Opens the RAG app on <dataDir> and prepares a big `replace` build, then prints "prepared" and waits
 * for a line on stdin. It then prints "ready" right before handing the build to the app, "writing"
 * right before the store's write transaction, "written <ms>" after it, and "done <status> <ms>" once
 * the app answered. The parent SIGKILLs it somewhere in between.
 */
import { once } from "node:events";
import { buildRagApp } from "../../src/rag/app.js";
import { crashBuildRequest, openReportingStore } from "./rag-crash-corpus.js";
import { testConfig } from "./env.js";

const [dataDir, documents] = process.argv.slice(2);
if (dataDir === undefined || documents === undefined) {
  throw new Error("usage: rag-crash-builder.ts <dataDir> <documents>");
}

// Pipes are synchronous on Linux, so the parent reads "writing" before the transaction begins.
const store = openReportingStore(dataDir, (line) => process.stdout.write(`${line}\n`));
const app = await buildRagApp({ config: testConfig({ DATA_DIR: dataDir }), store });
const payload = JSON.stringify(crashBuildRequest(Number(documents)));

process.stdout.write("prepared\n");
await once(process.stdin, "data");
process.stdin.destroy();

process.stdout.write("ready\n");
const started = performance.now();
const res = await app.inject({
  method: "POST",
  url: "/rag/build",
  payload,
  headers: { "content-type": "application/json" },
});
process.stdout.write(`done ${res.statusCode} ${Math.round(performance.now() - started)}\n`);
await app.close();
