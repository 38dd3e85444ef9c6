/**
 * Turns a file's bytes into document text, by extension, after checking the bytes are what the
 * extension says: .txt .md (text in the encoding it is in: text-decoding.ts), .html (html-to-text,
 * navigation/scripts/styles dropped, tables one row a line), .pdf (unpdf, page by page, so chunks can
 * cite pages: pages.ts; a page with no text layer that paints an image is read by OCR: ocr.ts),
 * .docx (docx.ts, streamed), images (.png .jpg .jpeg .tif .tiff, by OCR). Markdown, HTML and .docx
 * also give their heading structure (sections.ts). Anything else, or a file whose content does not
 * match, is a 400 naming the file and why. Every step is linear in the file; what a hostile file could
 * still cost is bounded by the parse process it runs in (parse-process.ts) and the limits of
 * limits.ts: a limit passed is a 413 naming the file and the setting.
 */
import path from "node:path";
import type { FormatCallback } from "html-to-text";
import { compile } from "html-to-text";
import { Parser } from "htmlparser2";
import { getDocumentProxy, getResolvedPDFJS } from "unpdf";
import { badRequest, DomainError } from "../../core/errors.js";
import type { Metadata } from "../store/types.js";
import { InflateLimitError, checkPdfInflation } from "./inflate-check.js";
import { TextLimitError, extractDocxText } from "./docx.js";
import { DEFAULT_INGEST_LIMITS, fileTooLarge, isAllocationFailure, type IngestLimits } from "./limits.js";
import { missingOcrTools, OcrError, recogniseImage, recognisePdfPage, type OcrOptions } from "./ocr.js";
import { joinPages } from "./pages.js";
import { markdownHeadings, sectionsOf, type Heading, type Section } from "./sections.js";
import { decodeText } from "./text-decoding.js";
import { shortTitle } from "./title.js";

export const SUPPORTED_EXTENSIONS = [
  ".txt",
  ".text",
  ".md",
  ".markdown",
  ".html",
  ".htm",
  ".pdf",
  ".docx",
  ".png",
  ".jpg",
  ".jpeg",
  ".tif",
  ".tiff",
] as const;

/** Images, read by OCR (ocr.ts): each a page. */
const IMAGE_EXTENSIONS = new Set([".png", ".jpg", ".jpeg", ".tif", ".tiff"]);

export interface LoadedFile {
  text: string;
  title: string | null;
  metadata: Metadata;
  /** For PDFs: where each page starts in `text` (page n starts at pageStarts[n - 1]; pages.ts). */
  pageStarts?: number[];
  /** For Markdown, HTML and DOCX: where each section starts and its heading path (sections.ts). */
  sections?: Section[];
}

export function isSupported(fileName: string): boolean {
  return (SUPPORTED_EXTENSIONS as readonly string[]).includes(path.extname(fileName).toLowerCase());
}

/**
 * Whether a folder walk (RAG_FILES_DIR builds, folder sync, the CLI) picks a file up: a supported type
 * and, for an image, OCR installed. A folder's images are skipped without OCR, as before images were
 * read, rather than failing the whole folder; an image named on its own is parsed and says why not.
 */
export function isIndexable(fileName: string): boolean {
  if (!isSupported(fileName)) return false;
  if (!IMAGE_EXTENSIONS.has(path.extname(fileName).toLowerCase())) return true;
  return !missingOcrTools().some((tool) => tool.startsWith("tesseract"));
}

const invalid = (fileName: string, why: string) =>
  badRequest(`File "${fileName}": ${why}`, [{ file: fileName, reason: why }]);

/** How a file may be read besides its bytes. */
export interface LoadOptions {
  /**
   * The Content-Type the file came with, for a caller that has it: its charset decodes text. (Not
   * an upload's: @fastify/multipart passes a file part's media type without its parameters, so
   * uploads rely on byte order marks, HTML's <meta> and the UTF-8-else-Latin-1 rule.)
   */
  contentType?: string;
  /** When the parse ends (Date.now()), for OCR; default: MAX_PARSE_MS from now. */
  deadline?: number;
}

/**
 * The text of the first `# heading` line, with any closing #s dropped. Scans, not regexes: the
 * title regex `/^#\s+(.+?)\s*#*\s*$/m` backtracked cubically on a heading followed by thousands of
 * spaces, and `/#+$/` is quadratic on a line of #s that ends in something else (`# ###…#x`).
 */
export function markdownTitle(text: string): string | null {
  for (let start = 0; start < text.length;) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    if (text[start] === "#" && (text[start + 1] === " " || text[start + 1] === "\t")) {
      let line = text.slice(start + 1, end).trim();
      let cut = line.length;
      while (cut > 0 && line[cut - 1] === "#") cut--;
      line = line.slice(0, cut).trim();
      if (line !== "") return line;
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

function loadHtml(
  fileName: string,
  bytes: Uint8Array,
  limits: IngestLimits,
  options: LoadOptions,
): LoadedFile {
  const html = decodeText(fileName, bytes, "html", options.contentType);
  if (html.length > limits.maxFileChars) {
    throw fileTooLarge(fileName, `${html.length} characters of HTML`, "MAX_FILE_CHARS", limits.maxFileChars);
  }
  const outline = outlineHtml(html, limits.maxHtmlDepth);
  if (outline.elements === 0) throw invalid(fileName, "has no HTML markup");
  if (outline.tooDeep) {
    throw fileTooLarge(fileName, "elements nested too deep", "MAX_HTML_DEPTH", limits.maxHtmlDepth);
  }
  const title = outline.title;
  const { text, headings } = unmarkHeadings(htmlToText(html.replace(MARKS, "")));
  return { text, title, metadata: {}, sections: sectionsOf(headings) };
}

/**
 * Headings are marked in html-to-text's output (HEADING_OPEN and the level's digit before the
 * heading's text, HEADING_CLOSE after it), since its builder says nowhere where a block lands in
 * the text; the marks are private-use characters, removed from the page first (they mean nothing
 * in a document) so that every one found here is ours.
 */
const HEADING_OPEN = "\uE000";
const HEADING_CLOSE = "\uE001";
const MARKS = /[\uE000\uE001]/g;

const formatMarkedHeading: FormatCallback = (element, walk, builder, formatOptions) => {
  builder.openBlock({ leadingLineBreaks: formatOptions.leadingLineBreaks ?? 2 });
  const upper = formatOptions.uppercase !== false;
  // The open mark goes on the heading's first word, so the whitespace before it is handled as before.
  let mark = HEADING_OPEN + (element.name ?? "h1").slice(1);
  builder.pushWordTransform((word) => {
    const marked = mark + (upper ? word.toUpperCase() : word);
    mark = "";
    return marked;
  });
  walk(element.children ?? [], builder);
  builder.popWordTransform();
  if (mark === "") builder.addLiteral(HEADING_CLOSE);
  builder.closeBlock({ trailingLineBreaks: formatOptions.trailingLineBreaks ?? 2 });
};

/** The text without the heading marks, and the headings they marked (where each starts in that text). */
function unmarkHeadings(marked: string): { text: string; headings: Heading[] } {
  const headings: Heading[] = [];
  const parts: string[] = [];
  let length = 0;
  const open: Array<{ start: number; level: number; from: number }> = [];
  const marks = new RegExp(MARKS.source, "g");
  let at = 0;
  for (;;) {
    marks.lastIndex = at;
    const found = marks.exec(marked);
    const end = found ? found.index : marked.length;
    parts.push(marked.slice(at, end));
    length += end - at;
    if (!found) break;
    if (marked[end] === HEADING_OPEN) {
      open.push({ start: length, level: Number(marked[end + 1]) || 1, from: parts.length });
      at = end + 2;
    } else {
      const heading = open.pop();
      if (heading) {
        headings.push({
          start: heading.start,
          level: heading.level,
          text: parts.slice(heading.from).join(""),
        });
      }
      at = end + 1;
    }
  }
  headings.sort((a, b) => a.start - b.start);
  return { text: parts.join(""), headings };
}

type DomNode = Parameters<FormatCallback>[0];
const oneLine = (text: string) =>
  text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .join(" ");
const childTags = (node: DomNode, names: readonly string[]) =>
  (node.children ?? []).filter((child) => child.type === "tag" && names.includes(child.name ?? ""));

/**
 * A table as text, one row a line, its cells separated by " | " (and its caption before it). Not
 * html-to-text's `dataTable`, which lays cells out on a grid: each cell fills colspan × rowspan
 * places (a 2 KB table of colspan=1000 rowspan=1000 cells: 6 minutes and 900 MB), the grid is
 * transposed in time quadratic in its longer side (20,000 one-cell rows: 15 s), and every line is
 * padded to the widest cell before it (one 200 KB cell above 2,000 rows: 400 M characters). Here each
 * cell is walked once and spans are not laid out at all, so a table costs what its markup does; for
 * retrieval a row's cells on one line keep what the grid kept, which cells belong together.
 */
const formatTableRows: FormatCallback = (table, walk, builder) => {
  builder.openBlock({ leadingLineBreaks: 2 });
  for (const caption of childTags(table, ["caption"])) {
    builder.openBlock({ leadingLineBreaks: 1 });
    walk(caption.children ?? [], builder);
    builder.closeBlock({ trailingLineBreaks: 1 });
  }
  const sections = [table, ...childTags(table, ["thead", "tbody", "tfoot"])];
  for (const section of sections) {
    for (const row of childTags(section, ["tr"])) {
      builder.openBlock({ leadingLineBreaks: 1 });
      childTags(row, ["td", "th"]).forEach((cell, index) => {
        if (index > 0) builder.addInline(" | ");
        walk(cell.children ?? [], builder);
      });
      // Paragraphs and breaks inside cells would split the row: it stays one line.
      builder.closeBlock({ trailingLineBreaks: 1, blockTransform: oneLine });
    }
  }
  builder.closeBlock({ trailingLineBreaks: 2 });
};

/** Compiled once: navigation, scripts, styles, asides and images are dropped; links keep their text. */
const htmlToText = compile({
  wordwrap: false,
  // Size is checked before (MAX_FILE_CHARS); html-to-text would otherwise cut long pages silently.
  limits: { maxInputLength: Number.MAX_SAFE_INTEGER },
  formatters: { tableRows: formatTableRows, markedHeading: formatMarkedHeading },
  selectors: [
    ...["nav", "script", "style", "noscript", "aside", "img"].map((selector) => ({
      selector,
      format: "skip",
    })),
    { selector: "a", options: { ignoreHref: true } },
    ...["h1", "h2", "h3"].map((selector) => ({
      selector,
      format: "markedHeading",
      options: { uppercase: false, leadingLineBreaks: 3, trailingLineBreaks: 2 },
    })),
    ...["h4", "h5", "h6"].map((selector) => ({
      selector,
      format: "markedHeading",
      options: { uppercase: true, leadingLineBreaks: 2, trailingLineBreaks: 2 },
    })),
    { selector: "table", format: "tableRows" },
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
  /** The page's box in points: [x0, y0, x1, y1]. */
  view: number[];
  getOperatorList(): Promise<{ fnArray: number[] }>;
  cleanup(): unknown;
}

/**
 * A PDF that pdf.js could not read: a 400, unless what failed was an allocation (the parse process's
 * memory limit), which is passed on to be answered 413.
 */
function unreadablePdf(fileName: string, error: unknown): Error {
  if (isAllocationFailure(error)) return error as Error;
  return invalid(fileName, `is a corrupt or unreadable PDF (${(error as Error).message})`);
}

/** pdf.js's operators that paint an image (OPS.paintImageMaskXObject … paintSolidColorImageMask). */
let imageOperators: Set<number> | undefined;

/**
 * Whether a page paints an image: a page without a text layer is read by OCR only then (a scan is
 * an image), so blank pages cost no OCR.
 */
async function drawsImage(page: PdfPage): Promise<boolean> {
  if (!imageOperators) {
    const { OPS } = await getResolvedPDFJS();
    imageOperators = new Set(
      Object.entries(OPS as Record<string, number>)
        .filter(([name]) => /^paint.*Image/.test(name))
        .map(([, code]) => code),
    );
  }
  const { fnArray } = await page.getOperatorList();
  return fnArray.some((code) => imageOperators!.has(code));
}

/** A PDF's pages: the text layer of each, and the pages with none that paint an image (with their longer side, in points). */
export interface PdfText {
  pages: string[];
  blank: Array<{ page: number; longSide: number }>;
}

const tooMuchText = (fileName: string, limits: IngestLimits) =>
  fileTooLarge(
    fileName,
    `yields more than ${limits.maxFileChars} characters of text`,
    "MAX_FILE_CHARS",
    limits.maxFileChars,
  );

/**
 * The text of each page of a PDF, in order. The text pre-check (checkPdfInflation) is a fast path
 * only: it refuses the bombs a reading of the file's text finds before pdf.js starts; what pdf.js
 * decodes however it is spelled is bounded by the parse process's memory limit.
 */
export async function pdfPageTexts(
  fileName: string,
  bytes: Uint8Array,
  limits: IngestLimits,
): Promise<PdfText> {
  if (new TextDecoder().decode(bytes.subarray(0, 5)) !== "%PDF-") throw invalid(fileName, "is not a PDF");
  await checkPdfInflation(bytes, limits.maxExtractedBytes).catch((error: unknown) =>
    refusal(fileName, error, limits.maxExtractedBytes),
  );
  let pdf: Awaited<ReturnType<typeof getDocumentProxy>>;
  try {
    // unpdf may transfer the buffer to its worker: hand it a copy.
    pdf = await getDocumentProxy(new Uint8Array(bytes));
  } catch (error) {
    throw unreadablePdf(fileName, error);
  }
  const pages: string[] = [];
  const blank: PdfText["blank"] = [];
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
        if (text.trim() === "" && (await drawsImage(page))) {
          const [x0 = 0, y0 = 0, x1 = 612, y1 = 792] = page.view;
          blank.push({ page: number, longSide: Math.max(Math.abs(x1 - x0), Math.abs(y1 - y0)) });
        }
        page.cleanup();
      } catch (error) {
        throw unreadablePdf(fileName, error);
      }
      chars += text.length;
      if (chars > limits.maxFileChars) throw tooMuchText(fileName, limits);
      pages.push(text);
    }
  } finally {
    await pdf.destroy();
  }
  return { pages, blank };
}

/** What reading text by OCR takes in this parse: the languages, the deadline, the text cap. */
function ocrOptions(limits: IngestLimits, options: LoadOptions): OcrOptions {
  return {
    languages: limits.ocrLanguages,
    deadline: options.deadline ?? Date.now() + limits.maxParseMs,
    maxChars: limits.maxFileChars,
  };
}

/** An OCR tool's failure: past the deadline a 422 naming MAX_PARSE_MS, else a 400 naming the file. */
function ocrFailure(fileName: string, error: unknown, limits: IngestLimits): never {
  if (error instanceof OcrError) {
    if (error.timedOut) {
      throw new DomainError(
        "unprocessable",
        `File "${fileName}": recognising its text (OCR) took longer than ${limits.maxParseMs} ms; the limit is ${limits.maxParseMs} (MAX_PARSE_MS)`,
        {
          details: [
            {
              file: fileName,
              reason: "OCR time limit passed",
              limit: limits.maxParseMs,
              setting: "MAX_PARSE_MS",
            },
          ],
        },
      );
    }
    throw invalid(fileName, `its text could not be recognised (OCR): ${error.message}`);
  }
  throw error;
}

const ocrMissing = (missing: string[]) => `OCR is not installed (missing: ${missing.join(", ")})`;

/**
 * A PDF's text, page by page; pages without a text layer (scans) are read by OCR when its tools are
 * installed. Without them such pages stay empty and the document says which (`pages_without_text`,
 * `ocr: "not installed"`); a PDF with no text at all is then a 400 that says why.
 */
async function loadPdf(
  fileName: string,
  bytes: Uint8Array,
  limits: IngestLimits,
  options: LoadOptions,
): Promise<LoadedFile> {
  const { pages, blank } = await pdfPageTexts(fileName, bytes, limits);
  const metadata: Metadata = { page_count: pages.length };
  if (blank.length > 0) {
    const missing = missingOcrTools();
    const numbers = blank.map(({ page }) => page);
    if (missing.length > 0) {
      if (blank.length === pages.length) {
        throw invalid(fileName, `has no text layer on any page (a scan?) and ${ocrMissing(missing)}`);
      }
      Object.assign(metadata, { pages_without_text: numbers, ocr: "not installed" });
    } else {
      const ocr = ocrOptions(limits, options);
      let chars = pages.reduce((sum, page) => sum + page.length, 0);
      for (const { page, longSide } of blank) {
        const text = await recognisePdfPage(bytes, page, longSide, ocr).catch((error: unknown) =>
          ocrFailure(fileName, error, limits),
        );
        chars += text.length;
        if (chars > limits.maxFileChars) throw tooMuchText(fileName, limits);
        pages[page - 1] = text;
      }
      metadata.ocr_pages = numbers;
    }
  }
  const { text, pageStarts } = joinPages(pages);
  return { text, title: null, metadata, pageStarts };
}

/** Whether the bytes start as the image format the extension names (PNG, JPEG, TIFF). */
function isImage(extension: string, bytes: Uint8Array): boolean {
  const starts = (...prefix: number[]) => prefix.every((byte, i) => bytes[i] === byte);
  if (extension === ".png") return starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
  if (extension === ".jpg" || extension === ".jpeg") return starts(0xff, 0xd8, 0xff);
  return starts(0x49, 0x49, 0x2a, 0x00) || starts(0x4d, 0x4d, 0x00, 0x2a);
}

/** An image's text by OCR: each of its pages (a TIFF may have several) a page of the document. */
async function loadImage(
  fileName: string,
  extension: string,
  bytes: Uint8Array,
  limits: IngestLimits,
  options: LoadOptions,
): Promise<LoadedFile> {
  if (!isImage(extension, bytes))
    throw invalid(fileName, `is not a ${extension.slice(1).toUpperCase()} image`);
  const missing = missingOcrTools().filter((tool) => tool.startsWith("tesseract"));
  if (missing.length > 0)
    throw invalid(fileName, `is an image, whose text needs OCR, and ${ocrMissing(missing)}`);
  const pages = await recogniseImage(bytes, ocrOptions(limits, options)).catch((error: unknown) =>
    ocrFailure(fileName, error, limits),
  );
  const { text, pageStarts } = joinPages(pages);
  return {
    text,
    title: null,
    metadata: { page_count: pages.length, ocr_pages: pages.map((_, i) => i + 1) },
    pageStarts,
  };
}

async function loadDocx(fileName: string, bytes: Uint8Array, limits: IngestLimits): Promise<LoadedFile> {
  if (bytes[0] !== 0x50 || bytes[1] !== 0x4b) throw invalid(fileName, "is not a .docx (not a ZIP container)");
  const zip = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  try {
    const { text, headings } = await extractDocxText(zip, limits);
    return { text, title: null, metadata: {}, sections: sectionsOf(headings) };
  } catch (error) {
    if (error instanceof TextLimitError) {
      throw fileTooLarge(fileName, error.message, "MAX_FILE_CHARS", limits.maxFileChars);
    }
    if (error instanceof InflateLimitError) refusal(fileName, error, limits.maxExtractedBytes);
    if (isAllocationFailure(error)) throw error;
    throw invalid(fileName, `is a corrupt or unreadable .docx (${(error as Error).message})`);
  }
}

export async function loadFile(
  fileName: string,
  bytes: Uint8Array,
  limits: IngestLimits = DEFAULT_INGEST_LIMITS,
  options: LoadOptions = {},
): Promise<LoadedFile> {
  const extension = path.extname(fileName).toLowerCase();
  let loaded: LoadedFile;
  switch (extension) {
    case ".txt":
    case ".text":
      loaded = { text: decodeText(fileName, bytes, "text", options.contentType), title: null, metadata: {} };
      break;
    case ".md":
    case ".markdown": {
      const text = decodeText(fileName, bytes, "text", options.contentType);
      loaded = {
        text,
        title: markdownTitle(text),
        metadata: {},
        sections: sectionsOf(markdownHeadings(text)),
      };
      break;
    }
    case ".html":
    case ".htm":
      loaded = loadHtml(fileName, bytes, limits, options);
      break;
    case ".pdf":
      loaded = await loadPdf(fileName, bytes, limits, options);
      break;
    case ".docx":
      loaded = await loadDocx(fileName, bytes, limits);
      break;
    default:
      if (IMAGE_EXTENSIONS.has(extension)) {
        loaded = await loadImage(fileName, extension, bytes, limits, options);
        break;
      }
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
  return { ...loaded, title: shortTitle(loaded.title ?? path.basename(fileName)) };
}

export { MAX_TITLE_CHARS, shortTitle } from "./title.js";
