/**
 * Admission control between the routes and the model, after TGI's router: at most `maxConcurrent`
 * generations run at once (one per llama.cpp sequence; the context batches them together), at most
 * `maxQueue` wait, and the rest are told to come back later (429 + Retry-After) instead of queueing
 * forever. Each job has a deadline, and a job whose client went away leaves the queue at once or,
 * when running, has its generation aborted. Written here because it is the product's core policy and
 * no package couples queueing, deadlines and cancellation the way generation needs.
 */
import { busy, DomainError } from "../../core/errors.js";

export interface SchedulerOptions {
  maxConcurrent: number;
  maxQueue: number;
  timeoutMs: number;
}

export interface SchedulerStats {
  running: number;
  queued: number;
  completed: number;
  rejected: number;
  timedOut: number;
  cancelled: number;
}

interface Waiter {
  start: () => void;
  cancel: (error: DomainError) => void;
}

export class Scheduler {
  private running = 0;
  private readonly queue: Waiter[] = [];
  private readonly counters = { completed: 0, rejected: 0, timedOut: 0, cancelled: 0 };
  /** Mean run time of recent jobs, for a Retry-After that means something. */
  private meanRunMs = 1000;
  /** Controllers of admitted jobs (queued or running), so shutdown can stop them. */
  private readonly admitted = new Set<AbortController>();
  private closing = false;
  private idle?: () => void;

  constructor(private readonly options: SchedulerOptions) {}

  stats(): SchedulerStats {
    return { running: this.running, queued: this.queue.length, ...this.counters };
  }

  /**
   * Runs `task` when a slot is free. The signal handed to the task aborts when the client's signal
   * aborts or the deadline passes. Throws 429 when the queue is full, 504 when the deadline passes
   * before the task finished, and 499-like cancellation (a DomainError the caller will not send) when
   * the client left while waiting.
   */
  async run<T>(clientSignal: AbortSignal | undefined, task: (signal: AbortSignal) => Promise<T>): Promise<T> {
    if (clientSignal?.aborted) throw cancelledError();
    if (this.closing) throw shuttingDownError();
    if (this.running >= this.options.maxConcurrent && this.queue.length >= this.options.maxQueue) {
      this.counters.rejected++;
      const retryAfter = Math.max(
        1,
        Math.ceil(((this.queue.length + 1) * this.meanRunMs) / this.options.maxConcurrent / 1000),
      );
      throw busy(
        `The server is busy: ${this.running} generations running and ${this.queue.length} waiting. Retry after ${retryAfter} s.`,
        retryAfter,
      );
    }

    const controller = new AbortController();
    this.admitted.add(controller);
    let timedOut = false;
    const deadline = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error("deadline"));
    }, this.options.timeoutMs);
    const onClientAbort = () => controller.abort(new Error("client"));
    clientSignal?.addEventListener("abort", onClientAbort, { once: true });

    try {
      await this.acquire(controller.signal, () => timedOut);
      const startedAt = performance.now();
      // The slot is held until the task has really ended (its llama.cpp sequence is busy until then),
      // but the caller is answered at the deadline or when its client leaves, whatever the task is
      // doing: a step of native work cannot be interrupted, a request can.
      const work = task(controller.signal).finally(() => {
        this.meanRunMs = 0.8 * this.meanRunMs + 0.2 * (performance.now() - startedAt);
        this.release();
      });
      const result = await untilAborted(work, controller.signal);
      if (timedOut) throw timeoutError(this.options.timeoutMs);
      if (controller.signal.reason === SHUTDOWN) throw shuttingDownError();
      if (clientSignal?.aborted) this.counters.cancelled++;
      else this.counters.completed++;
      return result;
    } catch (error) {
      if (timedOut) {
        this.counters.timedOut++;
        throw timeoutError(this.options.timeoutMs);
      }
      if (controller.signal.reason === SHUTDOWN) throw shuttingDownError();
      if (clientSignal?.aborted) {
        this.counters.cancelled++;
        throw cancelledError();
      }
      throw error;
    } finally {
      clearTimeout(deadline);
      clientSignal?.removeEventListener("abort", onClientAbort);
      this.admitted.delete(controller);
      if (this.admitted.size === 0) this.idle?.();
    }
  }

  /**
   * Graceful shutdown: new jobs get 503 at once; admitted ones may finish within `graceMs`, after
   * which they are aborted and answered 503. Resolves when no job is left.
   */
  async shutdown(graceMs: number): Promise<void> {
    this.closing = true;
    if (this.admitted.size === 0) return;
    const drained = new Promise<void>((resolve) => (this.idle = resolve));
    const grace = setTimeout(() => {
      for (const controller of this.admitted) controller.abort(SHUTDOWN);
    }, graceMs);
    await drained;
    clearTimeout(grace);
  }

  private acquire(signal: AbortSignal, isTimedOut: () => boolean): Promise<void> {
    if (this.running < this.options.maxConcurrent) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        start: () => {
          signal.removeEventListener("abort", onAbort);
          this.running++;
          resolve();
        },
        cancel: reject,
      };
      const onAbort = () => {
        const index = this.queue.indexOf(waiter);
        if (index >= 0) this.queue.splice(index, 1);
        if (isTimedOut()) reject(timeoutError(this.options.timeoutMs));
        else {
          this.counters.cancelled++;
          reject(cancelledError());
        }
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.queue.push(waiter);
    });
  }

  private release(): void {
    this.running--;
    const next = this.queue.shift();
    next?.start();
  }
}

const SHUTDOWN = new Error("server shutting down");

/** `work`, or a rejection as soon as `signal` aborts; a later failure of `work` is then ignored. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  work.catch(() => undefined);
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error as Error);
      },
    );
  });
}

function shuttingDownError(): DomainError {
  return new DomainError("not_ready", "The server is shutting down; retry on another replica or later", {
    retryAfter: "5",
  });
}

function timeoutError(timeoutMs: number): DomainError {
  return new DomainError("timeout", `Generation did not finish within REQUEST_TIMEOUT_MS (${timeoutMs} ms)`);
}

function cancelledError(): DomainError {
  return new DomainError("cancelled", "The client closed the request");
}
