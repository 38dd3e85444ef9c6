/**
 * Top-k retrieval with dynamic pruning: MaxScore (Turtle & Flood 1995) over windows of documents with
 * block-max bounds, in the style of Lucene's MaxScoreBulkScorer, so that postings that cannot make the
 * top k are skipped without being scored.
 *
 * Every query term i has an upper bound on what it can add to a normalised score: its query weight times
 * the largest per-posting factor of its list, or of the blocks of its list that overlap a window (see
 * `ScoreBounds` in scoring.ts). θ is what a newcomer must beat: the k-th best score once k hits are kept,
 * and `minScore`.
 *
 * 1. Globally, terms are sorted by bound; the longest prefix of small-bound terms whose bounds add up to
 *    no more than θ is *non-essential*: a document containing only those terms cannot get in. Windows
 *    start at the next document of an essential term, so stretches where only non-essential terms occur
 *    are never visited.
 * 2. Per window of {@link WINDOW} documents, the bounds are recomputed from block maxima; a window whose
 *    total bound cannot beat θ is skipped whole, otherwise the terms are split again into essential and
 *    non-essential with these tighter, window-local bounds.
 * 3. The essential terms' postings in the window are scored term-at-a-time into window-local
 *    accumulators. Each document found is then completed with the non-essential terms (looked up by
 *    galloping search, largest bound first) only as long as its partial score plus the remaining bounds
 *    can still beat θ.
 *
 * Exactness: a document is only dropped when a bound, inflated by a relative 1e-9 against rounding, shows
 * that its score is below θ (or below minScore). Each surviving document gets exactly the exhaustive
 * path's score: every contribution is computed by the same expression and kept per query term, and they
 * are summed in the exhaustive path's term order (absent terms add 0, which changes nothing in floating
 * point). The top-k collector orders ties by ordinal whatever the order of offers, so the hits (ordinals
 * and scores) are identical to exhaustive scoring.
 */

import { BLOCK_SHIFT, BLOCK_SIZE, sublinearTf } from "../scoring.js";
import type { TopK } from "../topk.js";
import type { Segment } from "./segment.js";

/** Bounds are multiplied by this before being compared, so rounding can never prune a real hit. */
export const SLACK = 1 + 1e-9;
const END = Number.MAX_SAFE_INTEGER;
/** Documents per window (default). */
export const WINDOW = 4096;

/**
 * Work counters, for tests and benchmarks (cumulative; reset them by assigning 0). Cheap: a few
 * increments per window.
 */
export const pruningCounters = {
  queries: 0,
  windows: 0,
  /** Windows skipped whole because their block-max bound could not beat θ. */
  skippedWindows: 0,
  /** Windows where some terms were non-essential. */
  prunedWindows: 0,
  /** Blocks of essential postings skipped by their block-max bound. */
  skippedBlocks: 0,
  /** Postings read from essential lists. */
  scoredPostings: 0,
  /** Documents rescored exactly after passing every bound. */
  rescored: 0,
};

/** Reusable per-search buffers (one set per index; a nested search allocates its own). */
export interface MaxScoreScratch {
  /** Documents per window. */
  readonly window: number;
  /** Window-local partial scores (essential terms only), for bounds. */
  readonly partial: Float64Array;
  /** Window-local offsets of the documents found in the window. */
  readonly found: Int32Array;
  /** Per-term state of a segment's search (reused: no allocation per segment). */
  readonly perTerm: Float64Array;
  readonly perTermInt: Int32Array;
}

/** Per-term arrays (Float64) in `perTerm`, per-term arrays (Int32) in `perTermInt`: at most this many terms. */
const MAX_TERMS = 64;
const FLOAT_ARRAYS = 12;
const INT_ARRAYS = 3;

export function newMaxScoreScratch(window = WINDOW): MaxScoreScratch {
  return {
    window,
    partial: new Float64Array(window),
    found: new Int32Array(window),
    perTerm: new Float64Array(FLOAT_ARRAYS * MAX_TERMS),
    perTermInt: new Int32Array(INT_ARRAYS * MAX_TERMS),
  };
}

/** First posting in [from, end) whose document is ≥ target (`end` if none): galloping, then binary search. */
export function advanceTo(docIds: Uint32Array, from: number, end: number, target: number): number {
  if (from >= end || (docIds[from] ?? 0) >= target) return from;
  let low = from; // docIds[low] < target
  let step = 1;
  let high = from + 1;
  while (high < end && (docIds[high] ?? 0) < target) {
    low = high;
    step *= 2;
    high = low + step;
  }
  if (high > end) high = end;
  // docIds[low] < target; docIds[high] ≥ target, or high = end.
  while (low + 1 < high) {
    const middle = (low + high) >>> 1;
    if ((docIds[middle] ?? 0) < target) low = middle;
    else high = middle;
  }
  return high;
}

/** One segment's part of a query: its local terms and their bounds, in the query's term order. */
export interface SegmentQuery {
  readonly segment: Segment;
  /** Local term ids of the query terms the segment holds, in query-term order. */
  readonly terms: readonly number[];
  /** Their normalised query weights. */
  readonly weights: readonly number[];
  /** Their exact max factors over the segment's live postings. */
  readonly maxFactors: readonly number[];
  /** Multiplier making the block maxima (made at the segment's reference avgdl) bounds at today's avgdl. */
  readonly blockScale: number;
}

/**
 * Adds one segment's hits to `heap` (shared across segments, so θ carries over), skipping documents that
 * provably cannot get in. Each kept document gets exactly the exhaustive path's score.
 */
export function maxScoreSegment(
  query: SegmentQuery,
  bm25: boolean,
  norms: Float64Array,
  heap: TopK,
  minScore: number,
  accept: ((key: number) => boolean) | undefined,
  scratch: MaxScoreScratch,
): void {
  const { segment, terms: termIds, weights: queryWeights, maxFactors, blockScale } = query;
  const { termOffsets, docIds, termFreqs, docLengths, keys, blockMaxima } = segment;
  const deletedBits = segment.live.deletedBits;
  const n = termIds.length;
  const documentCount = segment.documentCount;

  if (n > MAX_TERMS) throw new RangeError(`pruned search takes at most ${MAX_TERMS} terms`);
  const { perTerm, perTermInt } = scratch;
  const floats = (k: number): Float64Array => perTerm.subarray(k * MAX_TERMS, k * MAX_TERMS + n);
  const ints = (k: number): Int32Array => perTermInt.subarray(k * MAX_TERMS, k * MAX_TERMS + n);
  const weight = floats(0);
  const upper = floats(1); // global bound
  const local = floats(2); // window bound
  const start = floats(3);
  const position = floats(4);
  const end = floats(5);
  const firstBlock = floats(6); // index in blockMaxima, −1 when the list is a single block
  for (let i = 0; i < n; i++) {
    const t = termIds[i] ?? 0;
    weight[i] = queryWeights[i] ?? 0;
    upper[i] = (weight[i] ?? 0) * (maxFactors[i] ?? 0);
    const from = termOffsets[t] ?? 0;
    const to = termOffsets[t + 1] ?? 0;
    start[i] = from;
    position[i] = from;
    end[i] = to;
    firstBlock[i] = to - from > BLOCK_SIZE ? segment.firstBlock(t) : -1;
  }
  // Terms by global bound, ascending (insertion sort: n is small; ties keep query order).
  const globalOrder = ints(0);
  for (let j = 0; j < n; j++) {
    let k = j;
    while (k > 0 && (upper[globalOrder[k - 1] ?? 0] ?? 0) > (upper[j] ?? 0)) {
      globalOrder[k] = globalOrder[k - 1] ?? 0;
      k--;
    }
    globalOrder[k] = j;
  }
  const globalPrefix = floats(7);
  let sum = 0;
  for (let j = 0; j < n; j++) globalPrefix[j] = sum += upper[globalOrder[j] ?? 0] ?? 0;
  const order = ints(1); // window-local order: slot → term
  const rank = ints(2); // term → slot
  const localPrefix = floats(8);
  const windowFirst = floats(9); // first posting ≥ window start
  const probe = floats(10); // cursors for exact rescoring

  const { partial, found, window } = scratch;

  pruningCounters.queries++;
  const capacity = heap.capacity;
  let beat = heap.threshold; // a newcomer must beat it
  const canEnter = (x: number): boolean => {
    const inflated = x * SLACK;
    return inflated >= minScore && inflated > beat;
  };
  const isDeleted = (d: number): boolean =>
    deletedBits !== null && ((deletedBits[d >>> 5] ?? 0) & (1 << (d & 31))) !== 0;
  /** weight × factor of posting p of document d: the same expression as the exhaustive path. */
  const contribution = (w: number, p: number, d: number): number => {
    const tf = termFreqs[p] ?? 1;
    const norm = norms[docLengths[d] ?? 0] ?? 1;
    return w * (bm25 ? tf / (tf + norm) : sublinearTf(tf) / norm);
  };
  let globalEssential = 0; // globalOrder[0 … globalEssential) are non-essential
  while (globalEssential < n && !canEnter(globalPrefix[globalEssential] ?? 0)) globalEssential++;

  const seek = (i: number, target: number): void => {
    const p = position[i] ?? 0;
    if (p < (end[i] ?? 0) && (docIds[p] ?? 0) < target) {
      position[i] = advanceTo(docIds, p, end[i] ?? 0, target);
    }
  };
  const offer = (d: number, score: number): void => {
    if (score > 1) score = 1; // rounding can push a perfect match a few ulps past 1
    const key = keys[d] ?? 0;
    if (score < minScore || !heap.wouldAccept(key, score)) return;
    if (accept !== undefined && !accept(key)) return;
    heap.offer(key, score);
    if (heap.size === capacity) beat = heap.threshold;
  };

  while (globalEssential < n) {
    // The window starts at the next document of an essential term.
    let windowStart = END;
    for (let j = globalEssential; j < n; j++) {
      const i = globalOrder[j] ?? 0;
      const p = position[i] ?? 0;
      if (p < (end[i] ?? 0)) {
        const doc = docIds[p] ?? 0;
        if (doc < windowStart) windowStart = doc;
      }
    }
    if (windowStart === END) break;
    const windowEnd = Math.min(documentCount, windowStart + window);
    pruningCounters.windows++;

    // Window-local bounds from the maxima of the blocks that overlap the window.
    let total = 0;
    for (let i = 0; i < n; i++) {
      seek(i, windowStart);
      const p = position[i] ?? 0;
      const to = end[i] ?? 0;
      let factor = 0;
      if (p < to && (docIds[p] ?? 0) < windowEnd) {
        const block = firstBlock[i] ?? -1;
        if (block < 0) factor = maxFactors[i] ?? 0;
        else {
          const from = start[i] ?? 0;
          let b = (p - from) >>> BLOCK_SHIFT;
          let blockFirst = from + b * BLOCK_SIZE;
          while (blockFirst < to && (docIds[blockFirst] ?? 0) < windowEnd) {
            const m = blockMaxima[block + b] ?? 0;
            if (m > factor) factor = m;
            b++;
            blockFirst += BLOCK_SIZE;
          }
          factor = Math.min(factor * blockScale, maxFactors[i] ?? 0);
        }
      }
      local[i] = (weight[i] ?? 0) * factor;
      total += local[i] ?? 0;
    }
    if (!canEnter(total)) {
      pruningCounters.skippedWindows++;
      for (let i = 0; i < n; i++) seek(i, windowEnd);
      continue;
    }

    // Window-local essential split: insertion sort by local bound (n is small).
    for (let j = 0; j < n; j++) {
      let k = j;
      while (k > 0 && (local[order[k - 1] ?? 0] ?? 0) > (local[j] ?? 0)) {
        order[k] = order[k - 1] ?? 0;
        k--;
      }
      order[k] = j;
    }
    sum = 0;
    let essential = 0;
    for (let j = 0; j < n; j++) {
      localPrefix[j] = sum += local[order[j] ?? 0] ?? 0;
      rank[order[j] ?? 0] = j;
    }
    while (essential < n && !canEnter(localPrefix[essential] ?? 0)) essential++;

    // Essential terms, term-at-a-time in query-term order, into window-local accumulators. A block of
    // postings whose maximum, with every other term at its window bound, cannot beat θ is skipped. With
    // no non-essential term and no skipped block the sums are then exactly the exhaustive path's;
    // otherwise the survivors are rescored exactly below.
    let foundCount = 0;
    let skippedBlocks = false;
    for (let i = 0; i < n; i++) {
      windowFirst[i] = position[i] ?? 0;
      if ((rank[i] ?? 0) < essential) continue;
      const w = weight[i] ?? 0;
      const from = start[i] ?? 0;
      const to = end[i] ?? 0;
      const block = firstBlock[i] ?? -1;
      const others = total - (local[i] ?? 0);
      let p = position[i] ?? 0;
      let scored = 0;
      while (p < to) {
        let stop = to;
        if (block >= 0) {
          const b = (p - from) >>> BLOCK_SHIFT;
          stop = Math.min(to, from + (b + 1) * BLOCK_SIZE);
          if (!canEnter(w * (blockMaxima[block + b] ?? 0) * blockScale + others)) {
            skippedBlocks = true;
            pruningCounters.skippedBlocks++;
            // Skip the block, but not past the window: later documents get later windows' bounds.
            if ((docIds[stop - 1] ?? 0) < windowEnd) {
              p = stop;
              continue;
            }
            p = advanceTo(docIds, p, stop, windowEnd);
            break;
          }
        }
        const first = p;
        for (; p < stop; p++) {
          const d = docIds[p] ?? 0;
          if (d >= windowEnd) break;
          if (isDeleted(d)) continue;
          const c = contribution(w, p, d);
          const offset = d - windowStart;
          const previous = partial[offset] ?? 0;
          if (previous === 0) found[foundCount++] = offset;
          partial[offset] = previous + c;
        }
        scored += p - first;
        if (p < stop) break; // reached the window's end
      }
      pruningCounters.scoredPostings += scored;
      position[i] = p;
    }

    if (essential === 0 && !skippedBlocks) {
      for (let f = 0; f < foundCount; f++) {
        const offset = found[f] ?? 0;
        const score = partial[offset] ?? 0;
        partial[offset] = 0;
        offer(windowStart + offset, score);
      }
    } else {
      pruningCounters.prunedWindows++;
      // Ascending ordinals, so that lists are only walked forwards: sort the few, or scan the window.
      const dense = foundCount * 16 > windowEnd - windowStart;
      if (!dense) found.subarray(0, foundCount).sort();
      const limit = dense ? windowEnd - windowStart : foundCount;
      for (let i = 0; i < n; i++) probe[i] = windowFirst[i] ?? 0;
      for (let f = 0; f < limit; f++) {
        const offset = dense ? f : (found[f] ?? 0);
        let score = partial[offset] ?? 0;
        if (score === 0) continue;
        partial[offset] = 0;
        const d = windowStart + offset;
        // Complete with the non-essential terms, largest bound first, while the document can still get in.
        let alive = true;
        for (let j = essential - 1; j >= 0; j--) {
          if (!canEnter(score + (localPrefix[j] ?? 0))) {
            alive = false;
            break;
          }
          const i = order[j] ?? 0;
          seek(i, d);
          const p = position[i] ?? 0;
          if (p < (end[i] ?? 0) && docIds[p] === d) score += contribution(weight[i] ?? 0, p, d);
        }
        if (!alive || !canEnter(score)) continue;
        pruningCounters.rescored++;
        // A likely hit: recompute its score with the exhaustive path's exact arithmetic, contributions
        // summed in query-term order.
        score = 0;
        for (let i = 0; i < n; i++) {
          let p: number;
          if ((rank[i] ?? 0) < essential) p = position[i] ?? 0;
          else {
            p = advanceTo(docIds, probe[i] ?? 0, end[i] ?? 0, d);
            probe[i] = p;
          }
          if (p < (end[i] ?? 0) && docIds[p] === d) score += contribution(weight[i] ?? 0, p, d);
        }
        offer(d, score);
      }
    }
    while (globalEssential < n && !canEnter(globalPrefix[globalEssential] ?? 0)) globalEssential++;
    // Every list moves past the window (the non-essential ones may have stopped inside it).
    for (let i = 0; i < n; i++) seek(i, windowEnd);
  }
}
