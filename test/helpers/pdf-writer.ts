/**
 * The one PDF writer of the test fixtures: numbered objects, the cross-reference table (or, with
 * objects compressed into an object stream, a cross-reference stream) and the trailer. The fixtures
 * choose the objects (doc-fixtures.ts a real document, bomb-fixtures.ts and
 * reliability/hostile-fixtures.ts hostile streams); this only lays them out with correct offsets, and
 * encrypts streams the way the standard security handler does (pdfEncryption).
 */
import { createCipheriv, createHash, randomBytes } from "node:crypto";
import { deflateSync } from "node:zlib";

/** An object's body: text (written as Latin-1), or pieces written as given (a stream's raw bytes). */
export type PdfObject = string | readonly (string | Buffer)[];

export interface PdfLayout {
  /** More trailer entries, e.g. `/Encrypt 9 0 R /ID [<…> <…>]`. */
  trailer?: string;
  /**
   * Numbers of objects (not streams) to store compressed in one object stream (PDF 1.5), which a
   * cross-reference stream then locates: their text appears nowhere in the file as written.
   */
  compressed?: readonly number[];
}

/** A PDF of `objects`, numbered from 1 in order; `root` is the catalog's number. */
export function writePdf(objects: readonly PdfObject[], root = 1, layout: PdfLayout = {}): Buffer {
  const parts: Buffer[] = [];
  /** Per object number: its byte offset, or where it sits in the object stream. */
  const entries: Array<{ offset: number } | { inStream: number; index: number }> = [];
  let length = 0;
  const push = (piece: Buffer | string) => {
    const bytes = typeof piece === "string" ? Buffer.from(piece, "latin1") : piece;
    parts.push(bytes);
    length += bytes.length;
  };
  const writeObject = (number: number, body: PdfObject) => {
    entries[number] = { offset: length };
    push(`${number} 0 obj\n`);
    for (const piece of typeof body === "string" ? [body] : body) push(piece);
    push("\nendobj\n");
  };
  const compressed = [...new Set(layout.compressed ?? [])].sort((a, b) => a - b);
  push(compressed.length > 0 ? "%PDF-1.5\n" : "%PDF-1.4\n");
  objects.forEach((body, index) => {
    if (!compressed.includes(index + 1)) writeObject(index + 1, body);
  });
  const trailer = `/Root ${root} 0 R${layout.trailer ? ` ${layout.trailer}` : ""}`;
  if (compressed.length === 0) {
    const xref = length;
    push(`xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`);
    for (const entry of entries.slice(1))
      push(`${String((entry as { offset: number }).offset).padStart(10, "0")} 00000 n \n`);
    push(`trailer\n<< /Size ${objects.length + 1} ${trailer} >>\nstartxref\n${xref}\n%%EOF\n`);
    return Buffer.concat(parts);
  }
  const objectStream = objects.length + 1;
  let header = "";
  let body = "";
  compressed.forEach((number, index) => {
    const text = objects[number - 1];
    if (typeof text !== "string") throw new Error(`object ${number} is a stream: it cannot be compressed`);
    header += `${number} ${body.length} `;
    body += `${text}\n`;
    entries[number] = { inStream: objectStream, index };
  });
  const packed = deflateSync(Buffer.from(header + body, "latin1"));
  writeObject(
    objectStream,
    pdfStream(packed, `/Type /ObjStm /N ${compressed.length} /First ${header.length} /Filter /FlateDecode`),
  );
  // The cross-reference stream: per object, type (0 free, 1 at an offset, 2 in an object stream),
  // then 4 bytes (offset or stream number) and 2 (generation or index), unfiltered.
  const xrefNumber = objectStream + 1;
  entries[xrefNumber] = { offset: length };
  const rows = Buffer.alloc(7 * (xrefNumber + 1));
  for (let number = 1; number <= xrefNumber; number++) {
    const entry = entries[number]!;
    const at = 7 * number;
    if ("offset" in entry) {
      rows[at] = 1;
      rows.writeUInt32BE(entry.offset, at + 1);
    } else {
      rows[at] = 2;
      rows.writeUInt32BE(entry.inStream, at + 1);
      rows.writeUInt16BE(entry.index, at + 5);
    }
  }
  rows.writeUInt16BE(0xffff, 5); // object 0: free, generation 65535
  const xref = length;
  writeObject(xrefNumber, pdfStream(rows, `/Type /XRef /Size ${xrefNumber + 1} /W [1 4 2] ${trailer}`));
  push(`startxref\n${xref}\n%%EOF\n`);
  return Buffer.concat(parts);
}

/** A stream object: `data` exactly as given after `keyword` ("stream" and its end of line). */
export function pdfStream(data: Buffer, dictionary = "", keyword = "stream\n"): PdfObject {
  return [
    `<< /Length ${data.length}${dictionary ? ` ${dictionary}` : ""} >>\n${keyword}`,
    data,
    "\nendstream",
  ];
}

/**
 * One page in Helvetica whose content is `content` (object 4); the page tree lists `kids` and
 * claims `count` pages, which a hostile file may set to anything.
 */
export function onePagePdf(content: PdfObject, pages: { kids?: string; count?: number } = {}): Buffer {
  return writePdf([
    "<< /Type /Catalog /Pages 2 0 R >>",
    `<< /Type /Pages /Kids [${pages.kids ?? "3 0 R"}] /Count ${pages.count ?? 1} >>`,
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
    content,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
  ]);
}

/** The 32 bytes an empty password is padded with (PDF 32000-1, 7.6.3.3, Algorithm 2). */
const PASSWORD_PAD = Buffer.from("28bf4e5e4e758a4164004e56fffa01082e2e00b6d0683e802f0ca9fe6453697a", "hex");

const md5 = (...parts: Buffer[]) => createHash("md5").update(Buffer.concat(parts)).digest();

/** RC4 (written here: OpenSSL 3 keeps it in its legacy provider, which Node does not load). */
export function rc4(key: Buffer, data: Buffer): Buffer {
  const state = Uint8Array.from({ length: 256 }, (_, i) => i);
  for (let i = 0, j = 0; i < 256; i++) {
    j = (j + state[i]! + key[i % key.length]!) & 0xff;
    [state[i], state[j]] = [state[j]!, state[i]!];
  }
  const out = Buffer.alloc(data.length);
  for (let n = 0, i = 0, j = 0; n < data.length; n++) {
    i = (i + 1) & 0xff;
    j = (j + state[i]!) & 0xff;
    [state[i], state[j]] = [state[j]!, state[i]!];
    out[n] = data[n]! ^ state[(state[i]! + state[j]!) & 0xff]!;
  }
  return out;
}

export interface PdfEncryption {
  /** The /Encrypt dictionary, to be written as an object of its own. */
  dictionary: string;
  /** Trailer entries besides /Encrypt: the file identifier the keys are derived from. */
  id: string;
  /** `data` as stored in the file for the stream of object `number` (generation 0). */
  encryptStream(number: number, data: Buffer): Buffer;
}

/**
 * The standard security handler with an empty user password, so any reader opens the file without
 * asking: "rc4-40" is revision 2 (RC4, 40-bit key), "aes-128" revision 4 with a crypt filter
 * (/StdCF, AESV2), which is what a stream's `/Filter [/Crypt …]` names.
 */
export function pdfEncryption(kind: "rc4-40" | "aes-128"): PdfEncryption {
  const fileId = randomBytes(16);
  const owner = randomBytes(32); // only the user password is checked by a reader opening the file
  const permissions = Buffer.alloc(4);
  permissions.writeInt32LE(-4);
  let key = md5(PASSWORD_PAD, owner, permissions, fileId);
  const aes = kind === "aes-128";
  if (aes) for (let round = 0; round < 50; round++) key = md5(key.subarray(0, 16));
  key = key.subarray(0, aes ? 16 : 5);
  let user: Buffer;
  if (aes) {
    user = rc4(key, md5(PASSWORD_PAD, fileId));
    for (let round = 1; round <= 19; round++) user = rc4(Buffer.from(key.map((byte) => byte ^ round)), user);
    user = Buffer.concat([user, Buffer.alloc(16)]);
  } else user = rc4(key, PASSWORD_PAD);
  const hex = (bytes: Buffer) => `<${bytes.toString("hex")}>`;
  const dictionary = aes
    ? `<< /Filter /Standard /V 4 /R 4 /Length 128 /CF << /StdCF << /CFM /AESV2 /AuthEvent /DocOpen /Length 16 >> >> /StmF /StdCF /StrF /StdCF /O ${hex(owner)} /U ${hex(user)} /P -4 >>`
    : `<< /Filter /Standard /V 1 /R 2 /Length 40 /O ${hex(owner)} /U ${hex(user)} /P -4 >>`;
  return {
    dictionary,
    id: `/ID [${hex(fileId)} ${hex(fileId)}]`,
    encryptStream(number, data) {
      const objectKey = md5(
        key,
        Buffer.from([number & 0xff, (number >> 8) & 0xff, (number >> 16) & 0xff, 0, 0]),
        aes ? Buffer.from("sAlT") : Buffer.alloc(0),
      ).subarray(0, Math.min(key.length + 5, 16));
      if (!aes) return rc4(objectKey, data);
      const iv = randomBytes(16);
      const cipher = createCipheriv("aes-128-cbc", objectKey, iv);
      return Buffer.concat([iv, cipher.update(data), cipher.final()]);
    },
  };
}
