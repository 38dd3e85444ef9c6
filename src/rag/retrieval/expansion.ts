/**
 * RM3 query expansion for /rag/query's `"expand": true`: the engine's RM3 (src/rag/search/rm3.ts,
 * Anserini's defaults) over the query's first-pass chunks, as the store holds them. The caller runs the
 * first pass (with the request's filter, so that feedback only comes from chunks the query may see)
 * and searches the returned boosted terms with `SegmentedIndex.searchBoosted`.
 */
import type { SegmentedIndex } from "../search/index.js";
import { RM3_DEFAULTS, rm3Query, rm3Statistics } from "../search/rm3.js";

/** Chunks the first pass fetches for feedback. */
export const FEEDBACK_CHUNKS = RM3_DEFAULTS.fbDocs;

/** The expanded query: each term and its boost. `feedback`: the first pass's chunks, best first. */
export function expandedQuery(
  engine: SegmentedIndex,
  query: string,
  feedback: ReadonlyArray<{ text: string; score: number }>,
): Map<string, number> {
  return rm3Query(
    engine.analyze(query),
    feedback.map(({ text, score }) => ({ terms: engine.analyze(text), score })),
    rm3Statistics(engine),
    RM3_DEFAULTS,
  );
}
