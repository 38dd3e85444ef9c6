/**
 * Starts a worker thread from a module beside the caller: `new URL("./x.js", import.meta.url)`.
 * Compiled, the worker is the `.js` file; under tsx (tests, `npm start`) it is the `.ts` file, and
 * since Node 20's workers do not run the parent's `--import` hooks, a bootstrap registers tsx in the
 * worker first. (The RAG app's workers are started by name through src/rag/search/indexer/start-worker.ts.)
 */
import { Worker, type WorkerOptions } from "node:worker_threads";

export function startWorkerAt(moduleUrl: URL, options: WorkerOptions = {}): Worker {
  const underTsx = moduleUrl.pathname.endsWith(".ts") || import.meta.url.endsWith(".ts");
  const workerUrl = underTsx ? new URL(moduleUrl.href.replace(/\.js$/, ".ts")) : moduleUrl;
  if (!underTsx) return new Worker(workerUrl, options);
  const tsxApi = import.meta.resolve("tsx/esm/api");
  const bootstrap =
    `import(${JSON.stringify(tsxApi)}).then(({ register }) => { register(); ` +
    `return import(${JSON.stringify(workerUrl.href)}); });`;
  return new Worker(bootstrap, { ...options, eval: true });
}
