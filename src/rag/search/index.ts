/**
 * Lectern's full-text search engine: a small, pure library (no I/O of its own: what an index keeps out of
 * memory goes through the Directory it is given, directory.ts) for ranked keyword search with
 * TF-IDF (pivoted length normalisation) or BM25 scoring, over a segmented index that takes writes at a
 * cost proportional to the write (see docs/design/segmented-index.md).
 *
 * ```ts
 * import { IndexWriter, SegmentedIndex } from "./rag/search/index.js";
 *
 * const index = SegmentedIndex.create({ scorer: "bm25" });
 * const writer = new IndexWriter(index);
 * const write = writer.prepare({ add: ["Cats purr when content.", "Dogs bark at the postman."] });
 * // persist write.segment, write.tombstones, write.state … then:
 * write.apply();                                      // write.keys: [0, 1]
 * index.search("barking dogs", { topK: 5 });          // → [{ key: 1, score: 1 }]
 * writer.prepare({ delete: [{ key: 0, text: "Cats purr when content." }] }).apply();
 * ```
 *
 * Layout (mirrors Tantivy): `core/` holds the index, its segments and the searcher; `indexer/` the
 * writer, the segment writer, the merge policy, the merger and its worker thread.
 *
 * Scores are normalised per query to 0 … 1 (`scoring.ts`) and equal scores are ordered by key, so results
 * are deterministic and identical to those of a fresh build over the live documents in key order.
 * Top-k search prunes with MaxScore over block-max windows when the query terms have many postings;
 * `{ exhaustive: true }` scores every posting instead (same hits and scores).
 */

export {
  createAnalyzer,
  ENGLISH_STOP_WORDS,
  type Analyzer,
  type ResolvedAnalyzerOptions,
} from "./analyzer.js";
export { DEFAULT_BM25 } from "./scoring.js";
export { RamDirectory, type Directory, type DirectoryFile } from "./directory.js";
export { SegmentedIndex, type IndexLease, type ResolvedSearchIndexOptions } from "./core/segmented-index.js";
export { IndexWriter, type PreparedWrite } from "./indexer/index-writer.js";
export { TieredMergePolicy, type TieredMergePolicyOptions } from "./indexer/merge-policy.js";
export { type MergeResult, type PreparedMerge } from "./core/merge-commit.js";
export { mergeInBackground, mergeNow } from "./indexer/merge.js";
export { buildsGraph, encodeVectorsOffThread } from "./indexer/vector-build.js";
export type * from "./types.js";
export {
  RM3_DEFAULTS,
  rm3Query,
  rm3Statistics,
  searchExpanded,
  type FeedbackDocument,
  type Rm3Parameters,
} from "./rm3.js";
