/**
 * SegmentedIndex: an ordered set of immutable segments, a tombstone bitset per segment, and the
 * collection statistics over live documents only (live count, total length, live df per term), kept
 * incrementally so that scores and ranking are exactly those of a fresh build over the live documents.
 *
 * Changes come from an {@link IndexWriter} (a batch: one new segment + tombstones), from a committed
 * merge ({@link SegmentedIndex.prepareMerge}) or from a replica catch-up ({@link SegmentedIndex.applyChanges}).
 *
 * Files. Segments whose vector codes went to the index's Directory hold a file each, released when the
 * segment can no longer be read: when a merge or a catch-up drops it (every search reads the segments
 * the index holds at that moment, in one synchronous call, so none reads a dropped one), or when the
 * index itself is closed by its owner and released by every reader that acquired it (Lucene's
 * SearcherManager acquire/release, reference counted).
 */
import type { Directory } from "../directory.js";

import {
  createAnalyzer,
  resolveAnalyzerOptions,
  type Analyzer,
  type ResolvedAnalyzerOptions,
} from "../analyzer.js";
import {
  resolveBm25,
  SCORER_NAMES,
  tabulateLengthNorms,
  type LengthNorms,
  type ScorerParameters,
} from "../scoring.js";
import type {
  Bm25Parameters,
  DenseSearchOptions,
  VectorIndexOptions,
  VectorStats,
  IndexState,
  ScorerName,
  SearchHit,
  SearchIndexOptions,
  SearchOptions,
  SegmentInfo,
  StoredSegment,
  Tombstone,
} from "../types.js";
import { decodeSegmentVectors, resolveVectorOptions, searchDense, vectorStatsOf } from "./dense.js";
import { prepareMerge, type MergeResult, type PreparedMerge } from "./merge-commit.js";
import { decodeStoredSegment, type StoredTerms } from "./segment-codec.js";
import { deriveLookup, Segment, type PostingsDerived, type SegmentData } from "./segment.js";
import { LiveDocs } from "./live-docs.js";
import { searchSegments, SearchScratch, type QueryTerms, type ResolvedSearchOptions } from "./searcher.js";
import { TermCache } from "../term-cache.js";
import { TermDictionary } from "./term-dictionary.js";
import type { SegmentVectors } from "../vectors/segment-vectors.js";

/** What a catch-up decodes of a stored segment besides its postings. */
interface DecodedExtras {
  deleted: number[];
  byteLength: number;
  vectors: SegmentVectors | null;
}

/** {@link SearchIndexOptions} with every default filled in. */
export interface ResolvedSearchIndexOptions {
  readonly scorer: ScorerName;
  /** The BM25 parameters (resolved even for tfidf indexes, where they are unused). */
  readonly bm25: Readonly<Bm25Parameters>;
  readonly analyzer: Readonly<ResolvedAnalyzerOptions>;
  /** The index's vectors (null: lexical only). */
  readonly vectors: Readonly<VectorIndexOptions> | null;
  /** Where vector codes of segments with a graph go (null: memory). */
  readonly directory: Directory | null;
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
    vectors: resolveVectorOptions(options.vectors),
    directory: resolveDirectory(options.directory),
  };
}

function resolveDirectory(directory: Directory | undefined): Directory | null {
  if (directory === undefined) return null;
  if (typeof (directory as Partial<Directory> | null)?.create !== "function")
    throw new TypeError("directory must be a Directory (directory.ts)");
  return directory;
}

/** A reader's hold on an index, from `SegmentedIndex.acquire` until `release` (idempotent). */
export interface IndexLease {
  release(): void;
}

function validateState(state: IndexState): IndexState {
  const { nextKey, nextSegmentId } = state;
  for (const [name, value] of [
    ["nextKey", nextKey],
    ["nextSegmentId", nextSegmentId],
  ] as const) {
    if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
      throw new RangeError(`index state: ${name} must be a u32, got ${String(value)}`);
    }
  }
  return { nextKey, nextSegmentId };
}

function validateSearchOptions(options: SearchOptions): ResolvedSearchOptions {
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

/** A document to delete, found and checked (see `IndexWriter`). */
export interface DocumentDeletion {
  readonly segment: Segment;
  readonly ordinal: number;
  /** Its local terms in the segment and their frequencies. */
  readonly localTerms: readonly number[];
  readonly frequencies: readonly number[];
}

export class SegmentedIndex {
  readonly options: ResolvedSearchIndexOptions;
  /** @internal The index-wide term table. */
  readonly dictionary = new TermDictionary();
  /** @internal What the analyzer made of the words this index's writes met (see `TermCache`). */
  readonly termCache = new TermCache();
  /** @internal What the scorer maths need. */
  readonly scorerParameters: ScorerParameters;
  private segmentList: Segment[] = [];
  private live = 0;
  private deleted = 0;
  private total = 0;
  private postings = 0;
  private counters: IndexState = { nextKey: 0, nextSegmentId: 0 };
  /** @internal Bumped by every change; prepared writes and merges check it. */
  version = 0;
  private readonly analyzer: Analyzer;
  private norms: LengthNorms | undefined;
  private maxDocumentLength = 0;
  private scratch: SearchScratch | undefined;
  private searching = false;
  /** The owner (until `close`) and each reader holding a lease: at 0, every segment's files go. */
  private holders = 1;
  private ownerClosed = false;

  private constructor(options: SearchIndexOptions) {
    this.options = resolveIndexOptions(options);
    this.scorerParameters = {
      kind: this.options.scorer,
      k1: this.options.bm25.k1,
      b: this.options.bm25.b,
    };
    this.analyzer = createAnalyzer(this.options.analyzer);
  }

  /** An empty index. */
  static create(options: SearchIndexOptions): SegmentedIndex {
    return new SegmentedIndex(options);
  }

  /**
   * From persisted segments (in the given order) and their tombstoned ordinals. Segment bytes that are
   * 4-byte aligned are used in place, not copied (halves the memory a load needs): do not change them.
   */
  static load(
    options: SearchIndexOptions,
    segments: ReadonlyArray<StoredSegment>,
    state: IndexState,
  ): SegmentedIndex {
    const index = new SegmentedIndex(options);
    index.applyChanges({ addSegments: segments, removeSegmentIds: [], tombstones: [], state });
    return index;
  }

  get scorer(): ScorerName {
    return this.options.scorer;
  }

  /**
   * Holds the index for a reader (a query that searches it across awaits): its segments' files stay
   * open until the lease is released, even if the owner closes the index meanwhile (a cache that
   * replaced it with a newer load). Throws on an index already closed and released.
   */
  acquire(): IndexLease {
    if (this.holders === 0) throw new Error("the index is closed");
    this.holders++;
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        this.drop();
      },
    };
  }

  /**
   * The owner lets go of the index (idempotent): its files are released now, or when the last reader
   * releases its lease. A closed index must not be searched afterwards by anyone but those readers.
   */
  close(): void {
    if (this.ownerClosed) return;
    this.ownerClosed = true;
    this.drop();
  }

  /** Whether the owner closed the index and no reader holds it: its files are released. */
  get released(): boolean {
    return this.holders === 0;
  }

  private drop(): void {
    if (--this.holders > 0) return;
    for (const segment of this.segmentList) segment.vectors?.release();
  }

  get liveDocumentCount(): number {
    return this.live;
  }

  get deletedDocumentCount(): number {
    return this.deleted;
  }

  /** Sum of the live documents' lengths (terms after analysis). */
  get totalLength(): number {
    return this.total;
  }

  /** Distinct terms with live df > 0. */
  get vocabularySize(): number {
    return this.dictionary.vocabularySize;
  }

  /** Postings held in memory, deleted documents' included. */
  get postingCount(): number {
    return this.postings;
  }

  get state(): IndexState {
    return { ...this.counters };
  }

  segments(): SegmentInfo[] {
    return this.segmentList.map((segment) => ({
      id: segment.id,
      documentCount: segment.documentCount,
      deletedCount: segment.live.deletedCount,
      byteLength: segment.byteLength,
    }));
  }

  /** @internal */
  segmentById(id: number): Segment | undefined {
    return this.segmentList.find((segment) => segment.id === id);
  }

  /** Analyses text exactly as documents and queries are analysed. */
  analyze(text: string): string[] {
    return this.analyzer(text);
  }

  /** Live document frequency of an analysed term. */
  documentFrequency(term: string): number {
    const id = this.dictionary.idOf(term);
    return id === undefined ? 0 : this.dictionary.documentFrequency(id);
  }

  /** Where a live document is (undefined for unknown or deleted keys). */
  locate(key: number): Tombstone | undefined {
    for (const segment of this.segmentList) {
      const ordinal = segment.ordinalOf(key);
      if (ordinal >= 0)
        return segment.live.isDeleted(ordinal) ? undefined : { segmentId: segment.id, ordinal };
    }
    return undefined;
  }

  /**
   * Ranks live documents for a free-text query. At most `topK` hits, best first; equal scores by
   * ascending key. An empty query, or one of only stop words or unknown terms, returns [].
   */
  search(query: string, options: SearchOptions): SearchHit[] {
    return this.searchTerms(this.analyzer(query), options);
  }

  /** Like {@link SegmentedIndex.search} for analysed terms (repeats count as query term frequency). */
  searchTerms(terms: readonly string[], options: SearchOptions): SearchHit[] {
    return this.searchQuery({ boosted: false, terms }, options);
  }

  /**
   * Like {@link SegmentedIndex.searchTerms} for distinct analysed terms, each with a boost (> 0, finite)
   * that multiplies its weight at query frequency 1 (Lucene's `BoostQuery`): RM3's expanded queries.
   * Scores stay normalised to 0 … 1; boosts of 1 give the same hits and scores as the terms unboosted.
   */
  searchBoosted(terms: ReadonlyMap<string, number>, options: SearchOptions): SearchHit[] {
    for (const [term, boost] of terms) {
      if (typeof boost !== "number" || !(boost > 0) || !Number.isFinite(boost))
        throw new RangeError(
          `boost of ${JSON.stringify(term)} must be a finite number > 0, got ${String(boost)}`,
        );
    }
    return this.searchQuery({ boosted: true, terms }, options);
  }

  /**
   * Ranks live documents by cosine similarity of their vectors to `query` (an embedding of the index's
   * dimension): at most `topK` hits, best first, equal scores by ascending key. Segments below the graph
   * threshold are searched exactly; larger ones through their HNSW graph (approximate) unless `exact`.
   * Throws a RangeError on an index without vectors or a query of another dimension.
   */
  searchDense(query: ArrayLike<number>, options: DenseSearchOptions): SearchHit[] {
    return searchDense(this.options.vectors, this.segmentList, query, options);
  }

  /** Live vectors, their dimension and the bytes of their stored codes (spilled or not); null without vectors. */
  vectorStats(): VectorStats | null {
    return vectorStatsOf(this.options.vectors, this.segmentList);
  }

  private searchQuery(query: QueryTerms, options: SearchOptions): SearchHit[] {
    const resolved = validateSearchOptions(options);
    if (this.live === 0 || this.total === 0) return [];
    const averageLength = this.total / this.live;
    let norms = this.norms;
    if (
      norms === undefined ||
      norms.averageLength !== averageLength ||
      norms.table.length <= this.maxDocumentLength
    ) {
      norms = this.norms = tabulateLengthNorms(this.scorerParameters, averageLength, this.maxDocumentLength);
    }
    // A nested search (from `accept`) gets its own buffers.
    const reentrant = this.searching;
    const scratch = reentrant ? new SearchScratch() : (this.scratch ??= new SearchScratch());
    this.searching = true;
    try {
      return searchSegments(
        {
          scorer: this.scorerParameters,
          segments: this.segmentList,
          dictionary: this.dictionary,
          liveDocumentCount: this.live,
          averageLength,
          norms: norms.table,
        },
        query,
        resolved,
        scratch,
      );
    } catch (error) {
      // An exception from `accept` can leave partial sums behind: start the next search afresh.
      if (!reentrant) this.scratch = undefined;
      throw error;
    } finally {
      if (!reentrant) this.searching = false;
    }
  }

  /**
   * Replica catch-up: applies segments and tombstones committed elsewhere (same semantics as load,
   * aligned segment bytes included: they are used in place).
   */
  applyChanges(change: {
    addSegments: ReadonlyArray<StoredSegment>;
    removeSegmentIds: readonly number[];
    tombstones: readonly Tombstone[];
    state: IndexState;
  }): void {
    const state = validateState(change.state);
    // Decode everything first, so that corrupt bytes change nothing (and hold no file).
    const decoded: Array<ReturnType<typeof decodeStoredSegment> & DecodedExtras> = [];
    try {
      for (const { bytes, deleted, vectors } of change.addSegments) {
        const segment = decodeStoredSegment(bytes);
        const ofSegment = decodeSegmentVectors(this.options, segment.id, segment.data.keys.length, vectors);
        decoded.push({ ...segment, deleted: [...deleted], byteLength: bytes.byteLength, vectors: ofSegment });
      }
      this.checkChanges(change, decoded);
    } catch (error) {
      for (const { vectors } of decoded) vectors?.release();
      throw error;
    }
    for (const id of change.removeSegmentIds) this.detachSegment(this.segmentById(id) as Segment);
    for (const { id, data, terms, deleted, byteLength, vectors } of decoded)
      this.attachSegment(id, data, terms, deleted, byteLength, vectors);
    const bySegment = new Map<number, number[]>();
    for (const { segmentId, ordinal } of change.tombstones) {
      const list = bySegment.get(segmentId) ?? [];
      list.push(ordinal);
      bySegment.set(segmentId, list);
    }
    for (const [segmentId, ordinals] of bySegment) {
      this.deleteOrdinals(this.segmentById(segmentId) as Segment, ordinals);
    }
    this.counters = state;
    this.version++;
  }

  /** A catch-up's segment ids and tombstones, checked against the index before anything changes. */
  private checkChanges(
    change: { removeSegmentIds: readonly number[]; tombstones: readonly Tombstone[] },
    decoded: ReadonlyArray<{ id: number }>,
  ): void {
    for (const id of change.removeSegmentIds) {
      if (this.segmentById(id) === undefined) throw new RangeError(`segment ${id} is not in the index`);
    }
    const ids = new Set(this.segmentList.map((segment) => segment.id));
    for (const id of change.removeSegmentIds) ids.delete(id);
    for (const { id } of decoded) {
      if (ids.has(id)) throw new RangeError(`segment ${id} is already in the index`);
      ids.add(id);
    }
    for (const { segmentId } of change.tombstones) {
      if (!ids.has(segmentId)) throw new RangeError(`tombstone for segment ${segmentId}, not in the index`);
    }
  }

  /**
   * A merged segment computed in the background, turned into a commit against the current state: deletes
   * since its snapshot become its tombstones. Throws if a merged segment is no longer in the index.
   */
  prepareMerge(result: MergeResult): PreparedMerge {
    return prepareMerge(this, result);
  }

  /**
   * @internal Adds a segment with its vectors, whose owner the index becomes (its live postings count in
   * the statistics). `knownIds`: per term of `terms` (a list), its id in the dictionary (−1: not in it)
   * looked up since the last change (a prepared write's), so that no term is looked up twice.
   */
  attachSegment(
    id: number,
    data: Omit<SegmentData, "terms">,
    terms: readonly string[] | StoredTerms,
    deleted: Iterable<number>,
    byteLength: number,
    vectors: SegmentVectors | null,
    countStatistics = true,
    knownIds?: Int32Array,
  ): Segment {
    const termIds = this.acquireTerms(terms, knownIds);
    const segment = Segment.build(id, data, termIds, this.scorerParameters, deleted, byteLength);
    segment.vectors = vectors;
    this.insertSegment(segment, this.segmentList.length, countStatistics);
    return segment;
  }

  /**
   * @internal Adds a segment built apart (indexer/segment-build.ts) with no tombstones: its
   * postings-derived arrays come with it, only its term lookup is computed here. `knownIds` as above.
   */
  attachBuiltSegment(
    id: number,
    data: Omit<SegmentData, "terms">,
    terms: StoredTerms,
    byteLength: number,
    knownIds: Int32Array,
    derived: PostingsDerived,
    vectors: SegmentVectors | null,
  ): Segment {
    const termIds = this.acquireTerms(terms, knownIds);
    const live = new LiveDocs(data.keys.length);
    const segment = new Segment(id, data, { ...deriveLookup(termIds), ...derived }, live, byteLength);
    segment.vectors = vectors;
    this.insertSegment(segment, this.segmentList.length, true);
    return segment;
  }

  /** The dictionary ids of a new segment's terms, each held once more (`knownIds`: looked up already). */
  private acquireTerms(
    terms: readonly string[] | StoredTerms,
    knownIds: Int32Array | undefined,
  ): Uint32Array {
    const dictionary = this.dictionary;
    let termIds: Uint32Array;
    if (Array.isArray(terms)) {
      const list = terms as readonly string[];
      termIds = new Uint32Array(list.length);
      list.forEach((term, t) => {
        const known = knownIds?.[t] ?? -1;
        termIds[t] = known >= 0 ? dictionary.acquireResolved(term, known) : dictionary.acquire(term);
      });
    } else {
      const { count, text, ends, decoded } = terms as StoredTerms;
      termIds = new Uint32Array(count);
      for (let t = 0, start = 0; t < count; t++) {
        const end = ends[t] ?? 0;
        const known = knownIds?.[t] ?? -1;
        const term = decoded.get(t);
        termIds[t] =
          known >= 0
            ? dictionary.acquireResolved("", known)
            : term === undefined
              ? dictionary.acquireAscii(text, start, end)
              : dictionary.acquire(term);
        start = end;
      }
    }
    return termIds;
  }

  /**
   * @internal Inserts a built segment whose terms the dictionary already holds; the index owns its
   * vectors from now on (an index already released releases them at once: no one may read it).
   */
  insertSegment(segment: Segment, position: number, countStatistics: boolean): void {
    if (this.holders === 0) segment.vectors?.release();
    if (!countStatistics) this.dictionary.retainAll(segment.termIds);
    this.segmentList.splice(position, 0, segment);
    this.postings += segment.postingCount;
    this.deleted += segment.live.deletedCount;
    if (segment.maxDocumentLength > this.maxDocumentLength)
      this.maxDocumentLength = segment.maxDocumentLength;
    if (!countStatistics) return;
    this.live += segment.live.liveCount;
    for (let t = 0; t < segment.termCount; t++) {
      const live = segment.liveFrequency(t);
      if (live > 0) this.dictionary.addDocumentFrequency(segment.termIds[t] ?? 0, live);
    }
    const { docLengths } = segment;
    for (let d = 0; d < segment.documentCount; d++) {
      if (!segment.live.isDeleted(d)) this.total += docLengths[d] ?? 0;
    }
  }

  /**
   * @internal Removes a segment and releases its vectors' file (no search can reach it any more: module
   * comment); its live postings leave the statistics unless `countStatistics` is false.
   */
  detachSegment(segment: Segment, countStatistics = true): void {
    const position = this.segmentList.indexOf(segment);
    if (position < 0) throw new Error("segment is not in the index");
    this.segmentList.splice(position, 1);
    segment.vectors?.release();
    this.postings -= segment.postingCount;
    this.deleted -= segment.live.deletedCount;
    if (countStatistics) {
      this.live -= segment.live.liveCount;
      for (let t = 0; t < segment.termCount; t++) {
        const live = segment.liveFrequency(t);
        if (live > 0) this.dictionary.addDocumentFrequency(segment.termIds[t] ?? 0, -live);
      }
      const { docLengths } = segment;
      for (let d = 0; d < segment.documentCount; d++) {
        if (!segment.live.isDeleted(d)) this.total -= docLengths[d] ?? 0;
      }
    }
    this.dictionary.releaseAll(segment.termIds);
    if (segment.maxDocumentLength === this.maxDocumentLength) {
      this.maxDocumentLength = 0;
      for (const other of this.segmentList) {
        if (other.maxDocumentLength > this.maxDocumentLength)
          this.maxDocumentLength = other.maxDocumentLength;
      }
    }
  }

  /** @internal Tombstones one checked document (its terms known). */
  deleteDocument(deletion: DocumentDeletion): void {
    const { segment, ordinal, localTerms, frequencies } = deletion;
    segment.deleteDocument(ordinal, localTerms, frequencies);
    for (const t of localTerms) this.dictionary.addDocumentFrequency(segment.termIds[t] ?? 0, -1);
    this.live--;
    this.deleted++;
    this.total -= segment.docLengths[ordinal] ?? 0;
  }

  /**
   * @internal Tombstones ordinals without their texts (replicas): one pass over the segment's postings
   * finds their terms. Ordinals already deleted are skipped.
   */
  deleteOrdinals(segment: Segment, ordinals: readonly number[]): void {
    const fresh = new Set<number>();
    for (const ordinal of ordinals) {
      if (!Number.isInteger(ordinal) || ordinal < 0 || ordinal >= segment.documentCount) {
        throw new RangeError(`tombstone ordinal ${ordinal} is outside segment ${segment.id}`);
      }
      if (!segment.live.isDeleted(ordinal)) fresh.add(ordinal);
    }
    if (fresh.size === 0) return;
    const byOrdinal = new Map<number, { terms: number[]; frequencies: number[] }>();
    const wanted = new Uint32Array((segment.documentCount + 31) >>> 5);
    for (const ordinal of fresh) {
      byOrdinal.set(ordinal, { terms: [], frequencies: [] });
      wanted[ordinal >>> 5] = (wanted[ordinal >>> 5] ?? 0) | (1 << (ordinal & 31));
    }
    const { termOffsets, docIds, termFreqs } = segment;
    for (let t = 0; t < segment.termCount; t++) {
      const end = termOffsets[t + 1] ?? 0;
      for (let p = termOffsets[t] ?? 0; p < end; p++) {
        const d = docIds[p] ?? 0;
        if (((wanted[d >>> 5] ?? 0) & (1 << (d & 31))) === 0) continue;
        const entry = byOrdinal.get(d);
        if (entry !== undefined) {
          entry.terms.push(t);
          entry.frequencies.push(termFreqs[p] ?? 1);
        }
      }
    }
    for (const [ordinal, { terms, frequencies }] of byOrdinal) {
      this.deleteDocument({ segment, ordinal, localTerms: terms, frequencies });
    }
  }

  /** @internal */
  setState(state: IndexState): void {
    this.counters = validateState(state);
  }

  /** @internal The segments, in order. */
  get segmentsInOrder(): readonly Segment[] {
    return this.segmentList;
  }
}
