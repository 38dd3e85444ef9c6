/**
 * Hostile files made by the tests themselves, in memory, in milliseconds: a .docx whose
 * word/document.xml inflates to hundreds of MB, PDFs whose streams do the same (once or through two
 * FlateDecode layers, or spelled so that only a real PDF parser finds them) or that claim millions of
 * pages, and HTML nested 100,000 deep.
 *
 * The bombs are built without compressing hundreds of MB: one MB of a repeated byte is deflated once
 * with a full flush, which resets the compressor, so the same compressed block may be repeated as many
 * times as wanted and still be a valid deflate stream (~1 KB per MB inflated).
 */
import { constants, crc32, deflateRawSync, deflateSync } from "node:zlib";
import { onePagePdf, pdfEncryption, pdfStream, writePdf, type PdfObject } from "./pdf-writer.js";

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

/** The filters a bomb's stream may be written through, as pdf.js decodes them. */
export type PdfFilterName =
  "FlateDecode" | "ASCIIHexDecode" | "ASCII85Decode" | "RunLengthDecode" | "LZWDecode";

/** `data` as ASCIIHexDecode reads it (two hex digits a byte, `>` at the end). */
export const asciiHex = (data: Buffer) => Buffer.from(`${data.toString("hex")}>`, "latin1");

/** `data` as ASCII85Decode reads it (`z` for four zero bytes, `~>` at the end). */
export function ascii85(data: Buffer): Buffer {
  let out = "";
  for (let at = 0; at < data.length; at += 4) {
    const group = Buffer.alloc(4);
    data.copy(group, 0, at, at + 4);
    const count = Math.min(4, data.length - at);
    let value = group.readUInt32BE(0);
    if (value === 0 && count === 4) {
      out += "z";
      continue;
    }
    const digits: string[] = [];
    for (let i = 0; i < 5; i++) {
      digits.unshift(String.fromCharCode(33 + (value % 85)));
      value = Math.floor(value / 85);
    }
    out += digits.slice(0, count + 1).join("");
  }
  return Buffer.from(`${out}~>`, "latin1");
}

/** `data` as RunLengthDecode reads it: runs of one byte as repeats, the rest as literals, 128 at the end. */
export function runLength(data: Buffer): Buffer {
  const out: number[] = [];
  let at = 0;
  while (at < data.length) {
    let run = 1;
    while (run < 128 && at + run < data.length && data[at + run] === data[at]) run++;
    if (run > 1) {
      out.push(257 - run, data[at]!);
      at += run;
      continue;
    }
    const start = at;
    while (at < data.length && at - start < 128 && !(data[at + 1] === data[at] && data[at + 2] === data[at]))
      at++;
    out.push(at - start - 1, ...data.subarray(start, at));
  }
  out.push(128);
  return Buffer.from(out);
}

/**
 * LZW as PDF writes it (9- to 12-bit codes, 256 clears, 257 ends, EarlyChange 1), for an LZWDecode
 * bomb: a long run of one byte is a few KB of codes.
 */
export function lzwEncode(data: Uint8Array): Buffer {
  const out: number[] = [];
  let bits = 0;
  let pending = 0;
  let emitted = 0; // codes since the last clear: the decoder's table lags one entry behind ours
  const emit = (code: number) => {
    const size = 258 + Math.max(0, emitted - 1) + 1;
    const width = size < 512 ? 9 : size < 1024 ? 10 : size < 2048 ? 11 : 12;
    pending = (pending << width) | code;
    bits += width;
    while (bits >= 8) {
      out.push((pending >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
    pending &= (1 << bits) - 1;
    emitted++;
  };
  let table = new Map<number, number>();
  let next = 258;
  emit(256);
  emitted = 0;
  let current = data[0]!;
  for (let index = 1; index < data.length; index++) {
    const byte = data[index]!;
    const known = table.get(current * 256 + byte);
    if (known !== undefined) {
      current = known;
      continue;
    }
    emit(current);
    if (next < 4095) table.set(current * 256 + byte, next++);
    else {
      emit(256);
      [emitted, table, next] = [0, new Map(), 258];
    }
    current = byte;
  }
  emit(current);
  emit(257);
  if (bits > 0) out.push((pending << (8 - bits)) & 0xff);
  return Buffer.from(out);
}

/** `data` encoded so that `filter` decodes it back. */
export function encodeFor(filter: PdfFilterName, data: Buffer): Buffer {
  switch (filter) {
    case "FlateDecode":
      return deflateSync(data);
    case "ASCIIHexDecode":
      return asciiHex(data);
    case "ASCII85Decode":
      return ascii85(data);
    case "RunLengthDecode":
      return runLength(data);
    case "LZWDecode":
      return lzwEncode(data);
  }
}

/**
 * The content stream every bomb inflates to, zlib-wrapped for FlateDecode: `mebibytes` MiB of "a"
 * inside one text-showing operator, or (`fill` " ") of spaces before a short one, which pdf.js's
 * lexer skips, so its decoded buffer grows as fast as it can inflate.
 */
export function bombContent(mebibytes: number, fill: "a" | " " = "a"): Buffer {
  return fill === "a"
    ? zlibWrap(deflateBomb("BT /F1 12 Tf 72 720 Td (", "a", mebibytes, ") Tj ET"))
    : zlibWrap(deflateBomb("", " ", mebibytes, "BT /F1 12 Tf 72 720 Td (Spaces first) Tj ET"));
}

/** How a stream's filters are written in its dictionary, and how the file around it is kept. */
export interface StreamSpelling {
  /** `/Filter`, or the abbreviation `/F` pdf.js also reads. */
  key: "Filter" | "F";
  /** The filter array in the dictionary, in an object of its own (`/Filter 6 0 R`), or that object compressed in an object stream. */
  placement: "direct" | "indirect" | "object-stream";
  /** A string `(obj)` after the filter in the dictionary. */
  objInDictionary: boolean;
  /** A comment between the key and its value. */
  commentAfterKey: boolean;
  /** The standard security handler: none, RC4 (revision 2), or AES behind `/Crypt` (revision 4). */
  encryption: "none" | "rc4-40" | "aes-128";
}

/**
 * `data` encoded through `chain`, so that decoding it in the array's order (as PDF does: the first
 * filter is undone first) gives `data` back.
 */
export function encodeThrough(chain: readonly PdfFilterName[], data: Buffer): Buffer {
  for (const filter of [...chain].reverse()) data = encodeFor(filter, data);
  return data;
}

/**
 * A one-page PDF whose content stream (object 4) holds `data` (already encoded for `chain`) behind
 * the filters `chain`, its dictionary spelled as `spelling`.
 */
export function filteredPdf(data: Buffer, chain: readonly PdfFilterName[], spelling: StreamSpelling): Buffer {
  const crypt = spelling.encryption === "none" ? null : pdfEncryption(spelling.encryption);
  if (crypt && spelling.placement === "object-stream")
    throw new Error("an object stream is not encrypted here");
  const names = [...(crypt && spelling.encryption === "aes-128" ? ["Crypt"] : []), ...chain];
  const array = `[${names.map((name) => `/${name}`).join(" ")}]`;
  const parms =
    names[0] === "Crypt"
      ? ` /DecodeParms [<< /Type /CryptFilterDecodeParms /Name /StdCF >>${" null".repeat(chain.length)}]`
      : "";
  const value = spelling.placement === "direct" ? array : "6 0 R";
  const dictionary =
    `/${spelling.key}${spelling.commentAfterKey ? " %a comment\n" : " "}${value}${parms}` +
    (spelling.objInDictionary ? " /Subject (obj)" : "");
  const objects: PdfObject[] = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
    pdfStream(crypt ? crypt.encryptStream(4, data) : data, dictionary),
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    spelling.placement === "direct" ? "null" : array,
  ];
  if (crypt) objects.push(crypt.dictionary);
  return writePdf(objects, 1, {
    ...(spelling.placement === "object-stream" ? { compressed: [6] } : {}),
    ...(crypt ? { trailer: `/Encrypt 7 0 R ${crypt.id}` } : {}),
  });
}

/**
 * Ways to write a bomb's stream that a reader of the file's text does not see as one, while pdf.js
 * (the parser behind unpdf) decodes it all the same (issue #35): the filter under its abbreviated key
 * `/F`; the word `obj` inside the dictionary (a scan back to "obj" starts after the filter); a comment
 * between `/Filter` and its value; the filter array given by reference (`/Filter 6 0 R`), or kept in
 * a compressed object stream; the stream RC4-encrypted (revision 2); or AES-encrypted behind a
 * `/Crypt` filter (revision 4, crypt filter /StdCF). Behind [/ASCIIHexDecode /FlateDecode] the data
 * is not deflate data itself, so a check that tries FlateDecode on every stream does not find it either.
 */
export const BOMB_SPELLINGS = {
  "abbreviated-key": { key: "F" },
  "obj-in-dictionary": { objInDictionary: true },
  "comment-after-filter": { commentAfterKey: true },
  "indirect-filter": { placement: "indirect" },
  "object-stream": { placement: "object-stream" },
  "rc4-encrypted": { encryption: "rc4-40" },
  "crypt-filter": { encryption: "aes-128" },
} satisfies Record<string, Partial<StreamSpelling>>;
export type BombSpelling = keyof typeof BOMB_SPELLINGS;

const PLAIN_SPELLING: StreamSpelling = {
  key: "Filter",
  placement: "direct",
  objInDictionary: false,
  commentAfterKey: false,
  encryption: "none",
};

/** A one-page PDF whose content stream inflates to `mebibytes` MiB, written as `spelling`. */
export function spelledBombPdf(spelling: BombSpelling, mebibytes: number): Buffer {
  const options: StreamSpelling = { ...PLAIN_SPELLING, ...BOMB_SPELLINGS[spelling] };
  // Encrypted, the data is no deflate data as written: FlateDecode alone hides it as well.
  const chain: PdfFilterName[] =
    options.encryption === "none" ? ["ASCIIHexDecode", "FlateDecode"] : ["FlateDecode"];
  // bombContent is the last FlateDecode layer already (deflated cheaply by deflateBomb).
  return filteredPdf(encodeThrough(chain.slice(0, -1), bombContent(mebibytes)), chain, options);
}
