/**
 * Weighted Reciprocal Rank Fusion (src/rag/retrieval/fusion.ts): worked examples, and a fast-check
 * property against a reference written the plain way (per key, look up its rank in each list).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import fc from "fast-check";
import { Compile } from "typebox/compile";

import {
  maxFusedScore,
  reciprocalRankFusion,
  type FusionLists,
  type RankedHit,
} from "../../../src/rag/retrieval/fusion.js";
import { FusionField, fusionOptions } from "../../../src/rag/retrieval/schemas.js";

const hits = (...keys: number[]): RankedHit[] => keys.map((key, i) => ({ key, score: 1 - i / 10 }));

describe("reciprocalRankFusion", () => {
  it("scores Σ w / (k + rank), keeps each source's score and rank", () => {
    const fused = reciprocalRankFusion({ lexical: hits(7, 3, 5), dense: hits(3, 9) }, { k: 60 });
    assert.deepEqual(
      fused.map((hit) => hit.key),
      [3, 7, 9, 5],
    );
    const three = fused[0]!;
    assert.equal(three.score, 1 / 62 + 1 / 61);
    assert.deepEqual(three.ranks, { lexical: 2, dense: 1 });
    assert.deepEqual(three.scores, { lexical: 0.9, dense: 1 });
    assert.deepEqual(fused[1], { key: 7, score: 1 / 61, scores: { lexical: 1 }, ranks: { lexical: 1 } });
    // 7 (lexical rank 1) and 9 (dense rank 2) with weights 1 and 2: 1/61 < 2/62.
    const weighted = reciprocalRankFusion(
      { lexical: hits(7, 3, 5), dense: hits(3, 9) },
      { k: 60, weights: { dense: 2 } },
    );
    assert.deepEqual(
      weighted.map((hit) => hit.key),
      [3, 9, 7, 5],
    );
  });

  it("orders equal fused scores by ascending key; a key repeated in a list counts once, at its best rank", () => {
    // 4 is first lexically, 2 first densely: equal scores, so 2 comes first.
    const fused = reciprocalRankFusion({ lexical: hits(4, 2), dense: hits(2, 4) });
    assert.deepEqual(
      fused.map((hit) => hit.key),
      [2, 4],
    );
    assert.equal(fused[0]!.score, fused[1]!.score);
    const repeated = reciprocalRankFusion({ lexical: [...hits(1, 2), { key: 1, score: 0 }] });
    assert.deepEqual(repeated[0], { key: 1, score: 1 / 61, scores: { lexical: 1 }, ranks: { lexical: 1 } });
    assert.equal(repeated.length, 2);
  });

  it("cuts at topK; no lists fuse to nothing; bad k or weights are refused", () => {
    assert.deepEqual(
      reciprocalRankFusion({ lexical: hits(1, 2, 3) }, {}, 2).map((hit) => hit.key),
      [1, 2],
    );
    assert.deepEqual(reciprocalRankFusion({}), []);
    assert.throws(() => reciprocalRankFusion({}, { k: 0 }), /k must be/);
    assert.throws(() => reciprocalRankFusion({}, { weights: { dense: -1 } }), /weight of dense/);
  });

  it("maxFusedScore bounds every fused score (rank 1 everywhere reaches it)", () => {
    const options = { k: 10, weights: { lexical: 0.5, dense: 2 } };
    const top = reciprocalRankFusion({ lexical: hits(1), dense: hits(1) }, options)[0]!;
    assert.equal(top.score, maxFusedScore(options));
    assert.equal(maxFusedScore(options, ["dense"]), 2 / 11);
  });
});

/** The reference: for each key, find its first rank in each list, sum w / (k + rank) in source order. */
function reference(lists: FusionLists, k: number, weights: { lexical: number; dense: number }) {
  const sources = ["lexical", "dense"] as const;
  const keys = new Set<number>();
  for (const source of sources) for (const hit of lists[source] ?? []) keys.add(hit.key);
  const rows = [...keys].map((key) => {
    let score = 0;
    for (const source of sources) {
      const index = (lists[source] ?? []).findIndex((hit) => hit.key === key);
      if (index >= 0) score += weights[source] / (k + index + 1);
    }
    return { key, score };
  });
  return rows.sort((a, b) => (a.score !== b.score ? b.score - a.score : a.key - b.key));
}

describe("reciprocalRankFusion equals the reference computation (fast-check)", () => {
  const list = fc.array(
    fc.record({ key: fc.nat({ max: 40 }), score: fc.double({ min: 0, max: 1, noNaN: true }) }),
    { maxLength: 30 },
  );
  it("for random lists (repeats and shared keys included), k and weights", () => {
    fc.assert(
      fc.property(
        list,
        list,
        fc.integer({ min: 1, max: 200 }),
        fc.double({ min: 0, max: 5, noNaN: true }),
        fc.double({ min: 0, max: 5, noNaN: true }),
        fc.boolean(),
        (lexical, dense, k, wl, wd, dropDense) => {
          const lists: FusionLists = dropDense ? { lexical } : { lexical, dense };
          const fused = reciprocalRankFusion(lists, { k, weights: { lexical: wl, dense: wd } });
          const expected = reference(lists, k, { lexical: wl, dense: wd });
          assert.deepEqual(
            fused.map(({ key, score }) => ({ key, score })),
            expected,
          );
          for (const hit of fused) {
            for (const source of ["lexical", "dense"] as const) {
              const index = (lists[source] ?? []).findIndex((h) => h.key === hit.key);
              assert.equal(hit.ranks[source], index >= 0 ? index + 1 : undefined);
              assert.equal(hit.scores[source], index >= 0 ? lists[source]![index]!.score : undefined);
            }
          }
        },
      ),
      { seed: Number(process.env.FC_SEED ?? 26), numRuns: 300 },
    );
  });
});

describe("the fusion request field", () => {
  const check = Compile(FusionField);
  it("takes the documented shape and fills defaults; refuses unknown fields and bad values", () => {
    assert.ok(check.Check({ method: "rrf", k: 60, weights: { lexical: 1, dense: 1 } }));
    assert.ok(check.Check({}));
    assert.deepEqual(fusionOptions(undefined), { k: 60, weights: { lexical: 1, dense: 1 } });
    assert.deepEqual(fusionOptions({ k: 10, weights: { dense: 3 } }), {
      k: 10,
      weights: { lexical: 1, dense: 3 },
    });
    for (const bad of [
      { method: "linear" },
      { k: 0 },
      { k: -5 },
      { weights: { lexical: -1 } },
      { weights: { sparse: 1 } },
      { extra: true },
    ])
      assert.equal(check.Check(bad), false, JSON.stringify(bad));
  });
});
