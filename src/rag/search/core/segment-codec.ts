/**
 * Binary format of one segment (all integers little-endian; every section 4-byte aligned):
 *
 * | size   | content                                                          |
 * |--------|------------------------------------------------------------------|
 * | 4      | magic "LXSG"                                                     |
 * | 4      | u32 format version (2; version 1 is read too)                    |
 * | 4      | u32 documentCount N                                              |
 * | 4      | u32 term count V                                                 |
 * | 4      | u32 posting count P                                              |
 * | 4      | u32 bytes per term frequency (1, 2 or 4; version 1: 2 or 4)      |
 * | 4      | u32 byte length of the dictionary text (UTF-8)                   |
 * | 4      | u32 segment id                                                   |
 * | 8      | f64 reference average length (the avgdl its bounds were made at) |
 * | 4N     | u32 keys, ascending                                              |
 * | 4N     | u32 document lengths                                             |
 * | 4V     | u32 term end offsets in the dictionary text (UTF-16 units)       |
 * | 4V+4   | u32 term → first posting (CSR offsets)                           |
 * | 4P     | u32 posting → local ordinal (ascending within a term)            |
 * | P/2P/4P| u8/u16/u32 posting → term frequency, zero-padded to 4            |
 * | …      | dictionary text: all terms concatenated, UTF-8                   |
 *
 * Version 2 added one-byte frequencies (written whenever every frequency is below 256: a sixth of the
 * memory a segment holds); otherwise the two versions are the same, so version 1 segments (older
 * databases) load unchanged.
 *
 * Only raw data is stored; bounds, frontiers and the term lookup are recomputed on load, by the same
 * code as for a freshly written segment, so results are identical.
 */

import { assertLittleEndian, bytesOf, HEADER_BYTES, padded, withHeader } from "./binary-header.js";
import { termFrequencyArray, type SegmentData, type TermFrequencies } from "./segment.js";

const MAGIC = 0x4753584c; // "LXSG" read as a little-endian u32
export const SEGMENT_FORMAT_VERSION = 2;

function corrupt(reason: string): Error {
  return new Error(`segment bytes are corrupt: ${reason}`);
}

export function encodeSegment(segmentId: number, data: SegmentData, into?: Uint8Array): Uint8Array {
  assertLittleEndian("segment codec");
  const { keys, docLengths, terms, termOffsets, docIds, termFreqs } = data;
  const dictionaryBytes = new TextEncoder().encode(terms.join(""));
  const termEnds = new Uint32Array(terms.length);
  let end = 0;
  for (let t = 0; t < terms.length; t++) termEnds[t] = end += (terms[t] ?? "").length;
  const sections = [keys, docLengths, termEnds, termOffsets, docIds, termFreqs].map(bytesOf);
  let total = HEADER_BYTES;
  for (const section of sections) total += padded(section.byteLength);
  total += dictionaryBytes.byteLength;
  if (into !== undefined && into.byteLength !== total)
    throw new Error("encodeSegment: the buffer's size is not the segment's");
  const header = [
    MAGIC,
    SEGMENT_FORMAT_VERSION,
    keys.length,
    terms.length,
    docIds.length,
    termFreqs.BYTES_PER_ELEMENT,
    dictionaryBytes.byteLength,
    segmentId,
  ];
  const out = withHeader(total, header, data.referenceAverageLength, into);
  let offset = HEADER_BYTES;
  for (const section of sections) {
    // A section made in place (segmentLayout) is already where it goes.
    const inPlace = section.buffer === out.buffer && section.byteOffset === out.byteOffset + offset;
    if (!inPlace) out.set(section, offset);
    offset += padded(section.byteLength);
  }
  out.set(dictionaryBytes, offset);
  return out;
}

/**
 * The bytes of a segment of this shape, and its two posting sections (docIds, termFreqs) as views into
 * them where encodeSegment puts them: a writer that makes its postings there (SegmentWriter.finish)
 * leaves encodeSegment(…, out) nothing to copy but the small sections, so a large segment is not held
 * twice while it is encoded.
 */
export function segmentLayout(shape: {
  documentCount: number;
  terms: readonly string[];
  postingCount: number;
  maxFrequency: number;
}): { out: Uint8Array; docIds: Uint32Array; termFreqs: TermFrequencies } {
  const { documentCount, terms, postingCount } = shape;
  const frequencyBytes = termFrequencyArray(0, shape.maxFrequency).BYTES_PER_ELEMENT;
  const docIdsAt = HEADER_BYTES + 8 * documentCount + 4 * terms.length + 4 * (terms.length + 1);
  const freqsAt = docIdsAt + 4 * postingCount;
  const dictionaryAt = freqsAt + padded(frequencyBytes * postingCount);
  const out = new Uint8Array(dictionaryAt + Buffer.byteLength(terms.join(""), "utf8"));
  const docIds = new Uint32Array(out.buffer, docIdsAt, postingCount);
  const termFreqs =
    frequencyBytes === 1
      ? new Uint8Array(out.buffer, freqsAt, postingCount)
      : frequencyBytes === 2
        ? new Uint16Array(out.buffer, freqsAt, postingCount)
        : new Uint32Array(out.buffer, freqsAt, postingCount);
  return { out, docIds, termFreqs };
}

/**
 * A segment's terms as stored, for loading without a string per term: its dictionary text (UTF-8) and
 * each term's end in it, in bytes. Terms of ASCII characters are read from the bytes; the others (rare)
 * are decoded here, so that checking them is part of decoding.
 */
export interface StoredTerms {
  readonly count: number;
  readonly text: Uint8Array;
  readonly ends: Uint32Array;
  /** Local term → its string, for the terms with a non-ASCII character. */
  readonly decoded: ReadonlyMap<number, string>;
}

interface DecodedParts {
  id: number;
  data: Omit<SegmentData, "terms">;
  /** Term ends in the dictionary text, in UTF-16 code units. */
  termEnds: Uint32Array;
  /** The dictionary text, UTF-8 (a view into the bytes). */
  text: Uint8Array;
}

/**
 * Decodes segment bytes and checks their consistency. With `adopt`, 4-byte-aligned bytes are not copied:
 * the arrays are views into them (the caller must not change them afterwards); otherwise, and for
 * unaligned bytes, every section is copied.
 */
export function decodeSegment(bytes: Uint8Array, adopt = false): { id: number; data: SegmentData } {
  const { id, data, termEnds, text } = decodeParts(bytes, adopt);
  const dictionary = new TextDecoder("utf-8", { fatal: true }).decode(text);
  const terms: string[] = new Array<string>(termEnds.length);
  let start = 0;
  for (let t = 0; t < termEnds.length; t++) {
    const end = termEnds[t] ?? 0;
    if (end <= start || end > dictionary.length) throw corrupt("term offsets");
    terms[t] = dictionary.slice(start, end);
    start = end;
  }
  if (start !== dictionary.length) throw corrupt("dictionary length");
  return { id, data: { ...data, terms } };
}

/**
 * Like {@link decodeSegment} (with `adopt`), but the terms as {@link StoredTerms}: loading a large index
 * this way makes no string per (segment, term), which would be garbage the moment the term dictionary
 * has its bytes (hundreds of MB at a million chunks, left to a lazy GC).
 */
export function decodeStoredSegment(bytes: Uint8Array): {
  id: number;
  data: Omit<SegmentData, "terms">;
  terms: StoredTerms;
} {
  const { id, data, termEnds, text } = decodeParts(bytes, true);
  const termCount = termEnds.length;
  const ends = new Uint32Array(termCount);
  const decoded = new Map<number, string>();
  const utf8 = new TextDecoder("utf-8", { fatal: true });
  let byte = 0;
  let units = 0;
  for (let t = 0; t < termCount; t++) {
    const unitEnd = termEnds[t] ?? 0;
    if (unitEnd <= units) throw corrupt("term offsets");
    const firstByte = byte;
    const firstUnit = units;
    let ascii = true;
    while (units < unitEnd && byte < text.length) {
      const lead = text[byte] ?? 0;
      if (lead < 0x80) {
        byte++;
        units++;
        continue;
      }
      ascii = false;
      // The sequence's length from its lead byte (its validity is checked by the decoder below).
      const length = lead >= 0xf8 ? 0 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
      if (length === 0) throw corrupt("dictionary text is not UTF-8");
      byte += length;
      units += length === 4 ? 2 : 1;
    }
    if (units !== unitEnd || byte > text.length) throw corrupt("term offsets");
    ends[t] = byte;
    if (!ascii) {
      let term: string;
      try {
        term = utf8.decode(text.subarray(firstByte, byte));
      } catch {
        throw corrupt("dictionary text is not UTF-8");
      }
      if (term.length !== unitEnd - firstUnit) throw corrupt("term offsets");
      decoded.set(t, term);
    }
  }
  if (byte !== text.length) throw corrupt("dictionary length");
  return { id, data, terms: { count: termCount, text, ends, decoded } };
}

/** The header, the arrays and the dictionary text, checked except the text itself. */
function decodeParts(bytes: Uint8Array, adopt: boolean): DecodedParts {
  assertLittleEndian("segment codec");
  if (!(bytes instanceof Uint8Array)) throw new TypeError("segment bytes must be a Uint8Array");
  if (bytes.byteLength < HEADER_BYTES) throw corrupt("shorter than the header");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u32 = (i: number): number => view.getUint32(4 * i, true);
  if (u32(0) !== MAGIC) throw corrupt("not a Lectern segment (bad magic)");
  const version = u32(1);
  if (version !== 1 && version !== SEGMENT_FORMAT_VERSION) {
    throw new Error(
      `segment format version ${version} is not supported (expected 1 … ${SEGMENT_FORMAT_VERSION})`,
    );
  }
  const documentCount = u32(2);
  const termCount = u32(3);
  const postingCount = u32(4);
  const tfBytes = u32(5);
  const dictionaryLength = u32(6);
  const referenceAverageLength = view.getFloat64(32, true);
  if (!(tfBytes === 2 || tfBytes === 4 || (tfBytes === 1 && version >= 2))) {
    throw corrupt(`term frequency width ${tfBytes}`);
  }
  if (!(referenceAverageLength > 0)) throw corrupt("reference average length");
  let offset = HEADER_BYTES;
  const views = adopt && bytes.byteOffset % 4 === 0;
  const take = (length: number): Uint8Array => {
    if (offset + length > bytes.byteLength) throw corrupt("truncated");
    if (views) {
      const view = new Uint8Array(bytes.buffer, bytes.byteOffset + offset, length);
      offset += padded(length);
      return view;
    }
    // A copy in a fresh, aligned buffer (a Node Buffer's slice() would be a view into its pool).
    const slice = new Uint8Array(length);
    slice.set(bytes.subarray(offset, offset + length));
    offset += padded(length);
    return slice;
  };
  const u32Array = (count: number): Uint32Array => {
    const section = take(4 * count);
    return new Uint32Array(section.buffer, section.byteOffset, count);
  };
  const keys = u32Array(documentCount);
  const docLengths = u32Array(documentCount);
  const termEnds = u32Array(termCount);
  const termOffsets = u32Array(termCount + 1);
  const docIds = u32Array(postingCount);
  const tfSection = take(tfBytes * postingCount);
  const termFreqs = frequenciesOf(tfSection.buffer, tfSection.byteOffset, postingCount, tfBytes);
  if (offset - padded(dictionaryLength) > bytes.byteLength) throw corrupt("truncated");
  if (offset + dictionaryLength !== bytes.byteLength) throw corrupt("length mismatch");
  const text = bytes.subarray(offset, offset + dictionaryLength);
  for (let d = 1; d < documentCount; d++) {
    if ((keys[d] ?? 0) <= (keys[d - 1] ?? 0)) throw corrupt("keys not ascending");
  }
  if (termOffsets[0] !== 0 || termOffsets[termCount] !== postingCount) throw corrupt("term offsets");
  for (let t = 0; t < termCount; t++) {
    const from = termOffsets[t] ?? 0;
    const to = termOffsets[t + 1] ?? 0;
    if (to <= from) throw corrupt("empty or unordered postings list");
    let previous = -1;
    for (let p = from; p < to; p++) {
      const d = docIds[p] ?? 0;
      if (d <= previous || d >= documentCount) throw corrupt("postings");
      if ((termFreqs[p] ?? 0) < 1) throw corrupt("term frequency");
      previous = d;
    }
  }
  return {
    id: u32(7),
    data: { keys, docLengths, termOffsets, docIds, termFreqs, referenceAverageLength },
    termEnds,
    text,
  };
}

function frequenciesOf(
  buffer: ArrayBufferLike,
  byteOffset: number,
  count: number,
  width: number,
): TermFrequencies {
  if (width === 1) return new Uint8Array(buffer, byteOffset, count);
  return width === 2
    ? new Uint16Array(buffer, byteOffset, count)
    : new Uint32Array(buffer, byteOffset, count);
}

/** Rewrites the segment id in encoded bytes (a merge learns its id only when it is committed). */
export function setSegmentId(bytes: Uint8Array, segmentId: number): void {
  new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).setUint32(28, segmentId, true);
}

/**
 * The arrays of bytes this engine wrote itself (a merge result), as views into them: no copy, no checks,
 * no term strings (the index knows the terms' global ids already). `bytes` must be 4-byte aligned.
 */
export function viewSegment(
  bytes: Uint8Array,
): Omit<SegmentData, "terms"> & { termCount: number; dictionaryText: Uint8Array } {
  if (bytes.byteOffset % 4 !== 0) throw new Error("viewSegment: bytes must be 4-byte aligned");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u32 = (i: number): number => view.getUint32(4 * i, true);
  if (u32(0) !== MAGIC || u32(1) !== SEGMENT_FORMAT_VERSION) throw corrupt("not a segment of this version");
  const documentCount = u32(2);
  const termCount = u32(3);
  const postingCount = u32(4);
  const tfBytes = u32(5);
  let offset = bytes.byteOffset + HEADER_BYTES;
  const u32Array = (count: number): Uint32Array => {
    const array = new Uint32Array(bytes.buffer, offset, count);
    offset += 4 * count;
    return array;
  };
  const keys = u32Array(documentCount);
  const docLengths = u32Array(documentCount);
  offset += 4 * termCount; // term ends (the terms themselves are not needed)
  const termOffsets = u32Array(termCount + 1);
  const docIds = u32Array(postingCount);
  const termFreqs = frequenciesOf(bytes.buffer, offset, postingCount, tfBytes);
  const dictionaryLength = u32(6);
  return {
    keys,
    docLengths,
    termOffsets,
    docIds,
    termFreqs,
    referenceAverageLength: view.getFloat64(32, true),
    termCount,
    // The dictionary text ends the segment.
    dictionaryText: bytes.subarray(bytes.byteLength - dictionaryLength),
  };
}
