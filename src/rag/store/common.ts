/**
 * What every IndexStore shares: the checks of a write that do not depend on stored state, the error
 * a stale `expectedVersion` raises, the size accounting of a document, and how segment rows are read
 * back. Keeping them in one place keeps the SQLite and PostgreSQL stores answering alike, down to the
 * messages; what a write does to stored state is their shared plan (write-plan.ts).
 */
import { badRequest, corrupt, DomainError } from "../../core/errors.js";
import type {
  ChunkHit,
  ChunkRecord,
  DocumentRecord,
  EngineState,
  IndexKey,
  IndexWrite,
  LoadedSegment,
  MergeWrite,
  Metadata,
  SegmentRecord,
  Tombstone,
} from "./types.js";

/** A broken invariant of a write or of stored state. */
export const internal = corrupt;

export const label = (key: IndexKey) => `index "${key.name}" of tenant "${key.tenantId}"`;

/**
 * The 409 of a write whose `expectedVersion` no longer matches the stored version: another writer
 * committed in between. Its own class so that a writer can tell it from "already exists" and retry.
 */
export class StaleVersionError extends DomainError {
  constructor(key: IndexKey, found: number | undefined, expected: number) {
    super(
      "conflict",
      `${label(key)} was changed by another write (version ${found ?? "none"}, expected ${expected}); retry`,
    );
    this.name = "StaleVersionError";
  }
}

/** Checks what does not depend on stored state; throws before any transaction starts. */
export function validateWrite(change: IndexWrite): void {
  const ids = new Set<string>();
  const keys = new Set<number>();
  const { engine } = change;
  checkEngineState(engine);
  for (const { document, chunks } of change.upsert) {
    if (ids.has(document.id)) throw badRequest(`document id "${document.id}" is given more than once`);
    ids.add(document.id);
    chunks.forEach((chunk, seq) => {
      if (
        chunk.documentId !== document.id ||
        chunk.seq !== seq ||
        chunk.chunkId !== `${document.id}#${seq}`
      ) {
        throw internal(`chunk "${chunk.chunkId}" does not belong at position ${seq} of "${document.id}"`);
      }
      if (!isKey(chunk.engineKey) || chunk.engineKey >= engine.nextKey) {
        throw internal(
          `chunk "${chunk.chunkId}" has engine key ${chunk.engineKey}, not below ${engine.nextKey}`,
        );
      }
      if (keys.has(chunk.engineKey)) throw internal(`engine key ${chunk.engineKey} is given more than once`);
      keys.add(chunk.engineKey);
    });
  }
  if (change.segment !== null) checkSegment(change.segment, engine);
  else if (keys.size > 0) throw internal("a write that adds chunks must add their segment");
  checkTombstones(change.tombstones);
}

/** Checks a merge's shape (what does not depend on stored state). */
export function validateMerge(change: MergeWrite): void {
  checkEngineState(change.engine);
  checkSegment(change.segment, change.engine);
  if (change.removedSegmentIds.length === 0) throw internal("a merge must remove at least one segment");
  if (new Set(change.removedSegmentIds).size !== change.removedSegmentIds.length) {
    throw internal("a merge names a removed segment more than once");
  }
  if (change.removedSegmentIds.includes(change.segment.id)) {
    throw internal(`a merge cannot both remove and add segment ${change.segment.id}`);
  }
  checkTombstones(change.tombstones);
  if (change.tombstones.some((t) => t.segmentId !== change.segment.id)) {
    throw internal("a merge's tombstones must all be on its new segment");
  }
}

const isKey = (n: number) => Number.isSafeInteger(n) && n >= 0;

function checkEngineState(engine: EngineState): void {
  if (!isKey(engine.nextKey) || !isKey(engine.nextSegmentId) || !isKey(engine.totalLength)) {
    throw internal(`invalid engine state ${JSON.stringify(engine)}`);
  }
}

function checkSegment(segment: SegmentRecord, engine: EngineState): void {
  if (!isKey(segment.id) || segment.id >= engine.nextSegmentId) {
    throw internal(`segment id ${segment.id} is not below nextSegmentId ${engine.nextSegmentId}`);
  }
  // A merge of wholly deleted segments may leave a segment without documents: harmless, allowed.
  if (!isKey(segment.documentCount) || segment.bytes.byteLength === 0) {
    throw internal(`segment ${segment.id} has no bytes or an invalid document count`);
  }
}

function checkTombstones(tombstones: readonly Tombstone[]): void {
  const seen = new Set<string>();
  for (const { segmentId, ordinal } of tombstones) {
    if (!isKey(segmentId) || !isKey(ordinal)) throw internal(`invalid tombstone ${segmentId}/${ordinal}`);
    const id = `${segmentId}/${ordinal}`;
    if (seen.has(id)) throw internal(`tombstone ${id} is given more than once`);
    seen.add(id);
  }
}

/**
 * Tombstones per segment, for the per-segment checks of a write (the segment exists, the ordinal is
 * below its document count) and for building `deleted` lists.
 */
export function groupTombstones(tombstones: readonly Tombstone[]): Map<number, number[]> {
  const bySegment = new Map<number, number[]>();
  for (const { segmentId, ordinal } of tombstones) {
    let list = bySegment.get(segmentId);
    if (list === undefined) bySegment.set(segmentId, (list = []));
    list.push(ordinal);
  }
  return bySegment;
}

export const utf8 = (s: string) => Buffer.byteLength(s, "utf8");

/** A document's serialised metadata, its chunks' and the bytes all of it occupies (UTF-8). */
export function serialiseDocument(document: DocumentRecord, chunks: ChunkRecord[]) {
  const metadata = JSON.stringify(document.metadata);
  let bytes = utf8(document.text) + utf8(metadata);
  const chunkMetadata = chunks.map((chunk) => {
    const json = JSON.stringify(chunk.metadata);
    bytes += utf8(chunk.text) + utf8(json);
    return json;
  });
  return { metadata, chunkMetadata, bytes };
}

/** The engine index as a Buffer over the same memory (no copy). */
export const asBuffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/**
 * A chunk row joined with its document's title and source, as both stores read it for a query:
 * `Key` is how the engine key arrives (a bigint string from PostgreSQL), `Meta` the metadata column
 * (JSON text from SQLite, parsed JSON from PostgreSQL).
 */
export interface ChunkHitRow<Key extends number | string, Meta> {
  engine_key: Key;
  chunk_id: string;
  doc_id: string;
  seq: number;
  start_offset: number;
  end_offset: number;
  metadata: Meta;
  text: string;
  title: string | null;
  source: string | null;
}

/** The hits of the keys asked for, in their order, leaving out keys no chunk has. */
export function chunkHitsInKeyOrder<Meta>(
  engineKeys: readonly number[],
  rows: ReadonlyArray<ChunkHitRow<number | string, Meta>>,
  metadataOf: (metadata: Meta) => Metadata,
): ChunkHit[] {
  const byKey = new Map<number, ChunkHitRow<number | string, Meta>>();
  for (const row of rows) byKey.set(Number(row.engine_key), row);
  const ordered: ChunkHit[] = [];
  for (const key of engineKeys) {
    const row = byKey.get(key);
    if (row === undefined) continue;
    ordered.push({
      engineKey: key,
      chunkId: row.chunk_id,
      documentId: row.doc_id,
      seq: row.seq,
      text: row.text,
      start: row.start_offset,
      end: row.end_offset,
      metadata: metadataOf(row.metadata),
      title: row.title,
      source: row.source,
    });
  }
  return ordered;
}

/**
 * The live engine documents of an index must be its chunks: segment documents minus tombstones equal
 * the chunk rows after every write and merge. (An index from before the segmented index has chunks but
 * no segment yet; the service's first write to it is the re-index that adds them.)
 */
export function checkLiveCount(
  key: IndexKey,
  segmentDocuments: number,
  tombstones: number,
  chunks: number,
): void {
  if (segmentDocuments - tombstones !== chunks) {
    throw internal(
      `${label(key)} would hold ${chunks} chunks but ${segmentDocuments - tombstones} live engine documents ` +
        `(${segmentDocuments} in segments, ${tombstones} deleted)`,
    );
  }
}

/** A segment row as both stores read it. */
export interface SegmentRow {
  segment_id: number;
  doc_count: number;
  /**
   * A BLOB from SQLite; from PostgreSQL a bytea, which arrives hex-encoded and pg decodes to a Buffer
   * (pg's binary transfer mode would decode the bytes as UTF-8 text and corrupt them: not an option).
   */
  bytes: Buffer;
}

export interface TombstoneRow {
  segment_id: number;
  ordinal: number;
}

/** Segments with their tombstones (both in ascending order), as loadIndex and loadChanges return them. */
export function withDeleted(
  segments: readonly SegmentRow[],
  tombstones: Iterable<TombstoneRow>,
): LoadedSegment[] {
  const loaded = segments.map((row): LoadedSegment => ({
    id: row.segment_id,
    documentCount: row.doc_count,
    bytes: new Uint8Array(row.bytes.buffer, row.bytes.byteOffset, row.bytes.byteLength),
    deleted: [],
  }));
  const byId = new Map(loaded.map((segment) => [segment.id, segment]));
  for (const { segment_id: segmentId, ordinal } of tombstones) byId.get(segmentId)?.deleted.push(ordinal);
  return loaded;
}
