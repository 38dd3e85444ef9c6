/**
 * Bounds on what extracting text from files may cost: how much a file may inflate to, how much text
 * it and the whole request may yield, a PDF's page count, an HTML page's nesting, the memory and time
 * of the process that parses it, and how many files are parsed at once (parse-gate.ts: the rest wait
 * in a bounded, per-tenant fair queue; past it, 429 with Retry-After).
 */
import type { Config } from "../../core/config.js";
import { tooLarge, type DomainError } from "../../core/errors.js";
import { ParseGate } from "./parse-gate.js";

export { ParseGate } from "./parse-gate.js";

export interface IngestLimits {
  /** Bytes a .docx's ZIP entries or a PDF's compressed streams may inflate to (MAX_EXTRACTED_BYTES). */
  maxExtractedBytes: number;
  /** Characters of text one file may yield (MAX_FILE_CHARS). */
  maxFileChars: number;
  /** Characters of text one request may carry in all (MAX_BUILD_CHARS). */
  maxRequestChars: number;
  /** Pages of one PDF (MAX_PDF_PAGES). */
  maxPdfPages: number;
  /** Element nesting depth of one HTML file (MAX_HTML_DEPTH). */
  maxHtmlDepth: number;
  /** Bytes one server-side file (RAG_FILES_DIR) may have, checked before reading (MAX_BODY_BYTES). */
  maxFileBytes: number;
  /** Time one file's parse may take in its parse process (MAX_PARSE_MS). */
  maxParseMs: number;
  /** JavaScript heap of one parse process, in MB (MAX_PARSE_HEAP_MB). */
  maxParseHeapMb: number;
  /** Parse processes at once (MAX_CONCURRENT_PARSES). */
  maxConcurrentParses: number;
  /**
   * Not a bound, but travels with them to the parse process: tesseract's languages for pages and
   * images read by OCR (OCR_LANGUAGES, e.g. "eng" or "eng+deu").
   */
  ocrLanguages: string;
}

/** What a route needs to load files: the bounds, and the gate every request's parsing goes through. */
export interface Ingest {
  limits: IngestLimits;
  gate: ParseGate;
}

/** Generous bounds for callers without a config (the CLI reading local files). */
export const DEFAULT_INGEST_LIMITS: IngestLimits = {
  maxExtractedBytes: 256 * 1024 * 1024,
  maxFileChars: 64 * 1024 * 1024,
  maxRequestChars: 1_000_000_000,
  maxPdfPages: 10_000,
  maxHtmlDepth: 256,
  maxFileBytes: 256 * 1024 * 1024,
  maxParseMs: 120_000,
  maxParseHeapMb: 1024,
  maxConcurrentParses: 2,
  ocrLanguages: "eng",
};

/** 413 naming the file and the variable that bounds it, in the contract's error shape. */
export function fileTooLarge(fileName: string, why: string, variable: string, limit: number): DomainError {
  return tooLarge(`File "${fileName}": ${why}; the limit is ${limit} (${variable})`, [
    { file: fileName, reason: why, limit, setting: variable },
  ]);
}

/** Adds each file's text to a request's total and refuses the file that takes it past the cap. */
export class RequestTextBudget {
  private used = 0;

  constructor(private readonly limits: IngestLimits) {}

  add(fileName: string, chars: number): void {
    this.used += chars;
    if (this.used > this.limits.maxRequestChars) {
      throw tooLarge(
        `File "${fileName}" takes the request's text to ${this.used} characters; the limit is ${this.limits.maxRequestChars} (MAX_BUILD_CHARS). Split it into appends.`,
        [{ file: fileName, limit: this.limits.maxRequestChars, setting: "MAX_BUILD_CHARS" }],
      );
    }
  }
}

export function ingestFromConfig(
  config: Pick<Config, "ingest"> & { limits: Pick<Config["limits"], "maxBodyBytesLarge"> },
): Ingest {
  return {
    limits: {
      maxExtractedBytes: config.ingest.maxExtractedBytes,
      maxFileChars: config.ingest.maxFileChars,
      maxRequestChars: config.ingest.maxBuildChars,
      maxPdfPages: config.ingest.maxPdfPages,
      maxHtmlDepth: config.ingest.maxHtmlDepth,
      // A file on the server may be as large as an upload of it could be.
      maxFileBytes: config.limits.maxBodyBytesLarge,
      maxParseMs: config.ingest.maxParseMs,
      maxParseHeapMb: config.ingest.maxParseHeapMb,
      maxConcurrentParses: config.ingest.maxConcurrentParses,
      ocrLanguages: config.ingest.ocrLanguages,
    },
    gate: new ParseGate(
      config.ingest.maxConcurrentParses,
      config.ingest.maxParseQueue,
      undefined,
      config.ingest.maxParsesPerTenant ?? undefined,
    ),
  };
}

const MIB = 1024 * 1024;

/**
 * What a parse process holds besides its heap and the data it decodes: Node and V8 themselves, the
 * parsers' code (pdf.js is 1.6 MB of JavaScript), ICU, thread stacks, the file's bytes and its text.
 * Measured on Linux x64 (Node 20, under tsx): ~155 MiB of writable private memory once the parsers
 * are loaded; the rest is margin.
 */
export const PARSE_PROCESS_OVERHEAD_BYTES = 256 * MIB;

/** The semi-spaces of a parse process's young generation: a thirty-second of its heap, 1–16 MB each. */
export const semiSpaceMb = (heapMb: number): number => Math.max(1, Math.min(16, Math.floor(heapMb / 32)));

/**
 * The writable private memory (RLIMIT_DATA) one parse process may have: its JavaScript heap
 * (MAX_PARSE_HEAP_MB, old and young generations), what it may decode (MAX_EXTRACTED_BYTES: pdf.js
 * holds decoded streams in ArrayBuffers, outside the heap), and the fixed overhead above. The kernel
 * refuses any allocation past it, whatever allocated it.
 */
export function parseProcessDataLimit(
  limits: Pick<IngestLimits, "maxParseHeapMb" | "maxExtractedBytes">,
): number {
  const heap = (limits.maxParseHeapMb + 3 * semiSpaceMb(limits.maxParseHeapMb)) * MIB;
  // A whole number of KiB, the unit `ulimit -d` takes.
  return Math.ceil((PARSE_PROCESS_OVERHEAD_BYTES + heap + limits.maxExtractedBytes) / 1024) * 1024;
}

/**
 * Whether an error is an allocation the process could not make: V8's own messages for an ArrayBuffer
 * the allocator refused (RLIMIT_DATA) and for arrays and strings past what it can hold. pdf.js passes
 * errors between its two halves as new errors carrying the message, so the message is what is read.
 */
export function isAllocationFailure(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return /Array buffer allocation failed|Invalid typed array length|Invalid array length|Invalid string length|out of memory/i.test(
    message,
  );
}
