/**
 * A write's segment built away from its index, on a worker thread (the service's write preparation):
 * analysis, postings, their encoding and the postings-derived bounds, everything a segment costs in
 * proportion to its text. It is built with id 0 and keys 0 … n−1; `IndexWriter.prepare({ built })`
 * numbers it against the index (rewriting the id and keys in place) and looks its terms up in the
 * dictionary, a pass over the distinct terms, with no string made for an ASCII term.
 *
 * The result is the same segment an `add` of the same texts makes (same terms, postings and lengths;
 * only the avgdl its block bounds were computed at may differ, and any positive one is correct).
 */
import type { ScorerParameters } from "../scoring.js";
import type { AnalyzerOptions } from "../types.js";
import { encodeSegment, segmentLayout } from "../core/segment-codec.js";
import { derivePostings, postingsArrays, type PostingsDerived } from "../core/segment.js";
import { SegmentWriter } from "./segment-writer.js";

/** A segment built by {@link SegmentBuilder}: plain data and typed arrays, sent between threads. */
export interface BuiltSegment {
  /** The encoded segment (id 0, keys 0 … n−1), 4-byte aligned. */
  bytes: Uint8Array;
  documentCount: number;
  /** Sum of the documents' lengths (terms after analysis). */
  totalLength: number;
  /** Per local term, the end of its UTF-8 bytes in the segment's dictionary text. */
  termByteEnds: Uint32Array;
  /** The local terms with a character past ASCII, as strings (the rest are read from the bytes). */
  wideTerms: Map<number, string>;
  /** Bounds and frontiers of its postings (no tombstones yet). */
  derived: PostingsDerived;
}

/** The buffers of a built segment, to transfer rather than copy it to another thread. */
export function transferablesOf(built: BuiltSegment): ArrayBuffer[] {
  const arrays = [built.bytes, built.termByteEnds, ...postingsArrays(built.derived)];
  return [...new Set(arrays.map((array) => array.buffer as ArrayBuffer))];
}

/** Analyses texts one at a time into one segment (no shared term cache: it runs apart from the index). */
export class SegmentBuilder {
  private readonly writer: SegmentWriter;

  constructor(
    analyzer: AnalyzerOptions,
    private readonly scorer: ScorerParameters,
  ) {
    this.writer = new SegmentWriter(analyzer);
  }

  get documentCount(): number {
    return this.writer.documentCount;
  }

  add(text: string): void {
    this.writer.add(text);
  }

  /** The segment of the texts added; null when none was. */
  finish(): BuiltSegment | null {
    const writer = this.writer;
    const documentCount = writer.documentCount;
    if (documentCount === 0) return null;
    const totalLength = writer.totalLength;
    const keys = new Uint32Array(documentCount);
    for (let d = 0; d < documentCount; d++) keys[d] = d;
    const reference = totalLength > 0 ? totalLength / documentCount : 1;
    // The postings are made inside the encoded segment's bytes (segmentLayout), not copied there.
    let layout: ReturnType<typeof segmentLayout> | undefined;
    const data = writer.finish(keys, reference, (postingCount, maxFrequency) => {
      layout = segmentLayout({ documentCount, terms: writer.termList, postingCount, maxFrequency });
      return layout;
    });
    const termByteEnds = new Uint32Array(data.terms.length);
    const wideTerms = new Map<number, string>();
    let end = 0;
    data.terms.forEach((term, t) => {
      end += Buffer.byteLength(term, "utf8");
      termByteEnds[t] = end;
      if (!isAscii(term)) wideTerms.set(t, term);
    });
    const derived = derivePostings(data, this.scorer, null);
    const bytes = encodeSegment(0, data, layout?.out);
    return { bytes, documentCount, totalLength, termByteEnds, wideTerms, derived };
  }
}

function isAscii(term: string): boolean {
  for (let i = 0; i < term.length; i++) if (term.charCodeAt(i) >= 0x80) return false;
  return true;
}
