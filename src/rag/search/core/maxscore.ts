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
import type { Segment, TermFrequencies } from "./segment.js";

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

/** At most this many terms per pruned search. */
const MAX_TERMS = 64;

/**
 * Reusable per-search buffers (one set per index; a nested search allocates its own). Each per-term
 * array has room for {@link MAX_TERMS} terms: a segment's search allocates nothing, which matters when
 * a query visits dozens of small segments.
 */
export class MaxScoreScratch {
  /** Window-local partial scores (essential terms only), for bounds. */
  readonly partial: Float64Array;
  /** Window-local offsets of the documents found in the window. */
  readonly found: Int32Array;
  /** The segment's query, filled by the caller: local terms, weights, max factors (query-term order). */
  readonly terms = new Int32Array(MAX_TERMS);
  readonly weights = new Float64Array(MAX_TERMS);
  readonly maxFactors = new Float64Array(MAX_TERMS);
  readonly upper = new Float64Array(MAX_TERMS); // global bound
  readonly local = new Float64Array(MAX_TERMS); // window bound
  readonly start = new Float64Array(MAX_TERMS);
  readonly position = new Float64Array(MAX_TERMS);
  readonly end = new Float64Array(MAX_TERMS);
  readonly firstBlock = new Float64Array(MAX_TERMS); // index in blockMaxima, −1 for a single-block list
  readonly globalPrefix = new Float64Array(MAX_TERMS);
  readonly localPrefix = new Float64Array(MAX_TERMS);
  readonly windowFirst = new Float64Array(MAX_TERMS); // first posting ≥ window start
  readonly probe = new Float64Array(MAX_TERMS); // cursors for exact rescoring
  readonly globalOrder = new Int32Array(MAX_TERMS);
  readonly order = new Int32Array(MAX_TERMS); // window-local order: slot → term
  readonly rank = new Int32Array(MAX_TERMS); // term → slot

  /** @param window documents per window */
  constructor(readonly window = WINDOW) {
    this.partial = new Float64Array(window);
    this.found = new Int32Array(window);
  }
}

export function newMaxScoreScratch(window = WINDOW): MaxScoreScratch {
  return new MaxScoreScratch(window);
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

/** Can a document whose score is at most `x` get in? (θ = `beat`; inflated against rounding.) */
function canEnter(x: number, minScore: number, beat: number): boolean {
  const inflated = x * SLACK;
  return inflated >= minScore && inflated > beat;
}

/** weight × factor of posting p of document d: the same expression as the exhaustive path. */
function contribution(
  w: number,
  p: number,
  d: number,
  termFreqs: TermFrequencies,
  docLengths: Uint32Array,
  norms: Float64Array,
  bm25: boolean,
): number {
  const tf = termFreqs[p] ?? 1;
  const norm = norms[docLengths[d] ?? 0] ?? 1;
  return w * (bm25 ? tf / (tf + norm) : sublinearTf(tf) / norm);
}

/** Moves cursor i to its first posting ≥ target. */
function seek(
  position: Float64Array,
  end: Float64Array,
  docIds: Uint32Array,
  i: number,
  target: number,
): void {
  const p = position[i] ?? 0;
  if (p < (end[i] ?? 0) && (docIds[p] ?? 0) < target) position[i] = advanceTo(docIds, p, end[i] ?? 0, target);
}

/**
 * Puts terms 0…n-1 in `order` by `bound`, ascending (insertion sort: n is small; ties keep query
 * order), and the running sums of their bounds in that order in `prefix`.
 */
function orderByBound(bound: Float64Array, n: number, order: Int32Array, prefix: Float64Array): void {
  for (let j = 0; j < n; j++) {
    let k = j;
    while (k > 0 && (bound[order[k - 1] ?? 0] ?? 0) > (bound[j] ?? 0)) {
      order[k] = order[k - 1] ?? 0;
      k--;
    }
    order[k] = j;
  }
  let sum = 0;
  for (let j = 0; j < n; j++) prefix[j] = sum += bound[order[j] ?? 0] ?? 0;
}

/** Offers document d with this score (the caller refreshes θ). */
function offer(
  heap: TopK,
  key: number,
  score: number,
  minScore: number,
  accept: ((key: number) => boolean) | undefined,
): void {
  if (score > 1) score = 1; // rounding can push a perfect match a few ulps past 1
  if (score < minScore || !heap.wouldAccept(key, score)) return;
  if (accept !== undefined && !accept(key)) return;
  heap.offer(key, score);
}

/**
 * Adds one segment's hits to `heap` (shared across segments, so θ carries over), skipping documents that
 * provably cannot get in. Each kept document gets exactly the exhaustive path's score.
 *
 * The segment's query is in `scratch`: its first `n` entries of `terms` (local term ids of the query
 * terms the segment holds, in query-term order), `weights` (their normalised query weights) and
 * `maxFactors` (their exact max factors over the segment's live postings). `blockScale` makes the block
 * maxima (made at the segment's reference avgdl) bounds at today's avgdl.
 */
export function maxScoreSegment(
  segment: Segment,
  n: number,
  blockScale: number,
  bm25: boolean,
  norms: Float64Array,
  heap: TopK,
  minScore: number,
  accept: ((key: number) => boolean) | undefined,
  scratch: MaxScoreScratch,
): void {
  const { termOffsets, docIds, termFreqs, docLengths, keys, blockMaxima } = segment;
  const deletedBits = segment.live.deletedBits;
  const documentCount = segment.documentCount;

  if (n > MAX_TERMS) throw new RangeError(`pruned search takes at most ${MAX_TERMS} terms`);
  const {
    terms: termIds,
    weights: weight,
    maxFactors,
    upper,
    local,
    start,
    position,
    end,
    firstBlock,
  } = scratch;
  for (let i = 0; i < n; i++) {
    const t = termIds[i] ?? 0;
    upper[i] = (weight[i] ?? 0) * (maxFactors[i] ?? 0);
    const from = termOffsets[t] ?? 0;
    const to = termOffsets[t + 1] ?? 0;
    start[i] = from;
    position[i] = from;
    end[i] = to;
    firstBlock[i] = to - from > BLOCK_SIZE ? segment.firstBlock(t) : -1;
  }
  // Terms by global bound.
  const { globalOrder, globalPrefix, order, rank, localPrefix, windowFirst, probe } = scratch;
  orderByBound(upper, n, globalOrder, globalPrefix);

  const { partial, found, window } = scratch;

  pruningCounters.queries++;
  const capacity = heap.capacity;
  let beat = heap.threshold; // a newcomer must beat it
  let globalEssential = 0; // globalOrder[0 … globalEssential) are non-essential
  while (globalEssential < n && !canEnter(globalPrefix[globalEssential] ?? 0, minScore, beat))
    globalEssential++;

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
      seek(position, end, docIds, i, windowStart);
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
    if (!canEnter(total, minScore, beat)) {
      pruningCounters.skippedWindows++;
      for (let i = 0; i < n; i++) seek(position, end, docIds, i, windowEnd);
      continue;
    }

    // Window-local essential split, by local bound.
    orderByBound(local, n, order, localPrefix);
    for (let j = 0; j < n; j++) rank[order[j] ?? 0] = j;
    let essential = 0;
    while (essential < n && !canEnter(localPrefix[essential] ?? 0, minScore, beat)) essential++;

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
          if (!canEnter(w * (blockMaxima[block + b] ?? 0) * blockScale + others, minScore, beat)) {
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
          if (deletedBits !== null && ((deletedBits[d >>> 5] ?? 0) & (1 << (d & 31))) !== 0) continue;
          const c = contribution(w, p, d, termFreqs, docLengths, norms, bm25);
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
        offer(heap, keys[windowStart + offset] ?? 0, score, minScore, accept);
        if (heap.size === capacity) beat = heap.threshold;
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
          if (!canEnter(score + (localPrefix[j] ?? 0), minScore, beat)) {
            alive = false;
            break;
          }
          const i = order[j] ?? 0;
          seek(position, end, docIds, i, d);
          const p = position[i] ?? 0;
          if (p < (end[i] ?? 0) && docIds[p] === d)
            score += contribution(weight[i] ?? 0, p, d, termFreqs, docLengths, norms, bm25);
        }
        if (!alive || !canEnter(score, minScore, beat)) continue;
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
          if (p < (end[i] ?? 0) && docIds[p] === d)
            score += contribution(weight[i] ?? 0, p, d, termFreqs, docLengths, norms, bm25);
        }
        offer(heap, keys[d] ?? 0, score, minScore, accept);
        if (heap.size === capacity) beat = heap.threshold;
      }
    }
    while (globalEssential < n && !canEnter(globalPrefix[globalEssential] ?? 0, minScore, beat))
      globalEssential++;
    // Every list moves past the window (the non-essential ones may have stopped inside it).
    for (let i = 0; i < n; i++) seek(position, end, docIds, i, windowEnd);
  }
}
