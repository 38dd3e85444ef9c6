/**
 * Starts a worker thread by name: a module of this folder, or of the folder of `near` (the caller's
 * `import.meta.url`), as core/worker-thread.ts starts one (the `.ts` file under tsx, with tsx
 * registered in the worker first).
 */
import type { Worker, WorkerOptions } from "node:worker_threads";
import { startWorkerAt } from "../../../core/worker-thread.js";

/**
 * The young generation of the threads that turn a request's data into other data (a body parsed, a
 * write prepared): their garbage is mostly short strings, and V8's default of 16 MB semi-spaces let
 * it double such a thread's peak memory (a 52 MB write: +141 MB of RSS against +64 MB at 2 MB).
 */
export const DATA_THREAD_LIMITS = { maxYoungGenerationSizeMb: 8 } as const;

export function startWorker(name: string, options: WorkerOptions = {}, near = import.meta.url): Worker {
  return startWorkerAt(new URL(`./${name}.js`, near), options);
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
