/**
 * Decompression-bomb checks: a PDF's compressed streams are inflated as streams whose output is
 * counted and dropped before pdf.js (which inflates whole streams into memory) sees the file, and the
 * inflation stops the moment MAX_EXTRACTED_BYTES is passed, so the check holds a few KB however large a
 * stream turns out to be. Also the ZIP directory reader of the .docx loader (docx.ts).
 */
import { decoderFor, filterNamed, type PdfFilter } from "./pdf-filters.js";

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
 * Decodes `data` through the filter chain, counting the final output and dropping it. Resolves with
 * the byte count, or rejects with an InflateLimitError once it passes `limit`. Corrupt data resolves
 * with what was counted: the parser that runs next decides whether the file is readable.
 */
function countDecoded(
  data: Uint8Array,
  limit: number,
  chain: readonly PdfFilter[],
  earlyChange: number,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const stages = chain.map((filter) => decoderFor(filter, earlyChange));
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
    stages[0]!.end(data);
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
const OBJ_KEYWORD = Buffer.from("obj");
/** Distinct filter chains tried per stream: a dictionary names one, decoys in nested dictionaries more. */
const MAX_CHAINS_PER_STREAM = 8;

/** The filter chains named by `/Filter` entries in a dictionary's text (`/Filter /Fl`, `[/AHx /Fl]`). */
export function filterChains(dictionary: string): PdfFilter[][] {
  // Names may spell characters as #xx ("/Fl#61teDecode"); pdf.js decodes them, so do we.
  const text = dictionary.replace(/#([0-9A-Fa-f]{2})/g, (_, hex: string) =>
    String.fromCharCode(parseInt(hex, 16)),
  );
  const chains = new Map<string, PdfFilter[]>();
  for (let at = text.indexOf("/Filter"); at >= 0; at = text.indexOf("/Filter", at + 7)) {
    let from = at + 7;
    while (from < text.length && " \t\r\n\f\0".includes(text[from]!)) from++;
    let value: string;
    if (text[from] === "[") {
      const close = text.indexOf("]", from);
      value = text.slice(from + 1, close < 0 ? text.length : close);
    } else {
      const name = /^\/[^\s/[\]<>()%]*/.exec(text.slice(from, from + 64));
      value = name ? name[0] : "";
    }
    const chain = value
      .split("/")
      .map((name) => filterNamed(name.trim()))
      .filter((filter): filter is PdfFilter => filter !== null);
    if (chain.length > 0) {
      chains.delete(chain.join());
      chains.set(chain.join(), chain);
    }
  }
  return [...chains.values()].slice(-MAX_CHAINS_PER_STREAM);
}

/** Where a stream's data starts, as pdf.js finds it: after the first CR, CRLF or LF past the keyword. */
function dataStartAfter(bytes: Buffer, keywordEnd: number): number {
  for (let at = keywordEnd; at < bytes.length; at++) {
    if (bytes[at] === 0x0a) return at + 1;
    if (bytes[at] === 0x0d) return bytes[at + 1] === 0x0a ? at + 2 : at + 1;
  }
  return bytes.length;
}

/**
 * Refuses a PDF whose streams decode, together, to more than `limit` bytes. Every `stream` keyword
 * in the file is found by scanning the bytes (pdf.js can only read streams that are there), the
 * filter chains named in the dictionary before it are read, and its data is decoded through each
 * chain (FlateDecode, LZWDecode, RunLengthDecode, ASCIIHexDecode, ASCII85Decode, in any order),
 * counted, and dropped; the largest count is what pdf.js could make of it. The data runs to its
 * `/Length` or its `endstream`, whichever is further, and a chain that starts with FlateDecode is fed
 * to the end of the file (zlib stops at the end of its own data), so an `endstream` hidden in a
 * stored deflate block ends nothing. One pass: every search moves forward.
 */
export async function checkPdfInflation(pdf: Uint8Array, limit: number): Promise<void> {
  const bytes = Buffer.from(pdf.buffer, pdf.byteOffset, pdf.byteLength);
  let total = 0;
  let from = 0;
  let nextEnd = -1;
  for (;;) {
    const keyword = bytes.indexOf(STREAM_KEYWORD, from);
    if (keyword < 0) return;
    const keywordEnd = keyword + STREAM_KEYWORD.length;
    // "endstream" contains "stream": skip it.
    if (keyword >= 3 && bytes.toString("latin1", keyword - 3, keyword) === "end") {
      from = keywordEnd;
      continue;
    }
    const dataStart = dataStartAfter(bytes, keywordEnd);
    if (nextEnd < dataStart && nextEnd !== bytes.length) {
      nextEnd = bytes.indexOf(END_STREAM_KEYWORD, dataStart);
      if (nextEnd < 0) nextEnd = bytes.length;
    }
    const region = bytes.subarray(from, keyword);
    const obj = region.lastIndexOf(OBJ_KEYWORD);
    const dictionary = region.toString("latin1", obj < 0 ? 0 : obj);
    const declared = /\/Length\s+(\d{1,12})(?!\d)(?!\s+\d+\s+R)/.exec(dictionary);
    const dataEnd = Math.min(bytes.length, Math.max(nextEnd, declared ? dataStart + Number(declared[1]) : 0));
    const earlyChange = /\/EarlyChange\s+0/.test(dictionary) ? 0 : 1;
    // A filter given by reference (/Filter 7 0 R) is not read here: try plain FlateDecode too.
    const chains = [["flate"] as PdfFilter[], ...filterChains(dictionary)];
    let most = 0;
    for (const chain of chains) {
      const data = bytes.subarray(dataStart, chain[0] === "flate" ? bytes.length : dataEnd);
      try {
        most = Math.max(most, await countDecoded(data, limit - total, chain, earlyChange));
      } catch (error) {
        if (error instanceof InflateLimitError) {
          throw new InflateLimitError(`has streams that inflate to more than ${limit} bytes`);
        }
        throw error;
      }
    }
    total += most;
    from = Math.max(dataEnd, keywordEnd);
  }
}
