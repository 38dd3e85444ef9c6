/**
 * A parse process (started by parse-process.ts): turns one file at a time into text with `loadFile`,
 * so a hostile file costs this process's memory and time, both bounded from outside (RLIMIT_DATA set
 * before it started, MAX_PARSE_MS by its parent), never the server's.
 *
 * It talks over Node's IPC channel: it sends `{ ready, dataLimit }` once the parsers are loaded, then
 * answers each job with `{ id, loaded }` or `{ id, refusal }`, plus what it holds (`memory`).
 */
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { getResolvedPDFJS } from "unpdf";
import { DomainError } from "../../core/errors.js";
import { fileTooLarge, isAllocationFailure, type IngestLimits } from "./limits.js";
import { loadFile } from "./loaders.js";
import { killOcrTools } from "./ocr.js";

export interface ParseJob {
  id: number;
  name: string;
  /** The file's bytes, or the path of a file holding them (an upload spooled to disk). */
  bytes?: Uint8Array;
  path?: string;
  limits: IngestLimits;
}

/** What the process holds after a job, from /proc/self/status (0 where there is none). */
export interface ProcessMemory {
  /** Writable private memory now (VmData): what RLIMIT_DATA bounds. */
  dataBytes: number;
  /** The most resident memory the process ever had (VmHWM). */
  peakRssBytes: number;
}

export type ChildMessage =
  | { ready: true; dataLimit: number | null }
  | { id: number; loaded: Awaited<ReturnType<typeof loadFile>>; memory: ProcessMemory }
  | {
      id: number;
      refusal: { kind: DomainError["kind"]; code?: string; message: string; details?: unknown[] };
      memory: ProcessMemory;
    };

function statusField(status: string, field: string): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
  return match ? Number(match[1]) * 1024 : 0;
}

function memory(): ProcessMemory {
  try {
    const status = readFileSync("/proc/self/status", "utf8");
    return { dataBytes: statusField(status, "VmData"), peakRssBytes: statusField(status, "VmHWM") };
  } catch {
    return { dataBytes: 0, peakRssBytes: process.resourceUsage().maxRSS * 1024 };
  }
}

/** The soft RLIMIT_DATA this process runs under (null: unlimited, or not Linux). */
function dataLimit(): number | null {
  try {
    const limits = readFileSync("/proc/self/limits", "utf8");
    const soft = /^Max data size\s+(\S+)/m.exec(limits)?.[1];
    return soft === undefined || soft === "unlimited" ? null : Number(soft);
  } catch {
    return null;
  }
}

/**
 * pdf.js skips what it cannot read with a warning and goes on (a page's text then ends early): an
 * allocation the kernel refused is one such warning. It is caught here so that the file is refused
 * with a 413 rather than indexed with its text cut short.
 */
let allocationRefused = false;
for (const method of ["log", "warn", "error", "info", "debug"] as const) {
  console[method] = (...args: unknown[]) => {
    if (args.some((arg) => isAllocationFailure(arg))) allocationRefused = true;
  };
}

const send = (message: ChildMessage) => process.send?.(message);

function refusalOf(job: ParseJob, error: unknown) {
  if (allocationRefused || isAllocationFailure(error)) {
    error = fileTooLarge(
      job.name,
      "decoding it needs more memory than its parse process may use",
      "MAX_EXTRACTED_BYTES",
      job.limits.maxExtractedBytes,
    );
  }
  return error instanceof DomainError
    ? { kind: error.kind, code: error.code, message: error.message, details: error.details }
    : {
        kind: "unprocessable" as const,
        message: `File "${job.name}" could not be parsed: ${(error as Error).message}`,
      };
}

process.on("message", (job: ParseJob) => {
  void (async () => {
    allocationRefused = false;
    // The parent stops the job at MAX_PARSE_MS from now; OCR tools are given no longer.
    const deadline = Date.now() + job.limits.maxParseMs;
    try {
      const bytes = job.bytes ?? (await readFile(job.path!));
      const loaded = await loadFile(job.name, bytes, job.limits, { deadline });
      if (allocationRefused) throw new RangeError("Array buffer allocation failed");
      send({ id: job.id, loaded, memory: memory() });
    } catch (error) {
      send({ id: job.id, refusal: refusalOf(job, error), memory: memory() });
    }
  })();
});
// The parent going away (the server ended, even by SIGKILL) closes the channel: nothing is left running.
process.on("disconnect", () => process.exit(0));
// OCR tools (ocr.ts) die with this process: killed here on an orderly exit, and with the process
// group when the parent kills it (parse-process.ts).
process.on("exit", killOcrTools);

// The parsers are loaded (pdf.js, which unpdf loads on first use, too): the time limit of the first
// job starts after this, not while modules compile.
await getResolvedPDFJS();
send({ ready: true, dataLimit: dataLimit() });
