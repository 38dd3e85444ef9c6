import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { evaluateRun, ndcgAt, parseQrels, recallAt } from "../../../scripts/lib/ir-eval.js";

const close = (actual: number, expected: number): void =>
  assert.ok(Math.abs(actual - expected) < 1e-12, `${actual} ≠ ${expected}`);

describe("IR metrics", () => {
  const judgments = new Map([
    ["a", 2],
    ["b", 1],
    ["c", 0],
  ]);

  it("nDCG@k uses graded gains, log2 discount and the ideal order of the qrels", () => {
    const ranking = [
      { docId: "x", score: 3 },
      { docId: "b", score: 2 },
      { docId: "a", score: 1 },
    ];
    const dcg = 1 / Math.log2(3) + 2 / Math.log2(4);
    const idcg = 2 / Math.log2(2) + 1 / Math.log2(3);
    close(ndcgAt(ranking, judgments, 10), dcg / idcg);
    close(ndcgAt(ranking, judgments, 1), 0);
    close(ndcgAt([], judgments, 10), 0);
  });

  it("orders ties like trec_eval (document id descending)", () => {
    const ranking = [
      { docId: "a", score: 1 },
      { docId: "z", score: 1 },
    ];
    // trec_eval puts "z" first, so "a" (gain 2) lands at rank 2.
    close(ndcgAt(ranking, judgments, 1), 0);
  });

  it("Recall@k counts relevant (score > 0) documents", () => {
    const ranking = [
      { docId: "c", score: 3 },
      { docId: "b", score: 2 },
      { docId: "a", score: 1 },
    ];
    close(recallAt(ranking, judgments, 2), 0.5);
    close(recallAt(ranking, judgments, 3), 1);
  });

  it("parses qrels with a header and averages over every judged query", () => {
    const qrels = parseQrels("query-id\tcorpus-id\tscore\r\nq1\ta\t1\r\nq2\tb\t1\r\n");
    assert.equal(qrels.size, 2);
    const metrics = evaluateRun(new Map([["q1", [{ docId: "a", score: 1 }]]]), qrels);
    assert.equal(metrics.queryCount, 2);
    close(metrics.ndcg10, 0.5);
    close(metrics.recall100, 0.5);
  });
});
