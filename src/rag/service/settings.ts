/**
 * The rules of what an index is made with, each written once: its settings (scorer, chunk size,
 * overlap) with their defaults and bounds, resolved here for every way an index is made (/rag/build,
 * folder sync, the OpenAI vector stores, the CLI), and how deeply metadata may nest. The request
 * schemas take their bounds and defaults from these constants, so the OpenAPI document says the same.
 */
import { badRequest } from "../../core/errors.js";
import { checkNestingDepth } from "../../core/validation.js";
import { defaultOverlap, overlapFits } from "../ingest/chunker.js";
import { SCORER_NAMES } from "../search/scoring.js";
import type { ScorerName } from "../search/index.js";
import type { IndexSettings } from "../store/types.js";

export const DEFAULT_SCORER: ScorerName = "tfidf";
export const DEFAULT_CHUNK_SIZE = 1000;
/** Characters a chunk may hold, at least and at most. */
export const CHUNK_SIZE_RANGE = { minimum: 100, maximum: 10_000 } as const;
/** The largest overlap any chunk size allows (half the largest chunk). */
export const MAX_OVERLAP = CHUNK_SIZE_RANGE.maximum / 2;

/** Metadata and filters deeper than this are refused: nothing real needs more, and it bounds work. */
export const MAX_METADATA_DEPTH = 32;

/** 400 when `value` (document metadata, a filter) nests deeper than MAX_METADATA_DEPTH. */
export function checkMetadataDepth(value: unknown, what: string): void {
  checkNestingDepth(value, MAX_METADATA_DEPTH, what);
}

/**
 * The settings of an index from those a caller gave: defaults for the rest (scorer tfidf, chunks of
 * 1000 characters, overlap min(128, chunk size/2)), each checked against its bounds, the overlap
 * against half the chunk size. A DomainError (invalid) naming the field otherwise.
 */
export function resolveIndexSettings(given: Partial<IndexSettings>): IndexSettings {
  const scorer = given.scorer ?? DEFAULT_SCORER;
  if (!SCORER_NAMES.includes(scorer))
    throw badRequest(`scorer must be one of ${SCORER_NAMES.join(", ")}`, [{ path: "/scorer" }]);
  const chunkSize = given.chunkSize ?? DEFAULT_CHUNK_SIZE;
  if (
    !Number.isInteger(chunkSize) ||
    chunkSize < CHUNK_SIZE_RANGE.minimum ||
    chunkSize > CHUNK_SIZE_RANGE.maximum
  )
    throw badRequest(
      `chunk size must be a whole number from ${CHUNK_SIZE_RANGE.minimum} to ${CHUNK_SIZE_RANGE.maximum}`,
      [{ path: "/chunk_size" }],
    );
  const overlap = given.overlap ?? defaultOverlap(chunkSize);
  if (!overlapFits(chunkSize, overlap))
    throw badRequest(
      `overlap must be a whole number from 0 to half the chunk size (${Math.floor(chunkSize / 2)})`,
      [{ path: "/overlap", message: "greater than chunk_size/2" }],
    );
  return { scorer, chunkSize, overlap };
}
