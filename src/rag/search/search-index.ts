/**
 * An immutable, searchable index: term dictionary + CSR postings + the precomputed part of the scorer.
 * Built by {@link IndexBuilder} or loaded with {@link SearchIndex.deserialize}.
 */

import {
  createAnalyzer,
  resolveAnalyzerOptions,
  type Analyzer,
  type ResolvedAnalyzerOptions,
} from "./analyzer.js";
import { maxScoreTopK, newMaxScoreScratch, type MaxScoreScratch } from "./maxscore.js";
import {
  bm25MaxImpact,
  prepareBm25,
  prepareTfidf,
  resolveBm25,
  SCORER_NAMES,
  sublinearTf,
  type IndexData,
  type ScoringModel,
} from "./scoring.js";
import { decodeIndex, encodeIndex } from "./serialization.js";
import { TopK } from "./topk.js";
import type { Bm25Parameters, ScorerName, SearchHit, SearchIndexOptions, SearchOptions } from "./types.js";

/** {@link SearchIndexOptions} with every default filled in, as stored with the index. */
export interface ResolvedSearchIndexOptions {
  readonly scorer: ScorerName;
  /** The BM25 parameters (resolved even for tfidf indexes, where they are unused). */
  readonly bm25: Readonly<Bm25Parameters>;
  readonly analyzer: Readonly<ResolvedAnalyzerOptions>;
}

export function resolveIndexOptions(options: SearchIndexOptions): ResolvedSearchIndexOptions {
  if (options === null || typeof options !== "object") throw new TypeError("index options must be an object");
  if (!SCORER_NAMES.includes(options.scorer)) {
    throw new RangeError(
      `unknown scorer ${JSON.stringify(options.scorer)}; use one of ${SCORER_NAMES.join(", ")}`,
    );
  }
  return {
    scorer: options.scorer,
    bm25: resolveBm25(options.bm25),
    analyzer: resolveAnalyzerOptions(options.analyzer),
  };
}

/**
 * Queries with more distinct terms than this are scored exhaustively: pruning needs a window of
 * per-term contributions, and such long queries rarely prune well.
 */
const MAX_PRUNED_TERMS = 64;

/**
 * Below this many postings (summed over the query terms) scoring them all term-at-a-time costs well
 * under a tenth of a millisecond, and pruning's per-window bookkeeping cannot win: such queries are
 * scored exhaustively unless pruning is asked for (`exhaustive: false`).
 */
const PRUNING_MIN_POSTINGS = 16_384;

/** Per-search scratch space, reused between searches (N floats + N ordinals). */
interface Scratch {
  readonly accumulators: Float64Array;
  readonly touched: Uint32Array;
}

export class SearchIndex {
  readonly options: ResolvedSearchIndexOptions;
  private readonly data: IndexData;
  private readonly termIds: Map<string, number>;
  private readonly model: ScoringModel;
  private readonly analyzer: Analyzer;
  private scratch: Scratch | undefined;
  private pruningScratch: MaxScoreScratch | undefined;
  private searching = false;

  /**
   * Use {@link IndexBuilder.build} or {@link SearchIndex.deserialize}; this constructor is internal.
   * `termIds` may be passed when the caller already has the term → id map.
   */
  constructor(options: SearchIndexOptions, data: IndexData, termIds?: Map<string, number>) {
    this.options = resolveIndexOptions(options);
    validateData(data);
    this.data = data;
    if (termIds === undefined) {
      termIds = new Map();
      for (let t = 0; t < data.terms.length; t++) termIds.set(data.terms[t] ?? "", t);
    }
    if (termIds.size !== data.terms.length)
      throw new Error("search index: duplicate terms in the dictionary");
    this.termIds = termIds;
    this.model = this.options.scorer === "bm25" ? prepareBm25(data, this.options.bm25) : prepareTfidf(data);
    this.analyzer = createAnalyzer(this.options.analyzer);
  }

  get scorer(): ScorerName {
    return this.options.scorer;
  }

  /** Number of documents (ordinals are 0 … documentCount − 1). */
  get documentCount(): number {
    return this.data.docLengths.length;
  }

  /** Number of distinct terms. */
  get vocabularySize(): number {
    return this.data.terms.length;
  }

  /** Number of (term, document) pairs. */
  get postingCount(): number {
    return this.data.docIds.length;
  }

  /** How many documents contain `term` (an analysed term, e.g. from {@link SearchIndex.analyze}). */
  documentFrequency(term: string): number {
    const t = this.termIds.get(term);
    return t === undefined ? 0 : (this.data.termOffsets[t + 1] ?? 0) - (this.data.termOffsets[t] ?? 0);
  }

  /** Analyses text exactly as queries (and documents added with `add`) are analysed. */
  analyze(text: string): string[] {
    return this.analyzer(text);
  }

  /**
   * Ranks documents for a free-text query (analysed with the index's analyzer). Every document that
   * contains at least one query term is a candidate. Returns at most `topK` hits, best first; equal
   * scores are ordered by ordinal. An empty query, or one made only of stop words or unknown terms,
   * returns [].
   */
  search(query: string, options: SearchOptions): SearchHit[] {
    return this.searchTerms(this.analyzer(query), options);
  }

  /** Like {@link SearchIndex.search} for already analysed terms (repeats count as query term frequency). */
  searchTerms(terms: readonly string[], options: SearchOptions): SearchHit[] {
    const { topK, minScore, accept, exhaustive } = validateSearchOptions(options);
    const queryTerms = new Map<number, number>(); // term id → query term frequency
    for (const term of terms) {
      const t = this.termIds.get(term);
      if (t !== undefined) queryTerms.set(t, (queryTerms.get(t) ?? 0) + 1);
    }
    const documentCount = this.documentCount;
    if (queryTerms.size === 0 || documentCount === 0) return [];

    // Per-term query weights, including the query-side normalisation, so that the accumulated sums
    // are already normalised scores.
    const ids: number[] = [];
    const weights: number[] = [];
    const model = this.model;
    if (model.kind === "tfidf") {
      let squaredNorm = 0;
      for (const [t, qtf] of queryTerms) {
        const idf = model.idf[t] ?? 0;
        const q = sublinearTf(qtf) * idf;
        squaredNorm += q * q;
        ids.push(t);
        weights.push(q * idf); // q_t · idf_t; the document side adds (1 + ln tf) and 1/‖d‖
      }
      const inverse = 1 / Math.sqrt(squaredNorm);
      for (let i = 0; i < weights.length; i++) weights[i] = (weights[i] ?? 0) * inverse;
    } else {
      let bound = 0;
      for (const [t, qtf] of queryTerms) bound += qtf * bm25MaxImpact(model, t);
      for (const [t, qtf] of queryTerms) {
        ids.push(t);
        weights.push((qtf * (model.idf[t] ?? 0) * (model.k1 + 1)) / bound);
      }
    }

    let prune = exhaustive === false && ids.length <= MAX_PRUNED_TERMS;
    if (exhaustive === undefined && ids.length <= MAX_PRUNED_TERMS) {
      // Automatic: prune when there are enough postings for it to pay.
      let postings = 0;
      const { termOffsets } = this.data;
      for (const t of ids) postings += (termOffsets[t + 1] ?? 0) - (termOffsets[t] ?? 0);
      prune = postings > PRUNING_MIN_POSTINGS;
    }
    if (prune) {
      // A nested search (from `accept`) gets its own buffers.
      const reentrant = this.searching;
      const scratch = reentrant ? newMaxScoreScratch() : (this.pruningScratch ??= newMaxScoreScratch());
      this.searching = true;
      try {
        return maxScoreTopK(this.data, model, ids, weights, topK, minScore, accept, scratch);
      } catch (error) {
        // An exception from `accept` can leave partial sums behind: start the next search afresh.
        if (!reentrant) this.pruningScratch = undefined;
        throw error;
      } finally {
        if (!reentrant) this.searching = false;
      }
    }

    // Term-at-a-time accumulation. Every contribution is > 0, so a zero accumulator means "untouched".
    const reentrant = this.searching;
    const scratch = reentrant ? newScratch(documentCount) : (this.scratch ??= newScratch(documentCount));
    const { accumulators, touched } = scratch;
    const { termOffsets, docIds, termFreqs } = this.data;
    let touchedCount = 0;
    this.searching = true;
    try {
      for (let i = 0; i < ids.length; i++) {
        const t = ids[i] ?? 0;
        const weight = weights[i] ?? 0;
        const end = termOffsets[t + 1] ?? 0;
        if (model.kind === "tfidf") {
          for (let p = termOffsets[t] ?? 0; p < end; p++) {
            const d = docIds[p] ?? 0;
            const previous = accumulators[d] ?? 0;
            if (previous === 0) touched[touchedCount++] = d;
            accumulators[d] = previous + weight * sublinearTf(termFreqs[p] ?? 1);
          }
        } else {
          const lengthNorms = model.lengthNorms;
          for (let p = termOffsets[t] ?? 0; p < end; p++) {
            const d = docIds[p] ?? 0;
            const tf = termFreqs[p] ?? 1;
            const previous = accumulators[d] ?? 0;
            if (previous === 0) touched[touchedCount++] = d;
            accumulators[d] = previous + (weight * tf) / (tf + (lengthNorms[d] ?? 0));
          }
        }
      }

      // Top-k collection. `accept` (possibly costly) is only asked about hits that would get in.
      const heap = new TopK(Math.min(topK, touchedCount) || 1);
      const inverseNorms = model.kind === "tfidf" ? model.inverseNorms : undefined;
      for (let i = 0; i < touchedCount; i++) {
        const d = touched[i] ?? 0;
        let score = accumulators[d] ?? 0;
        if (inverseNorms !== undefined) score *= inverseNorms[d] ?? 0;
        // Rounding can push a perfect match a few ulps past 1.
        if (score > 1) score = 1;
        if (score < minScore || !heap.wouldAccept(d, score)) continue;
        if (accept !== undefined && !accept(d)) continue;
        heap.offer(d, score);
      }
      return heap.drain();
    } finally {
      for (let i = 0; i < touchedCount; i++) accumulators[touched[i] ?? 0] = 0;
      if (!reentrant) this.searching = false;
    }
  }

  /**
   * The same documents and postings ranked by another scorer (or other BM25 parameters): only the
   * scorer's precomputed part is made (one pass over the postings); the postings are shared, not copied.
   * The analyzer cannot change (the postings were made with it).
   */
  withScorer(options: Omit<SearchIndexOptions, "analyzer">): SearchIndex {
    return new SearchIndex({ ...options, analyzer: this.options.analyzer }, this.data, this.termIds);
  }

  /** Compact binary form (little-endian, versioned); load it with {@link SearchIndex.deserialize}. */
  serialize(): Uint8Array {
    return encodeIndex(this.options, this.data);
  }

  /** Loads an index written by {@link SearchIndex.serialize}; searches give identical results. */
  static deserialize(bytes: Uint8Array): SearchIndex {
    const { options, data } = decodeIndex(bytes);
    return new SearchIndex(options, data);
  }
}

function newScratch(documentCount: number): Scratch {
  return { accumulators: new Float64Array(documentCount), touched: new Uint32Array(documentCount) };
}

function validateSearchOptions(
  options: SearchOptions,
): Required<Omit<SearchOptions, "accept" | "exhaustive">> & Pick<SearchOptions, "accept" | "exhaustive"> {
  if (options === null || typeof options !== "object")
    throw new TypeError("search options must be an object");
  const { topK, minScore = 0, accept, exhaustive } = options;
  if (!Number.isInteger(topK) || topK < 1)
    throw new RangeError(`topK must be an integer ≥ 1, got ${String(topK)}`);
  if (typeof minScore !== "number" || Number.isNaN(minScore)) {
    throw new RangeError(`minScore must be a number, got ${String(minScore)}`);
  }
  if (accept !== undefined && typeof accept !== "function") throw new TypeError("accept must be a function");
  if (exhaustive !== undefined && typeof exhaustive !== "boolean")
    throw new TypeError("exhaustive must be a boolean");
  return { topK, minScore, accept, exhaustive };
}

function validateData(data: IndexData): void {
  const { terms, termOffsets, docIds, termFreqs } = data;
  if (termOffsets.length !== terms.length + 1)
    throw new Error("search index: term offsets do not match terms");
  if (docIds.length !== termFreqs.length) throw new Error("search index: postings arrays differ in length");
  if ((termOffsets[0] ?? 0) !== 0 || (termOffsets[terms.length] ?? 0) !== docIds.length) {
    throw new Error("search index: term offsets do not span the postings");
  }
}
