/**
 * Untrusted files are parsed in child processes (parse-process.ts), never on the event loop and never
 * in the server's memory: at most MAX_CONCURRENT_PARSES at once, each process with a JavaScript heap of
 * MAX_PARSE_HEAP_MB and a hard limit on all its writable memory (the heap, MAX_EXTRACTED_BYTES of
 * decoded data and a fixed overhead: limits.ts parseProcessDataLimit), and each file with MAX_PARSE_MS.
 * A parse past one is stopped by killing its process and answered 413 (memory) or 422 (time), naming
 * the file and the limit; a caller whose client left aborts its parse the same way. Processes are kept
 * between files (starting one costs more than parsing a small file) and exit after a while without
 * work, or once they hold more than half their limit (so one file's leftovers never refuse the next).
 */
import { DomainError } from "../../core/errors.js";
import { DEFAULT_INGEST_LIMITS, type IngestLimits } from "./limits.js";
import type { LoadedFile } from "./loaders.js";
import type { ParseJob } from "./parse-child.js";
import { ParseProcess, processLimitsFor, type ProcessMemoryLimits } from "./parse-process.js";

/** How long an idle parse process is kept. */
const IDLE_MS = 30_000;

interface Job {
  file: Omit<ParseJob, "id">;
  signal?: AbortSignal;
  resolve: (loaded: LoadedFile) => void;
  reject: (error: Error) => void;
}

interface Idle {
  parser: ParseProcess;
  timer: NodeJS.Timeout;
}

const clientLeft = () => new DomainError("cancelled", "The client closed the request");
const sameLimits = (a: ProcessMemoryLimits, b: ProcessMemoryLimits) =>
  a.heapMb === b.heapMb && a.dataBytes === b.dataBytes;

class ParsePool {
  private readonly idle: Idle[] = [];
  private running = 0;
  private nextId = 0;
  private readonly queue: Job[] = [];

  run(job: Job): void {
    if (job.signal?.aborted) return job.reject(clientLeft());
    if (this.running < job.file.limits.maxConcurrentParses) {
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

  /** Runs one job in a process, settles it, and keeps the process (or ends it, if it was stopped). */
  private async parseOn(job: Job): Promise<void> {
    if (job.signal?.aborted) return job.reject(clientLeft());
    const limits = processLimitsFor(job.file.limits);
    const parser = this.take(limits);
    // A client that leaves while a new process starts (a second under tsx) frees its slot at once; the
    // process, once started, waits for the next file.
    const started = await Promise.race([
      parser.ready.then(
        () => "ready" as const,
        (error: Error) => error,
      ),
      whenAborted(job.signal),
    ]);
    if (started !== "ready") {
      if (started === "aborted")
        void parser.ready.then(
          () => this.putBack(parser),
          () => undefined,
        );
      return job.reject(started === "aborted" ? clientLeft() : started);
    }
    const outcome = await parser.parse(job.file, this.nextId++, job.signal);
    const overgrown = (outcome.memory?.dataBytes ?? 0) > limits.dataBytes / 2;
    if (outcome.alive && !overgrown) this.putBack(parser);
    else {
      // Ended before the job is settled: its memory is given back before the next file starts.
      parser.kill();
      await parser.ended();
    }
    if ("loaded" in outcome) job.resolve(outcome.loaded);
    else job.reject(outcome.error);
  }

  private take(limits: ProcessMemoryLimits): ParseProcess {
    // A process that ended on its own is not taken again.
    const at = this.idle.findIndex(({ parser }) => parser.alive && sameLimits(parser.memoryLimits, limits));
    if (at >= 0) {
      const [{ parser, timer }] = this.idle.splice(at, 1) as [Idle];
      clearTimeout(timer);
      return parser;
    }
    return new ParseProcess(limits);
  }

  private putBack(parser: ParseProcess): void {
    const timer = setTimeout(() => {
      const at = this.idle.findIndex((idle) => idle.parser === parser);
      if (at >= 0) this.idle.splice(at, 1);
      parser.kill();
    }, IDLE_MS);
    timer.unref();
    this.idle.push({ parser, timer });
  }
}

/** Resolves with "aborted" when `signal` fires (never without one). */
function whenAborted(signal: AbortSignal | undefined): Promise<"aborted"> {
  return new Promise((resolve) => {
    if (signal?.aborted) resolve("aborted");
    else signal?.addEventListener("abort", () => resolve("aborted"), { once: true });
  });
}

const pool = new ParsePool();

/**
 * The single entry point for parsing an untrusted file: `bytes` (copied to the process) are parsed by
 * extension in a parse process within `limits` (MAX_PARSE_MS, MAX_PARSE_HEAP_MB, MAX_EXTRACTED_BYTES,
 * MAX_CONCURRENT_PARSES and the per-file limits of loaders.ts). Rejects with the domain error to answer
 * (400, 413, 422); with `signal`, a client that left stops its parse and frees the process.
 */
export function parseFileBytes(
  name: string,
  bytes: Uint8Array,
  limits: IngestLimits = DEFAULT_INGEST_LIMITS,
  signal?: AbortSignal,
): Promise<LoadedFile> {
  return new Promise((resolve, reject) =>
    pool.run({ file: { name, bytes, limits }, signal, resolve, reject }),
  );
}

/** As parseFileBytes, for a file the server wrote itself (an upload spooled to disk): the process reads it. */
export function parseSpooledFile(
  name: string,
  path: string,
  limits: IngestLimits,
  signal?: AbortSignal,
): Promise<LoadedFile> {
  return new Promise((resolve, reject) =>
    pool.run({ file: { name, path, limits }, signal, resolve, reject }),
  );
}
