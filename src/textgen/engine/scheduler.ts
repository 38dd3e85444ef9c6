/**
 * Admission control between the routes and the model, after TGI's router: at most `maxConcurrent`
 * generations run at once (one per llama.cpp sequence; the context batches them together), at most
 * `maxQueue` wait, and the rest are told to come back later (429 + Retry-After) instead of queueing
 * forever. Each job has a deadline, and a job whose client went away leaves the queue at once or,
 * when running, has its generation aborted. Written here because it is the product's core policy and
 * no package couples queueing, deadlines and cancellation the way generation needs.
 *
 * Priorities (for the Batch API): a job is "interactive" (the default) or "batch". Interactive jobs
 * are admitted before any waiting batch job, and when every sequence is taken and some run batch
 * jobs, an interactive job preempts the most recently started one: its signal aborts (reason
 * `PREEMPTED`), the batcher drops its sequence at the next step, and the interactive job takes the
 * sequence then. So an interactive request never waits behind a batch line for more than one decode
 * step. The preempted job's `run` rejects with PreemptedError; whoever runs the batch submits the line
 * again later (its cells may survive, in a sequence or the RAM prefix cache, to be reused).
 */
import { busy, DomainError } from "../../core/errors.js";

export interface SchedulerOptions {
  maxConcurrent: number;
  maxQueue: number;
  timeoutMs: number;
}

export type Priority = "interactive" | "batch";

export interface RunOptions {
  /** "batch": admitted after interactive jobs and preempted by them (default "interactive"). */
  priority?: Priority;
}

/** A batch job gave its sequence to an interactive one; submit it again. */
export class PreemptedError extends DomainError {
  constructor() {
    super("busy", "The batch line was preempted by interactive requests; it is retried later", {
      retryAfter: "1",
    });
  }
}

export interface SchedulerStats {
  running: number;
  queued: number;
  /** Of those, batch jobs. */
  runningBatch: number;
  queuedBatch: number;
  preempted: number;
  completed: number;
  rejected: number;
  timedOut: number;
  cancelled: number;
}

interface Waiter {
  start: () => void;
  cancel: (error: DomainError) => void;
}

interface Admitted {
  priority: Priority;
  startedAt: number;
  preempted: boolean;
}

export class Scheduler {
  private running = 0;
  /** Waiting jobs, interactive ones first served. */
  private readonly queues: Record<Priority, Waiter[]> = { interactive: [], batch: [] };
  private readonly counters = { completed: 0, rejected: 0, timedOut: 0, cancelled: 0, preempted: 0 };
  /** Running jobs (holding a sequence), by their controller. */
  private readonly holding = new Map<AbortController, Admitted>();
  /** Mean run time of recent jobs, for a Retry-After that means something. */
  private meanRunMs = 1000;
  /** Controllers of admitted jobs (queued or running), so shutdown can stop them. */
  private readonly admitted = new Set<AbortController>();
  private closing = false;
  private idle?: () => void;

  constructor(private readonly options: SchedulerOptions) {}

  stats(): SchedulerStats {
    const runningBatch = [...this.holding.values()].filter((job) => job.priority === "batch").length;
    return {
      running: this.running,
      queued: this.queues.interactive.length + this.queues.batch.length,
      runningBatch,
      queuedBatch: this.queues.batch.length,
      ...this.counters,
    };
  }

  /**
   * Runs `task` when a slot is free. The signal handed to the task aborts when the client's signal
   * aborts or the deadline passes. Throws 429 when the queue is full, 504 when the deadline passes
   * before the task finished, and 499-like cancellation (a DomainError the caller will not send) when
   * the client left while waiting.
   */
  async run<T>(
    clientSignal: AbortSignal | undefined,
    task: (signal: AbortSignal) => Promise<T>,
    options: RunOptions = {},
  ): Promise<T> {
    const priority = options.priority ?? "interactive";
    if (clientSignal?.aborted) throw cancelledError();
    if (this.closing) throw shuttingDownError();
    const queue = this.queues[priority];
    if (this.running >= this.options.maxConcurrent && queue.length >= this.options.maxQueue) {
      this.counters.rejected++;
      const retryAfter = Math.max(
        1,
        Math.ceil(((queue.length + 1) * this.meanRunMs) / this.options.maxConcurrent / 1000),
      );
      throw busy(
        `The server is busy: ${this.running} generations running and ${queue.length} waiting. Retry after ${retryAfter} s.`,
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
      await this.acquire(controller.signal, () => timedOut, priority);
      const startedAt = performance.now();
      this.holding.set(controller, { priority, startedAt, preempted: false });
      // The slot is held until the task has really ended (its llama.cpp sequence is busy until then),
      // but the caller is answered at the deadline or when its client leaves, whatever the task is
      // doing: a step of native work cannot be interrupted, a request can.
      const work = task(controller.signal).finally(() => {
        this.meanRunMs = 0.8 * this.meanRunMs + 0.2 * (performance.now() - startedAt);
        this.holding.delete(controller);
        this.release();
      });
      const result = await untilAborted(work, controller.signal);
      if (timedOut) throw timeoutError(this.options.timeoutMs);
      if (controller.signal.reason === SHUTDOWN) throw shuttingDownError();
      if (controller.signal.reason === PREEMPTED) throw new PreemptedError();
      if (clientSignal?.aborted) this.counters.cancelled++;
      else this.counters.completed++;
      return result;
    } catch (error) {
      if (timedOut) {
        this.counters.timedOut++;
        throw timeoutError(this.options.timeoutMs);
      }
      if (controller.signal.reason === SHUTDOWN) throw shuttingDownError();
      if (controller.signal.reason === PREEMPTED) throw new PreemptedError();
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

  private acquire(signal: AbortSignal, isTimedOut: () => boolean, priority: Priority): Promise<void> {
    if (this.running < this.options.maxConcurrent) {
      this.running++;
      return Promise.resolve();
    }
    const queue = this.queues[priority];
    if (priority === "interactive") this.preemptFor(this.queues.interactive.length + 1);
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
        const index = queue.indexOf(waiter);
        if (index >= 0) queue.splice(index, 1);
        if (isTimedOut()) reject(timeoutError(this.options.timeoutMs));
        else {
          this.counters.cancelled++;
          reject(cancelledError());
        }
      };
      signal.addEventListener("abort", onAbort, { once: true });
      queue.push(waiter);
    });
  }

  /**
   * Makes sure `waiting` interactive jobs will get sequences soon: batch jobs already preempted count,
   * and more are preempted (the most recently started first: the least work lost) until they cover it.
   */
  private preemptFor(waiting: number): void {
    const jobs = [...this.holding.entries()].filter(([, job]) => job.priority === "batch");
    let freeing = jobs.filter(([, job]) => job.preempted).length;
    const candidates = jobs
      .filter(([, job]) => !job.preempted)
      .sort(([, a], [, b]) => b.startedAt - a.startedAt);
    for (const [controller, job] of candidates) {
      if (freeing >= waiting) return;
      job.preempted = true;
      this.counters.preempted++;
      freeing++;
      controller.abort(PREEMPTED);
    }
  }

  private release(): void {
    this.running--;
    const next = this.queues.interactive.shift() ?? this.queues.batch.shift();
    next?.start();
  }
}

const SHUTDOWN = new Error("server shutting down");
const PREEMPTED = new Error("preempted by an interactive request");

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
