/**
 * Turns a file's bytes into document text, by extension, after checking the bytes are what the
 * extension says: .txt .md (UTF-8 text), .html (html-to-text, navigation/scripts/styles dropped),
 * .pdf (unpdf, page by page, so chunks can cite pages), .docx (mammoth). Anything else, or a file
 * whose content does not match, is a 400 naming the file and why.
 */
import path from "node:path";
import { compile } from "html-to-text";
import mammoth from "mammoth";
import { extractText, getDocumentProxy } from "unpdf";
import { badRequest } from "../../core/errors.js";
import type { Metadata } from "../store/types.js";

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

function loadHtml(fileName: string, bytes: Uint8Array): LoadedFile {
  const html = utf8(fileName, bytes);
  if (!/<\s*[a-z!][^>]*>/i.test(html)) throw invalid(fileName, "has no HTML markup");
  const title = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html)?.[1]?.replace(/\s+/g, " ").trim() || null;
  const text = htmlToText(html);
  return { text, title, metadata: {} };
}

/** Compiled once: navigation, scripts, styles, asides and images are dropped; links keep their text. */
const htmlToText = compile({
  wordwrap: false,
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

async function loadPdf(fileName: string, bytes: Uint8Array): Promise<LoadedFile> {
  if (new TextDecoder().decode(bytes.subarray(0, 5)) !== "%PDF-") throw invalid(fileName, "is not a PDF");
  let pages: string[];
  try {
    // unpdf may transfer the buffer to its worker: hand it a copy.
    const pdf = await getDocumentProxy(new Uint8Array(bytes));
    pages = (await extractText(pdf, { mergePages: false })).text;
  } catch (error) {
    throw invalid(fileName, `is a corrupt or unreadable PDF (${(error as Error).message})`);
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

async function loadDocx(fileName: string, bytes: Uint8Array): Promise<LoadedFile> {
  if (bytes[0] !== 0x50 || bytes[1] !== 0x4b) throw invalid(fileName, "is not a .docx (not a ZIP container)");
  try {
    const result = await mammoth.extractRawText({ buffer: Buffer.from(bytes) });
    return { text: result.value, title: null, metadata: {} };
  } catch (error) {
    throw invalid(fileName, `is a corrupt or unreadable .docx (${(error as Error).message})`);
  }
}

export async function loadFile(fileName: string, bytes: Uint8Array): Promise<LoadedFile> {
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
      loaded = loadHtml(fileName, bytes);
      break;
    case ".pdf":
      loaded = await loadPdf(fileName, bytes);
      break;
    case ".docx":
      loaded = await loadDocx(fileName, bytes);
      break;
    default:
      throw invalid(
        fileName,
        `unsupported type "${extension || "(none)"}"; supported: ${SUPPORTED_EXTENSIONS.join(" ")}`,
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
