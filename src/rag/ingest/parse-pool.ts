/**
 * Untrusted files are parsed on worker threads, never on the event loop: at most
 * MAX_CONCURRENT_PARSES at once, each thread with a heap of MAX_PARSE_HEAP_MB (`resourceLimits`) and
 * each file with MAX_PARSE_MS. A parse past either is stopped by terminating its thread and answered
 * 413 (memory) or 422 (time), naming the file and the limit; a caller whose client left aborts its
 * parse the same way. Threads are kept between files (starting one costs more than parsing a small
 * file) and exit after a while without work.
 */
import { Worker } from "node:worker_threads";
import { DomainError, type ErrorCode, type ErrorKind } from "../../core/errors.js";
import { DEFAULT_INGEST_LIMITS, fileTooLarge, type IngestLimits } from "./limits.js";
import type { LoadedFile } from "./loaders.js";
import type { ParseJob } from "./parse-worker.js";

/** How long an idle parse thread is kept. */
const IDLE_MS = 30_000;
/** How long a new thread may take to load the parsers (tsx compiles them in tests) before it is a 500. */
const START_MS = 120_000;

type Reply = { ready?: true; id?: number; loaded?: LoadedFile; refusal?: Refusal };
interface Refusal {
  kind: ErrorKind;
  code?: ErrorCode;
  message: string;
  details?: unknown[];
}

interface Job {
  name: string;
  source: { bytes: Uint8Array } | { path: string };
  limits: IngestLimits;
  signal?: AbortSignal;
  resolve: (loaded: LoadedFile) => void;
  reject: (error: Error) => void;
}

/** One thread and the job it is running, if any. */
interface Thread {
  worker: Worker;
  heapMb: number;
  ready: Promise<void>;
  idleTimer: NodeJS.Timeout | null;
}

const timeLimitPassed = (name: string, limits: IngestLimits) =>
  new DomainError(
    "unprocessable",
    `File "${name}": parsing took longer than ${limits.maxParseMs} ms; the limit is ${limits.maxParseMs} (MAX_PARSE_MS)`,
    {
      details: [
        { file: name, reason: "parse time limit passed", limit: limits.maxParseMs, setting: "MAX_PARSE_MS" },
      ],
    },
  );

const heapLimitPassed = (name: string, limits: IngestLimits) =>
  fileTooLarge(name, "parsing it needs more memory than allowed", "MAX_PARSE_HEAP_MB", limits.maxParseHeapMb);

const clientLeft = () => new DomainError("cancelled", "The client closed the request");

class ParsePool {
  private readonly idle: Thread[] = [];
  private running = 0;
  private nextId = 0;
  private readonly queue: Job[] = [];

  run(job: Job): void {
    if (job.signal?.aborted) return job.reject(clientLeft());
    if (this.running < job.limits.maxConcurrentParses) {
      this.running++;
      void this.execute(job);
      return;
    }
    this.queue.push(job);
    // A client that leaves while waiting gives its place up at once.
    job.signal?.addEventListener("abort", () => {
      const at = this.queue.indexOf(job);
      if (at < 0) return;
      this.queue.splice(at, 1);
      job.reject(clientLeft());
    });
  }

  private async execute(first: Job): Promise<void> {
    let job: Job | undefined = first;
    while (job !== undefined) {
      await this.parseOn(job);
      job = this.queue.shift();
    }
    this.running--;
  }

  /** Runs one job on a thread, settles it, and puts the thread back (or ends it, if it was stopped). */
  private async parseOn(job: Job): Promise<void> {
    if (job.signal?.aborted) return job.reject(clientLeft());
    const thread = this.take(job.limits.maxParseHeapMb);
    // A client that leaves while a new thread starts (seconds under tsx) frees its slot at once; the
    // thread, once started, waits for the next file.
    const started = await Promise.race([
      thread.ready.then(
        () => "ready" as const,
        (error: Error) => error,
      ),
      whenAborted(job.signal),
    ]);
    if (started !== "ready") {
      if (started === "aborted")
        void thread.ready.then(
          () => this.putBack(thread),
          () => undefined,
        );
      return job.reject(started === "aborted" ? clientLeft() : started);
    }
    const id = this.nextId++;
    const outcome = await new Promise<{ keep: boolean; settle: () => void }>((resolve) => {
      const done = (keep: boolean, settle: () => void) => {
        clearTimeout(timer);
        job.signal?.removeEventListener("abort", onAbort);
        thread.worker.off("message", onMessage);
        thread.worker.off("error", onError);
        thread.worker.off("exit", onExit);
        resolve({ keep, settle });
      };
      const onMessage = (reply: Reply) => {
        if (reply.id !== id) return;
        if (reply.loaded) done(true, () => job.resolve(reply.loaded!));
        else done(true, () => job.reject(refusalError(reply.refusal!)));
      };
      const onError = (error: Error & { code?: string }) =>
        done(false, () =>
          job.reject(
            error.code === "ERR_WORKER_OUT_OF_MEMORY"
              ? heapLimitPassed(job.name, job.limits)
              : new DomainError("unprocessable", `File "${job.name}" could not be parsed: ${error.message}`),
          ),
        );
      const onExit = () => done(false, () => job.reject(heapLimitPassed(job.name, job.limits)));
      const onAbort = () => done(false, () => job.reject(clientLeft()));
      const timer = setTimeout(
        () => done(false, () => job.reject(timeLimitPassed(job.name, job.limits))),
        job.limits.maxParseMs,
      );
      thread.worker.on("message", onMessage);
      thread.worker.on("error", onError);
      thread.worker.on("exit", onExit);
      job.signal?.addEventListener("abort", onAbort);
      thread.worker.ref();
      const message: ParseJob = { id, name: job.name, limits: job.limits, ...job.source };
      thread.worker.postMessage(message);
    });
    if (outcome.keep) this.putBack(thread);
    // Terminated before the job is settled: its memory is given back before the next file starts.
    else await thread.worker.terminate();
    outcome.settle();
  }

  private take(heapMb: number): Thread {
    // A thread that ended on its own (threadId -1) is not taken again.
    const at = this.idle.findIndex((thread) => thread.heapMb === heapMb && thread.worker.threadId >= 0);
    if (at >= 0) {
      const [thread] = this.idle.splice(at, 1);
      if (thread!.idleTimer) clearTimeout(thread!.idleTimer);
      return thread!;
    }
    return startThread(heapMb);
  }

  private putBack(thread: Thread): void {
    thread.worker.unref();
    this.idle.push(thread);
    thread.idleTimer = setTimeout(() => {
      const at = this.idle.indexOf(thread);
      if (at >= 0) this.idle.splice(at, 1);
      void thread.worker.terminate();
    }, IDLE_MS);
    thread.idleTimer.unref();
  }
}

/** Resolves with "aborted" when `signal` fires (never without one). */
function whenAborted(signal: AbortSignal | undefined): Promise<"aborted"> {
  return new Promise((resolve) => {
    if (signal?.aborted) resolve("aborted");
    else signal?.addEventListener("abort", () => resolve("aborted"), { once: true });
  });
}

function refusalError(refusal: Refusal): DomainError {
  return new DomainError(refusal.kind, refusal.message, {
    details: refusal.details ?? [],
    ...(refusal.code === undefined ? {} : { code: refusal.code }),
  });
}

/**
 * Starts a thread. Compiled, it runs `parse-worker.js`; under tsx (tests) it is the `.ts` file, and
 * since Node 20's workers do not run the parent's `--import` hooks, a bootstrap registers tsx first
 * (as the merge worker does).
 */
function startThread(heapMb: number): Thread {
  const underTsx = import.meta.url.endsWith(".ts");
  const workerUrl = new URL("./parse-worker." + (underTsx ? "ts" : "js"), import.meta.url);
  const resourceLimits = {
    maxOldGenerationSizeMb: heapMb,
    maxYoungGenerationSizeMb: Math.max(4, Math.min(64, Math.floor(heapMb / 8))),
    stackSizeMb: 4,
  };
  let worker: Worker;
  if (underTsx) {
    const tsxApi = import.meta.resolve("tsx/esm/api");
    const bootstrap =
      `import(${JSON.stringify(tsxApi)}).then(({ register }) => { register(); ` +
      `return import(${JSON.stringify(workerUrl.href)}); });`;
    worker = new Worker(bootstrap, { eval: true, resourceLimits });
  } else worker = new Worker(workerUrl, { resourceLimits });
  const ready = new Promise<void>((resolve, reject) => {
    const fail = (why: string) => {
      clearTimeout(timer);
      void worker.terminate();
      reject(new DomainError("corrupt", `A parse thread did not start: ${why}`));
    };
    const timer = setTimeout(() => fail(`not ready after ${START_MS} ms`), START_MS);
    timer.unref();
    const onMessage = (reply: Reply) => {
      if (!reply.ready) return;
      clearTimeout(timer);
      worker.off("message", onMessage);
      worker.off("error", onError);
      resolve();
    };
    const onError = (error: Error) => fail(error.message);
    worker.on("message", onMessage);
    worker.on("error", onError);
  });
  // An idle thread that fails is dropped when next looked at; the listener keeps the failure from
  // being an uncaught 'error' event.
  worker.on("error", () => undefined);
  // A rejected start is reported to the job that waits for it; nobody else awaits this promise.
  ready.catch(() => undefined);
  return { worker, heapMb, ready, idleTimer: null };
}

const pool = new ParsePool();

/**
 * The single entry point for parsing an untrusted file: `bytes` (copied to the thread) are parsed by
 * extension on a pool thread within `limits` (MAX_PARSE_MS, MAX_PARSE_HEAP_MB, MAX_CONCURRENT_PARSES
 * and the per-file limits of loaders.ts). Rejects with the domain error to answer (400, 413, 422); with
 * `signal`, a client that left stops its parse and frees the thread.
 */
export function parseFileBytes(
  name: string,
  bytes: Uint8Array,
  limits: IngestLimits = DEFAULT_INGEST_LIMITS,
  signal?: AbortSignal,
): Promise<LoadedFile> {
  return new Promise((resolve, reject) =>
    pool.run({ name, source: { bytes }, limits, signal, resolve, reject }),
  );
}

/** As parseFileBytes, for a file the server wrote itself (an upload spooled to disk): the thread reads it. */
export function parseSpooledFile(
  name: string,
  path: string,
  limits: IngestLimits,
  signal?: AbortSignal,
): Promise<LoadedFile> {
  return new Promise((resolve, reject) =>
    pool.run({ name, source: { path }, limits, signal, resolve, reject }),
  );
}
