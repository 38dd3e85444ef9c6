/**
 * The read logic every store shares, as scripts over its read port (port.ts IndexSnapshot), run in one
 * read transaction so that the index row, its segments and its tombstones are one committed version:
 * a whole index (`loadIndex`) and what changed in it since a version (`loadChanges`, what a replica or
 * a cache catching up asks for).
 */
import { fromParts } from "../search/vectors/vector-codec.js";
import { withDeleted, type TombstoneRow } from "./common.js";
import { step, type AnyIndexRow, type IndexSnapshot, type Script } from "./port.js";
import type { IndexDelta, IndexKey, LoadedSegment, StoredIndex, Tombstone } from "./types.js";
import { segmentBytes, toMeta } from "./write-plan.js";

/** The index row, every segment with its tombstones and its vectors; undefined when the index is missing. */
export function* loadIndex<Row extends AnyIndexRow>(
  snapshot: IndexSnapshot<Row>,
  key: IndexKey,
): Script<StoredIndex | undefined> {
  const row = yield* step(snapshot.readIndex(key));
  if (row === undefined) return undefined;
  const rows = yield* step(snapshot.segments(row.id, null));
  const segments = withDeleted(rows, yield* step(snapshot.tombstones(row.id, null)));
  yield* withVectors(snapshot, row.id, segments);
  return { meta: toMeta(row), segments };
}

/**
 * What changed after `sinceVersion`: the segments created since (with all their tombstones, which are
 * all newer than the segment), the ids of every segment still held, and the tombstones created since
 * on segments that are older. Undefined when the index is missing.
 */
export function* loadChanges<Row extends AnyIndexRow>(
  snapshot: IndexSnapshot<Row>,
  key: IndexKey,
  sinceVersion: number,
): Script<IndexDelta | undefined> {
  const row = yield* step(snapshot.readIndex(key));
  if (row === undefined) return undefined;
  const liveSegmentIds = [...(yield* step(snapshot.segmentIds(row.id)))];
  const added = yield* step(snapshot.segments(row.id, sinceVersion));
  const addedIds = new Set(added.map((segment) => segment.segment_id));
  const ofAdded: TombstoneRow[] = [];
  const tombstones: Tombstone[] = [];
  for (const t of yield* step(snapshot.tombstones(row.id, sinceVersion))) {
    if (addedIds.has(t.segment_id)) ofAdded.push(t);
    else tombstones.push({ segmentId: t.segment_id, ordinal: t.ordinal });
  }
  const addedSegments = withDeleted(added, ofAdded);
  yield* withVectors(snapshot, row.id, addedSegments);
  const bytesLoaded = addedSegments.reduce((sum, segment) => sum + segmentBytes(segment), 0);
  return { meta: toMeta(row), addedSegments, liveSegmentIds, tombstones, bytesLoaded };
}

/** Gives each loaded segment its vectors, read a segment at a time (a part is up to 64 MB). */
function* withVectors<Row extends AnyIndexRow>(
  snapshot: IndexSnapshot<Row>,
  id: Row["id"],
  segments: LoadedSegment[],
): Script<void> {
  for (const segment of segments) {
    const parts = yield* step(snapshot.vectorParts(id, segment.id));
    if (parts.length > 0)
      segment.vectors = fromParts(
        parts.map((part) => new Uint8Array(part.buffer, part.byteOffset, part.byteLength)),
      );
  }
}
