/**
 * Accumulates documents into flat typed arrays, then lays the postings out term by term (CSR) in
 * `build()`. Adding is O(terms); building is two linear passes (a counting sort by term id).
 */

import { createWordFilter, resolveAnalyzerOptions, sameAnalyzerOptions, tokenize } from "./analyzer.js";
import type { ResolvedAnalyzerOptions } from "./analyzer.js";
import type { IndexData } from "./scoring.js";
import { SearchIndex } from "./search-index.js";
import type { AnalyzerOptions, SearchIndexOptions } from "./types.js";

/** A Uint32Array that grows by doubling. */
class GrowableUint32 {
  array: Uint32Array;
  length = 0;

  constructor(capacity = 1024) {
    this.array = new Uint32Array(capacity);
  }

  push(value: number): void {
    if (this.length === this.array.length) this.reserve(this.length + 1);
    this.array[this.length++] = value;
  }

  /** Ensures capacity for `size` elements (new elements are 0). */
  reserve(size: number): void {
    if (size <= this.array.length) return;
    const next = new Uint32Array(Math.max(size, this.array.length * 2));
    next.set(this.array.subarray(0, this.length));
    this.array = next;
  }

  /** A right-sized copy. */
  toArray(): Uint32Array {
    return this.array.slice(0, this.length);
  }
}

/** Bounded memo of word → term id (−1 for stop words); cleared when full. */
const WORD_CACHE_LIMIT = 200_000;

/**
 * Builds a {@link SearchIndex}.
 *
 * @example
 * const builder = new IndexBuilder();
 * builder.add("Cats purr when content");   // ordinal 0
 * builder.add("Dogs bark at the postman"); // ordinal 1
 * const index = builder.build({ scorer: "bm25" });
 * index.search("barking dog", { topK: 5 }); // → [{ ordinal: 1, score: 1 }]
 */
export class IndexBuilder {
  /** The analyzer options every `add(text)` (and later every query) uses. */
  readonly analyzerOptions: Readonly<ResolvedAnalyzerOptions>;
  private readonly wordFilter: (word: string) => string | null;
  private readonly wordCache = new Map<string, number>();
  private readonly termIds = new Map<string, number>();
  private readonly terms: string[] = [];
  private readonly documentFrequencies = new GrowableUint32();
  private readonly docLengths = new GrowableUint32();
  /** Postings in document order: document d owns [docStarts[d], docStarts[d+1]). */
  private readonly postingTerms = new GrowableUint32(1 << 16);
  private readonly postingFreqs = new GrowableUint32(1 << 16);
  private readonly docStarts = new GrowableUint32();
  /** Per-term scratch for counting a document's terms: which document last saw it, and how often. */
  private readonly lastSeen = new GrowableUint32();
  private readonly counts = new GrowableUint32();
  private maxFrequency = 0;

  constructor(analyzer: AnalyzerOptions = {}) {
    this.analyzerOptions = resolveAnalyzerOptions(analyzer);
    this.wordFilter = createWordFilter(this.analyzerOptions);
    this.docStarts.push(0);
  }

  /** Number of documents added so far; the next document gets this ordinal. */
  get documentCount(): number {
    return this.docLengths.length;
  }

  /** Analyses and adds a document; returns its ordinal. */
  add(text: string): number {
    const words = tokenize(text);
    const ids = new Uint32Array(words.length);
    let n = 0;
    for (const word of words) {
      let id = this.wordCache.get(word);
      if (id === undefined) {
        const term = this.wordFilter(word);
        id = term === null ? -1 : this.termId(term);
        if (this.wordCache.size >= WORD_CACHE_LIMIT) this.wordCache.clear();
        this.wordCache.set(word, id);
      }
      if (id >= 0) ids[n++] = id;
    }
    return this.addTermIds(ids, n);
  }

  /**
   * Adds a document given as terms that are used verbatim (no analysis); returns its ordinal. Search such
   * documents with `searchTerms`, or make sure the terms match what the analyzer produces.
   */
  addTerms(terms: readonly string[]): number {
    const ids = new Uint32Array(terms.length);
    for (let i = 0; i < terms.length; i++) ids[i] = this.termId(terms[i] ?? "");
    return this.addTermIds(ids, ids.length);
  }

  /**
   * Creates an index of the documents added so far. The builder is left unchanged: it can take more
   * documents and build again (e.g. one index per scorer).
   */
  build(options: SearchIndexOptions): SearchIndex {
    if (options.analyzer !== undefined && !sameAnalyzerOptions(options.analyzer, this.analyzerOptions)) {
      throw new Error("build(): options.analyzer differs from the analyzer the builder was created with");
    }
    const vocabularySize = this.terms.length;
    const documentCount = this.docLengths.length;
    const postingCount = this.postingTerms.length;
    const df = this.documentFrequencies.array;

    const termOffsets = new Uint32Array(vocabularySize + 1);
    for (let t = 0; t < vocabularySize; t++) termOffsets[t + 1] = (termOffsets[t] ?? 0) + (df[t] ?? 0);
    const cursor = termOffsets.slice(0, vocabularySize);
    const docIds = new Uint32Array(postingCount);
    const termFreqs =
      this.maxFrequency <= 0xffff ? new Uint16Array(postingCount) : new Uint32Array(postingCount);
    const postingTerms = this.postingTerms.array;
    const postingFreqs = this.postingFreqs.array;
    const docStarts = this.docStarts.array;
    // Walking documents in order keeps every term's postings sorted by ordinal.
    for (let d = 0; d < documentCount; d++) {
      const end = docStarts[d + 1] ?? 0;
      for (let p = docStarts[d] ?? 0; p < end; p++) {
        const t = postingTerms[p] ?? 0;
        const slot = cursor[t] ?? 0;
        cursor[t] = slot + 1;
        docIds[slot] = d;
        termFreqs[slot] = postingFreqs[p] ?? 1;
      }
    }
    const data: IndexData = {
      terms: this.terms.slice(),
      docLengths: this.docLengths.toArray(),
      termOffsets,
      docIds,
      termFreqs,
    };
    return new SearchIndex({ ...options, analyzer: this.analyzerOptions }, data, new Map(this.termIds));
  }

  private termId(term: string): number {
    let id = this.termIds.get(term);
    if (id === undefined) {
      id = this.terms.length;
      this.terms.push(term);
      this.termIds.set(term, id);
      this.documentFrequencies.push(0);
      this.lastSeen.push(0);
      this.counts.push(0);
    }
    return id;
  }

  private addTermIds(ids: Uint32Array, n: number): number {
    const ordinal = this.docLengths.length;
    const stamp = ordinal + 1; // lastSeen holds ordinal + 1, so 0 means "never"
    const lastSeen = this.lastSeen.array;
    const counts = this.counts.array;
    const df = this.documentFrequencies.array;
    const start = this.postingTerms.length;
    for (let i = 0; i < n; i++) {
      const t = ids[i] ?? 0;
      if (lastSeen[t] !== stamp) {
        lastSeen[t] = stamp;
        counts[t] = 1;
        df[t] = (df[t] ?? 0) + 1;
        this.postingTerms.push(t);
      } else {
        counts[t] = (counts[t] ?? 0) + 1;
      }
    }
    const end = this.postingTerms.length;
    const postingTerms = this.postingTerms.array;
    this.postingFreqs.reserve(end);
    const freqs = this.postingFreqs.array;
    for (let p = start; p < end; p++) {
      const tf = counts[postingTerms[p] ?? 0] ?? 1;
      freqs[p] = tf;
      if (tf > this.maxFrequency) this.maxFrequency = tf;
    }
    this.postingFreqs.length = end;
    this.docLengths.push(n);
    this.docStarts.push(end);
    return ordinal;
  }
}
