/**
 * The hostile inputs of issue #23, made in memory by the tests: PDFs that hide a deflate bomb from a
 * naive check (a filter chain, other end-of-line forms after `stream`, an `endstream` inside a stored
 * deflate block), a PDF with thousands of page entries to one page, and text that made regexes
 * backtrack (a Markdown heading, HTML markup) or HTML that nests without visible nesting.
 */
import { deflateBomb, lzwEncode, zlibWrap } from "../helpers/bomb-fixtures.js";

// The LZW writer moved to the shared fixtures (bomb-fixtures.ts); it is still imported from here.
export { lzwEncode };
import { onePagePdf, pdfStream } from "../helpers/pdf-writer.js";

/** The text-showing content stream every bomb here inflates to, `mebibytes` MiB long. */
function bombStream(mebibytes: number): Buffer {
  return zlibWrap(deflateBomb("BT /F1 12 Tf 72 720 Td (", "a", mebibytes, ") Tj ET"));
}

/** A bomb behind `/Filter [/ASCIIHexDecode /FlateDecode]`: the check must decode the hex first. */
export function hexFlateBombPdf(mebibytes: number): Buffer {
  const hex = Buffer.from(bombStream(mebibytes).toString("hex") + ">", "latin1");
  return onePagePdf(pdfStream(hex, "/Filter [/ASCIIHexDecode /FlateDecode]"));
}

/** A FlateDecode bomb whose `stream` keyword ends with `eol` ("\r", " \n", …) instead of "\n". */
export function eolBombPdf(mebibytes: number, eol: string): Buffer {
  return onePagePdf(pdfStream(bombStream(mebibytes), "/Filter /FlateDecode", `stream${eol}`));
}

/**
 * A FlateDecode bomb whose deflate data starts with a stored (uncompressed) block holding the bytes
 * "endstream": a check that ends the stream there sees nothing; pdf.js reads /Length bytes.
 */
export function hiddenEndstreamBombPdf(mebibytes: number): Buffer {
  const text = Buffer.from("\nendstream\n", "latin1");
  const stored = Buffer.alloc(5);
  stored[0] = 0; // not the final block, stored
  stored.writeUInt16LE(text.length, 1);
  stored.writeUInt16LE(~text.length & 0xffff, 3);
  const raw = deflateBomb("BT /F1 12 Tf 72 720 Td (", "a", mebibytes, ") Tj ET");
  const data = zlibWrap(Buffer.concat([stored, text, raw]));
  return onePagePdf(pdfStream(data, "/Filter /FlateDecode"));
}

/** A small PDF whose page tree lists the same page `entries` times. */
export function repeatedPagePdf(entries: number): Buffer {
  return onePagePdf(pdfStream(Buffer.from("BT /F1 12 Tf 72 720 Td (Hello) Tj ET", "latin1")), {
    kids: Array.from({ length: entries }, () => "3 0 R").join(" "),
    count: entries,
  });
}

/** A Markdown heading followed by thousands of spaces: `/^#\s+(.+?)\s*#*\s*$/m` was cubic on it. */
export function backtrackingMarkdown(spaces = 3000): Buffer {
  return Buffer.from(`# a${" ".repeat(spaces)}b\n\nSome text under it.\n`);
}

/** `<div/>` repeated: HTML ignores the slash, so each one opens a div inside the last. */
export function selfClosingDivsHtml(count: number): Buffer {
  return Buffer.from(`<html><body>${"<div/>".repeat(count)}text</body></html>`);
}

/** `<p><td>` repeated: each closes nothing (only the element on top is implicitly closed), so they nest. */
export function implicitNestingHtml(count: number): Buffer {
  return Buffer.from(`<html><body>${"<p><td>".repeat(count)}text</body></html>`);
}

/** Many empty scripts: a check that lower-cased the page per `<script>` was quadratic on it. */
export function manyScriptsHtml(bytes: number): Buffer {
  const unit = "<script></script>";
  return Buffer.from(`<html><body><p>text</p>${unit.repeat(Math.ceil(bytes / unit.length))}</body></html>`);
}

/** Unclosed `<a` openings: a markup regex scanning to the end from each one was quadratic. */
export function unclosedTagsHtml(bytes: number): Buffer {
  return Buffer.from(`<p>text</p>${"<a".repeat(Math.ceil(bytes / 2))}`);
}

/** A PDF whose content stream is `mebibytes` MiB of one byte behind /Filter /LZWDecode. */
export function lzwBombPdf(mebibytes: number): Buffer {
  const data = lzwEncode(Buffer.alloc(mebibytes * 1024 * 1024, "a"));
  return onePagePdf(pdfStream(data, "/Filter /LZWDecode"));
}
