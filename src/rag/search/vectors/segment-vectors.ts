/**
 * The vectors of one segment: one embedding per document (chunk), addressed by the document's local
 * ordinal, stored normalised as f32, f16 or i8 (quantize.ts), immutable like the segment's postings.
 *
 * Search (after Lucene's per-segment KNN: exact below a size, the HNSW graph above it, deletions applied
 * as a filter whatever the graph holds):
 * - a segment of fewer than `graphThreshold` vectors (default 10 000) has no graph: brute force over the
 *   stored codes (a few milliseconds at 10k × 384);
 * - a larger one has its graph, built at write or merge (ann.ts). The graph knows nothing of deletions, so
 *   it is asked for more candidates than wanted (scaled by the deleted share, × `oversample`), deleted
 *   ones are dropped, the rest rescored with the exact stored score, and the ask doubled while too few
 *   live candidates come back; when that would visit more than half the segment, exact search instead
 *   (what Lucene does when its filter leaves few documents).
 *
 * Score: cosine similarity = dot(unit query, stored vector as decoded), computed in doubles the same way
 * by every path, so the exact and approximate paths agree on a candidate's score.
 *
 * Codes: in memory, or, for a set with a graph decoded for an index with a Directory, in a file of it
 * (spill.ts) read a row or a block at a time; the arithmetic on them is the same either way. A spilled
 * set is released (`release`) by its owner once nothing reads it any more.
 */
import type { LiveDocs } from "../core/live-docs.js";
import { TopK } from "../topk.js";
import { AnnGraph, DEFAULT_HNSW, type HnswParams } from "./ann.js";
import {
  allocateCodes,
  bytesPerDimension,
  encodeRow,
  f16Table16,
  normalized,
  type VectorCodes,
  type VectorStorage,
} from "./quantize.js";
import { SpilledCodes } from "./spill.js";

export const DEFAULT_GRAPH_THRESHOLD = 10_000;
export const DEFAULT_GRAPH_SCALAR: VectorStorage = "i8";
/**
 * Candidates asked of the graph per wanted hit, at least. The walk compares coarse i8 codes, so near
 * neighbours tie; asking for more and rescoring them on the stored codes buys the recall back.
 */
export const DEFAULT_OVERSAMPLE = 5;

/**
 * The fewest candidates a search of a segment of `count` vectors asks the graph for: 200 × √(count / 1M)
 * (200 at 1M, 63 at 100k). Asking for more widens the walk (USearch's ef is at least the count asked
 * for), and a bigger graph needs a wider walk for the same recall: at 1M × 384-d (i8 walk, top 10),
 * recall@10 was 0.81 asking 50 candidates, 0.90 asking 100, 0.99 asking 200 (bench/vectors.ts). A floor
 * per segment rather than per wanted hit: a deeper search (hybrid asks each side for 50) needs no wider
 * walk per hit than a top 10 does.
 */
export function minimumCandidates(count: number): number {
  return Math.ceil(200 * Math.sqrt(count / 1_000_000));
}

export const MAX_VECTOR_DIMENSION = 8192;

export interface VectorHit {
  doc: number;
  score: number;
}

export interface VectorSetOptions {
  storage: VectorStorage;
  /** Segments with at least this many vectors get an HNSW graph; smaller ones are searched exactly. */
  graphThreshold?: number;
  hnsw?: HnswParams;
  /**
   * The form of the graph's own copy of the vectors, which the walk compares (default i8 whatever the
   * storage: the walk is bound by memory reads, and at 100k × 384-d an f32 walk took 1.6× hnswlib's time
   * where an i8 one took 1.0×, with a quarter of the memory). Candidates are rescored with the stored
   * codes, so scores are the storage's own.
   */
  graphScalar?: VectorStorage;
  /** Threads building the graph (0 = all cores). */
  threads?: number;
}

export interface VectorSearchOptions {
  /** Brute force even where there is a graph (the reference the graph is measured against). */
  exact?: boolean;
  /**
   * Candidates asked of the graph per wanted hit, before the deleted share is accounted for. Unset: 5 per
   * hit and at least `minimumCandidates(count)`; set: exactly this many per hit (what the benchmark varies).
   */
  oversample?: number;
}

export function checkDimension(dimension: number): void {
  if (!Number.isInteger(dimension) || dimension < 1 || dimension > MAX_VECTOR_DIMENSION) {
    throw new RangeError(
      `vector dimension must be an integer in 1 … ${MAX_VECTOR_DIMENSION}, got ${dimension}`,
    );
  }
}

/** The query as every search takes it: checked against the dimension and normalised. */
export function prepareQuery(vector: ArrayLike<number>, dimension: number): Float32Array {
  return normalized(vector, dimension, "query vector");
}

/**
 * Cosine of one row of codes (at `base` of `codes`) to a unit query, `scale` its i8 scale: the one
 * arithmetic of every score, whether the row is read in memory, from a block or from a scratch row.
 */
function dot(
  storage: VectorStorage,
  codes: VectorCodes,
  base: number,
  dimension: number,
  unitQuery: Float32Array,
  scale: number,
): number {
  let sum = 0;
  if (storage === "f32") {
    for (let i = 0; i < dimension; i++) sum += (unitQuery[i] ?? 0) * (codes[base + i] ?? 0);
    return sum;
  }
  if (storage === "f16") {
    const table = f16Table16();
    for (let i = 0; i < dimension; i++) sum += (unitQuery[i] ?? 0) * (table[codes[base + i] ?? 0] ?? 0);
    return sum;
  }
  for (let i = 0; i < dimension; i++) sum += (unitQuery[i] ?? 0) * (codes[base + i] ?? 0);
  return sum * scale;
}

export class SegmentVectors {
  /** Set when the segment is large enough to have a graph (built, or loaded from its bytes). */
  graph: AnnGraph | null = null;
  /** The codes when in memory (null: spilled). */
  private readonly memory: VectorCodes | null;
  /** The codes when in a spill file (null: in memory). */
  private readonly spill: SpilledCodes | null;

  /** Use `build`, `merge` or the codec. */
  constructor(
    readonly dimension: number,
    readonly storage: VectorStorage,
    /** count × dimension codes, row d = document d: in memory, or spilled (spill.ts). */
    codes: VectorCodes | SpilledCodes,
    /** i8: the scale of each row; null otherwise. Always in memory (4 bytes a vector). */
    readonly scales: Float32Array | null,
  ) {
    checkDimension(dimension);
    this.memory = codes instanceof SpilledCodes ? null : codes;
    this.spill = codes instanceof SpilledCodes ? codes : null;
    if (this.spill !== null && (this.spill.storage !== storage || this.spill.dimension !== dimension))
      throw new RangeError("spilled codes of another storage or dimension");
    if (codes.length % dimension !== 0) throw new RangeError("vector codes are not whole rows");
    if ((storage === "i8") !== (scales !== null)) throw new RangeError("i8 vectors need one scale per row");
    if (scales !== null && scales.length !== codes.length / dimension) {
      throw new RangeError("i8 vectors need one scale per row");
    }
  }

  /** Normalises, quantises and (at `graphThreshold` or more vectors) builds the graph. */
  static build(
    dimension: number,
    vectors: readonly ArrayLike<number>[],
    options: VectorSetOptions,
  ): SegmentVectors {
    checkDimension(dimension);
    const { storage } = options;
    const codes = allocateCodes(storage, vectors.length * dimension);
    const scales = storage === "i8" ? new Float32Array(vectors.length) : null;
    vectors.forEach((vector, d) =>
      encodeRow(storage, normalized(vector, dimension, `vector ${d}`), codes, scales, d),
    );
    const set = new SegmentVectors(dimension, storage, codes, scales);
    set.buildGraphIfLarge(options);
    return set;
  }

  get count(): number {
    return (this.memory ?? (this.spill as SpilledCodes)).length / this.dimension;
  }

  /** Bytes of the codes and scales, wherever the codes are (the graph's own memory is USearch's). */
  get byteSize(): number {
    return this.count * this.dimension * bytesPerDimension(this.storage) + (this.scales?.byteLength ?? 0);
  }

  /** Of `byteSize`, the bytes held in memory (all of them unless the codes are spilled). */
  get residentBytes(): number {
    return this.spill === null ? this.byteSize : (this.scales?.byteLength ?? 0);
  }

  /** Whether the codes are in a spill file rather than in memory. */
  get spilled(): boolean {
    return this.spill !== null;
  }

  /** Closes the spill file (nothing for codes in memory); reading spilled codes afterwards throws. */
  release(): void {
    this.spill?.release();
  }

  /**
   * All codes, row d = document d: the in-memory array itself (do not modify it), or a full read of the
   * spill file. For encodes and builds; a merge takes `copyCodes`.
   */
  readCodes(): VectorCodes {
    return this.memory ?? (this.spill as SpilledCodes).readAll();
  }

  /** All codes in a new array, the caller's to keep, change or transfer to a worker. */
  copyCodes(): VectorCodes {
    return this.memory?.slice() ?? (this.spill as SpilledCodes).readAll();
  }

  /** Builds the graph when the set is at least `graphThreshold` long (a no-op below it). */
  buildGraphIfLarge(options: Omit<VectorSetOptions, "storage">): void {
    const threshold = options.graphThreshold ?? DEFAULT_GRAPH_THRESHOLD;
    if (this.count < Math.max(1, threshold)) return;
    this.graph = AnnGraph.build(
      this.storage,
      options.graphScalar ?? DEFAULT_GRAPH_SCALAR,
      this.dimension,
      this.readCodes(),
      f16Table16(),
      options.hnsw ?? DEFAULT_HNSW,
      options.threads ?? 0,
    );
  }

  /** Document d's stored vector, decoded (unit length up to quantisation). */
  vector(doc: number): Float32Array {
    this.checkDoc(doc);
    const { dimension } = this;
    const codes = this.memory ?? (this.spill as SpilledCodes).row(doc);
    const base = this.memory === null ? 0 : doc * dimension;
    const out = new Float32Array(dimension);
    if (this.storage === "f32") out.set((codes as Float32Array).subarray(base, base + dimension));
    else if (this.storage === "f16") {
      const table = f16Table16();
      for (let i = 0; i < dimension; i++) out[i] = table[codes[base + i] ?? 0] ?? 0;
    } else {
      const scale = this.scales?.[doc] ?? 0;
      for (let i = 0; i < dimension; i++) out[i] = (codes[base + i] ?? 0) * scale;
    }
    return out;
  }

  /** Cosine of document d to a unit query (prepareQuery). */
  score(doc: number, unitQuery: Float32Array): number {
    const { storage, dimension } = this;
    const scale = this.scales?.[doc] ?? 0;
    if (this.memory !== null) return dot(storage, this.memory, doc * dimension, dimension, unitQuery, scale);
    return dot(storage, (this.spill as SpilledCodes).row(doc), 0, dimension, unitQuery, scale);
  }

  /**
   * The k best live documents, by brute force; with `accept`, only among the documents it accepts (a
   * filter the graph knows nothing of). Spilled codes are read a block at a time.
   */
  exactSearch(
    unitQuery: Float32Array,
    k: number,
    live: LiveDocs | null,
    accept?: (doc: number) => boolean,
  ): VectorHit[] {
    this.checkQuery(unitQuery);
    const count = this.count;
    if (k < 1 || count === 0) return [];
    const top = new TopK(Math.min(k, count));
    const { storage, dimension, scales } = this;
    const scan = (block: VectorCodes, first: number, rows: number) => {
      for (let r = 0; r < rows; r++) {
        const d = first + r;
        if (live !== null && live.isDeleted(d)) continue;
        if (accept !== undefined && !accept(d)) continue;
        const score = dot(storage, block, r * dimension, dimension, unitQuery, scales?.[d] ?? 0);
        if (top.wouldAccept(d, score)) top.offer(d, score);
      }
    };
    if (this.memory !== null) scan(this.memory, 0, count);
    else (this.spill as SpilledCodes).forEachBlock(scan);
    return top.drain().map((hit) => ({ doc: hit.key, score: hit.score }));
  }

  /** The k best live documents: exactly, or through the graph where there is one (module comment). */
  search(
    unitQuery: Float32Array,
    k: number,
    live: LiveDocs | null,
    options: VectorSearchOptions = {},
  ): VectorHit[] {
    this.checkQuery(unitQuery);
    if (live !== null && live.documentCount !== this.count) {
      throw new RangeError(`live docs cover ${live.documentCount} documents, the vectors ${this.count}`);
    }
    const count = this.count;
    const liveCount = live === null ? count : live.liveCount;
    if (k < 1 || liveCount === 0) return [];
    const graph = this.graph;
    if (graph === null || options.exact === true) return this.exactSearch(unitQuery, k, live);
    const breadth =
      options.oversample === undefined
        ? Math.max(k * DEFAULT_OVERSAMPLE, minimumCandidates(count))
        : k * Math.max(1, options.oversample);
    let wanted = Math.ceil((breadth * count) / liveCount);
    for (;;) {
      if (wanted > count / 2) return this.exactSearch(unitQuery, k, live);
      const matches = graph.search(unitQuery, wanted);
      const top = new TopK(k);
      let found = 0;
      for (const { doc } of matches) {
        if (live !== null && live.isDeleted(doc)) continue;
        found++;
        top.offer(doc, this.score(doc, unitQuery));
      }
      if (found >= Math.min(liveCount, breadth)) {
        return top.drain().map((hit) => ({ doc: hit.key, score: hit.score }));
      }
      // The walk found fewer than asked for (a sparse corner of the graph): never answer short.
      if (matches.length < wanted) return this.exactSearch(unitQuery, k, live);
      wanted *= 2;
    }
  }

  private checkQuery(unitQuery: Float32Array): void {
    if (unitQuery.length !== this.dimension) {
      throw new RangeError(`query vector has ${unitQuery.length} dimensions, the index ${this.dimension}`);
    }
  }

  private checkDoc(doc: number): void {
    if (!Number.isInteger(doc) || doc < 0 || doc >= this.count) {
      throw new RangeError(`document ${doc} is outside the vector set (0 … ${this.count - 1})`);
    }
  }
}

/**
 * A merged segment's vectors: every input document whose `docMaps[i][doc]` is a new ordinal (−1: dropped,
 * a deleted one), at that ordinal. Codes and scales are copied as stored, so a document's score is the
 * same before and after the merge; the graph is built anew for the merged set (graphs are not merged).
 */
export function mergeSegmentVectors(
  inputs: readonly SegmentVectors[],
  docMaps: readonly Int32Array[],
  options: Omit<VectorSetOptions, "storage">,
): SegmentVectors {
  if (inputs.length === 0) throw new RangeError("vector merge: no inputs");
  if (docMaps.length !== inputs.length) throw new RangeError("vector merge: one doc map per input");
  const { dimension, storage } = inputs[0] as SegmentVectors;
  let total = 0;
  inputs.forEach((input, i) => {
    if (input.dimension !== dimension || input.storage !== storage) {
      throw new RangeError(
        `vector merge: input ${i} is ${input.dimension}-d ${input.storage}, input 0 ${dimension}-d ${storage}`,
      );
    }
    const map = docMaps[i] as Int32Array;
    if (map.length !== input.count)
      throw new RangeError(`vector merge: doc map ${i} does not cover its input`);
    for (const ordinal of map) if (ordinal >= 0) total++;
  });
  const codes = allocateCodes(storage, total * dimension);
  const scales = storage === "i8" ? new Float32Array(total) : null;
  const filled = new Uint8Array(total);
  inputs.forEach((input, i) => {
    const map = docMaps[i] as Int32Array;
    const inputCodes = input.readCodes();
    for (let doc = 0; doc < map.length; doc++) {
      const to = map[doc] ?? -1;
      if (to < 0) continue;
      if (to >= total || filled[to] === 1)
        throw new RangeError(`vector merge: new ordinal ${to} is not a permutation`);
      filled[to] = 1;
      codes.set(inputCodes.subarray(doc * dimension, (doc + 1) * dimension), to * dimension);
      if (scales !== null) scales[to] = input.scales?.[doc] ?? 0;
    }
  });
  const merged = new SegmentVectors(dimension, storage, codes, scales);
  merged.buildGraphIfLarge(options);
  return merged;
}
