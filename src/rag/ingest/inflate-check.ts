/**
 * Decompression-bomb checks: a PDF's compressed streams are inflated as streams whose output is
 * counted and dropped before pdf.js (which inflates whole streams into memory) sees the file, and the
 * inflation stops the moment MAX_EXTRACTED_BYTES is passed, so the check holds a few KB however large a
 * stream turns out to be. Also the ZIP directory reader of the .docx loader (docx.ts).
 */
import { createInflate, createInflateRaw, type Inflate, type InflateRaw } from "node:zlib";

/** Why a check refused a file; the loader turns it into a 413 naming the file and the limit. */
export class InflateLimitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InflateLimitError";
  }
}

/** A malformed container (not a readable ZIP, a truncated entry…). */
export class ContainerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ContainerError";
  }
}

/**
 * Inflates `compressed` through `layers` chained inflaters (a PDF filter chain may apply FlateDecode
 * more than once), counting the final output. Resolves with the byte count, or rejects with an
 * InflateLimitError once it passes `limit`. Corrupt data resolves with what was counted: the parser
 * that runs next decides whether the file is readable.
 */
function countInflated(
  compressed: Uint8Array,
  limit: number,
  options: { raw: boolean; layers: number },
): Promise<number> {
  return new Promise((resolve, reject) => {
    const stages: Array<Inflate | InflateRaw> = [];
    for (let layer = 0; layer < options.layers; layer++) {
      stages.push(layer === 0 && options.raw ? createInflateRaw() : createInflate());
    }
    let counted = 0;
    let settled = false;
    const finish = (error: Error | null) => {
      if (settled) return;
      settled = true;
      for (const stage of stages) stage.destroy();
      if (error) reject(error);
      else resolve(counted);
    };
    for (let layer = 0; layer + 1 < stages.length; layer++) stages[layer]!.pipe(stages[layer + 1]!);
    // A stage that fails (not deflate data, truncated) ends the count: nothing more can come out.
    for (const stage of stages) stage.on("error", () => finish(null));
    const last = stages[stages.length - 1]!;
    last.on("data", (chunk: Buffer) => {
      counted += chunk.length;
      if (counted > limit) finish(new InflateLimitError(`inflates to more than ${limit} bytes`));
    });
    last.on("end", () => finish(null));
    stages[0]!.end(compressed);
  });
}

// ---------------------------------------------------------------------------------------------
// ZIP (.docx)

const EOCD_SIGNATURE = 0x06054b50;
const CENTRAL_SIGNATURE = 0x02014b50;

export interface ZipEntry {
  name: string;
  method: number;
  compressedSize: number;
  declaredSize: number;
  localHeaderOffset: number;
}

/** The central directory, read the way JSZip (mammoth's reader) reads it: from the last EOCD record. */
export function readCentralDirectory(zip: Buffer): ZipEntry[] {
  // The EOCD is 22 bytes plus a comment of at most 65,535 bytes, at the very end.
  let eocd = -1;
  for (let at = zip.length - 22; at >= Math.max(0, zip.length - 22 - 0xffff); at--) {
    if (zip.readUInt32LE(at) === EOCD_SIGNATURE) {
      eocd = at;
      break;
    }
  }
  if (eocd < 0) throw new ContainerError("has no ZIP end-of-central-directory record");
  const count = zip.readUInt16LE(eocd + 10);
  const directorySize = zip.readUInt32LE(eocd + 12);
  const directoryOffset = zip.readUInt32LE(eocd + 16);
  if (count === 0xffff || directorySize === 0xffffffff || directoryOffset === 0xffffffff) {
    throw new ContainerError("is a ZIP64 archive, which a .docx never needs");
  }
  if (directoryOffset + directorySize > eocd) throw new ContainerError("has a truncated ZIP directory");
  const entries: ZipEntry[] = [];
  let at = directoryOffset;
  for (let index = 0; index < count; index++) {
    if (at + 46 > eocd || zip.readUInt32LE(at) !== CENTRAL_SIGNATURE) {
      throw new ContainerError("has a corrupt ZIP directory");
    }
    const nameLength = zip.readUInt16LE(at + 28);
    entries.push({
      method: zip.readUInt16LE(at + 10),
      compressedSize: zip.readUInt32LE(at + 20),
      declaredSize: zip.readUInt32LE(at + 24),
      name: zip.toString("utf8", at + 46, at + 46 + nameLength),
      localHeaderOffset: zip.readUInt32LE(at + 42),
    });
    at += 46 + nameLength + zip.readUInt16LE(at + 30) + zip.readUInt16LE(at + 32);
  }
  return entries;
}

// ---------------------------------------------------------------------------------------------
// PDF

const STREAM_KEYWORD = Buffer.from("stream");
const END_STREAM_KEYWORD = Buffer.from("endstream");
/** How far back from a `stream` keyword its dictionary (and its /Filter) is looked for. */
const DICTIONARY_LOOKBACK = 4096;

/** How many FlateDecode filters a stream's dictionary applies (`/Filter /FlateDecode`, `[/Fl /Fl]`). */
function flateLayers(dictionary: string): number {
  // Names may spell characters as #xx ("/Fl#61teDecode"); pdf.js decodes them, so do we.
  const decoded = dictionary.replace(/#([0-9A-Fa-f]{2})/g, (_, hex: string) =>
    String.fromCharCode(parseInt(hex, 16)),
  );
  const filter = /\/Filter\s*(\[[^\]]*\]|\/[A-Za-z0-9]+)/.exec(decoded)?.[1] ?? "";
  return (filter.match(/\/(FlateDecode|Fl)(?![A-Za-z0-9])/g) ?? []).length;
}

/**
 * Refuses a PDF whose Flate-compressed streams inflate, together, to more than `limit` bytes. Every
 * `stream … endstream` in the file is found by scanning the bytes (pdf.js can only read streams that
 * are there), its filter chain is read from the dictionary before it, and it is inflated through that
 * many layers, counted, and dropped.
 */
export async function checkPdfInflation(pdf: Uint8Array, limit: number): Promise<void> {
  const bytes = Buffer.from(pdf.buffer, pdf.byteOffset, pdf.byteLength);
  let total = 0;
  let from = 0;
  for (;;) {
    const keyword = bytes.indexOf(STREAM_KEYWORD, from);
    if (keyword < 0) return;
    // "endstream" contains "stream": skip it; a real stream keyword is followed by CRLF or LF.
    const isEnd = keyword >= 3 && bytes.toString("latin1", keyword - 3, keyword) === "end";
    let dataStart = keyword + STREAM_KEYWORD.length;
    if (bytes[dataStart] === 0x0d) dataStart++;
    if (isEnd || bytes[dataStart] !== 0x0a) {
      from = keyword + STREAM_KEYWORD.length;
      continue;
    }
    dataStart++;
    const end = bytes.indexOf(END_STREAM_KEYWORD, dataStart);
    const dataEnd = end < 0 ? bytes.length : end;
    const dictionary = bytes.toString("latin1", Math.max(0, keyword - DICTIONARY_LOOKBACK), keyword);
    const dictionaryStart = dictionary.lastIndexOf("obj");
    // At least one layer: a filter given by reference (/Filter 7 0 R) is not read here, and data
    // that is not zlib stops the count at its first byte anyway.
    const layers = Math.max(
      1,
      flateLayers(dictionaryStart < 0 ? dictionary : dictionary.slice(dictionaryStart)),
    );
    try {
      total += await countInflated(bytes.subarray(dataStart, dataEnd), limit - total, { raw: false, layers });
    } catch (error) {
      if (error instanceof InflateLimitError) {
        throw new InflateLimitError(`has streams that inflate to more than ${limit} bytes`);
      }
      throw error;
    }
    from = dataEnd;
  }
}
