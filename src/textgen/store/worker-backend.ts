/**
 * The SQLite backend as the main thread sees it: each call posted to the worker that owns the
 * database (sqlite-worker.ts), answered in order. The worker starts at the first call and again
 * after a crash; while no call waits it does not keep the process alive.
 */
import type { Worker } from "node:worker_threads";
import { notReady } from "../../core/errors.js";
import { startWorkerAt } from "../../core/worker-thread.js";
import { BACKEND_METHODS, type ResponsesBackend, type StoreLimits } from "./types.js";

export interface WorkerCall {
  id: number;
  method: (typeof BACKEND_METHODS)[number];
  args: unknown[];
}

export type WorkerAnswer =
  { id: number; result: unknown } | { id: number; error: { message: string; code?: string } };

interface Waiting {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

class WorkerHost {
  private worker: Worker | undefined;
  private readonly waiting = new Map<number, Waiting>();
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly dataDir: string,
    private readonly limits: StoreLimits,
  ) {}

  call(method: WorkerCall["method"], args: unknown[]): Promise<unknown> {
    if (this.closed) return Promise.reject(notReady("The Responses store is closed"));
    const worker = this.ensureWorker();
    const id = this.nextId++;
    if (this.waiting.size === 0) worker.ref();
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      worker.postMessage({ id, method, args } satisfies WorkerCall);
    });
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = startWorkerAt(new URL("./sqlite-worker.js", import.meta.url), {
      workerData: { dataDir: this.dataDir, limits: this.limits },
    });
    worker.unref();
    worker.on("message", (answer: WorkerAnswer) => {
      const waiting = this.waiting.get(answer.id);
      this.waiting.delete(answer.id);
      if (this.waiting.size === 0) worker.unref();
      if (!waiting) return;
      if ("result" in answer) waiting.resolve(answer.result);
      else waiting.reject(rebuilt(answer.error));
    });
    // It could not open the database, or it crashed: the calls waiting fail, the next call starts anew.
    worker.on("error", (error) => this.failAll(worker, error));
    worker.on("exit", () => this.failAll(worker, new Error("the store's worker thread ended")));
    this.worker = worker;
    return worker;
  }

  private failAll(worker: Worker, error: Error): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    const waiting = [...this.waiting.values()];
    this.waiting.clear();
    for (const { reject } of waiting)
      reject(notReady(`The Responses store is unavailable: ${error.message}`));
  }

  async close(): Promise<void> {
    this.closed = true;
    const worker = this.worker;
    if (!worker) return;
    const exited = new Promise((resolve) => worker.once("exit", resolve));
    worker.ref();
    // After the calls already posted (answered in order), the database closes and the worker ends.
    worker.postMessage("close");
    await exited;
  }
}

/** An error from the worker, with its code kept (SQLITE_FULL is a 507 wherever it is seen). */
function rebuilt(error: { message: string; code?: string }): Error {
  if (error.code === "SQLITE_BUSY")
    return notReady("The Responses store is locked by another process; retry shortly");
  return Object.assign(new Error(error.message), { code: error.code });
}

/** The SQLite Responses store under `dataDir`, run on a worker thread. */
export function sqliteWorkerBackend(dataDir: string, limits: StoreLimits): ResponsesBackend {
  const host = new WorkerHost(dataDir, limits);
  const methods = Object.fromEntries(
    BACKEND_METHODS.map((method) => [method, (...args: unknown[]) => host.call(method, args)]),
  );
  return { ...methods, close: () => host.close() } as unknown as ResponsesBackend;
}
