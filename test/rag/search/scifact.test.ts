/**
 * End-to-end relevance check on BEIR SciFact (test split). The collection is not part of the repository:
 * set LECTERN_IR_DIR, or keep it at ../shared/ir/scifact (relative to the repository root).
 * Skipped when it is missing.
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { loadBeir, runEngine, type BeirCollection } from "../../../scripts/lib/ir-eval.js";

const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));
const dir = resolve(repoRoot, process.env.LECTERN_IR_DIR ?? "../shared/ir/scifact");
const available = existsSync(resolve(dir, "corpus.jsonl"));

describe(
  "SciFact relevance",
  { skip: available ? false : `no BEIR collection at ${dir} (set LECTERN_IR_DIR)` },
  () => {
    let collection: BeirCollection | undefined;
    const load = (): BeirCollection => (collection ??= loadBeir(dir));

    it("tfidf: nDCG@10 ≥ 0.63, R@100 ≥ 0.90", () => {
      const result = runEngine(load(), { scorer: "tfidf" });
      assert.equal(result.queryCount, 300);
      assert.ok(result.ndcg10 >= 0.63, `nDCG@10 ${result.ndcg10}`);
      assert.ok(result.recall100 >= 0.9, `R@100 ${result.recall100}`);
      assert.ok(result.roundTripIdentical);
    });

    it("bm25: nDCG@10 ≥ 0.675, R@100 ≥ 0.90", () => {
      const result = runEngine(load(), { scorer: "bm25" });
      assert.ok(result.ndcg10 >= 0.675, `nDCG@10 ${result.ndcg10}`);
      assert.ok(result.recall100 >= 0.9, `R@100 ${result.recall100}`);
      assert.ok(result.roundTripIdentical);
    });
  },
);
