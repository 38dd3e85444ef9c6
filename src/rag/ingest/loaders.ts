/**
 * Turns a file's bytes into document text, by extension, after checking the bytes are what the
 * extension says: .txt .md (UTF-8 text), .html (html-to-text, navigation/scripts/styles dropped),
 * .pdf (unpdf, page by page, so chunks can cite pages), .docx (docx.ts, streamed). Anything else, or a file
 * whose content does not match, is a 400 naming the file and why. Hostile files are bounded before the
 * parsers see them (see limits.ts): a limit passed is a 413 naming the file and the setting.
 */
import path from "node:path";
import { compile } from "html-to-text";
import { getDocumentProxy } from "unpdf";
import { badRequest } from "../../core/errors.js";
import type { Metadata } from "../store/types.js";
import { InflateLimitError, checkPdfInflation } from "./inflate-check.js";
import { TextLimitError, extractDocxText } from "./docx.js";
import { DEFAULT_INGEST_LIMITS, fileTooLarge, type IngestLimits } from "./limits.js";

export const SUPPORTED_EXTENSIONS = [
  ".txt",
  ".text",
  ".md",
  ".markdown",
  ".html",
  ".htm",
  ".pdf",
  ".docx",
] as const;

export interface LoadedFile {
  text: string;
  title: string | null;
  metadata: Metadata;
  /** For PDFs: where each page starts in `text` (page n starts at pageStarts[n - 1]). */
  pageStarts?: number[];
}

export function isSupported(fileName: string): boolean {
  return (SUPPORTED_EXTENSIONS as readonly string[]).includes(path.extname(fileName).toLowerCase());
}

const invalid = (fileName: string, why: string) =>
  badRequest(`File "${fileName}": ${why}`, [{ file: fileName, reason: why }]);

function utf8(fileName: string, bytes: Uint8Array): string {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw invalid(fileName, "is not valid UTF-8 text");
  }
  // Text files do not contain NUL; a binary file renamed to .txt does.
  if (text.includes("\0")) throw invalid(fileName, "looks binary, not text");
  return text.replace(/^\uFEFF/, "");
}

function markdownTitle(text: string): string | null {
  const heading = /^#\s+(.+?)\s*#*\s*$/m.exec(text);
  return heading ? heading[1]!.trim() : null;
}

/** Elements that never hold children, and those whose end tag may be left out (a new one closes them). */
const VOID_OR_IMPLICITLY_CLOSED = new Set(
  (
    "area base br col embed hr img input link meta source track wbr param keygen " +
    "p li dt dd tr td th option optgroup thead tbody tfoot colgroup caption rp rt html head body"
  ).split(" "),
);

/**
 * The deepest element nesting of an HTML page, counted on its tags without building a tree: void
 * elements and those with optional end tags do not nest here, so sloppy but ordinary HTML stays shallow
 * while `<div><div><div>…` 100,000 deep is seen for what it is. Stops counting past `limit`.
 */
function htmlDepthExceeds(html: string, limit: number): boolean {
  const tag = /<!--[\s\S]*?(?:-->|$)|<(\/?)([a-zA-Z][^\s/>]*)[^>]*?(\/?)>/g;
  let depth = 0;
  for (let match = tag.exec(html); match !== null; match = tag.exec(html)) {
    const [, closing, rawName, selfClosing] = match;
    if (rawName === undefined) continue; // a comment
    const name = rawName.toLowerCase();
    if (VOID_OR_IMPLICITLY_CLOSED.has(name)) continue;
    if (name === "script" || name === "style") {
      // Their content is text, not markup: jump past the end tag.
      if (closing) continue;
      const end = html.toLowerCase().indexOf(`</${name}`, tag.lastIndex);
      tag.lastIndex = end < 0 ? html.length : end;
      continue;
    }
    if (closing) depth = Math.max(0, depth - 1);
    else if (!selfClosing && ++depth > limit) return true;
  }
  return false;
}

function loadHtml(fileName: string, bytes: Uint8Array, limits: IngestLimits): LoadedFile {
  const html = utf8(fileName, bytes);
  if (html.length > limits.maxFileChars) {
    throw fileTooLarge(fileName, `${html.length} characters of HTML`, "MAX_FILE_CHARS", limits.maxFileChars);
  }
  if (!/<\s*[a-z!][^>]*>/i.test(html)) throw invalid(fileName, "has no HTML markup");
  if (htmlDepthExceeds(html, limits.maxHtmlDepth)) {
    throw fileTooLarge(fileName, "elements nested too deep", "MAX_HTML_DEPTH", limits.maxHtmlDepth);
  }
  const title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1]?.replace(/\s+/g, " ").trim() || null;
  const text = htmlToText(html);
  return { text, title, metadata: {} };
}

/** Compiled once: navigation, scripts, styles, asides and images are dropped; links keep their text. */
const htmlToText = compile({
  wordwrap: false,
  // Size is checked before (MAX_FILE_CHARS); html-to-text would otherwise cut long pages silently.
  limits: { maxInputLength: Number.MAX_SAFE_INTEGER },
  selectors: [
    { selector: "nav", format: "skip" },
    { selector: "script", format: "skip" },
    { selector: "style", format: "skip" },
    { selector: "noscript", format: "skip" },
    { selector: "aside", format: "skip" },
    { selector: "img", format: "skip" },
    { selector: "a", options: { ignoreHref: true } },
    { selector: "h1", options: { uppercase: false } },
    { selector: "h2", options: { uppercase: false } },
    { selector: "h3", options: { uppercase: false } },
    { selector: "table", format: "dataTable", options: { uppercaseHeaderCells: false } },
  ],
});

/** An inflation limit passed is a 413 naming MAX_EXTRACTED_BYTES; anything else goes on as it is. */
function refusal(fileName: string, error: unknown, limit: number): never {
  if (error instanceof InflateLimitError) {
    throw fileTooLarge(fileName, error.message, "MAX_EXTRACTED_BYTES", limit);
  }
  throw error;
}

/** Text of one PDF page as unpdf joins it: the items' strings, a newline where a line ends. */
interface PdfPage {
  getTextContent(): Promise<{ items: Array<{ str?: string; hasEOL?: boolean }> }>;
  cleanup(): unknown;
}

async function loadPdf(fileName: string, bytes: Uint8Array, limits: IngestLimits): Promise<LoadedFile> {
  if (new TextDecoder().decode(bytes.subarray(0, 5)) !== "%PDF-") throw invalid(fileName, "is not a PDF");
  await checkPdfInflation(bytes, limits.maxExtractedBytes).catch((error: unknown) =>
    refusal(fileName, error, limits.maxExtractedBytes),
  );
  let pdf: Awaited<ReturnType<typeof getDocumentProxy>>;
  try {
    // unpdf may transfer the buffer to its worker: hand it a copy.
    pdf = await getDocumentProxy(new Uint8Array(bytes));
  } catch (error) {
    throw invalid(fileName, `is a corrupt or unreadable PDF (${(error as Error).message})`);
  }
  const pages: string[] = [];
  try {
    if (pdf.numPages > limits.maxPdfPages) {
      throw fileTooLarge(fileName, `${pdf.numPages} pages`, "MAX_PDF_PAGES", limits.maxPdfPages);
    }
    let chars = 0;
    // Page by page, not all at once: only one page's objects are alive, and the text cap stops early.
    for (let number = 1; number <= pdf.numPages; number++) {
      let text: string;
      try {
        const page = (await pdf.getPage(number)) as unknown as PdfPage;
        const content = await page.getTextContent();
        text = content.items.map((item) => (item.str ?? "") + (item.hasEOL ? "\n" : "")).join("");
        page.cleanup();
      } catch (error) {
        throw invalid(fileName, `is a corrupt or unreadable PDF (${(error as Error).message})`);
      }
      chars += text.length;
      if (chars > limits.maxFileChars) {
        throw fileTooLarge(
          fileName,
          `yields more than ${limits.maxFileChars} characters of text`,
          "MAX_FILE_CHARS",
          limits.maxFileChars,
        );
      }
      pages.push(text);
    }
  } finally {
    await pdf.destroy();
  }
  const pageStarts: number[] = [];
  let text = "";
  pages.forEach((page, index) => {
    if (index > 0) text += "\n\n";
    pageStarts.push(text.length);
    text += page.trim();
  });
  return { text, title: null, metadata: { pages: pages.length }, pageStarts };
}

async function loadDocx(fileName: string, bytes: Uint8Array, limits: IngestLimits): Promise<LoadedFile> {
  if (bytes[0] !== 0x50 || bytes[1] !== 0x4b) throw invalid(fileName, "is not a .docx (not a ZIP container)");
  const zip = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  try {
    return { text: await extractDocxText(zip, limits), title: null, metadata: {} };
  } catch (error) {
    if (error instanceof TextLimitError) {
      throw fileTooLarge(fileName, error.message, "MAX_FILE_CHARS", limits.maxFileChars);
    }
    if (error instanceof InflateLimitError) refusal(fileName, error, limits.maxExtractedBytes);
    throw invalid(fileName, `is a corrupt or unreadable .docx (${(error as Error).message})`);
  }
}

export async function loadFile(
  fileName: string,
  bytes: Uint8Array,
  limits: IngestLimits = DEFAULT_INGEST_LIMITS,
): Promise<LoadedFile> {
  const extension = path.extname(fileName).toLowerCase();
  let loaded: LoadedFile;
  switch (extension) {
    case ".txt":
    case ".text":
      loaded = { text: utf8(fileName, bytes), title: null, metadata: {} };
      break;
    case ".md":
    case ".markdown": {
      const text = utf8(fileName, bytes);
      loaded = { text, title: markdownTitle(text), metadata: {} };
      break;
    }
    case ".html":
    case ".htm":
      loaded = loadHtml(fileName, bytes, limits);
      break;
    case ".pdf":
      loaded = await loadPdf(fileName, bytes, limits);
      break;
    case ".docx":
      loaded = await loadDocx(fileName, bytes, limits);
      break;
    default:
      throw invalid(
        fileName,
        `unsupported type "${extension || "(none)"}"; supported: ${SUPPORTED_EXTENSIONS.join(" ")}`,
      );
  }
  if (loaded.text.length > limits.maxFileChars) {
    throw fileTooLarge(
      fileName,
      `${loaded.text.length} characters of text`,
      "MAX_FILE_CHARS",
      limits.maxFileChars,
    );
  }
  if (loaded.text.trim() === "") throw invalid(fileName, "contains no text");
  return { ...loaded, title: loaded.title ?? path.basename(fileName) };
}

/** The 1-based page of a character offset, given where each page starts. */
export function pageAt(pageStarts: readonly number[], offset: number): number {
  let low = 0;
  let high = pageStarts.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (pageStarts[mid]! <= offset) low = mid;
    else high = mid - 1;
  }
  return low + 1;
}
