/**
 * The write logic every store shares: what a write or a merge must find (its preconditions), which
 * rows it removes and adds, and the index row after it (its counters kept incrementally, the
 * live-documents invariant checked), as pure functions; and the scripts that run them over a store's
 * transaction port (port.ts): `applyWrite`, `applyMerge` and `dropIndex`, step by step. A store only
 * supplies the statements and the transaction around them, and hands back what only the database
 * knows (the rows a delete removed, the documents its segments hold). So no two stores can drift
 * apart in what a write means, down to the messages.
 */
import { conflict, notFound } from "../../core/errors.js";
import {
  StaleVersionError,
  checkLiveCount,
  groupTombstones,
  internal,
  label,
  serialiseDocument,
} from "./common.js";
import {
  step,
  type AnyIndexRow,
  type IndexTransaction,
  type IndexUpdate,
  type RemovedDocument,
  type Script,
  type SerialisedDocument,
} from "./port.js";
import type {
  IndexKey,
  IndexMeta,
  IndexWrite,
  MergeWrite,
  SegmentRecord,
  Tombstone,
  VectorSpace,
  VectorStorage,
} from "./types.js";

export type { AnyIndexRow, IndexRowOf, IndexUpdate } from "./port.js";

/** The columns of an IndexRowOf, for SELECT and RETURNING lists. */
export const META_COLUMNS =
  "id, tenant_id, name, scorer, chunk_size, overlap, documents_count, chunks_count, vocabulary_size, " +
  "size_bytes, version, created_at, updated_at, next_key, next_segment_id, total_length, segments_count, " +
  "deleted_chunks_count, vector_model, vector_dimension, vector_storage";

const isoTime = (time: string | Date) => (typeof time === "string" ? time : time.toISOString());

export function toMeta(row: AnyIndexRow): IndexMeta {
  return {
    tenantId: row.tenant_id,
    name: row.name,
    scorer: row.scorer,
    chunkSize: row.chunk_size,
    overlap: row.overlap,
    documentsCount: row.documents_count,
    chunksCount: row.chunks_count,
    vocabularySize: row.vocabulary_size,
    segmentsCount: row.segments_count,
    deletedChunksCount: row.deleted_chunks_count,
    engine: {
      nextKey: Number(row.next_key),
      nextSegmentId: row.next_segment_id,
      totalLength: Number(row.total_length),
    },
    vectors:
      row.vector_model === null || row.vector_dimension === null
        ? null
        : {
            model: row.vector_model,
            dimension: row.vector_dimension,
            storage: row.vector_storage as VectorStorage,
          },
    sizeBytes: Number(row.size_bytes),
    createdAt: isoTime(row.created_at),
    updatedAt: isoTime(row.updated_at),
    version: Number(row.version),
  };
}

/** The vector columns of an index row holding `space`. */
function vectorColumns(space: VectorSpace | null) {
  return {
    vectorModel: space?.model ?? null,
    vectorDimension: space?.dimension ?? null,
    vectorStorage: space?.storage ?? null,
  };
}

/** A segment's bytes in the store: its postings and its vectors. */
export const segmentBytes = (segment: SegmentRecord) =>
  segment.bytes.byteLength + (segment.vectors?.byteLength ?? 0);

/** A 500 when a segment's vectors do not match the index's space (carried iff it has one). */
function checkSegmentVectors(change: { key: IndexKey }, segment: SegmentRecord, space: VectorSpace | null) {
  if ((space !== null) !== (segment.vectors != null)) {
    throw internal(
      space === null
        ? `segment ${segment.id} carries vectors, but ${label(change.key)} has no embedding space`
        : `segment ${segment.id} carries no vectors, but ${label(change.key)} keeps ${space.model} vectors`,
    );
  }
}

type Counts = Pick<
  IndexUpdate,
  "documentsCount" | "chunksCount" | "sizeBytes" | "segmentsCount" | "deletedChunksCount"
>;

const NO_COUNTS: Counts = {
  documentsCount: 0,
  chunksCount: 0,
  sizeBytes: 0,
  segmentsCount: 0,
  deletedChunksCount: 0,
};

/** One write, as a store executes it, in this order. */
export interface WritePlan<Row extends AnyIndexRow = AnyIndexRow> {
  change: IndexWrite;
  /** The index row as stored; none: insert one first (settings, counters at zero). */
  row: Row | undefined;
  /** `replace`: every tombstone, segment, chunk and document row of the index goes first. */
  clearIndex: boolean;
  /** `update`: these documents lose their chunk and document rows (deleted, or replaced by upsert). */
  removeDocumentIds: string[];
  /** Then the write's segment (if any), its tombstones (checkTombstoneBounds), its documents and chunks. */
  segment: SegmentRecord | null;
  tombstones: readonly Tombstone[];
  upsert: IndexWrite["upsert"];
  /** The counters the write starts from: the index's own for an update, zeros for a new or replaced one. */
  base: Counts;
  /** The index's embedding space after the write. */
  vectors: VectorSpace | null;
}

/**
 * The plan of a write against the index as stored (`row`, read in the write's transaction): a 409
 * for a create of an existing index, a 404 for an update of a missing one, a 409 StaleVersionError
 * when the stored version is not the one the writer read.
 */
export function planWrite<Row extends AnyIndexRow>(change: IndexWrite, row: Row | undefined): WritePlan<Row> {
  const { key, mode } = change;
  const existing = row === undefined ? undefined : toMeta(row);
  if (mode === "create" && existing !== undefined) throw conflict(`${label(key)} already exists`);
  if (mode === "update" && existing === undefined) throw notFound(`${label(key)} not found`);
  if (change.expectedVersion !== null && (existing?.version ?? 0) !== change.expectedVersion) {
    throw new StaleVersionError(key, existing?.version, change.expectedVersion);
  }
  const update = existing !== undefined && mode !== "replace";
  const vectors = change.vectors !== undefined ? change.vectors : update ? existing.vectors : null;
  if (change.segment !== null) checkSegmentVectors(change, change.segment, vectors);
  return {
    vectors,
    change,
    row,
    clearIndex: existing !== undefined && mode === "replace",
    removeDocumentIds: update
      ? [...new Set([...change.deleteDocumentIds, ...change.upsert.map((u) => u.document.id)])]
      : [],
    segment: change.segment,
    tombstones: change.tombstones,
    upsert: change.upsert,
    base: update ? countsOf(existing) : NO_COUNTS,
  };
}

/** What the database did for a write: the rows it removed and what it holds after the write. */
export interface WriteOutcome {
  /** The document rows `removeDocumentIds` found (an id the index did not hold is no row). */
  removedDocuments: readonly RemovedDocument[];
  /** Bytes of the inserted documents and chunks (text and serialised metadata, UTF-8). */
  insertedBytes: number;
  /** Documents in all the index's segments after the write. */
  segmentDocuments: number;
  version: number;
  now: string;
}

/**
 * The index row after a write; a 500 (nothing committed) when its live engine documents (segment
 * documents minus tombstones) would not equal its chunks.
 */
export function indexAfterWrite(plan: WritePlan, outcome: WriteOutcome): IndexUpdate {
  const { change } = plan;
  const counts = { ...plan.base };
  for (const removed of outcome.removedDocuments) {
    counts.documentsCount--;
    counts.chunksCount -= removed.chunksCount;
    counts.sizeBytes -= removed.sizeBytes;
  }
  if (plan.segment !== null) {
    counts.segmentsCount++;
    counts.sizeBytes += segmentBytes(plan.segment);
  }
  counts.deletedChunksCount += plan.tombstones.length;
  for (const { chunks } of plan.upsert) {
    counts.documentsCount++;
    counts.chunksCount += chunks.length;
  }
  counts.sizeBytes += outcome.insertedBytes;
  checkLiveCount(change.key, outcome.segmentDocuments, counts.deletedChunksCount, counts.chunksCount);
  return {
    scorer: change.settings.scorer,
    chunkSize: change.settings.chunkSize,
    overlap: change.settings.overlap,
    ...counts,
    vocabularySize: change.vocabularySize,
    ...vectorColumns(plan.vectors),
    version: outcome.version,
    now: outcome.now,
    nextKey: change.engine.nextKey,
    nextSegmentId: change.engine.nextSegmentId,
    totalLength: change.engine.totalLength,
  };
}

/**
 * One merge, as a store executes it: remove the merged segments and their tombstones (reporting what
 * it removed), then add the merged segment and its tombstones (checkTombstoneBounds).
 */
export interface MergePlan<Row extends AnyIndexRow = AnyIndexRow> {
  change: MergeWrite;
  /** The index row as stored, and as meta. */
  row: Row;
  existing: IndexMeta;
}

/** The plan of a merge: a 404 when the index is gone, a 409 StaleVersionError when it changed since. */
export function planMerge<Row extends AnyIndexRow>(change: MergeWrite, row: Row | undefined): MergePlan<Row> {
  if (row === undefined) throw notFound(`${label(change.key)} not found`);
  const existing = toMeta(row);
  if (existing.version !== change.expectedVersion) {
    throw new StaleVersionError(change.key, existing.version, change.expectedVersion);
  }
  checkSegmentVectors(change, change.segment, existing.vectors);
  return { change, row, existing };
}

/** What the database did for a merge: the segment rows and tombstones it removed. */
export interface MergeOutcome {
  removedSegments: ReadonlyArray<{ documentCount: number; sizeBytes: number }>;
  removedTombstones: number;
  version: number;
  now: string;
}

/**
 * The index row after a merge; a 500 (nothing committed) when a merged segment was missing, or when
 * the merged segment does not hold exactly the documents of the ones it replaces that were live
 * when the merge started (those deleted since are its tombstones).
 */
export function indexAfterMerge(plan: MergePlan, outcome: MergeOutcome): IndexUpdate {
  const { change, existing } = plan;
  const { key, segment } = change;
  if (outcome.removedSegments.length !== change.removedSegmentIds.length) {
    throw internal(`${label(key)} lacks a segment of the merge (${change.removedSegmentIds.join(", ")})`);
  }
  let removedDocuments = 0;
  let removedBytes = 0;
  for (const removed of outcome.removedSegments) {
    removedDocuments += removed.documentCount;
    removedBytes += removed.sizeBytes;
  }
  checkLiveCount(
    key,
    segment.documentCount,
    change.tombstones.length,
    removedDocuments - outcome.removedTombstones,
  );
  return {
    scorer: existing.scorer,
    chunkSize: existing.chunkSize,
    overlap: existing.overlap,
    documentsCount: existing.documentsCount,
    chunksCount: existing.chunksCount,
    vocabularySize: existing.vocabularySize,
    sizeBytes: existing.sizeBytes - removedBytes + segmentBytes(segment),
    ...vectorColumns(existing.vectors),
    version: outcome.version,
    now: outcome.now,
    nextKey: change.engine.nextKey,
    nextSegmentId: change.engine.nextSegmentId,
    totalLength: change.engine.totalLength,
    segmentsCount: existing.segmentsCount - change.removedSegmentIds.length + 1,
    deletedChunksCount: existing.deletedChunksCount - outcome.removedTombstones + change.tombstones.length,
  };
}

/**
 * Tombstone bounds: each tombstone's segment is one the index holds (`documentCounts`: its segments'
 * document counts, at least those the tombstones name) and its ordinal is below that count.
 */
export function checkTombstoneBounds(
  bySegment: ReadonlyMap<number, readonly number[]>,
  documentCounts: ReadonlyMap<number, number>,
): void {
  for (const [segmentId, ordinals] of bySegment) {
    const documentCount = documentCounts.get(segmentId);
    if (documentCount === undefined) {
      throw internal(`a tombstone names segment ${segmentId}, which the index lacks`);
    }
    const outside = ordinals.find((ordinal) => ordinal >= documentCount);
    if (outside !== undefined) {
      throw internal(`tombstone ${segmentId}/${outside} is beyond the segment's ${documentCount} documents`);
    }
  }
}

function countsOf(meta: IndexMeta): Counts {
  return {
    documentsCount: meta.documentsCount,
    chunksCount: meta.chunksCount,
    sizeBytes: meta.sizeBytes,
    segmentsCount: meta.segmentsCount,
    deletedChunksCount: meta.deletedChunksCount,
  };
}

/** Characters of text (documents and their chunks) one insert step of a write carries, about. */
const INSERT_STEP_CHARS = 1024 * 1024;

/**
 * A write's documents serialised for insertion, in steps of about INSERT_STEP_CHARS: a store that runs
 * a script in slices (sqlite-store.ts) yields between them, so a large document goes in parts (its
 * row with the first, its chunks after), and no copy of a large write's metadata is made at once.
 * `bytes`: what the documents the step begins count in the index's size.
 */
function* insertSteps(
  upsert: IndexWrite["upsert"],
): Generator<{ parts: SerialisedDocument[]; bytes: number }> {
  let parts: SerialisedDocument[] = [];
  let chars = 0;
  let bytes = 0;
  for (const { document, chunks } of upsert) {
    const serialised = serialiseDocument(document, chunks);
    bytes += serialised.bytes;
    chars += document.text.length;
    const part = (from: number, to: number, documentRow: boolean): SerialisedDocument => ({
      document,
      chunks: chunks.slice(from, to),
      metadata: serialised.metadata,
      chunkMetadata: serialised.chunkMetadata.slice(from, to),
      bytes: serialised.bytes,
      chunkCount: chunks.length,
      documentRow,
    });
    let from = 0;
    for (let i = 0; i < chunks.length; i++) {
      chars += chunks[i]!.text.length;
      if (chars < INSERT_STEP_CHARS) continue;
      parts.push(part(from, i + 1, from === 0));
      yield { parts, bytes };
      parts = [];
      chars = 0;
      bytes = 0;
      from = i + 1;
    }
    if (from === 0 || from < chunks.length) parts.push(part(from, chunks.length, from === 0));
  }
  if (parts.length > 0) yield { parts, bytes };
}

/**
 * A write, executed in the store's write transaction: the index row read (under the store's writer
 * lock, if it has one), the plan made, then its rows removed and added in this order, and the index
 * row stored. Anything thrown rolls the whole transaction back.
 */
export function* applyWrite<Row extends AnyIndexRow>(
  tx: IndexTransaction<Row>,
  change: IndexWrite,
): Script<IndexMeta> {
  const { key } = change;
  const plan = planWrite(change, yield* step(tx.readIndex(key)));
  const version = yield* step(tx.nextVersion());
  const now = new Date().toISOString();
  const id = plan.row?.id ?? (yield* step(tx.insertIndex(key, change.settings, version, now)));
  if (plan.clearIndex) yield* step(tx.clearIndex(id));
  const removedDocuments =
    plan.removeDocumentIds.length === 0 ? [] : yield* step(tx.removeDocuments(id, plan.removeDocumentIds));
  if (plan.segment !== null) yield* step(tx.insertSegment(id, plan.segment, version));
  yield* insertTombstones(tx, id, plan.tombstones, version);
  let insertedBytes = 0;
  for (const { parts, bytes } of insertSteps(plan.upsert)) {
    insertedBytes += bytes;
    yield* step(tx.insertDocuments(id, parts));
  }
  const segmentDocuments = yield* step(tx.segmentDocumentTotal(id));
  const update = indexAfterWrite(plan, { removedDocuments, insertedBytes, segmentDocuments, version, now });
  return yield* storeIndexRow(tx, key, id, update);
}

/**
 * A merge, executed in the store's write transaction: the merged segments and their tombstones
 * removed (reporting what they held), the index row after it computed and checked, then the merged
 * segment and its tombstones added and the index row stored.
 */
export function* applyMerge<Row extends AnyIndexRow>(
  tx: IndexTransaction<Row>,
  change: MergeWrite,
): Script<IndexMeta> {
  const plan = planMerge(change, yield* step(tx.readIndex(change.key)));
  const id = plan.row.id;
  const version = yield* step(tx.nextVersion());
  const removed = yield* step(tx.removeSegments(id, change.removedSegmentIds));
  const update = indexAfterMerge(plan, {
    removedSegments: removed.segments,
    removedTombstones: removed.tombstones,
    version,
    now: new Date().toISOString(),
  });
  yield* step(tx.insertSegment(id, change.segment, version));
  yield* insertTombstones(tx, id, change.tombstones, version);
  return yield* storeIndexRow(tx, change.key, id, update);
}

/** Deletes an index and every row of it, in the store's write transaction; false when it is missing. */
export function* dropIndex<Row extends AnyIndexRow>(
  tx: IndexTransaction<Row>,
  key: IndexKey,
): Script<boolean> {
  const row = yield* step(tx.readIndex(key));
  if (row === undefined) return false;
  yield* step(tx.clearIndex(row.id));
  yield* step(tx.deleteIndex(row.id));
  if (tx.announce) yield* step(tx.announce({ tenantId: key.tenantId, name: key.name, version: null }));
  return true;
}

/** Stores the index row and announces the version it committed; the meta it now holds. */
function* storeIndexRow<Row extends AnyIndexRow>(
  tx: IndexTransaction<Row>,
  key: IndexKey,
  id: Row["id"],
  update: IndexUpdate,
): Script<IndexMeta> {
  const meta = toMeta(yield* step(tx.updateIndex(id, update)));
  if (tx.announce)
    yield* step(tx.announce({ tenantId: key.tenantId, name: key.name, version: update.version }));
  return meta;
}

/** Checks each tombstone's segment (the index holds it, the ordinal is in it), then inserts them all. */
function* insertTombstones<Row extends AnyIndexRow>(
  tx: IndexTransaction<Row>,
  id: Row["id"],
  tombstones: readonly Tombstone[],
  version: number,
): Script<void> {
  if (tombstones.length === 0) return;
  const bySegment = groupTombstones(tombstones);
  checkTombstoneBounds(bySegment, yield* step(tx.segmentDocumentCounts(id, [...bySegment.keys()])));
  yield* step(tx.insertTombstones(id, tombstones, version));
}
