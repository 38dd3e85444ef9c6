/**
 * Dense search over an index's segments, as Lucene's KNN query: each segment is searched for its own k
 * best live documents (exactly or through its graph), then the per-segment lists are merged into one
 * top k (TopDocs.merge). Order: higher score first; ties by segment position in the given list, then by
 * document ordinal, so the same segments and query always give the same list.
 */
import type { LiveDocs } from "../core/live-docs.js";
import { prepareQuery, type SegmentVectors, type VectorSearchOptions } from "./segment-vectors.js";

export interface VectorSegment {
  /** The caller's name for the segment (its id), carried into the hits. */
  id: number;
  vectors: SegmentVectors;
  /** Its tombstones; null when nothing is deleted. */
  live: LiveDocs | null;
}

export interface SegmentVectorHit {
  segment: number;
  doc: number;
  score: number;
}

export function searchSegments(
  segments: readonly VectorSegment[],
  query: ArrayLike<number>,
  k: number,
  options: VectorSearchOptions = {},
): SegmentVectorHit[] {
  if (!Number.isInteger(k) || k < 0) throw new RangeError(`k must be an integer ≥ 0, got ${k}`);
  const first = segments[0];
  if (first === undefined || k === 0) return [];
  const { dimension, storage } = first.vectors;
  for (const { id, vectors } of segments) {
    if (vectors.dimension !== dimension) {
      throw new RangeError(
        `segment ${id} has ${vectors.dimension}-d vectors, segment ${first.id} ${dimension}-d`,
      );
    }
    if (vectors.storage !== storage)
      throw new RangeError(`segment ${id} stores ${vectors.storage}, not ${storage}`);
  }
  const unit = prepareQuery(query, dimension);
  const hits: Array<SegmentVectorHit & { position: number }> = [];
  segments.forEach(({ id, vectors, live }, position) => {
    for (const hit of vectors.search(unit, k, live, options)) hits.push({ segment: id, position, ...hit });
  });
  hits.sort((a, b) => b.score - a.score || a.position - b.position || a.doc - b.doc);
  return hits.slice(0, k).map(({ segment, doc, score }) => ({ segment, doc, score }));
}
