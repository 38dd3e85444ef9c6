/**
 * Binary format of a serialised {@link SearchIndex} (all integers little-endian):
 *
 * | offset | size | content                                                        |
 * |--------|------|----------------------------------------------------------------|
 * | 0      | 4    | magic "LXSI"                                                   |
 * | 4      | 4    | u32 format version (1)                                         |
 * | 8      | 4    | u32 documentCount N                                            |
 * | 12     | 4    | u32 vocabularySize V                                           |
 * | 16     | 4    | u32 postingCount P                                             |
 * | 20     | 4    | u32 bytes per term frequency (2 or 4)                          |
 * | 24     | 4    | u32 byte length of the options JSON                            |
 * | 28     | 4    | u32 byte length of the dictionary text                         |
 * | 32     | …    | options JSON (UTF-8), zero-padded to a multiple of 4            |
 * |        | 4V   | u32 term end offsets in the dictionary text (UTF-16 units)      |
 * |        | 4V+4 | u32 term → first posting (CSR offsets)                          |
 * |        | 4P   | u32 posting → document ordinal                                  |
 * |        | 4N   | u32 document lengths                                           |
 * |        | 2P/4P| u16/u32 posting → term frequency, zero-padded to 4              |
 * |        | …    | dictionary text: all terms concatenated, UTF-8                 |
 *
 * Only raw statistics are stored; idf, norms and bounds are recomputed on load (a few ms), so a loaded
 * index is computed by exactly the same code as a freshly built one and gives identical results.
 * Arrays are 4-byte aligned so a reader could map them in place; this one copies them (the caller keeps
 * ownership of its buffer).
 */

import { resolveAnalyzerOptions } from "./analyzer.js";
import type { IndexData } from "./scoring.js";
import type { ResolvedSearchIndexOptions } from "./search-index.js";
import type { SearchIndexOptions } from "./types.js";

const MAGIC = 0x4953584c; // "LXSI" read as a little-endian u32
export const FORMAT_VERSION = 1;
const HEADER_BYTES = 32;

const IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function padded(length: number): number {
  return (length + 3) & ~3;
}

export function encodeIndex(options: ResolvedSearchIndexOptions, data: IndexData): Uint8Array {
  assertLittleEndian();
  const { terms, termOffsets, docIds, termFreqs, docLengths } = data;
  const encoder = new TextEncoder();
  const optionsBytes = encoder.encode(
    JSON.stringify({ scorer: options.scorer, bm25: options.bm25, analyzer: options.analyzer }),
  );
  const dictionaryText = terms.join("");
  const dictionaryBytes = encoder.encode(dictionaryText);
  const termEnds = new Uint32Array(terms.length);
  let end = 0;
  for (let t = 0; t < terms.length; t++) termEnds[t] = end += (terms[t] ?? "").length;

  const tfBytes = termFreqs.BYTES_PER_ELEMENT;
  const sections: Uint8Array[] = [
    optionsBytes,
    bytesOf(termEnds),
    bytesOf(termOffsets),
    bytesOf(docIds),
    bytesOf(docLengths),
    bytesOf(termFreqs),
  ];
  let total = HEADER_BYTES;
  for (const section of sections) total += padded(section.byteLength);
  total += dictionaryBytes.byteLength;

  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  const header = [
    MAGIC,
    FORMAT_VERSION,
    docLengths.length,
    terms.length,
    docIds.length,
    tfBytes,
    optionsBytes.byteLength,
    dictionaryBytes.byteLength,
  ];
  header.forEach((value, i) => view.setUint32(i * 4, value, true));
  let offset = HEADER_BYTES;
  for (const section of sections) {
    out.set(section, offset);
    offset += padded(section.byteLength);
  }
  out.set(dictionaryBytes, offset);
  return out;
}

export function decodeIndex(bytes: Uint8Array): { options: SearchIndexOptions; data: IndexData } {
  assertLittleEndian();
  if (!(bytes instanceof Uint8Array)) throw new TypeError("deserialize expects a Uint8Array");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u32 = (index: number): number => view.getUint32(index * 4, true);
  if (bytes.byteLength < 4 || u32(0) !== MAGIC) throw corrupt("not a search index (bad magic)");
  if (bytes.byteLength < HEADER_BYTES) throw corrupt("too short");
  const version = u32(1);
  if (version !== FORMAT_VERSION) {
    throw new Error(`search index format version ${version} is not supported (expected ${FORMAT_VERSION})`);
  }
  const documentCount = u32(2);
  const vocabularySize = u32(3);
  const postingCount = u32(4);
  const tfBytes = u32(5);
  const optionsLength = u32(6);
  const dictionaryLength = u32(7);
  if (tfBytes !== 2 && tfBytes !== 4) throw corrupt("bad term-frequency width");

  const expected =
    HEADER_BYTES +
    padded(optionsLength) +
    padded(4 * vocabularySize) +
    padded(4 * (vocabularySize + 1)) +
    padded(4 * postingCount) +
    padded(4 * documentCount) +
    padded(tfBytes * postingCount) +
    dictionaryLength;
  if (bytes.byteLength !== expected) throw corrupt(`length ${bytes.byteLength}, expected ${expected}`);

  let offset = HEADER_BYTES;
  const take = (length: number): Uint8Array => {
    // A copy into a fresh, aligned buffer. (Not `bytes.slice()`: on a Node Buffer that is a view.)
    const section = new Uint8Array(length);
    section.set(bytes.subarray(offset, offset + length));
    offset += padded(length);
    return section;
  };
  let stored: Partial<SearchIndexOptions> | null;
  try {
    stored = JSON.parse(
      new TextDecoder("utf-8", { fatal: true }).decode(take(optionsLength)),
    ) as typeof stored;
  } catch {
    throw corrupt("unreadable options");
  }
  if (stored === null || typeof stored !== "object" || stored.scorer === undefined)
    throw corrupt("bad options");
  // The SearchIndex constructor validates scorer and bm25 parameters; the analyzer options are checked here.
  const options: SearchIndexOptions = {
    scorer: stored.scorer,
    bm25: stored.bm25 ?? {},
    analyzer: resolveAnalyzerOptions(stored.analyzer),
  };
  const termEnds = new Uint32Array(take(4 * vocabularySize).buffer);
  const termOffsets = new Uint32Array(take(4 * (vocabularySize + 1)).buffer);
  const docIds = new Uint32Array(take(4 * postingCount).buffer);
  const docLengths = new Uint32Array(take(4 * documentCount).buffer);
  const tfSection = take(tfBytes * postingCount);
  const termFreqs = tfBytes === 2 ? new Uint16Array(tfSection.buffer) : new Uint32Array(tfSection.buffer);
  const dictionaryText = new TextDecoder("utf-8", { fatal: true }).decode(
    bytes.subarray(offset, offset + dictionaryLength),
  );

  const terms = new Array<string>(vocabularySize);
  let start = 0;
  for (let t = 0; t < vocabularySize; t++) {
    const end = termEnds[t] ?? 0;
    if (end < start || end > dictionaryText.length) throw corrupt("bad term dictionary");
    terms[t] = dictionaryText.slice(start, end);
    start = end;
  }
  if (start !== dictionaryText.length) throw corrupt("bad term dictionary");
  checkPostings(documentCount, termOffsets, docIds, termFreqs);
  return { options, data: { terms, termOffsets, docIds, termFreqs, docLengths } };
}

/** Structural checks, so that a damaged file fails loudly instead of ranking garbage. */
function checkPostings(
  documentCount: number,
  termOffsets: Uint32Array,
  docIds: Uint32Array,
  termFreqs: Uint16Array | Uint32Array,
): void {
  if ((termOffsets[0] ?? 0) !== 0 || termOffsets[termOffsets.length - 1] !== docIds.length) {
    throw corrupt("bad postings offsets");
  }
  for (let t = 0; t + 1 < termOffsets.length; t++) {
    const start = termOffsets[t] ?? 0;
    const end = termOffsets[t + 1] ?? 0;
    if (end < start) throw corrupt("bad postings offsets");
    let previous = -1;
    for (let p = start; p < end; p++) {
      const d = docIds[p] ?? 0;
      if (d <= previous || d >= documentCount || (termFreqs[p] ?? 0) < 1) throw corrupt("bad postings");
      previous = d;
    }
  }
}

function bytesOf(array: Uint16Array | Uint32Array): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

function corrupt(reason: string): Error {
  return new Error(`corrupt search index: ${reason}`);
}

function assertLittleEndian(): void {
  if (!IS_LITTLE_ENDIAN) throw new Error("search index serialisation needs a little-endian platform");
}
