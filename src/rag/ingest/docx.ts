/**
 * Text of a .docx, read as a stream: the main document part is inflated piece by piece and its
 * `<w:t>` runs are picked out as the bytes arrive, so memory is the text kept plus a few KB, whatever
 * the part inflates to. (mammoth, used before, builds a DOM of the whole part: about 60 bytes of
 * memory per byte of XML, 2.7 GB for a 40 MB part that zips to 100 KB.) The inflation stops at
 * MAX_EXTRACTED_BYTES, or as soon as a part inflates past the size the ZIP directory declares for it;
 * the text stops at MAX_FILE_CHARS. Paragraphs end with a blank line, as mammoth's raw text did.
 */
import { StringDecoder } from "node:string_decoder";
import { createInflateRaw } from "node:zlib";
import { ContainerError, InflateLimitError, readCentralDirectory, type ZipEntry } from "./inflate-check.js";
import type { Heading } from "./sections.js";

/** The text passed MAX_FILE_CHARS. */
export class TextLimitError extends Error {
  constructor(readonly limit: number) {
    super(`yields more than ${limit} characters of text`);
    this.name = "TextLimitError";
  }
}

const LOCAL_SIGNATURE = 0x04034b50;
const STORED = 0;
const DEFLATED = 8;
/** A tag longer than this is not WordprocessingML; refusing it bounds what is held between pieces. */
const MAX_TAG_CHARS = 1024 * 1024;
/** Text between tags is handed on in pieces of at most about this many characters. */
const TEXT_FLUSH_CHARS = 64 * 1024;

function entryData(zip: Buffer, entry: ZipEntry): Buffer {
  const local = entry.localHeaderOffset;
  if (local + 30 > zip.length || zip.readUInt32LE(local) !== LOCAL_SIGNATURE) {
    throw new ContainerError(`has a corrupt ZIP entry "${entry.name}"`);
  }
  // Where the data starts comes from the local header, its length from the directory: as JSZip reads it.
  const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
  const data = zip.subarray(start, start + entry.compressedSize);
  if (data.length < entry.compressedSize)
    throw new ContainerError(`has a truncated ZIP entry "${entry.name}"`);
  return data;
}

/**
 * Hands an entry's inflated bytes to `onBytes` piece by piece; rejects with InflateLimitError past
 * `limit` bytes or past the entry's declared size, and with whatever `onBytes` throws.
 */
function inflateEntry(
  zip: Buffer,
  entry: ZipEntry,
  limit: number,
  onBytes: (piece: Buffer) => void,
): Promise<void> {
  const data = entryData(zip, entry);
  const budget = Math.min(limit, entry.declaredSize);
  const overBudget = () =>
    new InflateLimitError(
      budget < limit
        ? `has a part "${entry.name}" that inflates past the ${entry.declaredSize} bytes it declares`
        : `inflates to more than ${limit} bytes`,
    );
  if (entry.method === STORED) {
    if (data.length > budget) return Promise.reject(overBudget());
    try {
      onBytes(data);
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }
  if (entry.method !== DEFLATED) {
    return Promise.reject(
      new ContainerError(`uses ZIP compression method ${entry.method}; only stored and deflate are read`),
    );
  }
  return new Promise((resolve, reject) => {
    const inflate = createInflateRaw();
    let inflated = 0;
    let settled = false;
    const finish = (error: Error | null) => {
      if (settled) return;
      settled = true;
      inflate.destroy();
      if (error) reject(error);
      else resolve();
    };
    inflate.on("data", (piece: Buffer) => {
      inflated += piece.length;
      if (inflated > budget) return finish(overBudget());
      try {
        onBytes(piece);
      } catch (error) {
        finish(error as Error);
      }
    });
    inflate.on("error", (error) =>
      finish(new ContainerError(`has a corrupt ZIP entry "${entry.name}" (${error.message})`)),
    );
    inflate.on("end", () => finish(null));
    inflate.end(data);
  });
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);/g, (whole, name: string) => {
    if (name[0] !== "#") return ENTITIES[name] ?? whole;
    const code = name[1] === "x" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
    return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
  });
}

/**
 * Picks the text out of WordprocessingML fed in pieces: the content of `t` elements (`w:t`, and
 * `m:t` of equations), a tab for `tab`, a line break for `br`/`cr`, a blank line after each paragraph.
 * Deleted text (`w:delText`) and field codes (`w:instrText`) are other elements, so they are left out.
 */
class DocumentTextScanner {
  private pending = "";
  private inText = false;
  private readonly parts: string[] = [];
  private chars = 0;
  /** The paragraph being read: where its text starts, its outline level (0: body text), its text so far. */
  private paragraph = { start: 0, level: 0, text: "" };
  readonly headings: Heading[] = [];

  constructor(
    private readonly maxChars: number,
    /** Outline level by paragraph style id, from the styles part (headingStyles); "HeadingN" besides. */
    private readonly styleLevels: ReadonlyMap<string, number> = new Map(),
  ) {}

  feed(piece: string): void {
    let source = this.pending + piece;
    this.pending = "";
    let at = 0;
    for (;;) {
      const open = source.indexOf("<", at);
      if (open < 0) {
        this.flushText(source.slice(at));
        return;
      }
      if (open > at) this.text(source.slice(at, open));
      const close = source.indexOf(">", open);
      if (close < 0) {
        this.pending = source.slice(open);
        if (this.pending.length > MAX_TAG_CHARS) throw new ContainerError("has a malformed document part");
        return;
      }
      this.tag(source.slice(open + 1, close));
      at = close + 1;
      // Let go of what has been read, so a long piece is not held twice.
      if (at > TEXT_FLUSH_CHARS) {
        source = source.slice(at);
        at = 0;
      }
    }
  }

  finish(): string {
    return this.parts.join("");
  }

  /** Text at the end of a piece: an entity may be cut in two, so keep a trailing "&…" for later. */
  private flushText(text: string): void {
    const ampersand = text.lastIndexOf("&");
    if (ampersand >= 0 && !text.includes(";", ampersand) && text.length - ampersand < 16) {
      this.text(text.slice(0, ampersand));
      this.pending = text.slice(ampersand);
    } else this.text(text);
  }

  private text(raw: string): void {
    if (this.inText && raw !== "") this.emit(decodeEntities(raw));
  }

  private tag(body: string): void {
    if (body[0] === "?" || body[0] === "!") return;
    const closing = body[0] === "/";
    const name = /^\/?([^\s/>]+)/.exec(body)?.[1] ?? "";
    const local = name.slice(name.indexOf(":") + 1);
    const selfClosing = body.endsWith("/");
    if (local === "t") this.inText = !closing && !selfClosing;
    else if (closing) {
      if (local === "p") this.endParagraph();
    } else if (local === "p" && !selfClosing) this.paragraph = { start: this.chars, level: 0, text: "" };
    else if (local === "pStyle" || local === "outlineLvl") this.outline(local, body);
    else if (local === "tab") this.emit("\t");
    else if (local === "br" || local === "cr") this.emit("\n");
    else if (local === "p" && selfClosing) this.emit("\n\n");
  }

  /**
   * A paragraph's outline level, from its style ("Heading1" … "Heading9", as Word names its built-in
   * heading styles) or its own `w:outlineLvl` (0 … 8).
   */
  private outline(local: string, body: string): void {
    const value = /\bw:val="([^"]*)"/.exec(body)?.[1] ?? "";
    const level =
      local === "pStyle"
        ? (this.styleLevels.get(value) ?? Number(/^heading\s*([1-9])$/i.exec(value)?.[1] ?? 0))
        : /^[0-8]$/.test(value)
          ? Number(value) + 1
          : 0;
    if (level > 0) this.paragraph.level = level;
  }

  private endParagraph(): void {
    const { start, level, text } = this.paragraph;
    if (level > 0 && text.trim() !== "") this.headings.push({ start, level, text });
    this.paragraph = { start: this.chars + 2, level: 0, text: "" };
    this.emit("\n\n");
  }

  private emit(text: string): void {
    // A heading's text is a label: what passes a title's length is not kept (sections.ts cuts it).
    if (this.paragraph.level > 0 && this.paragraph.text.length < 1024) this.paragraph.text += text;
    this.chars += text.length;
    if (this.chars > this.maxChars) throw new TextLimitError(this.maxChars);
    this.parts.push(text);
  }
}

/** The main document part's name, from the package relationships (word/document.xml in practice). */
async function mainPartName(zip: Buffer, entries: Map<string, ZipEntry>, limit: number): Promise<string> {
  const rels = entries.get("_rels/.rels");
  if (rels === undefined) return "word/document.xml";
  const decoder = new StringDecoder("utf8");
  let xml = "";
  await inflateEntry(zip, rels, Math.min(limit, 1024 * 1024), (piece) => (xml += decoder.write(piece)));
  for (const match of xml.matchAll(/<(?:\w+:)?Relationship\b[^>]*>/g)) {
    if (!/Type="[^"]*\/officeDocument"/.test(match[0])) continue;
    const target = /Target="([^"]+)"/.exec(match[0])?.[1];
    if (target) return decodeEntities(target).replace(/^\//, "");
  }
  return "word/document.xml";
}

/** The most bytes of the styles part read for heading styles (real ones are tens of KB). */
const MAX_STYLES_BYTES = 4 * 1024 * 1024;

/**
 * Paragraph styles that are headings, by style id: built-in ones are named "heading 1" … "heading 9"
 * whatever their id (a German Word writes the id "berschrift1"), and any style may set an outline
 * level. Read with indexOf, one pass: an unclosed <w:style> ends the scan rather than being rescanned.
 */
function headingStyles(xml: string): Map<string, number> {
  const levels = new Map<string, number>();
  for (let at = xml.indexOf("<w:style "); at >= 0; at = xml.indexOf("<w:style ", at)) {
    const end = xml.indexOf("</w:style>", at);
    if (end < 0) break;
    const style = xml.slice(at, end);
    at = end;
    const id = /w:styleId="([^"]*)"/.exec(style)?.[1];
    if (id === undefined || !/w:type="paragraph"/.test(style.slice(0, style.indexOf(">") + 1))) continue;
    const named = /<w:name w:val="heading ([1-9])"/i.exec(style)?.[1];
    const outline = /<w:outlineLvl w:val="([0-8])"/.exec(style)?.[1];
    const level = named ? Number(named) : outline ? Number(outline) + 1 : 0;
    if (level > 0) levels.set(decodeEntities(id), level);
  }
  return levels;
}

export interface DocxLimits {
  maxExtractedBytes: number;
  maxFileChars: number;
}

/**
 * The raw text of a .docx, and its headings (paragraphs with an outline level). Throws ContainerError for something that is not a readable .docx,
 * InflateLimitError past MAX_EXTRACTED_BYTES, TextLimitError past MAX_FILE_CHARS.
 */
export async function extractDocxText(
  zip: Buffer,
  limits: DocxLimits,
): Promise<{ text: string; headings: Heading[] }> {
  const entries = new Map(readCentralDirectory(zip).map((entry) => [entry.name, entry]));
  let declared = 0;
  for (const entry of entries.values()) declared += entry.declaredSize;
  // What the directory owns up to is refused before anything is inflated.
  if (declared > limits.maxExtractedBytes)
    throw new InflateLimitError(`declares ${declared} bytes once unzipped`);
  const name = await mainPartName(zip, entries, limits.maxExtractedBytes);
  const main = entries.get(name);
  if (main === undefined) throw new ContainerError(`has no main document part ("${name}")`);
  const stylesEntry = entries.get("word/styles.xml");
  let styles = "";
  if (stylesEntry) {
    const decoder = new StringDecoder("utf8");
    await inflateEntry(zip, stylesEntry, Math.min(limits.maxExtractedBytes, MAX_STYLES_BYTES), (piece) => {
      styles += decoder.write(piece);
    }).catch((error: unknown) => {
      // Styles only name headings: a styles part past its cap is read without them, not refused.
      if (!(error instanceof InflateLimitError)) throw error;
      styles = "";
    });
  }
  const scanner = new DocumentTextScanner(limits.maxFileChars, headingStyles(styles));
  const decoder = new StringDecoder("utf8");
  await inflateEntry(zip, main, limits.maxExtractedBytes, (piece) => scanner.feed(decoder.write(piece)));
  scanner.feed(decoder.end());
  return { text: scanner.finish(), headings: scanner.headings };
}
