/**
 * What a metadata filter may cost. A filter is compiled once per query and then run on every
 * candidate the query examines, so both its size and the number of candidates are bounded:
 * - `in` / `nin` lists are compiled to sets (a lookup per candidate, not a scan of the list), at most
 *   FILTER_MAX_LIST_VALUES values in one list and FILTER_MAX_VALUES in the whole filter;
 * - `/rag/query`'s equality `filter` has at most FILTER_MAX_KEYS keys and FILTER_MAX_EQUALITY_BYTES of
 *   JSON in its values, compared structurally (no serialisation of the stored metadata);
 * - a filtered query examines at most FILTER_MAX_CANDIDATES of the engine's best hits (queries.ts): a
 *   filter that rejects them all answers with what it found and says that the search was cut, rather
 *   than reading the whole index chunk by chunk.
 * Past the size limits, 400 naming the limit; nothing here scales with the index.
 */
import { badRequest } from "../../core/errors.js";
import type { Metadata } from "../store/types.js";

/** Values one `in` or `nin` list may hold (Pinecone's `$in` allows 10,000; no real filter needs more). */
export const FILTER_MAX_LIST_VALUES = 1_000;
/** Values all `in` / `nin` lists of one filter may hold together. */
export const FILTER_MAX_VALUES = 10_000;
/** Keys one equality `filter` (/rag/query) may have. */
export const FILTER_MAX_KEYS = 64;
/** Bytes of JSON the values of one equality `filter` may take together. */
export const FILTER_MAX_EQUALITY_BYTES = 64 * 1024;
/**
 * Candidates a filtered query reads and tests at most (per retriever): the engine is asked for 4 ×
 * top_k, then twice as many each round, up to this many. At 1 KB of chunk a candidate, 10 MB read.
 */
export const FILTER_MAX_CANDIDATES = 10_000;

export type MetadataPredicate = (metadata: Metadata) => boolean;

/** What a query's filter did: how many candidates it examined, and whether it stopped at the limit. */
export interface FilterCut {
  /** True when the limit was reached before top_k candidates passed: more may match further down. */
  truncated: boolean;
  /** Candidates examined (read and tested), summed over the query's retrievers. */
  examined: number;
  limit: number;
}

/** Counts the values of the `in` / `nin` lists of one filter, refusing (400) past the limits. */
export class ListBudget {
  private total = 0;

  take(count: number, path: string): void {
    if (count > FILTER_MAX_LIST_VALUES)
      throw badRequest(
        `${path} has ${count} values; an "in" or "nin" list may have at most ${FILTER_MAX_LIST_VALUES}`,
        [{ path, limit: FILTER_MAX_LIST_VALUES }],
      );
    this.total += count;
    if (this.total > FILTER_MAX_VALUES)
      throw badRequest(
        `filters hold more than ${FILTER_MAX_VALUES} "in" / "nin" values in all; narrow the filter or search again per part`,
        [{ path, limit: FILTER_MAX_VALUES }],
      );
  }
}

/**
 * `/rag/query`'s `filter`: every key present with a value equal to the one given, as JSON values are
 * (arrays in order, objects with the same keys in the same order, so as before when both sides were
 * compared serialised). 400 past FILTER_MAX_KEYS or FILTER_MAX_EQUALITY_BYTES.
 */
export function compileEquality(filter: Metadata): MetadataPredicate {
  const entries = Object.entries(filter);
  if (entries.length > FILTER_MAX_KEYS)
    throw badRequest(`filter has ${entries.length} keys; the limit is ${FILTER_MAX_KEYS}`, [
      { path: "/filter", limit: FILTER_MAX_KEYS },
    ]);
  let bytes = 0;
  for (const [, value] of entries) bytes += Buffer.byteLength(JSON.stringify(value) ?? "null");
  if (bytes > FILTER_MAX_EQUALITY_BYTES)
    throw badRequest(`filter values take ${bytes} bytes of JSON; the limit is ${FILTER_MAX_EQUALITY_BYTES}`, [
      { path: "/filter", limit: FILTER_MAX_EQUALITY_BYTES },
    ]);
  return (metadata) =>
    entries.every(
      ([key, value]) => Object.prototype.hasOwnProperty.call(metadata, key) && sameJson(metadata[key], value),
    );
}

/**
 * Whether two JSON values serialise alike, walking both at once: it stops at the first difference,
 * so its cost is bounded by the smaller value (the filter's), whatever the stored metadata holds.
 */
function sameJson(actual: unknown, expected: unknown): boolean {
  if (expected === null || typeof expected !== "object") {
    // -0 serialises as 0; JSON holds no NaN or undefined.
    return actual === expected;
  }
  if (actual === null || typeof actual !== "object") return false;
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return false;
    for (let i = 0; i < expected.length; i++) if (!sameJson(actual[i], expected[i])) return false;
    return true;
  }
  if (Array.isArray(actual)) return false;
  const expectedKeys = Object.keys(expected);
  const actualKeys = Object.keys(actual);
  if (actualKeys.length !== expectedKeys.length) return false;
  for (let i = 0; i < expectedKeys.length; i++) {
    const key = expectedKeys[i]!;
    if (actualKeys[i] !== key) return false;
    if (!sameJson((actual as Record<string, unknown>)[key], (expected as Record<string, unknown>)[key]))
      return false;
  }
  return true;
}
