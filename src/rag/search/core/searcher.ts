/**
 * Top-k search over all segments of an index with the index-wide live statistics. One heap is shared by
 * the segments, so θ (the score a newcomer must beat) carries from one segment to the next; each segment
 * is searched either exhaustively (term-at-a-time) or with MaxScore pruning (`maxscore.ts`).
 *
 * Every document's score is `Σ_i w_i · factor_i` summed in query-term order from 0, with
 * `w_i = weight_i / U(q)`, whatever the path or the segment layout: scores are bitwise reproducible.
 */

import { boundScale, sublinearTf, termWeight, type ScorerParameters } from "../scoring.js";
import { TopK } from "../topk.js";
import type { SearchHit } from "../types.js";
import { maxScoreSegment, newMaxScoreScratch, SLACK, type MaxScoreScratch } from "./maxscore.js";
import type { Segment } from "./segment.js";
import type { TermDictionary } from "./term-dictionary.js";

/** Queries with more distinct terms than this are scored exhaustively (pruning rarely pays for them). */
const MAX_PRUNED_TERMS = 64;

/**
 * Below this many postings (summed over the query terms) scoring them all costs well under a tenth of a
 * millisecond and pruning's bookkeeping cannot win: such queries are scored exhaustively unless pruning
 * is asked for (`exhaustive: false`).
 */
export const PRUNING_MIN_POSTINGS = 16_384;

/** What a search needs from the index. */
export interface SearchContext {
  readonly scorer: ScorerParameters;
  readonly segments: readonly Segment[];
  readonly dictionary: TermDictionary;
  readonly liveDocumentCount: number;
  readonly averageLength: number;
  /** Length norms at `averageLength` for every dl any segment holds. */
  readonly norms: Float64Array;
}

export interface ResolvedSearchOptions {
  readonly topK: number;
  readonly minScore: number;
  readonly accept: ((key: number) => boolean) | undefined;
  readonly exhaustive: boolean | undefined;
}

/** Per-search buffers, reused between searches (a nested search from `accept` allocates its own). */
export class SearchScratch {
  accumulators = new Float64Array(0);
  touched = new Uint32Array(0);
  readonly pruning: MaxScoreScratch = newMaxScoreScratch();
  /**
   * The (segment, query term) pairs of a search, segment by segment: local term, query-term slot and
   * exact live max factor. Typed and reused, so that a query over many segments allocates nothing per
   * segment.
   */
  pairTerms = new Int32Array(256);
  pairSlots = new Int32Array(256);
  pairMaxima = new Float64Array(256);
  /** Segments holding a query term (indices into the context's segments) and their first pair. */
  segmentIndices = new Int32Array(32);
  segmentFirstPair = new Int32Array(32);
  segmentPairCount = new Int32Array(32);

  reserve(documentCount: number): void {
    if (this.accumulators.length < documentCount) {
      this.accumulators = new Float64Array(documentCount);
      this.touched = new Uint32Array(documentCount);
    }
  }

  reservePairs(pairs: number, segments: number): void {
    if (this.pairTerms.length < pairs) {
      this.pairTerms = new Int32Array(pairs);
      this.pairSlots = new Int32Array(pairs);
      this.pairMaxima = new Float64Array(pairs);
    }
    if (this.segmentIndices.length < segments) {
      this.segmentIndices = new Int32Array(segments);
      this.segmentFirstPair = new Int32Array(segments);
      this.segmentPairCount = new Int32Array(segments);
    }
  }
}

/**
 * A query: its analysed terms, repeats counting as query term frequency, or (`boosted`) each distinct
 * term with a boost that multiplies its weight at qtf 1, as Lucene's `BoostQuery` over a `TermQuery`
 * does (RM3's expanded queries). Either way the first occurrence of a term fixes its summation order.
 */
export type QueryTerms =
  | { readonly boosted: false; readonly terms: readonly string[] }
  | { readonly boosted: true; readonly terms: ReadonlyMap<string, number> };

export function searchSegments(
  context: SearchContext,
  query: QueryTerms,
  options: ResolvedSearchOptions,
  scratch: SearchScratch,
): SearchHit[] {
  const { scorer, segments, dictionary, liveDocumentCount, norms } = context;
  const { topK, minScore, accept, exhaustive } = options;
  if (liveDocumentCount === 0 || !(context.averageLength > 0)) return [];
  let queryFrequencies: ReadonlyMap<string, number>;
  if (query.boosted) queryFrequencies = query.terms;
  else {
    const counts = new Map<string, number>(); // first-occurrence order fixes the summation order
    for (const term of query.terms) counts.set(term, (counts.get(term) ?? 0) + 1);
    queryFrequencies = counts;
  }
  const termIds: number[] = [];
  const weights: number[] = [];
  // Live postings of the query terms: decides the path (either gives the same hits).
  let postings = 0;
  for (const [term, qtfOrBoost] of queryFrequencies) {
    const id = dictionary.idOf(term);
    if (id === undefined) continue;
    const df = dictionary.documentFrequency(id);
    if (df === 0) continue;
    termIds.push(id);
    weights.push(
      query.boosted
        ? qtfOrBoost * termWeight(scorer, 1, liveDocumentCount, df)
        : termWeight(scorer, qtfOrBoost, liveDocumentCount, df),
    );
    postings += df;
  }
  const n = termIds.length;
  if (n === 0) return [];
  const bm25 = scorer.kind === "bm25";

  // Per segment, the local terms and their exact live max factors; globally, the max per term.
  scratch.reservePairs(segments.length * n, segments.length);
  const { pairTerms, pairSlots, pairMaxima, segmentIndices, segmentFirstPair, segmentPairCount } = scratch;
  const globalMax = new Float64Array(n);
  let pairs = 0;
  let visited = 0;
  for (let s = 0; s < segments.length; s++) {
    const segment = segments[s] as Segment;
    const first = pairs;
    for (let i = 0; i < n; i++) {
      const t = segment.localTerm(termIds[i] ?? 0);
      if (t < 0) continue;
      const max = segment.liveMaxFactor(t, bm25, norms);
      if (max === 0) continue; // every posting deleted
      pairTerms[pairs] = t;
      pairSlots[pairs] = i;
      pairMaxima[pairs] = max;
      pairs++;
      if (max > (globalMax[i] ?? 0)) globalMax[i] = max;
    }
    if (pairs > first) {
      // Largest segments first (insertion sort: few segments): θ rises early, so the smaller ones prune
      // more. (The heap's order is total, so the order of the segments cannot change the hits.)
      const count = segment.documentCount;
      let k = visited++;
      while (k > 0 && (segments[segmentIndices[k - 1] ?? 0]?.documentCount ?? 0) < count) {
        segmentIndices[k] = segmentIndices[k - 1] ?? 0;
        segmentFirstPair[k] = segmentFirstPair[k - 1] ?? 0;
        segmentPairCount[k] = segmentPairCount[k - 1] ?? 0;
        k--;
      }
      segmentIndices[k] = s;
      segmentFirstPair[k] = first;
      segmentPairCount[k] = pairs - first;
    }
  }
  let bound = 0;
  for (let i = 0; i < n; i++) bound += (weights[i] ?? 0) * (globalMax[i] ?? 0);
  const normalised = new Float64Array(n);
  for (let i = 0; i < n; i++) normalised[i] = (weights[i] ?? 0) / bound;

  const prune =
    n <= MAX_PRUNED_TERMS &&
    (exhaustive === false || (exhaustive === undefined && postings > PRUNING_MIN_POSTINGS));
  // A segment whose best possible score cannot get in is skipped whole, unless exhaustive scoring was
  // asked for (the reference path stays plain).
  const skipSegments = exhaustive !== true;
  const heap = new TopK(Math.max(1, Math.min(topK, liveDocumentCount)));
  const { pruning } = scratch;
  for (let v = 0; v < visited; v++) {
    const segment = segments[segmentIndices[v] ?? 0] as Segment;
    const first = segmentFirstPair[v] ?? 0;
    const count = segmentPairCount[v] ?? 0;
    let segmentBound = 0;
    for (let j = first; j < first + count; j++) {
      segmentBound += (normalised[pairSlots[j] ?? 0] ?? 0) * (pairMaxima[j] ?? 0);
    }
    if (skipSegments) {
      const inflated = segmentBound * SLACK;
      if (inflated < minScore || !(inflated > heap.threshold)) continue;
    }
    if (prune) {
      const { terms: localTerms, weights: segmentWeights, maxFactors } = pruning;
      for (let j = 0; j < count; j++) {
        localTerms[j] = pairTerms[first + j] ?? 0;
        segmentWeights[j] = normalised[pairSlots[first + j] ?? 0] ?? 0;
        maxFactors[j] = pairMaxima[first + j] ?? 0;
      }
      const blockScale = boundScale(scorer, context.averageLength, segment.referenceAverageLength);
      maxScoreSegment(segment, count, blockScale, bm25, norms, heap, minScore, accept, pruning);
    } else {
      exhaustiveSegment(segment, first, count, normalised, bm25, norms, heap, minScore, accept, scratch);
    }
  }
  return heap.drain();
}

/** Term-at-a-time: every live posting of every query term is scored. */
function exhaustiveSegment(
  segment: Segment,
  firstPair: number,
  pairCount: number,
  normalised: Float64Array,
  bm25: boolean,
  norms: Float64Array,
  heap: TopK,
  minScore: number,
  accept: ((key: number) => boolean) | undefined,
  scratch: SearchScratch,
): void {
  scratch.reserve(segment.documentCount);
  const { accumulators, touched } = scratch;
  const { termOffsets, docIds, termFreqs, docLengths, keys } = segment;
  const deletedBits = segment.live.deletedBits;
  let touchedCount = 0;
  try {
    // Every contribution is > 0, so a zero accumulator means "untouched".
    const { pairTerms, pairSlots } = scratch;
    for (let j = firstPair; j < firstPair + pairCount; j++) {
      const t = pairTerms[j] ?? 0;
      const w = normalised[pairSlots[j] ?? 0] ?? 0;
      const end = termOffsets[t + 1] ?? 0;
      for (let p = termOffsets[t] ?? 0; p < end; p++) {
        const d = docIds[p] ?? 0;
        if (deletedBits !== null && ((deletedBits[d >>> 5] ?? 0) & (1 << (d & 31))) !== 0) continue;
        const tf = termFreqs[p] ?? 1;
        const norm = norms[docLengths[d] ?? 0] ?? 1;
        const previous = accumulators[d] ?? 0;
        if (previous === 0) touched[touchedCount++] = d;
        accumulators[d] = previous + w * (bm25 ? tf / (tf + norm) : sublinearTf(tf) / norm);
      }
    }
    // `accept` (possibly costly) is only asked about hits that would get in.
    for (let j = 0; j < touchedCount; j++) {
      const d = touched[j] ?? 0;
      let score = accumulators[d] ?? 0;
      if (score > 1) score = 1; // rounding can push a perfect match a few ulps past 1
      const key = keys[d] ?? 0;
      if (score < minScore || !heap.wouldAccept(key, score)) continue;
      if (accept !== undefined && !accept(key)) continue;
      heap.offer(key, score);
    }
  } finally {
    for (let j = 0; j < touchedCount; j++) accumulators[touched[j] ?? 0] = 0;
  }
}
