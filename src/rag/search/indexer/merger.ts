/**
 * mergeSegments(): several segments → one, live documents only, in ascending key order (a k-way merge by
 * key, so any set of segments can be merged, not only adjacent ones). Pure (no index, no I/O): it runs on
 * the merge worker thread as well as inline.
 */

import { encodeSegment } from "../core/segment-codec.js";
import { deriveSegment, termFrequencyArray, type SegmentData, type SegmentDerived } from "../core/segment.js";
import { indexOfSorted } from "../core/sorted.js";
import type { ScorerParameters } from "../scoring.js";
import type { VectorIndexOptions } from "../types.js";
import { vectorSetOptions } from "../core/dense.js";
import type { VectorCodes } from "../vectors/quantize.js";
import { mergeSegmentVectors, SegmentVectors } from "../vectors/segment-vectors.js";
import { encodeVectors } from "../vectors/vector-codec.js";

export interface MergeInput {
  readonly data: Omit<SegmentData, "terms">;
  /** Local term → global term id (terms are matched by id: no string is looked up). */
  readonly termIds: Uint32Array;
  /** Tombstoned ordinals (dropped from the output). */
  readonly deleted: Iterable<number>;
}

export interface MergedSegment {
  readonly data: SegmentData;
  /** Output term → global term id. */
  readonly termIds: Uint32Array;
}

export function mergeSegments(
  inputs: readonly MergeInput[],
  referenceAverageLength: number,
  termOf: (termId: number) => string,
): MergedSegment {
  const k = inputs.length;
  // New ordinal of every input document (−1: deleted), by a k-way merge of the ascending keys.
  const newOrdinals: Int32Array[] = [];
  let liveTotal = 0;
  for (const { data, deleted } of inputs) {
    const map = new Int32Array(data.keys.length);
    for (const ordinal of deleted) {
      if (ordinal >= 0 && ordinal < map.length) map[ordinal] = -1;
    }
    for (let d = 0; d < map.length; d++) if (map[d] === 0) liveTotal++;
    newOrdinals.push(map);
  }
  const keys = new Uint32Array(liveTotal);
  const docLengths = new Uint32Array(liveTotal);
  const heads = new Int32Array(k);
  const nextLive = (s: number): void => {
    const map = newOrdinals[s] as Int32Array;
    let h = heads[s] ?? 0;
    while (h < map.length && map[h] === -1) h++;
    heads[s] = h;
  };
  for (let s = 0; s < k; s++) nextLive(s);
  for (let out = 0; out < liveTotal; out++) {
    let best = -1;
    let bestKey = Infinity;
    for (let s = 0; s < k; s++) {
      const h = heads[s] ?? 0;
      const data = (inputs[s] as MergeInput).data;
      if (h < data.keys.length) {
        const key = data.keys[h] ?? 0;
        if (key < bestKey) {
          bestKey = key;
          best = s;
        } else if (key === bestKey) throw new Error(`merge: key ${key} is in two segments`);
      }
    }
    const data = (inputs[best] as MergeInput).data;
    const h = heads[best] ?? 0;
    keys[out] = bestKey;
    docLengths[out] = data.docLengths[h] ?? 0;
    (newOrdinals[best] as Int32Array)[h] = out;
    heads[best] = h + 1;
    nextLive(best);
  }

  // The union of the terms, with their live posting counts.
  const termIndex = new Map<number, number>(); // global id → union index
  const unionTerms: number[] = [];
  const outTermOf: Int32Array[] = [];
  for (const { termIds } of inputs) {
    const map = new Int32Array(termIds.length);
    for (let t = 0; t < termIds.length; t++) {
      const termId = termIds[t] ?? 0;
      let id = termIndex.get(termId);
      if (id === undefined) {
        id = unionTerms.length;
        unionTerms.push(termId);
        termIndex.set(termId, id);
      }
      map[t] = id;
    }
    outTermOf.push(map);
  }
  const unionCount = unionTerms.length;
  const liveCounts = new Uint32Array(unionCount);
  const sourceCounts = new Uint32Array(unionCount + 1);
  let maxFrequency = 0;
  inputs.forEach(({ data }, s) => {
    const map = newOrdinals[s] as Int32Array;
    const outTerm = outTermOf[s] as Int32Array;
    for (let t = 0; t < data.termOffsets.length - 1; t++) {
      const u = outTerm[t] ?? 0;
      sourceCounts[u] = (sourceCounts[u] ?? 0) + 1;
      const end = data.termOffsets[t + 1] ?? 0;
      let live = 0;
      for (let p = data.termOffsets[t] ?? 0; p < end; p++) {
        if ((map[data.docIds[p] ?? 0] ?? -1) >= 0) {
          live++;
          const tf = data.termFreqs[p] ?? 1;
          if (tf > maxFrequency) maxFrequency = tf;
        }
      }
      liveCounts[u] = (liveCounts[u] ?? 0) + live;
    }
  });
  // Per union term, its (input, local term) sources, in input order.
  const sourceStarts = new Uint32Array(unionCount + 1);
  for (let u = 0; u < unionCount; u++) sourceStarts[u + 1] = (sourceStarts[u] ?? 0) + (sourceCounts[u] ?? 0);
  const sourceCursor = sourceStarts.slice(0, unionCount);
  const sourceInput = new Uint32Array(sourceStarts[unionCount] ?? 0);
  const sourceTerm = new Uint32Array(sourceStarts[unionCount] ?? 0);
  inputs.forEach(({ data }, s) => {
    const outTerm = outTermOf[s] as Int32Array;
    for (let t = 0; t < data.termOffsets.length - 1; t++) {
      const u = outTerm[t] ?? 0;
      const slot = sourceCursor[u] ?? 0;
      sourceCursor[u] = slot + 1;
      sourceInput[slot] = s;
      sourceTerm[slot] = t;
    }
  });

  // Output terms: those with live postings, in union order.
  const outputTermIds: number[] = [];
  let postingCount = 0;
  for (let u = 0; u < unionCount; u++) {
    if ((liveCounts[u] ?? 0) > 0) {
      outputTermIds.push(unionTerms[u] ?? 0);
      postingCount += liveCounts[u] ?? 0;
    }
  }
  const termCount = outputTermIds.length;
  const termOffsets = new Uint32Array(termCount + 1);
  const docIds = new Uint32Array(postingCount);
  const termFreqs = termFrequencyArray(postingCount, maxFrequency);
  const cursors = new Uint32Array(k);
  const ends = new Uint32Array(k);
  let out = 0;
  let p = 0;
  for (let u = 0; u < unionCount; u++) {
    if ((liveCounts[u] ?? 0) === 0) continue;
    termOffsets[out] = p;
    const first = sourceStarts[u] ?? 0;
    const last = sourceStarts[u + 1] ?? 0;
    for (let j = first; j < last; j++) {
      const data = (inputs[sourceInput[j] ?? 0] as MergeInput).data;
      const t = sourceTerm[j] ?? 0;
      cursors[j - first] = data.termOffsets[t] ?? 0;
      ends[j - first] = data.termOffsets[t + 1] ?? 0;
    }
    const sources = last - first;
    // k-way merge of the sources' lists by new ordinal (each list is ascending in it).
    for (;;) {
      let bestSource = -1;
      let bestOrdinal = Infinity;
      let bestTf = 0;
      for (let j = 0; j < sources; j++) {
        const s = sourceInput[first + j] ?? 0;
        const data = (inputs[s] as MergeInput).data;
        const map = newOrdinals[s] as Int32Array;
        let c = cursors[j] ?? 0;
        const end = ends[j] ?? 0;
        while (c < end && (map[data.docIds[c] ?? 0] ?? -1) < 0) c++;
        cursors[j] = c;
        if (c < end) {
          const ordinal = map[data.docIds[c] ?? 0] ?? 0;
          if (ordinal < bestOrdinal) {
            bestOrdinal = ordinal;
            bestSource = j;
            bestTf = data.termFreqs[c] ?? 1;
          }
        }
      }
      if (bestSource < 0) break;
      docIds[p] = bestOrdinal;
      termFreqs[p] = bestTf;
      p++;
      cursors[bestSource] = (cursors[bestSource] ?? 0) + 1;
    }
    out++;
  }
  termOffsets[termCount] = p;
  const terms = outputTermIds.map(termOf);
  return {
    data: { keys, docLengths, terms, termOffsets, docIds, termFreqs, referenceAverageLength },
    termIds: Uint32Array.from(outputTermIds),
  };
}

/** What a merge works from: copies of the sources' arrays and tombstones as of the snapshot. */
export interface MergeJob {
  readonly segments: ReadonlyArray<{
    data: Omit<SegmentData, "terms">;
    termIds: Uint32Array;
    deleted: Uint32Array;
  }>;
  /** The sources' terms: global ids (ascending), their strings concatenated, and each string's end. */
  readonly terms: { readonly ids: Uint32Array; readonly text: string; readonly ends: Uint32Array };
  readonly referenceAverageLength: number;
  readonly scorer: ScorerParameters;
  /** The sources' vectors (copies of their codes), for an index that keeps them. */
  readonly vectors?: {
    readonly options: VectorIndexOptions;
    readonly inputs: ReadonlyArray<{ codes: VectorCodes; scales: Float32Array | null }>;
  };
}

/** The merged segment's bytes and everything derived from them, computed off the event loop. */
export interface MergeOutput {
  readonly bytes: Uint8Array;
  readonly derived: SegmentDerived;
  /** The merged segment's vectors, encoded (its graph built here too, off the event loop); or null. */
  readonly vectors: Uint8Array | null;
}

/** Merges, derives bounds and frontiers, encodes (on the worker thread, or inline). */
export function runMergeJob(job: MergeJob): MergeOutput {
  const { ids, text, ends } = job.terms;
  const termOf = (termId: number): string => {
    const position = indexOfSorted(ids, termId);
    if (position < 0) throw new Error(`merge: term id ${termId} has no string`);
    return text.slice(position === 0 ? 0 : (ends[position - 1] ?? 0), ends[position] ?? 0);
  };
  const merged = mergeSegments(job.segments, job.referenceAverageLength, termOf);
  return {
    bytes: encodeSegment(0, merged.data),
    derived: deriveSegment(merged.data, merged.termIds, job.scorer, null),
    vectors: job.vectors === undefined ? null : mergeJobVectors(job, merged.data.keys),
  };
}

/**
 * The merged segment's vectors, in its document order: each source document not deleted at the
 * snapshot goes to the ordinal its key has among the merged keys (ascending); codes are copied as
 * stored, so scores do not change. A large result gets a new graph (graphs are not merged).
 */
function mergeJobVectors(job: MergeJob, mergedKeys: Uint32Array): Uint8Array {
  const { options, inputs } = job.vectors!;
  const sets = inputs.map(
    ({ codes, scales }) => new SegmentVectors(options.dimension, options.storage, codes, scales),
  );
  const docMaps = job.segments.map(({ data, deleted }, s) => {
    const map = new Int32Array(data.keys.length).fill(-1);
    if (sets[s]?.count !== data.keys.length)
      throw new Error(`merge: source ${s} has vectors for other documents`);
    for (let d = 0, next = 0; d < data.keys.length; d++) {
      // `deleted` is ascending: walk it beside the ordinals.
      if (next < deleted.length && deleted[next] === d) {
        next++;
        continue;
      }
      const merged = indexOfSorted(mergedKeys, data.keys[d] ?? 0);
      if (merged < 0) throw new Error(`merge: key ${data.keys[d] ?? 0} is not in the merged segment`);
      map[d] = merged;
    }
    return map;
  });
  return encodeVectors(mergeSegmentVectors(sets, docMaps, vectorSetOptions(options)));
}
