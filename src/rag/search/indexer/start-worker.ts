/**
 * Starts a worker thread by name: a module of this folder, or of the folder of `near` (the caller's
 * `import.meta.url`). Compiled, the worker is `<name>.js`; under tsx (tests, `npm start`) it is the
 * `.ts` file, and since Node 20's workers do not run the parent's `--import` hooks, a bootstrap
 * registers tsx in the worker first.
 */
import { Worker, type WorkerOptions } from "node:worker_threads";

export function startWorker(name: string, options: WorkerOptions = {}, near = import.meta.url): Worker {
  const underTsx = near.endsWith(".ts");
  const workerUrl = new URL(`./${name}.${underTsx ? "ts" : "js"}`, near);
  if (!underTsx) return new Worker(workerUrl, options);
  const tsxApi = import.meta.resolve("tsx/esm/api");
  const bootstrap =
    `import(${JSON.stringify(tsxApi)}).then(({ register }) => { register(); ` +
    `return import(${JSON.stringify(workerUrl.href)}); });`;
  return new Worker(bootstrap, { ...options, eval: true });
}
