/** Builders of documents, chunks and IndexWrite values for store tests. */
import { chunkDocument } from "../../src/rag/ingest/chunker.js";
import type {
  ChunkRecord,
  DocumentRecord,
  EngineState,
  IndexKey,
  IndexSettings,
  IndexStore,
  IndexWrite,
  LoadedSegment,
  MergeWrite,
  Metadata,
  SegmentRecord,
  StoredChunk,
  Tombstone,
  VectorSpace,
} from "../../src/rag/store/types.js";
import { makeProse, seededRandom } from "./text-fixtures.js";

export const SETTINGS: IndexSettings = { scorer: "bm25", chunkSize: 200, overlap: 20 };

export interface Entry {
  document: DocumentRecord;
  chunks: ChunkRecord[];
}

export function makeDocument(
  id: string,
  text: string,
  metadata: Metadata = {},
  extra: Partial<Pick<DocumentRecord, "title" | "source" | "contentHash">> = {},
): DocumentRecord {
  return {
    id,
    title: extra.title ?? null,
    source: extra.source ?? null,
    text,
    metadata,
    contentHash: extra.contentHash ?? null,
  };
}

export function entry(document: DocumentRecord, settings: IndexSettings = SETTINGS): Entry {
  return { document, chunks: chunkDocument(document, settings) };
}

/** `count` documents of about `length` characters, ids `${prefix}${i}`, deterministic. */
export function makeEntries(
  count: number,
  { prefix = "doc-", length = 500, seed = 1, settings = SETTINGS } = {},
): Entry[] {
  const random = seededRandom(seed);
  return Array.from({ length: count }, (_, i) =>
    entry(
      makeDocument(`${prefix}${i}`, makeProse(random, length), { n: i, group: i % 3 === 0 ? "a" : "b" }),
      settings,
    ),
  );
}

/** Options of a write the model prepares. */
export interface WriteOptions {
  deleteDocumentIds?: string[];
  expectedVersion?: number | null;
  settings?: IndexSettings;
  vocabularySize?: number;
  /** The write's `vectors` (the index's embedding space after it); left out: not given. */
  vectors?: VectorSpace | null;
}

/** Opaque stand-in bytes of a segment (the store never parses them): they name its id and keys. */
export function fakeSegmentBytes(id: number, keys: readonly number[]): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ fakeSegment: id, keys }));
}

/** Opaque stand-in bytes of a segment's vectors (the store never parses them either). */
export function fakeVectorBytes(id: number, keys: readonly number[]): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ fakeVectors: id, keys }));
}

interface ModelSegment {
  keys: number[];
  deleted: Set<number>;
}

/** A prepared change: `apply()` makes the model take it (after the store committed it). */
export interface Prepared<T> {
  change: T;
  apply(): void;
}

/**
 * Plays the engine's and the service's part for store tests, so that every write and merge it
 * prepares is consistent (keys and segment ids never reused, tombstones on the right ordinals, live
 * documents = chunks): it assigns engine keys to chunks, puts each write's chunks in one new segment
 * (opaque fake bytes) and keeps which key each segment ordinal holds. It is a model of what the store
 * must hold, not of the store: tests compare what the store returns with it.
 */
export class IndexModel {
  /** Whether its segments carry (fake) vectors: set for an index with an embedding space. */
  withVectors = false;
  engine: EngineState = { nextKey: 0, nextSegmentId: 0, totalLength: 0 };
  segments = new Map<number, ModelSegment>();
  /** Live chunks by key, with their document. */
  chunks = new Map<number, StoredChunk>();
  keysByDocument = new Map<string, number[]>();

  /** A write of `upsert` (and deletes); the model changes only on `apply()`. */
  prepare(
    key: IndexKey,
    mode: IndexWrite["mode"],
    upsert: Entry[],
    options: WriteOptions = {},
  ): Prepared<IndexWrite> {
    const next = this.clone();
    if (mode === "replace") next.clear();
    const tombstones: Tombstone[] = [];
    for (const documentId of new Set([
      ...(options.deleteDocumentIds ?? []),
      ...upsert.map((e) => e.document.id),
    ])) {
      tombstones.push(...next.deleteDocument(documentId));
    }
    const stored = upsert.map(({ document, chunks }) => ({
      document,
      chunks: chunks.map((chunk): StoredChunk => ({ ...chunk, engineKey: next.engine.nextKey++ })),
    }));
    const keys = stored.flatMap((e) => e.chunks.map((c) => c.engineKey));
    let segment: SegmentRecord | null = null;
    if (keys.length > 0) {
      const id = next.engine.nextSegmentId++;
      segment = { id, documentCount: keys.length, bytes: fakeSegmentBytes(id, keys) };
      if (this.withVectors) segment.vectors = fakeVectorBytes(id, keys);
      next.segments.set(id, { keys, deleted: new Set() });
      for (const e of stored) {
        next.keysByDocument.set(
          e.document.id,
          e.chunks.map((c) => c.engineKey),
        );
        for (const c of e.chunks) {
          next.chunks.set(c.engineKey, c);
          next.engine.totalLength += c.text.length;
        }
      }
    }
    const change: IndexWrite = {
      key,
      mode,
      settings: options.settings ?? SETTINGS,
      upsert: stored,
      deleteDocumentIds: options.deleteDocumentIds ?? [],
      segment,
      tombstones,
      engine: { ...next.engine },
      vocabularySize: options.vocabularySize ?? 42,
      expectedVersion: options.expectedVersion ?? null,
      ...(options.vectors === undefined ? {} : { vectors: options.vectors }),
    };
    return { change, apply: () => this.take(next) };
  }

  /**
   * A merge of `segmentIds` as a worker would start it now (from their live documents); `commit()`
   * then gives the MergeWrite with the deletes that happened since as tombstones of the new segment.
   */
  startMerge(key: IndexKey, segmentIds: number[]) {
    const merged = segmentIds
      .flatMap((id) => {
        const segment = this.segments.get(id)!;
        return segment.keys.filter((_, ordinal) => !segment.deleted.has(ordinal));
      })
      .sort((a, b) => a - b);
    return {
      keys: merged,
      commit: (expectedVersion: number): Prepared<MergeWrite> => {
        const next = this.clone();
        const id = next.engine.nextSegmentId++;
        const deleted = new Set<number>();
        merged.forEach((k, ordinal) => {
          if (!next.chunks.has(k)) deleted.add(ordinal);
        });
        for (const removed of segmentIds) next.segments.delete(removed);
        next.segments.set(id, { keys: merged, deleted });
        const change: MergeWrite = {
          key,
          expectedVersion,
          removedSegmentIds: segmentIds,
          segment: {
            id,
            documentCount: merged.length,
            bytes: fakeSegmentBytes(id, merged),
            ...(this.withVectors ? { vectors: fakeVectorBytes(id, merged) } : {}),
          },
          tombstones: [...deleted].map((ordinal) => ({ segmentId: id, ordinal })),
          engine: { ...next.engine },
        };
        return { change, apply: () => this.take(next) };
      },
    };
  }

  /** A merge with nothing deleted in between. */
  merge(key: IndexKey, segmentIds: number[], expectedVersion: number): Prepared<MergeWrite> {
    return this.startMerge(key, segmentIds).commit(expectedVersion);
  }

  /** What the store's loadIndex must return as segments. */
  expectedSegments(): LoadedSegment[] {
    return [...this.segments.entries()]
      .sort(([a], [b]) => a - b)
      .map(([id, segment]) => ({
        id,
        documentCount: segment.keys.length,
        bytes: fakeSegmentBytes(id, segment.keys),
        ...(this.withVectors ? { vectors: fakeVectorBytes(id, segment.keys) } : {}),
        deleted: [...segment.deleted].sort((a, b) => a - b),
      }));
  }

  get deletedCount(): number {
    let n = 0;
    for (const segment of this.segments.values()) n += segment.deleted.size;
    return n;
  }

  private deleteDocument(documentId: string): Tombstone[] {
    const keys = this.keysByDocument.get(documentId);
    if (keys === undefined) return [];
    this.keysByDocument.delete(documentId);
    const tombstones: Tombstone[] = [];
    for (const k of keys) {
      const chunk = this.chunks.get(k)!;
      this.chunks.delete(k);
      this.engine.totalLength -= chunk.text.length;
      for (const [segmentId, segment] of this.segments) {
        const ordinal = segment.keys.indexOf(k);
        if (ordinal >= 0 && !segment.deleted.has(ordinal)) {
          segment.deleted.add(ordinal);
          tombstones.push({ segmentId, ordinal });
        }
      }
    }
    return tombstones;
  }

  private clear(): void {
    this.segments.clear();
    this.chunks.clear();
    this.keysByDocument.clear();
    this.engine.totalLength = 0;
  }

  private clone(): IndexModel {
    const copy = new IndexModel();
    copy.withVectors = this.withVectors;
    copy.engine = { ...this.engine };
    for (const [id, s] of this.segments) copy.segments.set(id, { keys: s.keys, deleted: new Set(s.deleted) });
    copy.chunks = new Map(this.chunks);
    copy.keysByDocument = new Map(this.keysByDocument);
    return copy;
  }

  private take(other: IndexModel): void {
    this.engine = other.engine;
    this.segments = other.segments;
    this.chunks = other.chunks;
    this.keysByDocument = other.keysByDocument;
  }
}

/** A write from a fresh model (for tests that need one consistent write and nothing after). */
export function makeWrite(
  key: IndexKey,
  mode: IndexWrite["mode"],
  upsert: Entry[],
  options: WriteOptions = {},
): IndexWrite {
  return new IndexModel().prepare(key, mode, upsert, options).change;
}

/** Everything observable about one index through the store, for before/after comparisons. */
export async function observe(store: IndexStore, key: IndexKey) {
  const stored = await store.loadIndex(key);
  if (stored === undefined) return undefined;
  const documents = await store.listDocuments(key);
  const allKeys = Array.from({ length: stored.meta.engine.nextKey }, (_, k) => k);
  return {
    meta: stored.meta,
    segments: stored.segments.map((s) => ({
      ...s,
      bytes: Buffer.from(s.bytes).toString("base64"),
      vectors: s.vectors == null ? null : Buffer.from(s.vectors).toString("base64"),
    })),
    documents,
    documentChunks: [
      ...(await store.getDocumentChunks(
        key,
        documents.map((d) => d.id),
      )),
    ],
    chunks: await store.getChunks(key, allKeys),
  };
}
