/**
 * One parse process: a Node child running parse-child.ts under a hard memory limit, and the protocol
 * to hand it a file and get its text, or the refusal to answer, back.
 *
 * Why a process with RLIMIT_DATA rather than counting inside pdf.js: the decoded bytes of a PDF are
 * made by pdf.js's stream classes (Flate, LZW, predictors, decryption, object streams, images, fonts),
 * which unpdf ships bundled and minified, with no hook to count them; a defence that reads the file's
 * text first (inflate-check.ts) sees the dictionaries differently from pdf.js and was passed five ways
 * (#35). The kernel counts every writable private mapping of the process, ArrayBuffers included
 * (which a worker thread's `maxOldGenerationSizeMb` does not cap), so the bound holds whatever the
 * spelling, filter chain or encryption, and whatever parser (HTML, .docx) allocated the memory. A
 * refused allocation is an error the child turns into a 413, or a crash the parent turns into one.
 *
 * The limit is set by the shell that execs Node (`ulimit -d`, `ulimit -c 0` so a crash leaves no core
 * file): Node has no setrlimit, and `sh` is on every system that has `/proc` to check it with. The
 * child reports the limit it runs under; on Linux a process without it is not used.
 *
 * The cost: `spawn` forks the server and waits for the exec on the event loop (100–400 ms measured
 * at a load average of 20 on 2 cores, as for any spawn, `/bin/true` included), so processes are
 * kept between files and only a file that was stopped (its process killed) costs a new one.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { DomainError } from "../../core/errors.js";
import type { ChildMessage, ParseJob, ProcessMemory } from "./parse-child.js";
import { fileTooLarge, parseProcessDataLimit, semiSpaceMb, type IngestLimits } from "./limits.js";
import type { LoadedFile } from "./loaders.js";

/** How long a new process may take to load the parsers (tsx compiles them in tests) before it is a 500. */
const START_MS = 120_000;
/** The end of the child's stderr kept to tell a heap exhaustion from other deaths. */
const STDERR_KEPT = 8192;

/** How one job ended: the file's text or the error to answer; `alive`: the process may be reused. */
export type JobOutcome =
  | { loaded: LoadedFile; alive: true; memory: ProcessMemory }
  | { error: DomainError; alive: boolean; memory?: ProcessMemory };

export interface ProcessMemoryLimits {
  heapMb: number;
  dataBytes: number;
}

/** The memory settings of a process that parses under `limits` (reused only for equal ones). */
export function processLimitsFor(limits: IngestLimits): ProcessMemoryLimits {
  return { heapMb: limits.maxParseHeapMb, dataBytes: parseProcessDataLimit(limits) };
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

const clientLeft = () => new DomainError("cancelled", "The client closed the request");

export class ParseProcess {
  readonly ready: Promise<void>;
  private readonly child: ChildProcess;
  private stderr = "";
  private exited = false;
  /** The RLIMIT_DATA the child reported (null: none could be read). */
  dataLimit: number | null = null;

  constructor(readonly memoryLimits: ProcessMemoryLimits) {
    this.child = startChild(memoryLimits);
    this.child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-STDERR_KEPT);
    });
    this.child.on("exit", () => (this.exited = true));
    // An 'error' (spawn failure, a send to a dead child) is seen through 'exit' or the job's own handling.
    this.child.on("error", () => undefined);
    this.ready = new Promise<void>((resolve, reject) => {
      const fail = (why: string) => {
        clearTimeout(timer);
        this.kill();
        reject(new DomainError("corrupt", `A parse process did not start: ${why}`));
      };
      const timer = setTimeout(() => fail(`not ready after ${START_MS} ms`), START_MS);
      timer.unref();
      const onMessage = (message: ChildMessage) => {
        if (!("ready" in message)) return;
        clearTimeout(timer);
        this.child.off("message", onMessage);
        this.child.off("exit", onExit);
        this.child.off("error", onError);
        this.dataLimit = message.dataLimit;
        if (process.platform === "linux" && message.dataLimit !== memoryLimits.dataBytes) {
          return fail(
            `its memory limit is ${message.dataLimit ?? "unlimited"}, not ${memoryLimits.dataBytes}`,
          );
        }
        resolve();
      };
      const onExit = () => fail(`it exited: ${this.stderr.trim().slice(-500) || "no message"}`);
      // A spawn that fails (no /bin/sh) emits 'error', not 'exit'.
      const onError = (error: Error) => fail(error.message);
      this.child.on("message", onMessage);
      this.child.on("exit", onExit);
      this.child.once("error", onError);
    });
    // A rejected start is reported to the job that waits for it; nobody else awaits this promise.
    this.ready.catch(() => undefined);
    // An idle process keeps nothing alive: the channel is referenced while a start or a job is awaited.
    this.child.unref();
    void this.ready.finally(() => this.channel()?.unref()).catch(() => undefined);
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return !this.exited;
  }

  /**
   * Parses one file. Resolves (never rejects) with its outcome: past `limits.maxParseMs`, when
   * `signal` fires, or when the process dies (its memory limit), the process is killed and the job
   * answered 422, "client left" or 413.
   */
  parse(job: Omit<ParseJob, "id">, id: number, signal?: AbortSignal): Promise<JobOutcome> {
    const { name, limits } = job;
    return new Promise<JobOutcome>((resolve) => {
      const done = (outcome: JobOutcome) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.child.off("message", onMessage);
        this.child.off("exit", onExit);
        this.channel()?.unref();
        if (!outcome.alive) this.kill();
        resolve(outcome);
      };
      const onMessage = (message: ChildMessage) => {
        if (!("id" in message) || message.id !== id) return;
        if ("loaded" in message) done({ loaded: message.loaded, alive: true, memory: message.memory });
        else done({ error: refusalError(message.refusal), alive: true, memory: message.memory });
      };
      const onExit = () => done({ error: this.deathError(name, limits), alive: false });
      const onAbort = () => done({ error: clientLeft(), alive: false });
      const timer = setTimeout(
        () => done({ error: timeLimitPassed(name, limits), alive: false }),
        limits.maxParseMs,
      );
      if (this.exited) return onExit();
      if (signal?.aborted) return onAbort();
      this.child.on("message", onMessage);
      this.child.on("exit", onExit);
      signal?.addEventListener("abort", onAbort);
      this.channel()?.ref();
      this.child.send({ ...job, id } satisfies ParseJob, (error) => {
        if (error) done({ error: this.deathError(name, limits), alive: false });
      });
    });
  }

  /** Why the child died during a job: its heap (V8 says so on stderr), else its memory limit. */
  private deathError(name: string, limits: IngestLimits): DomainError {
    if (/heap out of memory|Reached heap limit/i.test(this.stderr)) {
      return fileTooLarge(
        name,
        "parsing it needs more memory than allowed",
        "MAX_PARSE_HEAP_MB",
        limits.maxParseHeapMb,
      );
    }
    return fileTooLarge(
      name,
      "decoding it needs more memory than its parse process may use",
      "MAX_EXTRACTED_BYTES",
      limits.maxExtractedBytes,
    );
  }

  /**
   * Ends the process at once (SIGKILL): a runaway parse gives nothing back by being asked. Its whole
   * process group goes, so the OCR tools it runs (ocr.ts) end with it.
   */
  kill(): void {
    if (this.exited) return;
    try {
      if (this.child.pid !== undefined) process.kill(-this.child.pid, "SIGKILL");
    } catch {
      // No group (the spawn failed): the process alone.
    }
    this.child.kill("SIGKILL");
  }

  /** Resolves once the process has ended (after kill). */
  ended(): Promise<void> {
    if (this.exited) return Promise.resolve();
    // Awaited, the exit must keep the event loop alive until it comes.
    this.child.ref();
    return new Promise((resolve) =>
      this.child.once("exit", () => {
        this.child.unref();
        resolve();
      }),
    );
  }

  /** The IPC channel, which keeps the server's event loop alive while referenced. */
  private channel(): { ref(): void; unref(): void } | undefined {
    return (this.child as unknown as { channel?: { ref(): void; unref(): void } }).channel;
  }
}

function refusalError(refusal: Extract<ChildMessage, { refusal: unknown }>["refusal"]): DomainError {
  return new DomainError(refusal.kind, refusal.message, {
    details: refusal.details ?? [],
    ...(refusal.code === undefined ? {} : { code: refusal.code as DomainError["code"] }),
  });
}

/**
 * Starts `node parse-child` under `sh -c 'ulimit …; exec node …'`. Compiled, the child is
 * `parse-child.js`; under tsx (tests, `npm start`) it is the `.ts` file, loaded through tsx's hooks.
 */
function startChild({ heapMb, dataBytes }: ProcessMemoryLimits): ChildProcess {
  const underTsx = import.meta.url.endsWith(".ts");
  const entry = new URL("./parse-child." + (underTsx ? "ts" : "js"), import.meta.url);
  const nodeArgs = [
    `--max-old-space-size=${heapMb}`,
    `--max-semi-space-size=${semiSpaceMb(heapMb)}`,
    ...(underTsx ? ["--import", import.meta.resolve("tsx")] : []),
    entry.pathname,
  ];
  // ulimit -d takes KiB; the child checks what it got against dataBytes, so round to a whole KiB.
  const kib = Math.floor(dataBytes / 1024);
  return spawn(
    "/bin/sh",
    [
      "-c",
      'ulimit -d "$1" && ulimit -c 0 && shift && exec "$@"',
      "sh",
      String(kib),
      process.execPath,
      ...nodeArgs,
    ],
    // A process group of its own (detached), which kill() ends whole: the child and its OCR tools.
    { stdio: ["ignore", "ignore", "pipe", "ipc"], serialization: "advanced", detached: true },
  );
}
