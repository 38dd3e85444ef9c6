/**
 * A segment: an immutable batch of documents with its own CSR postings (term-major, local ordinals in
 * ascending key order) plus what is derived from them when it is loaded: the term lookup by global id,
 * and for the terms with more than BLOCK_SIZE postings per-block factor bounds for pruning and the Pareto
 * frontier of (tf, dl) over live postings.
 * Only its tombstones (`live`) and lazily recomputed frontiers change after construction.
 *
 * Memory: 5 to 6 bytes per posting, 8 per document, about 14 per (segment, term) (the lookup directory
 * included); block bounds and frontiers only for the few terms with more than BLOCK_SIZE postings (a
 * short list's max factor is computed from its postings when a query asks: at most BLOCK_SIZE of them).
 * No strings (terms live once, in the index-wide {@link TermDictionary}).
 */

import type { SegmentVectors } from "../vectors/segment-vectors.js";
import { BLOCK_SHIFT, BLOCK_SIZE, factorOf, lengthNorm, type ScorerParameters } from "../scoring.js";
import { LiveDocs } from "./live-docs.js";
import { indexOfSorted } from "./sorted.js";
import type { TermDictionary } from "./term-dictionary.js";

/** Term frequencies, in the narrowest width their maximum fits (most segments: one byte each). */
export type TermFrequencies = Uint8Array | Uint16Array | Uint32Array;

/** The narrowest array for `count` frequencies up to `maxFrequency`. */
export function termFrequencyArray(count: number, maxFrequency: number): TermFrequencies {
  if (maxFrequency <= 0xff) return new Uint8Array(count);
  return maxFrequency <= 0xffff ? new Uint16Array(count) : new Uint32Array(count);
}

/** A segment's raw data, as stored in its bytes. */
export interface SegmentData {
  /** Local ordinal → key, ascending. */
  readonly keys: Uint32Array;
  /** Local ordinal → number of terms after analysis. */
  readonly docLengths: Uint32Array;
  /** Local term id → term. */
  readonly terms: readonly string[];
  /** Local term t's postings are [termOffsets[t], termOffsets[t + 1]). */
  readonly termOffsets: Uint32Array;
  /** Posting → local ordinal, ascending within a term. */
  readonly docIds: Uint32Array;
  /** Posting → term frequency (≥ 1). */
  readonly termFreqs: TermFrequencies;
  /** The avgdl the block bounds are computed at (any positive value is correct). */
  readonly referenceAverageLength: number;
}

/** Points (tf, dl) of a frontier, tf descending, dl strictly descending. */
interface Frontier {
  readonly tf: Uint32Array;
  readonly dl: Uint32Array;
}

class GrowableUint32 {
  array = new Uint32Array(256);
  length = 0;
  push(value: number): void {
    if (this.length === this.array.length) {
      const next = new Uint32Array(this.array.length * 2);
      next.set(this.array);
      this.array = next;
    }
    this.array[this.length++] = value;
  }
  toArray(): Uint32Array {
    return this.array.slice(0, this.length);
  }
}

/** Scratch for frontier computation: min dl per tf. */
let minLengthByTf = new Uint32Array(1024);
const NONE = 0xffffffff;

/**
 * Appends to (outTf, outDl) the Pareto frontier of the live postings [from, to): the (tf, dl) pairs not
 * dominated by another posting with higher-or-equal tf and lower-or-equal dl. Evaluating the factor (up
 * in tf, down in dl) on them gives the exact maximum over the list for any avgdl.
 */
function appendFrontier(
  docIds: Uint32Array,
  termFreqs: TermFrequencies,
  docLengths: Uint32Array,
  deletedBits: Uint32Array | null,
  from: number,
  to: number,
  outTf: GrowableUint32,
  outDl: GrowableUint32,
): void {
  if (to - from === 1) {
    const d = docIds[from] ?? 0;
    if (deletedBits !== null && ((deletedBits[d >>> 5] ?? 0) & (1 << (d & 31))) !== 0) return;
    outTf.push(termFreqs[from] ?? 1);
    outDl.push(docLengths[d] ?? 0);
    return;
  }
  let maxTf = 0;
  for (let p = from; p < to; p++) {
    const d = docIds[p] ?? 0;
    if (deletedBits !== null && ((deletedBits[d >>> 5] ?? 0) & (1 << (d & 31))) !== 0) continue;
    const tf = termFreqs[p] ?? 1;
    if (tf > maxTf) maxTf = tf;
  }
  if (maxTf === 0) return;
  if (maxTf <= 4 * (to - from) + 256) {
    if (minLengthByTf.length <= maxTf) minLengthByTf = new Uint32Array(2 * maxTf + 2);
    const minLength = minLengthByTf;
    minLength.fill(NONE, 0, maxTf + 1);
    for (let p = from; p < to; p++) {
      const d = docIds[p] ?? 0;
      if (deletedBits !== null && ((deletedBits[d >>> 5] ?? 0) & (1 << (d & 31))) !== 0) continue;
      const tf = termFreqs[p] ?? 1;
      const dl = docLengths[d] ?? 0;
      if (dl < (minLength[tf] ?? NONE)) minLength[tf] = dl;
    }
    let best = NONE + 1;
    for (let tf = maxTf; tf >= 1; tf--) {
      const dl = minLength[tf] ?? NONE;
      if (dl !== NONE && dl < best) {
        outTf.push(tf);
        outDl.push(dl);
        best = dl;
      }
    }
    return;
  }
  // Few postings with huge frequencies: sort the pairs instead.
  const pairs: [number, number][] = [];
  for (let p = from; p < to; p++) {
    const d = docIds[p] ?? 0;
    if (deletedBits !== null && ((deletedBits[d >>> 5] ?? 0) & (1 << (d & 31))) !== 0) continue;
    pairs.push([termFreqs[p] ?? 1, docLengths[d] ?? 0]);
  }
  pairs.sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  let best = Infinity;
  for (const [tf, dl] of pairs) {
    if (dl < best) {
      outTf.push(tf);
      outDl.push(dl);
      best = dl;
    }
  }
}

/**
 * A directory over the ascending global ids: bucket b = id >>> shift holds positions
 * [directory[b], directory[b + 1]) of `sortedTermIds` (and so of `sortedLocalTerms`). A query looks up every query term in every
 * segment; a plain binary search over a large segment's ids costs about 16 dependent cache misses, the
 * directory one or two. About two buckets per term, so at most 2 bytes per (segment, term).
 */
function buildTermDirectory(sortedTermIds: Uint32Array): { directory: Uint32Array; shift: number } {
  const count = sortedTermIds.length;
  const maxId = count > 0 ? (sortedTermIds[count - 1] ?? 0) : 0;
  const target = Math.max(1, count >>> 1);
  let shift = 0;
  while (shift < 31 && (maxId >>> shift) + 1 > target) shift++;
  const buckets = (maxId >>> shift) + 1;
  const directory = new Uint32Array(buckets + 1);
  let i = 0;
  for (let b = 0; b <= buckets; b++) {
    while (i < count && (sortedTermIds[i] ?? 0) >>> shift < b) i++;
    directory[b] = i;
  }
  return { directory, shift };
}

/** What is derived from a segment's data when it is loaded (or merged, on the worker thread). */
export interface SegmentDerived {
  /** Local term → global term id. */
  readonly termIds: Uint32Array;
  /** Local terms by ascending global id (the lookup by global id searches it through `termIds`). */
  readonly sortedLocalTerms: Uint32Array;
  /** Buckets of `sortedLocalTerms` by global id >>> directoryShift (see buildTermDirectory). */
  readonly termDirectory: Uint32Array;
  readonly directoryShift: number;
  readonly maxDocumentLength: number;
  /** The local terms with more than BLOCK_SIZE postings ("long" terms), ascending. */
  readonly longTerms: Uint32Array;
  /** Per long term, its first block in `blockMaxima` (and the total at the end). */
  readonly blockStarts: Uint32Array;
  readonly blockMaxima: Float64Array;
  /** Per long term, its frontier points in `frontierTf`/`frontierDl` (and the total at the end). */
  readonly frontierOffsets: Uint32Array;
  readonly frontierTf: Uint32Array;
  readonly frontierDl: Uint32Array;
}

/** The part of {@link SegmentDerived} that depends on the global term ids: the lookup by id. */
export type TermLookup = Pick<
  SegmentDerived,
  "termIds" | "sortedLocalTerms" | "termDirectory" | "directoryShift"
>;
/** The part of {@link SegmentDerived} computed from the postings alone (where the segment is built). */
export type PostingsDerived = Omit<SegmentDerived, keyof TermLookup>;

/** The typed arrays of derived postings, for a list of buffers to transfer to another thread. */
export function postingsArrays(derived: PostingsDerived): Array<Uint32Array | Float64Array> {
  const { longTerms, blockStarts, blockMaxima, frontierOffsets, frontierTf, frontierDl } = derived;
  return [longTerms, blockStarts, blockMaxima, frontierOffsets, frontierTf, frontierDl];
}

/**
 * The term lookup by global id, the block bounds at the reference avgdl and the (tf, dl) frontiers over
 * the postings of documents not in `deletedBits`, the last two for long terms only.
 */
export function deriveSegment(
  data: Omit<SegmentData, "terms">,
  termIds: Uint32Array,
  scorer: ScorerParameters,
  deletedBits: Uint32Array | null,
): SegmentDerived {
  return { ...deriveLookup(termIds), ...derivePostings(data, scorer, deletedBits) };
}

/** The lookup of a segment's local terms by global id (sorted ids and their directory). */
export function deriveLookup(termIds: Uint32Array): TermLookup {
  const termCount = termIds.length;
  // Sorted by global id: (id, local) packed into one float and sorted natively when it fits 53 bits.
  const sortedLocalTerms = new Uint32Array(termCount);
  if (termCount < 1 << 21) {
    const packed = new Float64Array(termCount);
    for (let t = 0; t < termCount; t++) packed[t] = (termIds[t] ?? 0) * (1 << 21) + t;
    packed.sort();
    for (let i = 0; i < termCount; i++) sortedLocalTerms[i] = (packed[i] ?? 0) % (1 << 21);
  } else {
    const order = Array.from({ length: termCount }, (_, t) => t).sort(
      (a, b) => (termIds[a] ?? 0) - (termIds[b] ?? 0),
    );
    order.forEach((t, i) => {
      sortedLocalTerms[i] = t;
    });
  }
  // The ids in that order, only to build the directory (a segment keeps no sorted copy of them).
  const sortedTermIds = new Uint32Array(termCount);
  for (let i = 0; i < termCount; i++) sortedTermIds[i] = termIds[sortedLocalTerms[i] ?? 0] ?? 0;
  const { directory: termDirectory, shift: directoryShift } = buildTermDirectory(sortedTermIds);
  return { termIds, sortedLocalTerms, termDirectory, directoryShift };
}

/**
 * The block bounds at the reference avgdl and the (tf, dl) frontiers over the postings of documents
 * not in `deletedBits` (long terms only), and the longest document.
 */
export function derivePostings(
  data: Omit<SegmentData, "terms">,
  scorer: ScorerParameters,
  deletedBits: Uint32Array | null,
): PostingsDerived {
  const termCount = data.termOffsets.length - 1;
  let maxLength = 0;
  for (const dl of data.docLengths) if (dl > maxLength) maxLength = dl;

  // Long terms and their blocks.
  const { termOffsets, docIds, termFreqs, docLengths } = data;
  let longCount = 0;
  for (let t = 0; t < termCount; t++) {
    if ((termOffsets[t + 1] ?? 0) - (termOffsets[t] ?? 0) > BLOCK_SIZE) longCount++;
  }
  const longTerms = new Uint32Array(longCount);
  const blockStarts = new Uint32Array(longCount + 1);
  let blocks = 0;
  for (let t = 0, j = 0; t < termCount; t++) {
    const df = (termOffsets[t + 1] ?? 0) - (termOffsets[t] ?? 0);
    if (df <= BLOCK_SIZE) continue;
    longTerms[j] = t;
    blockStarts[j++] = blocks;
    blocks += (df + BLOCK_SIZE - 1) >>> BLOCK_SHIFT;
  }
  blockStarts[longCount] = blocks;

  // Block bounds at the reference avgdl.
  const blockMaxima = new Float64Array(blocks);
  const bm25 = scorer.kind === "bm25";
  const norms = new Float64Array(maxLength + 1);
  for (let dl = 0; dl <= maxLength; dl++) norms[dl] = lengthNorm(scorer, dl, data.referenceAverageLength);
  for (let j = 0; j < longCount; j++) {
    const t = longTerms[j] ?? 0;
    const start = termOffsets[t] ?? 0;
    const end = termOffsets[t + 1] ?? 0;
    let block = blockStarts[j] ?? 0;
    for (let blockStart = start; blockStart < end; blockStart += BLOCK_SIZE, block++) {
      const blockEnd = Math.min(end, blockStart + BLOCK_SIZE);
      let best = 0;
      for (let p = blockStart; p < blockEnd; p++) {
        const f = factorOf(bm25, termFreqs[p] ?? 1, norms[docLengths[docIds[p] ?? 0] ?? 0] ?? 1);
        if (f > best) best = f;
      }
      blockMaxima[block] = best;
    }
  }

  // Frontiers of the long terms, over live postings.
  const frontierOffsets = new Uint32Array(longCount + 1);
  const outTf = new GrowableUint32();
  const outDl = new GrowableUint32();
  for (let j = 0; j < longCount; j++) {
    const t = longTerms[j] ?? 0;
    frontierOffsets[j] = outTf.length;
    appendFrontier(
      docIds,
      termFreqs,
      docLengths,
      deletedBits,
      termOffsets[t] ?? 0,
      termOffsets[t + 1] ?? 0,
      outTf,
      outDl,
    );
  }
  frontierOffsets[longCount] = outTf.length;
  return {
    maxDocumentLength: maxLength,
    longTerms,
    blockStarts,
    blockMaxima,
    frontierOffsets,
    frontierTf: outTf.toArray(),
    frontierDl: outDl.toArray(),
  };
}

export class Segment {
  readonly keys: Uint32Array;
  readonly docLengths: Uint32Array;
  readonly termOffsets: Uint32Array;
  readonly docIds: Uint32Array;
  readonly termFreqs: TermFrequencies;
  readonly referenceAverageLength: number;
  /** Local term → global term id. */
  readonly termIds: Uint32Array;
  /** Local terms by ascending global id: the lookup by global id. */
  private readonly sortedLocalTerms: Uint32Array;
  private readonly termDirectory: Uint32Array;
  private readonly directoryShift: number;
  readonly maxDocumentLength: number;
  /** Local terms with more than BLOCK_SIZE postings, ascending; blocks and frontiers are theirs. */
  private readonly longTerms: Uint32Array;
  /** Per long term, its first block in `blockMaxima`. */
  private readonly blockStarts: Uint32Array;
  /** Per block of BLOCK_SIZE postings, the max factor at the reference avgdl. */
  readonly blockMaxima: Float64Array;
  private readonly frontierOffsets: Uint32Array;
  private readonly frontierTf: Uint32Array;
  private readonly frontierDl: Uint32Array;
  /** Long terms whose frontier lost a point to a delete (recomputed when next needed), and recomputed ones. */
  private readonly staleFrontiers = new Set<number>();
  private readonly recomputedFrontiers = new Map<number, Frontier>();
  /**
   * The segment's embeddings, document d's at row d (an index with vectors sets them right after
   * building the segment; immutable like the postings, filtered by the same `live`).
   */
  vectors: SegmentVectors | null = null;

  /** A segment from its data: tombstones applied, derived arrays computed. */
  static build(
    id: number,
    data: Omit<SegmentData, "terms">,
    termIds: Uint32Array,
    scorer: ScorerParameters,
    deleted: Iterable<number>,
    byteLength: number,
  ): Segment {
    const live = new LiveDocs(data.keys.length);
    for (const ordinal of deleted) live.delete(ordinal);
    return new Segment(id, data, deriveSegment(data, termIds, scorer, live.deletedBits), live, byteLength);
  }

  /**
   * @param derived from {@link deriveSegment}; its frontiers must exclude the documents `live` deletes,
   *   or be marked stale with {@link Segment.markFrontiersStale}
   * @param byteLength the size of the segment's bytes
   */
  constructor(
    readonly id: number,
    data: Omit<SegmentData, "terms">,
    derived: SegmentDerived,
    readonly live: LiveDocs,
    readonly byteLength: number,
  ) {
    this.keys = data.keys;
    this.docLengths = data.docLengths;
    this.termOffsets = data.termOffsets;
    this.docIds = data.docIds;
    this.termFreqs = data.termFreqs;
    this.referenceAverageLength = data.referenceAverageLength;
    this.termIds = derived.termIds;
    this.sortedLocalTerms = derived.sortedLocalTerms;
    this.termDirectory = derived.termDirectory;
    this.directoryShift = derived.directoryShift;
    this.maxDocumentLength = derived.maxDocumentLength;
    this.longTerms = derived.longTerms;
    this.blockStarts = derived.blockStarts;
    this.blockMaxima = derived.blockMaxima;
    this.frontierOffsets = derived.frontierOffsets;
    this.frontierTf = derived.frontierTf;
    this.frontierDl = derived.frontierDl;
  }

  /** Marks stale the frontiers of the long terms of these (deleted) documents: one pass over their postings. */
  markFrontiersStale(ordinals: readonly number[]): void {
    if (ordinals.length === 0) return;
    const wanted = new Uint32Array((this.documentCount + 31) >>> 5);
    for (const d of ordinals) wanted[d >>> 5] = (wanted[d >>> 5] ?? 0) | (1 << (d & 31));
    const { termOffsets, docIds, longTerms } = this;
    for (const t of longTerms) {
      const end = termOffsets[t + 1] ?? 0;
      for (let p = termOffsets[t] ?? 0; p < end; p++) {
        const d = docIds[p] ?? 0;
        if (((wanted[d >>> 5] ?? 0) & (1 << (d & 31))) !== 0) {
          this.staleFrontiers.add(t);
          break;
        }
      }
    }
  }

  get documentCount(): number {
    return this.keys.length;
  }

  get postingCount(): number {
    return this.docIds.length;
  }

  get termCount(): number {
    return this.termIds.length;
  }

  /** The local term of global term id `termId`, or −1 if this segment does not hold it. */
  localTerm(termId: number): number {
    const { sortedLocalTerms, termIds, termDirectory } = this;
    const bucket = termId >>> this.directoryShift;
    if (bucket + 1 >= termDirectory.length) return -1;
    // Binary search within the bucket (about two terms), through `termIds`: no sorted copy of the ids.
    let low = termDirectory[bucket] ?? 0;
    const end = termDirectory[bucket + 1] ?? 0;
    let high = end;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((termIds[sortedLocalTerms[middle] ?? 0] ?? 0) < termId) low = middle + 1;
      else high = middle;
    }
    const t = sortedLocalTerms[low] ?? 0;
    return low < end && termIds[t] === termId ? t : -1;
  }

  /** Position of local term `t` among the long terms, or −1 for a short one. */
  private longIndex(t: number): number {
    return (this.termOffsets[t + 1] ?? 0) - (this.termOffsets[t] ?? 0) > BLOCK_SIZE
      ? indexOfSorted(this.longTerms, t)
      : -1;
  }

  /** The first block of local term `t` in `blockMaxima` (a term with more than BLOCK_SIZE postings). */
  firstBlock(t: number): number {
    const j = this.longIndex(t);
    if (j < 0) throw new RangeError(`local term ${t} has no blocks`);
    return this.blockStarts[j] ?? 0;
  }

  /** The local ordinal of `key`, or −1. */
  ordinalOf(key: number): number {
    return indexOfSorted(this.keys, key);
  }

  /** Term frequency of local term `t` in document `ordinal` (0 when absent). */
  frequency(t: number, ordinal: number): number {
    const { docIds } = this;
    let low = this.termOffsets[t] ?? 0;
    let high = this.termOffsets[t + 1] ?? 0;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if ((docIds[middle] ?? 0) < ordinal) low = middle + 1;
      else high = middle;
    }
    return low < (this.termOffsets[t + 1] ?? 0) && docIds[low] === ordinal ? (this.termFreqs[low] ?? 0) : 0;
  }

  /** Live postings of local term `t`. */
  liveFrequency(t: number): number {
    const from = this.termOffsets[t] ?? 0;
    const to = this.termOffsets[t + 1] ?? 0;
    const bits = this.live.deletedBits;
    if (bits === null) return to - from;
    let count = 0;
    for (let p = from; p < to; p++) {
      const d = this.docIds[p] ?? 0;
      if (((bits[d >>> 5] ?? 0) & (1 << (d & 31))) === 0) count++;
    }
    return count;
  }

  private frontier(t: number): Frontier {
    const recomputed = this.recomputedFrontiers.get(t);
    if (recomputed !== undefined && !this.staleFrontiers.has(t)) return recomputed;
    if (this.staleFrontiers.has(t)) {
      const outTf = new GrowableUint32();
      const outDl = new GrowableUint32();
      appendFrontier(
        this.docIds,
        this.termFreqs,
        this.docLengths,
        this.live.deletedBits,
        this.termOffsets[t] ?? 0,
        this.termOffsets[t + 1] ?? 0,
        outTf,
        outDl,
      );
      const frontier = { tf: outTf.toArray(), dl: outDl.toArray() };
      this.staleFrontiers.delete(t);
      this.recomputedFrontiers.set(t, frontier);
      return frontier;
    }
    const j = this.longIndex(t);
    const from = this.frontierOffsets[j] ?? 0;
    const to = this.frontierOffsets[j + 1] ?? 0;
    return { tf: this.frontierTf.subarray(from, to), dl: this.frontierDl.subarray(from, to) };
  }

  /** The exact max factor over the live postings of local term `t` (0 if none), at these length norms. */
  liveMaxFactor(t: number, bm25: boolean, norms: Float64Array): number {
    let best = 0;
    const from = this.termOffsets[t] ?? 0;
    const to = this.termOffsets[t + 1] ?? 0;
    if (to - from <= BLOCK_SIZE) {
      // A short list: its live postings themselves (the max over them equals the max over its frontier).
      const { docIds, termFreqs, docLengths } = this;
      const bits = this.live.deletedBits;
      for (let p = from; p < to; p++) {
        const d = docIds[p] ?? 0;
        if (bits !== null && ((bits[d >>> 5] ?? 0) & (1 << (d & 31))) !== 0) continue;
        const f = factorOf(bm25, termFreqs[p] ?? 1, norms[docLengths[d] ?? 0] ?? 1);
        if (f > best) best = f;
      }
      return best;
    }
    if (this.staleFrontiers.size === 0 && this.recomputedFrontiers.size === 0) {
      // Fast path (no delete has touched a frontier): read the stored frontier in place.
      const { frontierTf, frontierDl } = this;
      const j = this.longIndex(t);
      const end = this.frontierOffsets[j + 1] ?? 0;
      for (let i = this.frontierOffsets[j] ?? 0; i < end; i++) {
        const f = factorOf(bm25, frontierTf[i] ?? 1, norms[frontierDl[i] ?? 0] ?? 1);
        if (f > best) best = f;
      }
      return best;
    }
    const { tf, dl } = this.frontier(t);
    for (let i = 0; i < tf.length; i++) {
      const f = factorOf(bm25, tf[i] ?? 1, norms[dl[i] ?? 0] ?? 1);
      if (f > best) best = f;
    }
    return best;
  }

  /** Tombstones a document; `localTerms` and `frequencies` are its terms here, for the frontiers it may leave. */
  deleteDocument(ordinal: number, localTerms: readonly number[], frequencies: readonly number[]): void {
    if (!this.live.delete(ordinal)) throw new RangeError(`ordinal ${ordinal} is already deleted`);
    const dl = this.docLengths[ordinal] ?? 0;
    for (let k = 0; k < localTerms.length; k++) {
      const t = localTerms[k] ?? 0;
      // Short terms keep no frontier (their max is computed from their live postings).
      if (this.staleFrontiers.has(t) || this.longIndex(t) < 0) continue;
      const { tf, dl: lengths } = this.frontier(t);
      const frequency = frequencies[k] ?? 0;
      for (let i = 0; i < tf.length; i++) {
        if (tf[i] === frequency && lengths[i] === dl) {
          this.staleFrontiers.add(t);
          break;
        }
      }
    }
  }

  /** The raw data, with term strings from the dictionary (for encoding). */
  toData(dictionary: TermDictionary): SegmentData {
    const terms = Array.from(this.termIds, (id) => dictionary.termOf(id));
    return {
      keys: this.keys,
      docLengths: this.docLengths,
      terms,
      termOffsets: this.termOffsets,
      docIds: this.docIds,
      termFreqs: this.termFreqs,
      referenceAverageLength: this.referenceAverageLength,
    };
  }
}
