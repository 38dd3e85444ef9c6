/** Builders of documents, chunks and IndexWrite values for store tests. */
import { chunkDocument } from "../../src/rag/ingest/chunker.js";
import type {
  ChunkRecord,
  DocumentRecord,
  IndexKey,
  IndexSettings,
  IndexWrite,
  Metadata,
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
  extra: Partial<Pick<DocumentRecord, "title" | "source">> = {},
): DocumentRecord {
  return { id, title: extra.title ?? null, source: extra.source ?? null, text, metadata };
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

/** A stand-in for the serialised engine index: bytes that encode the chunk order. */
export function fakeEngineIndex(chunkOrder: readonly string[]): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ engine: "fake", chunkOrder }));
}

/** Chunk ids after an update: the old ones minus removed documents, plus the upserted ones. */
export function orderAfterUpdate(
  previous: readonly ChunkRecord[],
  upsert: readonly Entry[],
  deleteDocumentIds: readonly string[] = [],
): string[] {
  const gone = new Set([...deleteDocumentIds, ...upsert.map((e) => e.document.id)]);
  return [
    ...previous.filter((c) => !gone.has(c.documentId)).map((c) => c.chunkId),
    ...upsert.flatMap((e) => e.chunks.map((c) => c.chunkId)),
  ];
}

export function makeWrite(
  key: IndexKey,
  mode: IndexWrite["mode"],
  upsert: Entry[],
  options: {
    chunkOrder?: string[];
    deleteDocumentIds?: string[];
    expectedVersion?: number | null;
    settings?: IndexSettings;
    vocabularySize?: number;
  } = {},
): IndexWrite {
  // Reversed by default, so that tests notice a store returning chunks in insertion order.
  const chunkOrder = options.chunkOrder ?? upsert.flatMap((e) => e.chunks.map((c) => c.chunkId)).reverse();
  return {
    key,
    mode,
    settings: options.settings ?? SETTINGS,
    upsert,
    deleteDocumentIds: options.deleteDocumentIds ?? [],
    engineIndex: fakeEngineIndex(chunkOrder),
    chunkOrder,
    vocabularySize: options.vocabularySize ?? 42,
    expectedVersion: options.expectedVersion ?? null,
  };
}
