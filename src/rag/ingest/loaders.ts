/**
 * Turns a file's bytes into document text, by extension, after checking the bytes are what the
 * extension says: .txt .md (UTF-8 text), .html (html-to-text, navigation/scripts/styles dropped),
 * .pdf (unpdf, page by page, so chunks can cite pages), .docx (docx.ts, streamed). Anything else, or a file
 * whose content does not match, is a 400 naming the file and why. Hostile files are bounded before the
 * parsers see them (see limits.ts): a limit passed is a 413 naming the file and the setting.
 */
import path from "node:path";
import { compile } from "html-to-text";
import { Parser } from "htmlparser2";
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

/**
 * The text of the first `# heading` line, with any closing #s dropped. A scan over the lines, not a
 * regex: `/^#\s+(.+?)\s*#*\s*$/m` backtracks cubically on a heading followed by thousands of spaces.
 */
export function markdownTitle(text: string): string | null {
  for (let start = 0; start < text.length;) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    if (text[start] === "#" && (text[start + 1] === " " || text[start + 1] === "\t")) {
      const title = text
        .slice(start + 1, end)
        .trim()
        .replace(/#+$/, "")
        .trim();
      if (title !== "") return title;
    }
    start = end + 1;
  }
  return null;
}

/** What one pass of the HTML parser found: how many elements, whether they nest too deep, the title. */
interface HtmlOutline {
  elements: number;
  tooDeep: boolean;
  title: string | null;
}

/**
 * Runs the page through htmlparser2 (the parser html-to-text builds its tree with, so elements nest
 * here exactly as they will there: `<div/>` opens a div, `<p><td><p><td>…` nests, void elements do
 * not) counting open elements, and stops the moment the nesting passes `limit` (MAX_HTML_DEPTH), before
 * html-to-text would recurse that deep. The tokenizer is a linear state machine: no regex over the markup.
 */
export function outlineHtml(html: string, limit: number): HtmlOutline {
  let depth = 0;
  let elements = 0;
  let tooDeep = false;
  let inTitle = false;
  let title: string | null = null;
  const parser = new Parser(
    {
      onopentag(name) {
        elements++;
        if (name === "title" && title === null) [inTitle, title] = [true, ""];
        if (++depth > limit) {
          tooDeep = true;
          parser.pause();
        }
      },
      onclosetag(name) {
        depth--;
        if (name === "title") inTitle = false;
      },
      ontext(text) {
        if (inTitle) title += text;
      },
    },
    { decodeEntities: true },
  );
  parser.end(html);
  const trimmed = title === null ? "" : (title as string).replace(/\s+/g, " ").trim();
  return { elements, tooDeep, title: trimmed || null };
}

function loadHtml(fileName: string, bytes: Uint8Array, limits: IngestLimits): LoadedFile {
  const html = utf8(fileName, bytes);
  if (html.length > limits.maxFileChars) {
    throw fileTooLarge(fileName, `${html.length} characters of HTML`, "MAX_FILE_CHARS", limits.maxFileChars);
  }
  const outline = outlineHtml(html, limits.maxHtmlDepth);
  if (outline.elements === 0) throw invalid(fileName, "has no HTML markup");
  if (outline.tooDeep) {
    throw fileTooLarge(fileName, "elements nested too deep", "MAX_HTML_DEPTH", limits.maxHtmlDepth);
  }
  const title = outline.title;
  const text = htmlToText(html);
  return { text, title, metadata: {} };
}

/** Compiled once: navigation, scripts, styles, asides and images are dropped; links keep their text. */
const htmlToText = compile({
  wordwrap: false,
  // Size is checked before (MAX_FILE_CHARS); html-to-text would otherwise cut long pages silently.
  limits: { maxInputLength: Number.MAX_SAFE_INTEGER },
  selectors: [
    ...["nav", "script", "style", "noscript", "aside", "img"].map((selector) => ({
      selector,
      format: "skip",
    })),
    { selector: "a", options: { ignoreHref: true } },
    ...["h1", "h2", "h3"].map((selector) => ({ selector, options: { uppercase: false } })),
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
