/**
 * SegmentWriter: texts → one segment's raw data. Accumulates documents into flat typed arrays, then lays the postings out term by term (CSR) in
 * `build()`. Adding is O(terms); building is two linear passes (a counting sort by term id).
 *
 * Memory: a posting costs 6 bytes while building (term id + frequency, in fixed-size pages, so growing
 * never copies or doubles), and the built index 5 (document ordinal + frequency, one byte when every
 * frequency is below 256). Words are
 * looked up in a hash table straight from the text (no substring per word), so analysis allocates
 * little more than one normalised copy of each document.
 */

import {
  createWordFilter,
  needsDictionarySegmentation,
  normalizeText,
  resolveAnalyzerOptions,
  segmentWords,
} from "../analyzer.js";
import type { ResolvedAnalyzerOptions } from "../analyzer.js";
import { termFrequencyArray, type SegmentData, type TermFrequencies } from "../core/segment.js";
import { detach } from "../core/term-dictionary.js";
import { hashWord, WordScanner, WordTable } from "../scanner.js";
import { STOP_WORD, UNKNOWN_WORD, type TermCache } from "../term-cache.js";
import type { AnalyzerOptions } from "../types.js";

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

/** Postings are stored in pages of this many entries. */
const PAGE_SHIFT = 18;
const PAGE_SIZE = 1 << PAGE_SHIFT;
const PAGE_MASK = PAGE_SIZE - 1;
/** Frequencies ≥ this are kept in a side map (a u16 page entry holds this value as a marker). */
const BIG_FREQUENCY = 0xffff;

/** How many distinct words the word → term cache holds before it is cleared. */
const WORD_CACHE_LIMIT = 200_000;
const MISSING = -2;

/**
 * Builds one segment's data from texts (local ordinals in the order of `add`, local term ids in order of
 * first occurrence).
 */
export class SegmentWriter {
  /** The analyzer options every `add(text)` (and later every query) uses. */
  readonly analyzerOptions: Readonly<ResolvedAnalyzerOptions>;
  private readonly wordFilter: (word: string) => string | null;
  /** Normalised word → term id, or −1 for a stop word. */
  private readonly words = new WordTable(WORD_CACHE_LIMIT);
  private readonly scanner = new WordScanner();
  private readonly termIds = new Map<string, number>();
  private readonly terms: string[] = [];
  private readonly documentFrequencies = new GrowableUint32();
  private readonly docLengths = new GrowableUint32();
  /** Postings in document order: document d owns [docStarts[d], docStarts[d+1]). */
  private readonly termPages: Uint32Array[] = [];
  private readonly freqPages: Uint16Array[] = [];
  private readonly bigFrequencies = new Map<number, number>();
  private postingCount = 0;
  private readonly docStarts = new GrowableUint32();
  /** Per-term scratch for counting a document's terms: which document last saw it, and how often. */
  private readonly lastSeen = new GrowableUint32();
  private readonly counts = new GrowableUint32();
  /** The current document's term ids. */
  private readonly documentTerms = new GrowableUint32();
  private maxFrequency = 0;

  /** Term slot in the shared cache → local term id + 1 (0: not in this segment yet). */
  private readonly localOfSlot = new GrowableUint32();
  /** Local term id → its slot in the shared cache. */
  private readonly slotOfLocal = new GrowableUint32();
  private readonly cacheGeneration: number;

  /**
   * @param termCache the index's {@link TermCache}, shared by its writes (see there why); it must have
   *   been made for the same analyzer options. Without it, words are analysed afresh for this segment.
   */
  constructor(
    analyzer: AnalyzerOptions = {},
    private readonly termCache?: TermCache,
  ) {
    this.analyzerOptions = resolveAnalyzerOptions(analyzer);
    this.wordFilter = createWordFilter(this.analyzerOptions);
    this.docStarts.push(0);
    termCache?.trim();
    this.cacheGeneration = termCache?.generation ?? 0;
  }

  /** Number of documents added so far; the next document gets this ordinal. */
  get documentCount(): number {
    return this.docLengths.length;
  }

  /** Analyses and adds a document; returns its ordinal. */
  add(text: string): number {
    const { text: normalised, dictionary } = normalizeText(text);
    const ids = this.documentTerms;
    ids.length = 0;
    if (!dictionary) this.scanInto(normalised);
    else {
      for (const line of normalised.split("\n")) {
        if (!needsDictionarySegmentation(line)) {
          this.scanInto(line);
          continue;
        }
        for (const word of segmentWords(line)) {
          const id = this.wordId(word, 0, word.length, hashWord(word));
          if (id >= 0) ids.push(id);
        }
      }
    }
    return this.addTermIds(ids.array, ids.length);
  }

  /**
   * Adds a document given as terms that are used verbatim (no analysis); returns its ordinal. Search such
   * documents with `searchTerms`, or make sure the terms match what the analyzer produces.
   */
  addTerms(terms: readonly string[]): number {
    const ids = this.documentTerms;
    ids.length = 0;
    for (const term of terms) ids.push(this.termId(term));
    return this.addTermIds(ids.array, ids.length);
  }

  /** Sum of the added documents' lengths. */
  get totalLength(): number {
    let total = 0;
    const lengths = this.docLengths.array;
    for (let d = 0; d < this.docLengths.length; d++) total += lengths[d] ?? 0;
    return total;
  }

  /** The documents' lengths, in order of `add`. */
  documentLengths(): Uint32Array {
    return this.docLengths.toArray();
  }

  /** The distinct terms, by local term id. */
  get termList(): readonly string[] {
    return this.terms;
  }

  /** The shared cache's slot of local term `t` (−1 without a cache). */
  termSlot(t: number): number {
    if (this.termCache === undefined) return -1;
    if (this.termCache.generation !== this.cacheGeneration)
      throw new Error("SegmentWriter: the term cache was emptied meanwhile");
    return this.slotOfLocal.array[t] ?? -1;
  }

  /** How many documents hold each local term (indexes past `termList.length` are unused). */
  get termDocumentFrequencies(): Uint32Array {
    return this.documentFrequencies.array;
  }

  /**
   * The segment data of the documents added so far; document i gets key `keys[i]` (ascending).
   * The writer must not be used afterwards (the data shares its term list).
   */
  finish(
    keys: Uint32Array,
    referenceAverageLength: number,
    /** Where the postings go (segment-codec.ts segmentLayout: into the encoded segment's bytes). */
    allocate: (
      postingCount: number,
      maxFrequency: number,
    ) => { docIds: Uint32Array; termFreqs: TermFrequencies } = (count, maxFrequency) => ({
      docIds: new Uint32Array(count),
      termFreqs: termFrequencyArray(count, maxFrequency),
    }),
  ): SegmentData {
    if (keys.length !== this.documentCount) throw new Error("SegmentWriter.finish: one key per document");
    const vocabularySize = this.terms.length;
    const postingCount = this.postingCount;
    const df = this.documentFrequencies.array;

    const termOffsets = new Uint32Array(vocabularySize + 1);
    for (let t = 0; t < vocabularySize; t++) termOffsets[t + 1] = (termOffsets[t] ?? 0) + (df[t] ?? 0);
    const cursor = termOffsets.slice(0, vocabularySize);
    const { docIds, termFreqs } = allocate(postingCount, this.maxFrequency);
    const docStarts = this.docStarts.array;
    const bigFrequencies = this.bigFrequencies;
    // Walking the postings in document order keeps every term's postings sorted by ordinal.
    let d = 0;
    let nextStart = docStarts[1] ?? 0;
    for (let page = 0; page * PAGE_SIZE < postingCount; page++) {
      const terms = this.termPages[page] ?? new Uint32Array(0);
      const freqs = this.freqPages[page] ?? new Uint16Array(0);
      const base = page * PAGE_SIZE;
      const count = Math.min(PAGE_SIZE, postingCount - base);
      for (let k = 0; k < count; k++) {
        const p = base + k;
        while (p >= nextStart) nextStart = docStarts[++d + 1] ?? 0;
        const t = terms[k] ?? 0;
        const slot = cursor[t] ?? 0;
        cursor[t] = slot + 1;
        docIds[slot] = d;
        const tf = freqs[k] ?? 1;
        termFreqs[slot] = tf === BIG_FREQUENCY ? (bigFrequencies.get(p) ?? tf) : tf;
      }
    }
    // Its pages are garbage now: let them go before the caller encodes the segment.
    this.termPages.length = 0;
    this.freqPages.length = 0;
    return {
      keys,
      docLengths: this.docLengths.toArray(),
      terms: this.terms,
      termOffsets,
      docIds,
      termFreqs,
      referenceAverageLength,
    };
  }

  /** Appends the term ids of the words the scanner finds in a normalised text. */
  private scanInto(text: string): void {
    const ids = this.documentTerms;
    const scanner = this.scanner;
    scanner.reset(text);
    while (scanner.next()) {
      const id = this.wordId(text, scanner.start, scanner.end, scanner.hash);
      if (id >= 0) ids.push(id);
    }
    scanner.reset("");
  }

  /** Term id of the word text[start, end) (normalised), −1 for a stop word. */
  private wordId(text: string, start: number, end: number, hash: number): number {
    const cache = this.termCache;
    if (cache !== undefined) {
      let slot = cache.words.get(text, start, end, hash, UNKNOWN_WORD);
      if (slot === UNKNOWN_WORD) {
        const word = text.slice(start, end);
        const term = this.wordFilter(word);
        // The table copies the word's characters; the term is kept, so it must not pin the text.
        slot = term === null ? STOP_WORD : cache.slotOf(detach(term));
        cache.words.set(word, hash, slot);
      }
      return slot === STOP_WORD ? -1 : this.localTerm(slot);
    }
    const known = this.words.get(text, start, end, hash, MISSING);
    if (known !== MISSING) return known;
    const word = text.slice(start, end);
    const term = this.wordFilter(word);
    const id = term === null ? -1 : this.termId(term);
    if (!this.words.set(word, hash, id)) {
      this.words.clear();
      this.words.set(word, hash, id);
    }
    return id;
  }

  /** The local id of the term in the shared cache's `slot`, added to this segment if new. */
  private localTerm(slot: number): number {
    const localOfSlot = this.localOfSlot;
    if (slot >= localOfSlot.length) {
      localOfSlot.reserve(slot + 1);
      localOfSlot.length = Math.max(localOfSlot.length, slot + 1);
    }
    const known = localOfSlot.array[slot] ?? 0;
    if (known > 0) return known - 1;
    const id = this.newTerm((this.termCache as TermCache).terms[slot] ?? "");
    localOfSlot.array[slot] = id + 1;
    this.slotOfLocal.push(slot);
    return id;
  }

  private termId(term: string): number {
    if (this.termCache !== undefined) return this.localTerm(this.termCache.slotOf(detach(term)));
    const id = this.termIds.get(term);
    if (id !== undefined) return id;
    const owned = detach(term);
    const created = this.newTerm(owned);
    this.termIds.set(owned, created);
    return created;
  }

  /** A new local term (a string that pins no larger one). */
  private newTerm(term: string): number {
    const id = this.terms.length;
    this.terms.push(term);
    this.documentFrequencies.push(0);
    this.lastSeen.push(0);
    this.counts.push(0);
    return id;
  }

  private addTermIds(ids: Uint32Array, n: number): number {
    const ordinal = this.docLengths.length;
    const stamp = ordinal + 1; // lastSeen holds ordinal + 1, so 0 means "never"
    const lastSeen = this.lastSeen.array;
    const counts = this.counts.array;
    const df = this.documentFrequencies.array;
    const start = this.postingCount;
    let end = start;
    // First pass: distinct terms in order of first occurrence, with their counts.
    for (let i = 0; i < n; i++) {
      const t = ids[i] ?? 0;
      if (lastSeen[t] !== stamp) {
        lastSeen[t] = stamp;
        counts[t] = 1;
        df[t] = (df[t] ?? 0) + 1;
        const page = end >>> PAGE_SHIFT;
        if (page === this.termPages.length) {
          this.termPages.push(new Uint32Array(PAGE_SIZE));
          this.freqPages.push(new Uint16Array(PAGE_SIZE));
        }
        (this.termPages[page] as Uint32Array)[end & PAGE_MASK] = t;
        end++;
      } else {
        counts[t] = (counts[t] ?? 0) + 1;
      }
    }
    // Second pass: the frequencies.
    for (let p = start; p < end; p++) {
      const page = p >>> PAGE_SHIFT;
      const t = (this.termPages[page] as Uint32Array)[p & PAGE_MASK] ?? 0;
      const tf = counts[t] ?? 1;
      (this.freqPages[page] as Uint16Array)[p & PAGE_MASK] = tf < BIG_FREQUENCY ? tf : BIG_FREQUENCY;
      if (tf >= BIG_FREQUENCY) this.bigFrequencies.set(p, tf);
      if (tf > this.maxFrequency) this.maxFrequency = tf;
    }
    this.postingCount = end;
    this.docLengths.push(n);
    this.docStarts.push(end);
    return ordinal;
  }
}
