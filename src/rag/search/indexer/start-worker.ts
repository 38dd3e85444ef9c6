/**
 * Starts a worker thread by name: a module of this folder, or of the folder of `near` (the caller's
 * `import.meta.url`). Compiled, the worker is `<name>.js`; under tsx (tests, `npm start`) it is the
 * `.ts` file, and since Node 20's workers do not run the parent's `--import` hooks, a bootstrap
 * registers tsx in the worker first.
 */
import { Worker, type WorkerOptions } from "node:worker_threads";

/**
 * The young generation of the threads that turn a request's data into other data (a body parsed, a
 * write prepared): their garbage is mostly short strings, and V8's default of 16 MB semi-spaces let
 * it double such a thread's peak memory (a 52 MB write: +141 MB of RSS against +64 MB at 2 MB).
 */
export const DATA_THREAD_LIMITS = { maxYoungGenerationSizeMb: 8 } as const;

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

/**
 * At most `size` threads of one kind at once, the rest waiting in order: a burst of large requests
 * must not start a thread each (each holds a copy of its input), only queue for one.
 */
export class WorkerSlots {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly size: number) {}

  /** Runs `job` once a slot is free; the slot is given back when it settles. */
  async run<T>(job: () => Promise<T>): Promise<T> {
    if (this.running < this.size) this.running++;
    // The slot is handed over by the one that finishes, so `running` stays counted meanwhile.
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await job();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
