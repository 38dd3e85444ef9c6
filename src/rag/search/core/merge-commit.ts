/**
 * Committing a merge: a merged segment computed from a snapshot (indexer/merge.ts, on a worker thread)
 * turned into a commit against the index as it is then, deletes made meanwhile becoming tombstones of
 * the merged segment. In core/ because it changes the index's segments in memory (as a write's apply
 * and a catch-up do); indexer/ depends on core/, never the other way.
 */
import { LiveDocs } from "./live-docs.js";
import { setSegmentId, viewSegment } from "./segment-codec.js";
import { Segment, type SegmentDerived } from "./segment.js";
import { indexOfSorted } from "./sorted.js";
import type { TermDictionary } from "./term-dictionary.js";
import type { ScorerParameters } from "../scoring.js";
import type { IndexState, SegmentRecord, Tombstone, VectorIndexOptions } from "../types.js";
import type { Directory } from "../directory.js";
import { decodeSegmentVectors } from "./dense.js";

/**
 * What a merge reads of and writes to the index: segmented-index.ts's SegmentedIndex, named by its
 * shape so that this file and segmented-index.ts (which calls prepareMerge) do not import each other.
 */
export interface MergeableIndex {
  readonly options: {
    readonly vectors: Readonly<VectorIndexOptions> | null;
    readonly directory: Directory | null;
  };
  readonly dictionary: TermDictionary;
  readonly scorerParameters: ScorerParameters;
  readonly liveDocumentCount: number;
  readonly totalLength: number;
  readonly state: IndexState;
  readonly segmentsInOrder: readonly Segment[];
  version: number;
  segmentById(id: number): Segment | undefined;
  insertSegment(segment: Segment, position: number, countStatistics: boolean): void;
  detachSegment(segment: Segment, countStatistics?: boolean): void;
  setState(state: IndexState): void;
}

/** A merged segment computed from a snapshot (opaque to callers). */
export interface MergeResult {
  /** @internal */
  readonly sourceIds: readonly number[];
  /** @internal Per source, the ordinals deleted at snapshot time (ascending). */
  readonly snapshotDeleted: readonly Uint32Array[];
  /** @internal The merged segment's bytes (segment id patched when committed). */
  readonly bytes: Uint8Array;
  /** @internal Its term lookup, bounds and frontiers (computed with the merge, off the event loop). */
  readonly derived: SegmentDerived;
  /** @internal Its vectors' bytes (null: the index keeps none), computed with the merge. */
  readonly vectors: Uint8Array | null;
}

export interface PreparedMerge {
  /** The merged segment (new id from state.nextSegmentId). */
  readonly segment: SegmentRecord;
  readonly removedSegmentIds: readonly number[];
  /** In the merged segment: documents deleted while it merged. */
  readonly tombstones: readonly Tombstone[];
  readonly state: IndexState;
  /** Swaps the segments in memory; throws if the index changed since `prepareMerge`. */
  apply(): void;
  /**
   * Lets go of a merge that will not be applied (its commit failed, or it went stale): the merged
   * segment's vector file, if its codes went to the index's directory, is released. No-op once applied.
   */
  discard(): void;
}

/** Results already turned into a PreparedMerge (whose bytes must not change under it). */
const preparedResults = new WeakSet<MergeResult>();

/** Turns a merge result into a commit against the index's current state (see `SegmentedIndex.prepareMerge`). */
export function prepareMerge(index: MergeableIndex, result: MergeResult): PreparedMerge {
  const version = index.version;
  let sources = result.sourceIds.map((id) => {
    const segment = index.segmentById(id);
    if (segment === undefined) throw new Error(`merge is stale: segment ${id} is no longer in the index`);
    return segment;
  });
  const before = index.state;
  const id = before.nextSegmentId;
  // The in-memory segment's arrays are views into the result's bytes (its id patched in) and the derived
  // arrays come from the merge: little work here but the scan for deletes made during the merge. A result
  // prepared a second time is copied, so that the first PreparedMerge's bytes keep their id.
  const bytes = preparedResults.has(result) ? result.bytes.slice() : result.bytes;
  preparedResults.add(result);
  setSegmentId(bytes, id);
  const data = viewSegment(bytes);
  if (result.derived.termIds.length !== data.termCount)
    throw new Error("merge result: derived arrays do not match");
  // Deletes since the snapshot: tombstones of the merged segment.
  const carried: number[] = [];
  sources.forEach((source, s) => {
    const atSnapshot = new Set(result.snapshotDeleted[s] ?? []);
    for (const ordinal of source.live.deletedOrdinals()) {
      if (atSnapshot.has(ordinal)) continue;
      const key = source.keys[ordinal] ?? 0;
      const merged = indexOfSorted(data.keys, key);
      if (merged < 0) throw new Error(`merge result does not hold key ${key}: it is not from this index`);
      carried.push(merged);
    }
  });
  carried.sort((a, b) => a - b);
  const live = new LiveDocs(data.keys.length);
  for (const ordinal of carried) live.delete(ordinal);
  const segment = new Segment(id, data, result.derived, live, bytes.byteLength);
  segment.markFrontiersStale(carried);
  segment.vectors = decodeSegmentVectors(index.options, id, data.keys.length, result.vectors);
  const state: IndexState = { nextKey: before.nextKey, nextSegmentId: id + 1 };
  let applied = false;
  let discarded = false;
  return {
    segment: {
      id,
      documentCount: data.keys.length,
      bytes,
      ...(result.vectors === null ? {} : { vectors: result.vectors }),
    },
    removedSegmentIds: [...result.sourceIds],
    tombstones: carried.map((ordinal) => ({ segmentId: id, ordinal })),
    state,
    apply(): void {
      if (applied) throw new Error("this merge was already applied");
      if (discarded) throw new Error("this merge was discarded");
      if (index.version !== version) throw new Error("the index changed since this merge was prepared");
      const position = Math.min(...sources.map((source) => index.segmentsInOrder.indexOf(source)));
      // Insert before detaching, so that no shared term is forgotten in between. Statistics do not change.
      index.insertSegment(segment, position, false);
      for (const source of sources) index.detachSegment(source, false);
      index.setState(state);
      index.version++;
      applied = true;
      sources = []; // a PreparedMerge kept by the caller must not keep the old segments alive
    },
    discard(): void {
      if (applied || discarded) return;
      discarded = true;
      segment.vectors?.release();
    },
  };
}
