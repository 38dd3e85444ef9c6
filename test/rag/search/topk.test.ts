import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { TopK } from "../../../src/rag/search/topk.js";
import { seededRandom as random } from "../../../scripts/lib/seeded-random.js";

describe("TopK", () => {
  it("matches a full sort (score desc, key asc) on random data with ties", () => {
    const next = random(42);
    for (let round = 0; round < 300; round++) {
      const n = Math.floor(next() * 200);
      const k = 1 + Math.floor(next() * 30);
      const distinct = 1 + Math.floor(next() * 20); // few distinct scores → many ties
      const items = Array.from({ length: n }, (_, key) => ({
        key,
        score: Math.floor(next() * distinct) / distinct,
      }));
      // Offer in a shuffled order: the result must not depend on it.
      const shuffled = [...items].sort(() => next() - 0.5);
      const heap = new TopK(k);
      for (const item of shuffled) heap.offer(item.key, item.score);
      const expected = [...items].sort((a, b) => b.score - a.score || a.key - b.key).slice(0, k);
      assert.equal(heap.size, expected.length);
      assert.deepEqual(heap.drain(), expected, `round ${round}`);
      assert.equal(heap.size, 0);
    }
  });

  it("reports whether a hit would get in, and the threshold once full", () => {
    const heap = new TopK(2);
    assert.equal(heap.threshold, -Infinity);
    assert.equal(heap.offer(5, 0.5), true);
    assert.equal(heap.offer(3, 0.7), true);
    assert.equal(heap.threshold, 0.5);
    assert.equal(heap.wouldAccept(9, 0.4), false);
    assert.equal(heap.wouldAccept(9, 0.5), false); // tie, higher key loses
    assert.equal(heap.wouldAccept(1, 0.5), true); // tie, lower key wins
    assert.equal(heap.offer(9, 0.4), false);
    assert.equal(heap.offer(1, 0.5), true);
    assert.deepEqual(heap.drain(), [
      { key: 3, score: 0.7 },
      { key: 1, score: 0.5 },
    ]);
  });

  it("rejects a bad capacity", () => {
    assert.throws(() => new TopK(0), RangeError);
    assert.throws(() => new TopK(2.5), RangeError);
  });
});
