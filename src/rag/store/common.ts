/**
 * What every IndexStore shares: the checks of a write that do not depend on stored state, the error
 * a stale `expectedVersion` raises, and the size accounting of a document. Keeping them in one place
 * keeps the SQLite and PostgreSQL stores answering alike, down to the messages.
 */
import { ApiError, badRequest } from "../../core/errors.js";
import type { ChunkRecord, DocumentRecord, IndexKey, IndexWrite, Metadata } from "./types.js";

export const internal = (message: string) => new ApiError(500, "internal_error", message);

export const label = (key: IndexKey) => `index "${key.name}" of tenant "${key.tenantId}"`;

/**
 * The 409 of a write whose `expectedVersion` no longer matches the stored version: another writer
 * committed in between. Its own class so that a writer can tell it from "already exists" and retry.
 */
export class StaleVersionError extends ApiError {
  constructor(key: IndexKey, found: number | undefined, expected: number) {
    super(
      409,
      "conflict",
      `${label(key)} was changed by another write (version ${found ?? "none"}, expected ${expected}); retry`,
    );
    this.name = "StaleVersionError";
  }
}

/** Checks what does not depend on stored state; throws before any transaction starts. */
export function validateWrite(change: IndexWrite): void {
  const ids = new Set<string>();
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
    });
  }
  const order = new Set(change.chunkOrder);
  if (order.size !== change.chunkOrder.length) throw internal("chunkOrder lists a chunk more than once");
  if (change.engineIndex.byteLength === 0 && change.chunkOrder.length > 0) {
    throw internal("engineIndex is empty");
  }
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

/** A stored chunk row, as both stores read it (metadata still in the store's own form). */
export interface StoredChunkRow<M> {
  chunk_id: string;
  doc_id: string;
  seq: number;
  text: string;
  start_offset: number;
  end_offset: number;
  metadata: M;
}

/**
 * Puts an index's chunk rows in engine ordinal order (`chunk_order`, a JSON list of chunk ids),
 * refusing a stored order that does not match the rows exactly.
 */
export function orderChunks<M>(
  indexName: string,
  chunkOrderJson: string,
  rows: Iterable<StoredChunkRow<M>>,
  toMetadata: (stored: M) => Metadata,
): ChunkRecord[] {
  const byId = new Map<string, StoredChunkRow<M>>();
  for (const chunk of rows) byId.set(chunk.chunk_id, chunk);
  const order = JSON.parse(chunkOrderJson) as string[];
  if (order.length !== byId.size) {
    throw internal(`stored chunk order of index ${indexName} does not match its ${byId.size} chunks`);
  }
  return order.map((chunkId): ChunkRecord => {
    const chunk = byId.get(chunkId);
    if (chunk === undefined)
      throw internal(`stored chunk order of index ${indexName} names unknown ${chunkId}`);
    return {
      chunkId,
      documentId: chunk.doc_id,
      seq: chunk.seq,
      text: chunk.text,
      start: chunk.start_offset,
      end: chunk.end_offset,
      metadata: toMetadata(chunk.metadata),
    };
  });
}
