/**
 * Document normalisation: what a request's documents become before they are indexed (ids, well-formed
 * text, one record per id), their chunks (with their provenance: offsets, pages, headings), and the text the engine
 * indexes for each chunk. Pure: no store, no engine.
 */
import { createHash } from "node:crypto";
import { badRequest } from "../../core/errors.js";
import { chunkDocument } from "../ingest/chunker.js";
import { pagesOfSpan } from "../ingest/pages.js";
import { headingsAt, type Section } from "../ingest/sections.js";
import type { ChunkRecord, DocumentRecord, IndexSettings, Metadata } from "../store/types.js";
import type { DocumentInput } from "./types.js";

/** What the engine indexes for a chunk: the title with every chunk, as it is often its best summary. */
export const engineText = (title: string | null | undefined, text: string) =>
  title ? `${title}\n${text}` : text;

const LONE_SURROGATES = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const toWellFormed = (text: string) => text.replace(LONE_SURROGATES, "\uFFFD");

/** Page offsets of paged documents (PDF), beside the record so the store never sees them. */
const pageStartsOf = new WeakMap<DocumentRecord, number[]>();
/** Heading structure of structured documents (Markdown, HTML, DOCX), likewise. */
const sectionsOf = new WeakMap<DocumentRecord, Section[]>();
/** The chunking a record's input asked for, where it is not its index's. */
const chunkingOf = new WeakMap<DocumentRecord, { chunkSize: number; overlap: number }>();

/** Where a chunk lies in a paged document (pages.ts): `page` its first page, `first` … `last` every one. */
export interface ChunkPages {
  page: number;
  first: number;
  last: number;
}

/** The (1-based) pages of the chunk [start, end) of a document whose pages start at `pageStarts`. */
export function chunkPages(pageStarts: number[], start: number, end: number): ChunkPages {
  const { page, pages } = pagesOfSpan(pageStarts, start, end);
  return { page, first: pages[0]!, last: pages[pages.length - 1]! };
}

/**
 * A chunk's metadata: its document's, then where it came from: `start` and `end`, its offsets in
 * the document's text (the chunk's text is text.slice(start, end)); for a paged document (PDF)
 * `page`, the page it starts on, and `pages`, every page it covers, in order (`[3]` for a chunk
 * within page 3); for a document with headings (Markdown, HTML, DOCX) `headings`, the heading path
 * in force where it starts, outermost first. These names win over the document's own metadata.
 */
export function chunkMetadata(
  metadata: Metadata,
  start: number,
  end: number,
  pages: ChunkPages | null,
  sections: readonly Section[] | undefined,
): Metadata {
  return {
    ...metadata,
    start,
    end,
    ...(pages && {
      page: pages.first,
      pages: Array.from({ length: pages.last - pages.first + 1 }, (_, i) => pages.first + i),
    }),
    ...(sections && { headings: headingsAt(sections, start) }),
  };
}

/** Gives each chunk its provenance (chunkMetadata). */
function withProvenance(
  chunks: ChunkRecord[],
  pageStarts: number[] | undefined,
  sections: readonly Section[] | undefined,
): ChunkRecord[] {
  for (const chunk of chunks) {
    const pages = pageStarts ? chunkPages(pageStarts, chunk.start, chunk.end) : null;
    chunk.metadata = chunkMetadata(chunk.metadata, chunk.start, chunk.end, pages, sections);
  }
  return chunks;
}

/** The page offsets a paged document's record was made with (normaliseDocuments), if any. */
export const pageStartsOfRecord = (record: DocumentRecord) => pageStartsOf.get(record);

/** Documents and their chunks, and the engine text of every chunk in that order. */
export interface ChunkedDocuments {
  chunked: Array<{ document: DocumentRecord; chunks: ChunkRecord[] }>;
  engineTexts: string[];
}

/** Chunks documents with an index's settings (pages kept for paged sources). */
export function chunkDocuments(documents: DocumentRecord[], settings: IndexSettings): ChunkedDocuments {
  const chunked = documents.map((document) => ({
    document,
    chunks: withProvenance(
      chunkDocument(
        document,
        chunkingOf.get(document) ?? { chunkSize: settings.chunkSize, overlap: settings.overlap },
      ),
      pageStartsOf.get(document),
      sectionsOf.get(document),
    ),
  }));
  const engineTexts = chunked.flatMap(({ document, chunks }) =>
    chunks.map((chunk) => engineText(document.title, chunk.text)),
  );
  return { chunked, engineTexts };
}

/**
 * Fills in ids (a content hash when none is given, so re-sending a document does not duplicate it)
 * and rejects two different documents claiming one id in the same request.
 */
export function normaliseDocuments(inputs: DocumentInput[]): DocumentRecord[] {
  return [...normalisedById(inputs).values()].map(({ record }) => record);
}

/** normaliseDocuments, each record with the position of the input it was made from (the last of its id). */
export function normalisedById(
  inputs: DocumentInput[],
): Map<string, { record: DocumentRecord; position: number }> {
  const byId = new Map<string, { record: DocumentRecord; position: number }>();
  inputs.forEach((input, position) => {
    const record = normaliseDocument(input, position);
    const previous = byId.get(record.id)?.record;
    if (previous && (previous.text !== record.text || input.id !== undefined))
      throw duplicateId(record.id, position);
    byId.set(record.id, { record, position });
  });
  return byId;
}

/** The record of the input at `position` (400 when it has no text); ids as normalisedById gives them. */
export function normaliseDocument(input: DocumentInput, position: number): DocumentRecord {
  // Whitespace-only text would be stored as a document with no chunks that no query can find.
  if (input.text.trim() === "") {
    const which = input.source ? `File "${input.source}"` : `documents[${position}]`;
    throw badRequest(`${which} has no text to index (empty or only whitespace)`, [
      { path: `/documents/${position}/text`, message: "empty or only whitespace" },
    ]);
  }
  const id = input.id ?? createHash("sha256").update(input.text).digest("hex").slice(0, 16);
  const record: DocumentRecord = {
    id,
    // Lone UTF-16 surrogates cannot be stored as UTF-8: replace them now, so what is served from
    // memory is what is served after a restart.
    title: input.title == null ? null : toWellFormed(input.title),
    text: toWellFormed(input.text),
    metadata: input.metadata ?? {},
    source: input.source ?? null,
    contentHash: input.contentHash ?? null,
  };
  if (input.pageStarts) pageStartsOf.set(record, input.pageStarts);
  if (input.sections) sectionsOf.set(record, input.sections);
  if (input.chunking) chunkingOf.set(record, input.chunking);
  return record;
}

/** The 400 for an id seen twice in one request (the second at `position`). */
export function duplicateId(id: string, position: number) {
  return badRequest(`Document id "${id}" appears more than once in this request (documents[${position}])`, [
    { path: `/documents/${position}/id`, message: "duplicate id" },
  ]);
}
