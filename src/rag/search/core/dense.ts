/**
 * The dense side of a SegmentedIndex: each segment's vectors (vectors/) checked against the index's
 * vector options when a segment joins, and searched per segment through the segment's own live-docs
 * bitset (Lucene's per-segment KNN), the per-segment lists merged into one top k.
 *
 * Order: score descending, ties by ascending key, as lexical search orders them, so that an index and a
 * fresh build over its live documents rank alike whatever their segments (merged segments hold keys in
 * ascending order, written ones too, so a segment's own ties by ordinal are ties by key).
 */
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
 * on every segment, one per document, of its dimension and storage; a lexical index has none.
 */
export function decodeSegmentVectors(
  options: VectorIndexOptions | null,
  segmentId: number,
  documentCount: number,
  bytes: Uint8Array | null | undefined,
): SegmentVectors | null {
  if (options === null) {
    if (bytes != null) throw new RangeError(`segment ${segmentId} has vectors, the index has none`);
    return null;
  }
  if (bytes == null) throw new RangeError(`segment ${segmentId} has no vectors, the index keeps them`);
  const vectors = decodeVectors(bytes);
  checkSegmentVectors(options, segmentId, documentCount, vectors);
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
  const { topK, accept } = options;
  const hits: SearchHit[] = [];
  for (const segment of segments) {
    const vectors = segment.vectors;
    if (vectors === null || segment.live.liveCount === 0) continue;
    const live = segment.live.deletedCount === 0 ? null : segment.live;
    if (accept === undefined) {
      for (const { doc, score } of vectors.search(unit, topK, live, { exact: options.exact })) {
        hits.push({ key: segment.keys[doc] ?? 0, score });
      }
      continue;
    }
    // A filter the graph knows nothing of: scan the segment (Lucene too goes exact under a selective filter).
    const accepted = (d: number) => accept(segment.keys[d] ?? 0);
    for (const { doc, score } of vectors.exactSearch(unit, topK, live, accepted)) {
      hits.push({ key: segment.keys[doc] ?? 0, score });
    }
  }
  hits.sort((a, b) => b.score - a.score || a.key - b.key);
  return hits.slice(0, topK);
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
