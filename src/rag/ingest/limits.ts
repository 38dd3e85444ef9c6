/**
 * Bounds on what extracting text from files may cost: how much a file may inflate to, how much text
 * it and the whole request may yield, a PDF's page count, an HTML page's nesting, and how many files
 * are parsed at once (the rest wait in a bounded queue; past it, 429 with Retry-After).
 */
import type { Config } from "../../core/config.js";
import { busy, DomainError, tooLarge } from "../../core/errors.js";

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
  /** Time one file's parse may take on its worker thread (MAX_PARSE_MS). */
  maxParseMs: number;
  /** Heap of one parse worker thread, in MB (MAX_PARSE_HEAP_MB). */
  maxParseHeapMb: number;
  /** Parse worker threads at once (MAX_CONCURRENT_PARSES). */
  maxConcurrentParses: number;
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

/**
 * Admits at most `concurrency` parses at once; up to `queueLength` more wait in arrival order. A
 * request that finds the queue full gets 429 with Retry-After instead of holding memory while it
 * waits: parsing is what costs memory, so bounding it bounds the process.
 */
export class ParseGate {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly concurrency: number,
    private readonly queueLength: number,
    private readonly retryAfterSeconds = 2,
  ) {}

  /**
   * Runs `parse` once a slot is free. With `signal`, a caller whose client left while waiting gives
   * its place up at once (rejected), so abandoned requests never fill the queue.
   */
  async run<T>(parse: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.acquire(signal);
    try {
      return await parse();
    } finally {
      this.release();
    }
  }

  private acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(clientLeft());
    if (this.running < this.concurrency) {
      this.running++;
      return Promise.resolve();
    }
    if (this.waiting.length >= this.queueLength) {
      return Promise.reject(
        busy(
          `${this.concurrency} uploads are being parsed and ${this.waiting.length} wait (MAX_CONCURRENT_PARSES, MAX_PARSE_QUEUE); retry shortly`,
          this.retryAfterSeconds,
        ),
      );
    }
    // The slot is handed over directly by release(), so `running` stays counted meanwhile.
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const at = this.waiting.indexOf(admit);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(clientLeft());
      };
      const admit = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      this.waiting.push(admit);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }

  /** Requests waiting for a slot now (for tests and metrics). */
  get queued(): number {
    return this.waiting.length;
  }
}

const clientLeft = () => new DomainError("cancelled", "The client closed the request");

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
    },
    gate: new ParseGate(config.ingest.maxConcurrentParses, config.ingest.maxParseQueue),
  };
}
