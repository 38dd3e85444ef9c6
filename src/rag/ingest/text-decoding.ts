/**
 * Bytes to text for the text formats (.txt, .md, .html), in the encoding the file is in, found the way
 * browsers find it (WHATWG Encoding and HTML's "encoding sniffing"):
 *
 * 1. a byte order mark: UTF-8, UTF-16LE or UTF-16BE;
 * 2. the `charset` of the Content-Type the file came with, when the caller has one and it names an
 *    encoding;
 * 3. for HTML, a `<meta charset>` or `<meta http-equiv="Content-Type" content="…; charset=…">` within
 *    the first 1024 bytes (a UTF-16 label there means UTF-8, as in browsers: the bytes are ASCII-compatible);
 * 4. otherwise UTF-8 if the bytes are valid UTF-8, else windows-1252: what the web means by
 *    "ISO-8859-1" and "latin1", Latin-1's printable characters plus typographic ones in 0x80–0x9F.
 *    Without a label, bytes that are not UTF-8 are most often Latin-1 or windows-1252 text.
 *
 * UTF-16 without a byte order mark is not guessed. A file that contains NUL, or whose Latin-1 reading
 * is more than 1 % control characters, is binary, not text: 400. Decoding is TextDecoder's (Node's
 * full ICU knows every encoding of the Encoding standard); a declared encoding is decoded leniently
 * (U+FFFD for bytes it does not map), as browsers do, except UTF-16 announced by its byte order mark,
 * which must be well formed.
 */
import { badRequest } from "../../core/errors.js";

const invalid = (fileName: string, why: string) =>
  badRequest(`File "${fileName}": ${why}`, [{ file: fileName, reason: why }]);

/** How far into an HTML file a `<meta>` naming its charset is looked for (as HTML's prescan). */
const META_PRESCAN_BYTES = 1024;
/** Control characters beyond this share make a Latin-1 reading binary, not text. */
const MAX_CONTROL_SHARE = 0.01;

/** The WHATWG name of an encoding label ("latin1" → "windows-1252"), or null if it names none. */
export function encodingOf(label: string): string | null {
  try {
    return new TextDecoder(label.trim()).encoding;
  } catch {
    return null;
  }
}

/** The encoding a byte order mark announces, and its length. */
function byteOrderMark(bytes: Uint8Array): { encoding: string; length: number } | null {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return { encoding: "utf-8", length: 3 };
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return { encoding: "utf-16le", length: 2 };
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return { encoding: "utf-16be", length: 2 };
  return null;
}

/** The charset parameter of a Content-Type header value, as an encoding name. */
export function charsetOfContentType(contentType: string | undefined): string | null {
  if (!contentType) return null;
  const match = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/i.exec(contentType);
  const label = match?.[1] ?? match?.[2];
  return label ? encodingOf(label) : null;
}

/**
 * The encoding a `<meta>` in the first 1024 bytes of an HTML file declares. The prefix is read as
 * Latin-1 (each byte one character; markup is ASCII in every encoding HTML allows here) and is short,
 * so the patterns below run on at most 1 KB.
 */
export function charsetOfHtmlMeta(bytes: Uint8Array): string | null {
  const head = Buffer.from(
    bytes.buffer,
    bytes.byteOffset,
    Math.min(bytes.length, META_PRESCAN_BYTES),
  ).toString("latin1");
  for (const [tag] of head.matchAll(/<meta\b[^>]*>/gi)) {
    const attribute = (name: string) =>
      new RegExp(`\\b${name}\\s*=\\s*(?:"([^"]*)"|'([^']*)'|([^\\s"'>]+))`, "i").exec(tag);
    const value = (match: RegExpExecArray | null) => match?.[1] ?? match?.[2] ?? match?.[3];
    let label = value(attribute("charset"));
    if (label === undefined && value(attribute("http-equiv"))?.toLowerCase() === "content-type") {
      label = /charset\s*=\s*["']?([^\s;"']+)/i.exec(value(attribute("content")) ?? "")?.[1];
    }
    const encoding = label === undefined ? null : encodingOf(label);
    if (encoding) return encoding.startsWith("utf-16") ? "utf-8" : encoding;
  }
  return null;
}

/**
 * windows-1252's characters for bytes 0x80–0x9F (WHATWG index-windows-1252); the five it leaves
 * undefined stay C1 controls. Decoded here because Node 20's TextDecoder takes the Latin-1 fast path
 * for every windows-1252 label and returns C1 controls for all 32 (0x93 is U+0093, not “).
 */
const WINDOWS_1252_HIGH =
  "\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f" +
  "\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178";

/** Bytes as windows-1252: Latin-1, with 0x80–0x9F mapped as above. */
function decodeWindows1252(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    .toString("latin1")
    .replace(/[\x80-\x9f]/g, (c) => WINDOWS_1252_HIGH[c.charCodeAt(0) - 0x80]!);
}

/** Decodes `bytes` as `encoding` (a WHATWG name), leniently. */
function decodeAs(encoding: string, bytes: Uint8Array): string {
  return encoding === "windows-1252" ? decodeWindows1252(bytes) : new TextDecoder(encoding).decode(bytes);
}

/** Refuses text that is binary: a NUL, or (for a Latin-1 reading) too many control characters. */
function checkText(fileName: string, text: string, latin1: boolean): string {
  if (text.includes("\0")) throw invalid(fileName, "looks binary, not text");
  if (latin1) {
    let controls = 0;
    for (let at = 0; at < text.length; at++) {
      const code = text.charCodeAt(at);
      // C0 controls other than tab, line feed, vertical tab, form feed, carriage return, ESC and ^Z,
      // and the five bytes windows-1252 leaves undefined (decoded as C1 controls).
      if ((code < 0x20 && !"\t\n\v\f\r\x1b\x1a".includes(text[at]!)) || (code >= 0x80 && code < 0xa0))
        controls++;
    }
    if (controls > text.length * MAX_CONTROL_SHARE) throw invalid(fileName, "looks binary, not text");
  }
  return text;
}

/**
 * The text of a .txt, .md or .html file (see the module's comment for how its encoding is found).
 * `contentType` is the Content-Type it was received with, if any.
 */
export function decodeText(
  fileName: string,
  bytes: Uint8Array,
  kind: "text" | "html",
  contentType?: string,
): string {
  const bom = byteOrderMark(bytes);
  if (bom) {
    let text: string;
    try {
      text = new TextDecoder(bom.encoding, { fatal: true }).decode(bytes.subarray(bom.length));
    } catch {
      throw invalid(
        fileName,
        `starts with a ${bom.encoding.toUpperCase()} byte order mark but is not valid ${bom.encoding.toUpperCase()} text`,
      );
    }
    return checkText(fileName, text, false);
  }
  const declared = charsetOfContentType(contentType) ?? (kind === "html" ? charsetOfHtmlMeta(bytes) : null);
  if (declared) return checkText(fileName, decodeAs(declared, bytes), declared === "windows-1252");
  try {
    return checkText(fileName, new TextDecoder("utf-8", { fatal: true }).decode(bytes), false);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
  }
  return checkText(fileName, decodeWindows1252(bytes), true);
}
