/**
 * The dense side of a SegmentedIndex: each segment's vectors (vectors/) checked against the index's
 * vector options when a segment joins, and searched per segment through the segment's own live-docs
 * bitset (Lucene's per-segment KNN), the per-segment lists merged into one top k.
 *
 * Order: score descending, ties by ascending key, as lexical search orders them, so that an index and a
 * fresh build over its live documents rank alike whatever their segments (merged segments hold keys in
 * ascending order, written ones too, so a segment's own ties by ordinal are ties by key).
 */
import type { Directory } from "../directory.js";
import type { DenseSearchOptions, SearchHit, VectorIndexOptions, VectorStats } from "../types.js";
import { prepareQuery, SegmentVectors, type VectorSetOptions } from "../vectors/segment-vectors.js";
import { decodeVectors } from "../vectors/vector-codec.js";
import type { Segment } from "./segment.js";

/** The options a segment's vectors are built with (graph threshold included). */
export function vectorSetOptions(options: VectorIndexOptions): VectorSetOptions {
  return { storage: options.storage, graphThreshold: options.graphThreshold };
}

/** Checks vector options (dimension, storage, threshold); returns a copy. */
export function resolveVectorOptions(options: VectorIndexOptions | undefined): VectorIndexOptions | null {
  if (options === undefined) return null;
  if (options === null || typeof options !== "object")
    throw new TypeError("vector options must be an object");
  const { dimension, storage, graphThreshold } = options;
  if (!Number.isInteger(dimension) || dimension < 1 || dimension > 8192) {
    throw new RangeError(`vector dimension must be an integer in 1 … 8192, got ${String(dimension)}`);
  }
  if (storage !== "f32" && storage !== "f16" && storage !== "i8") {
    throw new RangeError(`vector storage must be f32, f16 or i8, got ${JSON.stringify(storage)}`);
  }
  if (graphThreshold !== undefined && (!Number.isInteger(graphThreshold) || graphThreshold < 1)) {
    throw new RangeError(`graphThreshold must be an integer ≥ 1, got ${String(graphThreshold)}`);
  }
  return graphThreshold === undefined ? { dimension, storage } : { dimension, storage, graphThreshold };
}

/**
 * A stored segment's vectors, decoded and checked against the index: an index with vectors has them
 * on every segment, one per document, of its dimension and storage; a lexical index has none. Codes of
 * a set with a graph go to the index's directory, if it has one: the caller owns the set (releases it).
 */
export function decodeSegmentVectors(
  index: { readonly vectors: VectorIndexOptions | null; readonly directory: Directory | null },
  segmentId: number,
  documentCount: number,
  bytes: Uint8Array | null | undefined,
): SegmentVectors | null {
  const options = index.vectors;
  if (options === null) {
    if (bytes != null) throw new RangeError(`segment ${segmentId} has vectors, the index has none`);
    return null;
  }
  if (bytes == null) throw new RangeError(`segment ${segmentId} has no vectors, the index keeps them`);
  const vectors = decodeVectors(bytes, { directory: index.directory });
  try {
    checkSegmentVectors(options, segmentId, documentCount, vectors);
  } catch (error) {
    vectors.release();
    throw error;
  }
  return vectors;
}

export function checkSegmentVectors(
  options: VectorIndexOptions,
  segmentId: number,
  documentCount: number,
  vectors: SegmentVectors,
): void {
  if (vectors.dimension !== options.dimension || vectors.storage !== options.storage) {
    throw new RangeError(
      `segment ${segmentId} holds ${vectors.dimension}-d ${vectors.storage} vectors, ` +
        `the index ${options.dimension}-d ${options.storage}`,
    );
  }
  if (vectors.count !== documentCount) {
    throw new RangeError(`segment ${segmentId} has ${vectors.count} vectors for ${documentCount} documents`);
  }
}

/** Builds a write's vectors (one per added document, in order). */
export function buildSegmentVectors(
  options: VectorIndexOptions,
  vectors: ReadonlyArray<ArrayLike<number>>,
): SegmentVectors {
  vectors.forEach((vector, i) => {
    if (vector.length !== options.dimension) {
      throw new RangeError(`vector ${i} has ${vector.length} dimensions, the index ${options.dimension}`);
    }
  });
  return SegmentVectors.build(options.dimension, vectors, vectorSetOptions(options));
}

function checkDenseOptions(options: DenseSearchOptions): void {
  if (options === null || typeof options !== "object")
    throw new TypeError("search options must be an object");
  if (!Number.isInteger(options.topK) || options.topK < 1) {
    throw new RangeError(`topK must be an integer ≥ 1, got ${String(options.topK)}`);
  }
  if (options.accept !== undefined && typeof options.accept !== "function")
    throw new TypeError("accept must be a function");
}

/** The top k live documents by cosine to `query` (see the module comment for the order). */
export function searchDense(
  vectorOptions: VectorIndexOptions | null,
  segments: readonly Segment[],
  query: ArrayLike<number>,
  options: DenseSearchOptions,
): SearchHit[] {
  checkDenseOptions(options);
  if (vectorOptions === null) throw new RangeError("the index has no vectors");
  const unit = prepareQuery(query, vectorOptions.dimension);
  const searched = segments.filter((segment) => segment.vectors !== null && segment.live.liveCount > 0);
  const { topK, accept } = options;
  const hits =
    accept === undefined
      ? searchSegmentsOptimistically(searched, unit, topK, options.exact === true)
      : searched.flatMap((segment) => scanSegment(segment, unit, topK, accept));
  hits.sort(byScoreThenKey);
  return hits.slice(0, topK);
}

const byScoreThenKey = (a: SearchHit, b: SearchHit) => b.score - a.score || a.key - b.key;

/**
 * How many hits a segment holding `share` of the index's live vectors is first asked for, when the index
 * is asked for k: its expected part of the top k plus three standard deviations (the top k's documents
 * fall in segments as a binomial draw), at least 1, at most k. After Lucene's optimistic per-leaf k
 * (OptimisticKnnVectorQuery): asking every segment for all k makes a search of s segments walk s graphs
 * k deep, where the top k are spread over them.
 */
export function perSegmentK(k: number, share: number): number {
  if (share >= 1) return k;
  const expected = k * share;
  const spread = 3 * Math.sqrt(k * share * (1 - share));
  return Math.max(1, Math.min(k, Math.ceil(expected + spread)));
}

/**
 * Each segment searched for its share of the top k (perSegmentK), then again for all k where that was
 * not enough: a segment all of whose first answers rank at or above the merged k-th may hold more of the
 * top k (ties included: equal scores are ordered by key). A segment whose last answer ranks below the
 * merged k-th holds no more of it — exactly so for exact search, so exact results equal a full-k search.
 */
function searchSegmentsOptimistically(
  segments: readonly Segment[],
  unit: Float32Array,
  topK: number,
  exact: boolean,
): SearchHit[] {
  let liveTotal = 0;
  for (const segment of segments) liveTotal += segment.live.liveCount;
  const perSegment = segments.map((segment) => {
    const k = perSegmentK(topK, segment.live.liveCount / liveTotal);
    return { segment, k, hits: searchSegment(segment, unit, k, exact) };
  });
  const merged = perSegment.flatMap(({ hits }) => hits).sort(byScoreThenKey);
  const kth = merged.length >= topK ? merged[topK - 1] : undefined;
  const hits: SearchHit[] = [];
  for (const entry of perSegment) {
    const last = entry.hits.at(-1);
    const mayHoldMore =
      entry.k < topK &&
      entry.hits.length === entry.k &&
      last !== undefined &&
      (kth === undefined || byScoreThenKey(last, kth) <= 0);
    hits.push(...(mayHoldMore ? searchSegment(entry.segment, unit, topK, exact) : entry.hits));
  }
  return hits;
}

/** One segment's k best live documents, as engine keys. */
function searchSegment(segment: Segment, unit: Float32Array, k: number, exact: boolean): SearchHit[] {
  const live = segment.live.deletedCount === 0 ? null : segment.live;
  return segment
    .vectors!.search(unit, k, live, { exact })
    .map(({ doc, score }) => ({ key: segment.keys[doc] ?? 0, score }));
}

/** A filter the graph knows nothing of: scan the segment (Lucene too goes exact under a selective filter). */
function scanSegment(
  segment: Segment,
  unit: Float32Array,
  topK: number,
  accept: (key: number) => boolean,
): SearchHit[] {
  const live = segment.live.deletedCount === 0 ? null : segment.live;
  const accepted = (d: number) => accept(segment.keys[d] ?? 0);
  return segment
    .vectors!.exactSearch(unit, topK, live, accepted)
    .map(({ doc, score }) => ({ key: segment.keys[doc] ?? 0, score }));
}

export function vectorStatsOf(
  vectorOptions: VectorIndexOptions | null,
  segments: readonly Segment[],
): VectorStats | null {
  if (vectorOptions === null) return null;
  let count = 0;
  let bytes = 0;
  for (const segment of segments) {
    if (segment.vectors === null) continue;
    count += segment.live.liveCount;
    bytes += segment.vectors.byteSize;
  }
  return { count, dimension: vectorOptions.dimension, bytes };
}
