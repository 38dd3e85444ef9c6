/**
 * Recall@10 of the HNSW path against exact search over the same stored vectors: 20 000 clustered 384-d
 * vectors (seeded), 100 queries from the same distribution, one storage type per test file (each builds
 * a graph: tens of seconds on a loaded 2-core machine). bench/vectors.ts measures 100k and 1M.
 */
import assert from "node:assert/strict";

import { LiveDocs } from "../../../../src/rag/search/core/live-docs.js";
import type { VectorStorage } from "../../../../src/rag/search/vectors/quantize.js";
import { prepareQuery, SegmentVectors } from "../../../../src/rag/search/vectors/segment-vectors.js";
import { clusteredVectors, rowsOf } from "../../../../scripts/lib/synthetic-vectors.js";

const COUNT = 20_000;
const QUERIES = 100;
const DIMENSION = 384;

/** Checks recall ≥ 0.95 (none and a tenth deleted); returns the two recalls. */
export function checkRecall(storage: VectorStorage): number[] {
  const recalls: number[] = [];
  const rows = rowsOf(
    clusteredVectors({ count: COUNT + QUERIES, dimension: DIMENSION, seed: 26 }),
    DIMENSION,
  );
  const set = SegmentVectors.build(DIMENSION, rows.slice(0, COUNT), { storage });
  assert.ok(set.graph !== null, "a 20k segment has a graph");
  const live = new LiveDocs(COUNT);
  for (let d = 0; d < COUNT; d += 10) live.delete(d); // a tenth deleted: the filter path too
  for (const filter of [null, live]) {
    let found = 0;
    for (const query of rows.slice(COUNT)) {
      const unit = prepareQuery(query, DIMENSION);
      const truth = new Set(set.search(unit, 10, filter, { exact: true }).map((h) => h.doc));
      const hits = set.search(unit, 10, filter);
      assert.equal(hits.length, 10);
      for (const hit of hits) {
        assert.ok(filter === null || !filter.isDeleted(hit.doc), `deleted ${hit.doc} returned`);
        if (truth.has(hit.doc)) found++;
      }
    }
    const recall = found / (10 * QUERIES);
    assert.ok(
      recall >= 0.95,
      `${storage} recall@10 ${recall} (${filter === null ? "no" : "a tenth"} deleted)`,
    );
    recalls.push(recall);
  }
  return recalls;
}
