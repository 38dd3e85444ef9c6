/**
 * A stored document's text, read back from its chunks, for the MCP tool `fetch_document` and the
 * document resources. The store keeps each chunk's text and its offsets in the document, and every
 * chunk's text is exactly `text.slice(start, end)` (ingest/chunker.ts): laid at their offsets, the
 * chunks give the document's text back, save the whitespace no chunk holds (before the first chunk,
 * between chunks that do not overlap), which is shown as spaces so that offsets stay the document's.
 */
import { badRequest, notFound } from "../../core/errors.js";
import type { RagService } from "../service.js";
import type { ChunkHit, IndexKey, Metadata } from "../store/types.js";

/** Facts of a chunk that say where it lies, not what the document is. */
const CHUNK_FACTS = new Set(["page", "pages", "start", "end", "headings"]);

export interface StoredDocument {
  id: string;
  title: string | null;
  source: string | null;
  /** The document's metadata (that of its chunks, without their own page facts). */
  metadata: Metadata;
  /** In order (seq). Empty for a document of whitespace only. */
  chunks: ChunkHit[];
}

/** A document of an index (404 for a missing index or document). */
export async function readDocument(
  service: RagService,
  key: IndexKey,
  documentId: string,
): Promise<StoredDocument> {
  await service.requireMeta(key);
  const found = (await service.store.getDocumentChunks(key, [documentId])).get(documentId);
  if (!found) {
    if (!(await service.store.hasDocument(key, documentId)))
      throw notFound(`Document "${documentId}" not found in index "${key.name}"`);
    return { id: documentId, title: null, source: null, metadata: {}, chunks: [] };
  }
  const chunks = (
    await service.store.getChunks(
      key,
      found.chunks.map((chunk) => chunk.engineKey),
    )
  ).sort((a, b) => a.seq - b.seq);
  const first = chunks[0];
  const metadata = Object.fromEntries(
    Object.entries(first?.metadata ?? {}).filter(([name]) => !CHUNK_FACTS.has(name)),
  );
  return { id: documentId, title: found.title, source: first?.source ?? null, metadata, chunks };
}

/** The text the chunks cover, from the first one's start: offsets are the document's. */
export function stitch(chunks: readonly ChunkHit[], from = 0): string {
  let text = "";
  let at = from;
  for (const chunk of chunks) {
    if (chunk.end <= at) continue;
    if (chunk.start > at) {
      text += " ".repeat(chunk.start - at);
      at = chunk.start;
    }
    text += chunk.text.slice(at - chunk.start);
    at = chunk.end;
  }
  return text;
}

const pagesOf = (chunk: ChunkHit) => {
  const { page, pages } = chunk.metadata;
  return page === undefined ? {} : { page, ...(pages !== undefined && { pages }) };
};

/** `max_chars` characters of the whole text from `offset`, and where the next call would go on. */
export function textPage(document: StoredDocument, offset: number, maxChars: number) {
  const whole = stitch(document.chunks);
  const text = whole.slice(offset, offset + maxChars);
  const end = offset + text.length;
  return {
    ...header(document),
    length: whole.length,
    offset,
    text,
    truncated: end < whole.length,
    ...(end < whole.length && { next_offset: end }),
  };
}

/** The chunk `chunkId` and `window` chunks either side, as one text at the document's offsets. */
export function passageWindow(document: StoredDocument, chunkId: string, window: number) {
  const at = document.chunks.findIndex((chunk) => chunk.chunkId === chunkId);
  if (at < 0)
    throw badRequest(
      `Chunk "${chunkId}" is not a chunk of document "${document.id}" (chunk ids are "<document id>#<n>", as search returns them)`,
    );
  const chunks = document.chunks.slice(Math.max(0, at - window), at + window + 1);
  const start = chunks[0]!.start;
  return {
    ...header(document),
    chunk_id: chunkId,
    start,
    end: chunks[chunks.length - 1]!.end,
    text: stitch(chunks, start),
    passages: chunks.map((chunk) => ({
      chunk_id: chunk.chunkId,
      start: chunk.start,
      end: chunk.end,
      ...pagesOf(chunk),
    })),
  };
}

function header(document: StoredDocument) {
  return {
    document_id: document.id,
    title: document.title,
    source: document.source,
    metadata: document.metadata,
    chunks_count: document.chunks.length,
  };
}
