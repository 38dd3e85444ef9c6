/**
 * Hostile files made by the tests themselves, in memory, in milliseconds: a .docx whose
 * word/document.xml inflates to hundreds of MB, PDFs whose streams do the same (once or through two
 * FlateDecode layers) or that claim millions of pages, and HTML nested 100,000 deep.
 *
 * The bombs are built without compressing hundreds of MB: one MB of a repeated byte is deflated once
 * with a full flush, which resets the compressor, so the same compressed block may be repeated as many
 * times as wanted and still be a valid deflate stream (~1 KB per MB inflated).
 */
import { constants, crc32, deflateRawSync, deflateSync } from "node:zlib";
import { onePagePdf, pdfStream } from "./pdf-writer.js";

const MIB = 1024 * 1024;

/** A raw deflate stream of `prefix`, then `mebibytes` MiB of `fill`, then `suffix`. */
export function deflateBomb(prefix: string, fill: string, mebibytes: number, suffix: string): Buffer {
  const flush = { level: 9, finishFlush: constants.Z_FULL_FLUSH };
  const block = deflateRawSync(Buffer.alloc(MIB, fill), flush);
  return Buffer.concat([
    deflateRawSync(Buffer.from(prefix), flush),
    ...Array.from({ length: mebibytes }, () => block),
    deflateRawSync(Buffer.from(suffix), { level: 9 }), // ends with the final block
  ]);
}

/** A zlib-wrapped (RFC 1950) deflate stream, as PDF's FlateDecode reads it. */
export function zlibWrap(raw: Buffer): Buffer {
  // The Adler-32 trailer is left zero: the bytes it covers are never all inflated by anyone.
  return Buffer.concat([Buffer.from([0x78, 0xda]), raw, Buffer.alloc(4)]);
}

interface ZipEntryInput {
  name: string;
  data: Buffer;
  /** 0 stored, 8 deflate. */
  method: 0 | 8;
  /** The uncompressed size the headers declare (a bomb may lie). */
  declaredSize: number;
}

function zip(entries: ZipEntryInput[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = Buffer.from(entry.name, "utf8");
    const crc = entry.method === 0 ? crc32(entry.data) : 0;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(entry.method, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(entry.data.length, 18);
    local.writeUInt32LE(entry.declaredSize, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(entry.method, 10);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(entry.data.length, 20);
    central.writeUInt32LE(entry.declaredSize, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, entry.data);
    centrals.push(central, name);
    offset += local.length + name.length + entry.data.length;
  }
  const directorySize = centrals.reduce((sum, b) => sum + b.length, 0);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directorySize, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, ...centrals, end]);
}

const CONTENT_TYPES =
  '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>';
const RELATIONSHIPS =
  '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>';

/**
 * A .docx whose word/document.xml is one paragraph of `mebibytes` MiB of text. `declared`: "honest"
 * puts the true size in the ZIP headers; a number puts that (a lie) there instead.
 */
export function makeBombDocx(mebibytes: number, declared: "honest" | number = "honest"): Buffer {
  const prefix =
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>';
  const suffix = "</w:t></w:r></w:p></w:body></w:document>";
  const document = deflateBomb(prefix, "a", mebibytes, suffix);
  const trueSize = prefix.length + mebibytes * MIB + suffix.length;
  const stored = (name: string, text: string): ZipEntryInput => ({
    name,
    data: Buffer.from(text),
    method: 0,
    declaredSize: Buffer.byteLength(text),
  });
  return zip([
    stored("[Content_Types].xml", CONTENT_TYPES),
    stored("_rels/.rels", RELATIONSHIPS),
    {
      name: "word/document.xml",
      data: document,
      method: 8,
      // The 32-bit field cannot say more than 4 GiB - 1.
      declaredSize: declared === "honest" ? Math.min(trueSize, 0xffffffff) : declared,
    },
  ]);
}

/** A PDF whose one content stream inflates to `mebibytes` MiB of text-showing operators. */
export function makeBombPdf(mebibytes: number): Buffer {
  const data = zlibWrap(deflateBomb("BT /F1 12 Tf 72 720 Td (", "a", mebibytes, ") Tj ET"));
  return onePagePdf(pdfStream(data, "/Filter /FlateDecode"));
}

/** The same bomb deflated twice, behind `/Filter [/FlateDecode /FlateDecode]`. */
export function makeDoubleBombPdf(mebibytes: number): Buffer {
  const inner = zlibWrap(deflateBomb("BT /F1 12 Tf 72 720 Td (", "a", mebibytes, ") Tj ET"));
  return onePagePdf(pdfStream(deflateSync(inner), "/Filter [/FlateDecode /FlateDecode]"));
}

/** A small, valid-looking PDF that claims `pageCount` pages. */
export function makeManyPagesPdf(pageCount: number): Buffer {
  return onePagePdf(pdfStream(Buffer.from("BT /F1 12 Tf 72 720 Td (Hello) Tj ET")), { count: pageCount });
}

/** HTML with `depth` nested <div> elements around one sentence. */
export function makeDeepHtml(depth: number): Buffer {
  return Buffer.from(
    `<!doctype html><html><body>${"<div>".repeat(depth)}Deep inside${"</div>".repeat(depth)}</body></html>`,
  );
}
