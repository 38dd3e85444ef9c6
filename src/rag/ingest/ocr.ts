/**
 * Optical character recognition for pages with no text layer (scanned PDFs) and for images: a PDF
 * page is rasterised by `pdftoppm` (poppler-utils) and read by `tesseract` (tesseract-ocr), the image
 * piped from one to the other as an uncompressed gray PGM (PNG's compression cost more than it
 * saved), nothing written to disk. Both run as children of the parse process
 * (parse-child.ts), so they inherit its memory limit (RLIMIT_DATA is inherited across fork and exec)
 * and share its process group, which the parent kills whole when the parse passes MAX_PARSE_MS or the
 * client leaves; here each is also bounded by the time left to the parse, and killed if the parse
 * process ends first. Off when either binary is missing: the loaders then say so (loaders.ts).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants } from "node:fs";
import path from "node:path";

/** What recognising text needs: the languages (tesseract's `-l`, OCR_LANGUAGES) and when the parse ends. */
export interface OcrOptions {
  languages: string;
  /** Date.now() past which the parse is over (its MAX_PARSE_MS). */
  deadline: number;
  /** Bytes of recognised text one call may return before it is stopped (MAX_FILE_CHARS). */
  maxChars: number;
}

/** The longer side of a rasterised page in pixels: 300 dpi for a Letter or A4 page, less for larger ones. */
const MAX_PAGE_PIXELS = 3508;
const DPI = 300;
/** What a tool's stderr is kept of, for the error it fails with. */
const STDERR_KEPT = 2048;

/** A tool that failed, ran out of time, or is missing. */
export class OcrError extends Error {
  constructor(
    message: string,
    readonly timedOut = false,
  ) {
    super(message);
    this.name = "OcrError";
  }
}

const running = new Set<ChildProcess>();

/** Kills every tool still running (the parse process is ending). */
export function killOcrTools(): void {
  for (const child of running) child.kill("SIGKILL");
}

function onPath(name: string): boolean {
  for (const folder of (process.env.PATH ?? "").split(path.delimiter)) {
    if (folder === "") continue;
    try {
      accessSync(path.join(folder, name), constants.X_OK);
      return true;
    } catch {
      // not in this folder
    }
  }
  return false;
}

let looked: { path: string | undefined; missing: string[] } | undefined;

/** The OCR tools not installed (empty: OCR is on), looked up once per PATH. */
export function missingOcrTools(): string[] {
  if (looked?.path !== process.env.PATH) {
    looked = {
      path: process.env.PATH,
      missing: [
        ...(onPath("tesseract") ? [] : ["tesseract (package tesseract-ocr)"]),
        ...(onPath("pdftoppm") ? [] : ["pdftoppm (package poppler-utils)"]),
      ],
    };
  }
  return looked!.missing;
}

/** Starts a tool with one thread (tesseract's OpenMP would take every core), tracked until it ends. */
function start(command: string, args: string[]): ChildProcess {
  const child = spawn(command, args, {
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, OMP_THREAD_LIMIT: "1" },
  });
  running.add(child);
  child.on("close", () => running.delete(child));
  // A tool that exits before reading all its input: the broken pipe is seen through its exit status.
  child.stdin?.on("error", () => undefined);
  return child;
}

/**
 * Resolves with a tool's stdout (when `collect`; else its stdout is piped elsewhere) once it exits 0;
 * rejects on another status, a signal or the deadline.
 */
function finished(child: ChildProcess, name: string, options: OcrOptions, collect = true): Promise<string> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    let failure: OcrError | null = null;
    const stop = (error: OcrError) => {
      failure ??= error;
      child.kill("SIGKILL");
    };
    const left = options.deadline - Date.now();
    const timer = setTimeout(
      () => stop(new OcrError(`${name} did not finish in time`, true)),
      Math.max(0, left),
    );
    if (collect) {
      child.stdout!.setEncoding("utf8").on("data", (piece: string) => {
        stdout += piece;
        if (stdout.length > options.maxChars) stop(new OcrError(`${name} gave more text than allowed`));
      });
    }
    child.stderr!.setEncoding("utf8").on("data", (piece: string) => {
      stderr = (stderr + piece).slice(-STDERR_KEPT);
    });
    child.on("error", (error) => {
      // A tool that could not start may never close: answered here (a second settle is a no-op).
      clearTimeout(timer);
      stop(new OcrError(`${name} could not be started: ${error.message}`));
      reject(failure!);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (failure) return reject(failure);
      if (code !== 0) {
        const why = stderr.trim().split("\n").slice(-3).join(" ") || `exit ${code ?? signal}`;
        return reject(new OcrError(`${name} failed: ${why}`));
      }
      resolve(stdout);
    });
  });
}

/** Tesseract reading an image from its stdin and writing its text to its stdout. */
function tesseract(options: OcrOptions): ChildProcess {
  return start("tesseract", ["stdin", "stdout", "-l", options.languages, "--psm", "3"]);
}

/** Tesseract ends each page with a form feed; a multi-page image (TIFF) gives several. */
export const ocrPages = (output: string): string[] => {
  const pages = output.split("\f");
  if (pages.length > 1 && pages[pages.length - 1]!.trim() === "") pages.pop();
  return pages;
};

/** The recognised text of each page of an image file (one for PNG and JPEG, each of a TIFF's). */
export async function recogniseImage(bytes: Uint8Array, options: OcrOptions): Promise<string[]> {
  const reader = tesseract(options);
  const text = finished(reader, "tesseract", options);
  reader.stdin!.end(bytes);
  return ocrPages(await text);
}

/**
 * The recognised text of page `page` (1-based) of a PDF, rasterised in gray at 300 dpi, or less for
 * a page whose longer side (`longSidePoints`, in points) would pass MAX_PAGE_PIXELS.
 */
export async function recognisePdfPage(
  bytes: Uint8Array,
  page: number,
  longSidePoints: number,
  options: OcrOptions,
): Promise<string> {
  const dpi = Math.max(1, Math.min(DPI, Math.floor((MAX_PAGE_PIXELS * 72) / Math.max(1, longSidePoints))));
  const raster = start("pdftoppm", ["-f", String(page), "-l", String(page), "-r", String(dpi), "-gray", "-"]);
  const reader = tesseract(options);
  raster.stdout!.pipe(reader.stdin!);
  const rendered = finished(raster, "pdftoppm", options, false).catch((error: unknown) => {
    reader.kill("SIGKILL");
    throw error;
  });
  const text = finished(reader, "tesseract", options);
  raster.stdin!.end(bytes);
  const [, recognised] = await Promise.all([rendered, text]);
  return ocrPages(recognised).join("\n");
}
