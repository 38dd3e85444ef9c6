/**
 * RM3 (src/rag/search/rm3.ts) on numbers checked by hand, and boosted queries (`searchBoosted`) against
 * the unboosted searcher they extend.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  IndexWriter,
  rm3Query,
  rm3Statistics,
  searchExpanded,
  SegmentedIndex,
  type ScorerName,
} from "../../../src/rag/search/index.js";

const VERBATIM = { stemming: false, stopWords: false };

function indexOf(texts: readonly string[], scorer: ScorerName): SegmentedIndex {
  const index = SegmentedIndex.create({ scorer, analyzer: VERBATIM });
  new IndexWriter(index).prepare({ add: texts }).apply();
  return index;
}

const close = (actual: number | undefined, expected: number, what: string): void => {
  assert.ok(
    actual !== undefined && Math.abs(actual - expected) < 1e-12,
    `${what}: ${String(actual)} ≠ ${expected}`,
  );
};

describe("rm3Query: the expanded query's weights", () => {
  /*
   * 100 live documents; df: the 50 (over 10%: never a feedback term), cat 10 (exactly 10%: kept),
   * dog 11 (dropped), every other term 1.
   *   d1, score 1:   cat cat feline purr x the café  → kept: cat 2, feline 1, purr 1 (x too short,
   *                  café not [a-z0-9], the too common); |d1| = 4
   *   d2, score 0.5: dog feline feline bark          → kept: feline 2, bark 1 (dog: df 11); |d2| = 3
   * Relevance model: cat 2/4·1 = 0.5, feline 1/4·1 + 2/3·0.5 = 7/12, purr 1/4, bark 1/3·0.5 = 1/6.
   * fbTerms = 3 keeps feline, cat, purr (sum 4/3): 7/16, 3/8, 3/16.
   * Query "cat cat dog": cat 2/3, dog 1/3. λ = 0.5:
   *   cat 0.5·2/3 + 0.5·3/8, dog 0.5·1/3, feline 0.5·7/16, purr 0.5·3/16.
   */
  const df: Record<string, number> = { the: 50, cat: 10, dog: 11 };
  const statistics = { documentCount: 100, documentFrequency: (term: string) => df[term] ?? 1 };
  const feedback = [
    { terms: ["cat", "cat", "feline", "purr", "x", "the", "café"], score: 1 },
    { terms: ["dog", "feline", "feline", "bark"], score: 0.5 },
  ];

  it("interpolates the query with the relevance model, Anserini's filters and pruning applied", () => {
    const expanded = rm3Query(["cat", "cat", "dog"], feedback, statistics, {
      fbTerms: 3,
      originalQueryWeight: 0.5,
    });
    assert.deepEqual([...expanded.keys()], ["cat", "dog", "feline", "purr"]);
    close(expanded.get("cat"), 0.5 * (2 / 3) + 0.5 * (3 / 8), "cat");
    close(expanded.get("dog"), 0.5 * (1 / 3), "dog");
    close(expanded.get("feline"), 0.5 * (7 / 16), "feline");
    close(expanded.get("purr"), 0.5 * (3 / 16), "purr");
    close(
      [...expanded.values()].reduce((sum, weight) => sum + weight, 0),
      1,
      "the weights sum to 1",
    );
  });

  it("prunes each feedback document to its fbTerms most frequent terms, ties by term", () => {
    // fbTerms 2: d1 keeps cat 2 and feline 1 (feline < purr), d2 feline 2 and bark 1.
    // Model: cat 2/3, feline 1/3 + 2/3·0.5 = 2/3, bark 1/6 → top 2: cat, feline (tie, by term), 1/2 each.
    const expanded = rm3Query(["cat"], feedback, statistics, { fbTerms: 2, originalQueryWeight: 0.25 });
    assert.deepEqual([...expanded.keys()], ["cat", "feline"]);
    close(expanded.get("cat"), 0.25 * 1 + 0.75 * 0.5, "cat");
    close(expanded.get("feline"), 0.75 * 0.5, "feline");
  });

  it("reads only the first fbDocs documents; λ = 1 is the query alone; no feedback leaves the query", () => {
    const first = rm3Query(["cat"], feedback, statistics, { fbDocs: 1, fbTerms: 10 });
    // d1 alone: cat 2/4, feline 1/4, purr 1/4.
    close(first.get("feline"), 0.5 * 0.25, "feline");
    assert.equal(first.has("bark"), false);
    assert.deepEqual(
      [...rm3Query(["cat", "dog"], feedback, statistics, { originalQueryWeight: 1 })],
      [
        ["cat", 0.5],
        ["dog", 0.5],
      ],
    );
    assert.deepEqual([...rm3Query(["cat"], [], statistics)], [["cat", 0.5]]);
  });

  it("refuses parameters out of range", () => {
    assert.throws(() => rm3Query(["cat"], feedback, statistics, { fbDocs: 0 }), /fbDocs/);
    assert.throws(() => rm3Query(["cat"], feedback, statistics, { fbTerms: 1.5 }), /fbTerms/);
    assert.throws(() => rm3Query(["cat"], feedback, statistics, { originalQueryWeight: 2 }), /originalQuery/);
  });
});

describe("searchBoosted: weighted query terms", () => {
  const texts = [
    "apple apple banana",
    "banana cherry",
    "cherry cherry cherry date",
    "apple date fig",
    "fig grape",
  ];

  it("boosts of 1 rank and score exactly as the unboosted query (both scorers, both paths)", () => {
    for (const scorer of ["bm25", "tfidf"] as const) {
      const index = indexOf(texts, scorer);
      for (const query of [["apple"], ["banana", "cherry"], ["date", "fig", "apple"], ["grape", "zebra"]]) {
        for (const exhaustive of [true, false]) {
          const plain = index.searchTerms(query, { topK: 5, exhaustive });
          const boosted = index.searchBoosted(new Map(query.map((term) => [term, 1])), {
            topK: 5,
            exhaustive,
          });
          assert.deepEqual(boosted, plain, `${scorer} ${query.join(" ")}`);
        }
      }
    }
  });

  it("under bm25 a boost of 2 is the term written twice; a boost moves the ranking", () => {
    const index = indexOf(texts, "bm25");
    assert.deepEqual(
      index.searchBoosted(
        new Map([
          ["apple", 2],
          ["cherry", 1],
        ]),
        { topK: 5 },
      ),
      index.searchTerms(["apple", "apple", "cherry"], { topK: 5 }),
    );
    const towardsCherry = index.searchBoosted(
      new Map([
        ["apple", 1],
        ["cherry", 10],
      ]),
      { topK: 1 },
    );
    const towardsApple = index.searchBoosted(
      new Map([
        ["apple", 10],
        ["cherry", 1],
      ]),
      { topK: 1 },
    );
    assert.equal(towardsCherry[0]?.key, 2);
    assert.equal(towardsApple[0]?.key, 0);
  });

  it("refuses a boost that is not a finite number > 0", () => {
    const index = indexOf(texts, "bm25");
    for (const boost of [0, -1, Number.NaN, Number.POSITIVE_INFINITY])
      assert.throws(() => index.searchBoosted(new Map([["apple", boost]]), { topK: 1 }), /boost of "apple"/);
  });
});

describe("searchExpanded: RM3 over an index", () => {
  // 3 on-topic documents among 30 fillers of unique words, so that cat (df 2), feline (3), purr (2)
  // and whiskers (2) pass the 10% df filter (33 documents: up to 3).
  const texts = [
    "cat feline purr",
    "cat feline whiskers",
    "feline whiskers purr",
    ...Array.from({ length: 30 }, (_, i) => `filler${i} other${i}`),
  ];

  it("finds a document that shares no word with the query, through its feedback terms", () => {
    const index = indexOf(texts, "bm25");
    const plain = index.search("cat", { topK: 10 });
    assert.deepEqual(
      plain.map((hit) => hit.key),
      [0, 1],
    );
    const expanded = searchExpanded(index, "cat", (key) => texts[key] ?? "", { topK: 10 });
    assert.deepEqual(new Set(expanded.map((hit) => hit.key)), new Set([0, 1, 2]));
    // Exactly the boosted search of the weights rm3Query makes from the first pass.
    const feedback = plain.map((hit) => ({ terms: index.analyze(texts[hit.key] ?? ""), score: hit.score }));
    const weights = rm3Query(["cat"], feedback, rm3Statistics(index));
    assert.deepEqual([...weights.keys()].sort(), ["cat", "feline", "purr", "whiskers"]);
    assert.deepEqual(expanded, index.searchBoosted(weights, { topK: 10 }));
    // The accept filter holds in both passes; an unknown query finds nothing.
    const filtered = searchExpanded(index, "cat", (key) => texts[key] ?? "", {
      topK: 10,
      accept: (key) => key !== 0,
    });
    assert.equal(
      filtered.some((hit) => hit.key === 0),
      false,
    );
    assert.deepEqual(
      searchExpanded(index, "zebra", () => "", { topK: 10 }),
      [],
    );
  });
});
