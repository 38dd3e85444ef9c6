import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  DEFAULT_BM25,
  IndexWriter,
  SegmentedIndex,
  type SearchIndexOptions,
} from "../../../src/rag/search/index.js";

/*
 * Three documents analysed verbatim (no stemming, no stop words), so every number below can be checked
 * by hand:
 *   d0 = apple apple banana        (length 3)
 *   d1 = banana cherry             (length 2)
 *   d2 = cherry cherry cherry date (length 4)   N = 3, avgdl = 3
 * Keys are 0, 1, 2 in that order.
 */
const DOCS = [
  ["apple", "apple", "banana"],
  ["banana", "cherry"],
  ["cherry", "cherry", "cherry", "date"],
];
const VERBATIM = { stemming: false, stopWords: false };

function indexOf(texts: readonly string[], options: SearchIndexOptions): SegmentedIndex {
  const index = SegmentedIndex.create(options);
  new IndexWriter(index).prepare({ add: texts }).apply();
  return index;
}

function build(scorer: "tfidf" | "bm25", bm25?: { k1?: number; b?: number }): SegmentedIndex {
  return indexOf(
    DOCS.map((terms) => terms.join(" ")),
    { scorer, analyzer: VERBATIM, ...(bm25 && { bm25 }) },
  );
}

const close = (actual: number | undefined, expected: number, message?: string): void => {
  assert.ok(
    actual !== undefined && Math.abs(actual - expected) < 1e-12,
    `${message ?? ""} ${actual} ≠ ${expected}`,
  );
};

describe("tfidf scorer (pivoted length normalisation)", () => {
  // Smoothed idf = ln((1 + N) / (1 + df)) + 1; factor (1 + ln tf) / (1 − s + s·√(dl/avgdl)), s = 0.75;
  // query weight (1 + ln qtf)·idf²; score = Σ weight·factor / Σ weight·(max factor of the term).
  const idf1 = Math.log(4 / 2) + 1; // df = 1: apple, date
  const idf2 = Math.log(4 / 3) + 1; // df = 2: banana, cherry
  const lengths = [3, 2, 4];
  const factor = (tf: number, d: number): number =>
    (1 + Math.log(tf)) / (0.25 + 0.75 * Math.sqrt((lengths[d] ?? 0) / 3));
  const weight = (qtf: number, idf: number): number => (1 + Math.log(qtf)) * idf * idf;

  it("exposes its statistics", () => {
    const index = build("tfidf");
    assert.equal(index.scorer, "tfidf");
    assert.equal(index.liveDocumentCount, 3);
    assert.equal(index.totalLength, 9);
    assert.equal(index.vocabularySize, 4);
    assert.equal(index.postingCount, 6);
    assert.equal(index.documentFrequency("cherry"), 2);
    assert.equal(index.documentFrequency("zebra"), 0);
  });

  it("scores a one-term query by its factor over the best factor", () => {
    const hits = build("tfidf").searchTerms(["banana"], { topK: 10 });
    // banana: d0 (tf 1, dl 3) and d1 (tf 1, dl 2); the shorter document wins and scores 1.
    assert.deepEqual(
      hits.map((h) => h.key),
      [1, 0],
    );
    close(hits[0]?.score, 1);
    close(hits[1]?.score, factor(1, 0) / factor(1, 1));
  });

  it("weights query terms by (1 + ln qtf)·idf² and normalises by the best reachable score", () => {
    // Query: apple ×2, cherry ×1. Best apple factor: d0; best cherry factor: max(d1 tf 1 dl 2, d2 tf 3 dl 4).
    const wApple = weight(2, idf1);
    const wCherry = weight(1, idf2);
    const bound = wApple * factor(2, 0) + wCherry * Math.max(factor(1, 1), factor(3, 2));
    const expected = [
      (wApple * factor(2, 0)) / bound,
      (wCherry * factor(1, 1)) / bound,
      (wCherry * factor(3, 2)) / bound,
    ];
    const hits = build("tfidf").searchTerms(["apple", "cherry", "apple"], { topK: 3 });
    const order = [0, 1, 2].sort((a, b) => (expected[b] ?? 0) - (expected[a] ?? 0));
    assert.deepEqual(
      hits.map((h) => h.key),
      order,
    );
    for (const hit of hits) close(hit.score, expected[hit.key] ?? NaN, `d${hit.key}`);
  });

  it("gives 1 to a document holding every query term at its best factor", () => {
    const hits = build("tfidf").searchTerms(["cherry", "date"], { topK: 1 });
    assert.equal(hits[0]?.key, 2);
    close(hits[0]?.score, 1);
  });

  it("ignores unknown query terms", () => {
    const index = build("tfidf");
    assert.deepEqual(
      index.searchTerms(["apple", "zebra"], { topK: 3 }),
      index.searchTerms(["apple"], { topK: 3 }),
    );
    assert.deepEqual(index.searchTerms(["zebra"], { topK: 3 }), []);
  });
});

describe("bm25 scorer", () => {
  const N = 3;
  const avgdl = 3;
  const lengths = [3, 2, 4];
  const idf = (df: number): number => Math.log(1 + (N - df + 0.5) / (df + 0.5));
  const impact = (tf: number, d: number, k1: number, b: number): number =>
    (tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * (lengths[d] ?? 0)) / avgdl));

  it("defaults to k1 = 1.2, b = 0.75", () => {
    assert.deepEqual(build("bm25").options.bm25, { k1: 1.2, b: 0.75 });
    assert.deepEqual({ ...DEFAULT_BM25 }, { k1: 1.2, b: 0.75 });
  });

  it("normalises by the sum of the query terms' best impacts (one term: best document = 1)", () => {
    const { k1, b } = DEFAULT_BM25;
    const raw1 = idf(2) * impact(1, 1, k1, b); // cherry in d1 (tf 1, length 2)
    const raw2 = idf(2) * impact(3, 2, k1, b); // cherry in d2 (tf 3, length 4)
    assert.ok(raw2 > raw1);
    const hits = build("bm25").searchTerms(["cherry"], { topK: 5 });
    assert.deepEqual(
      hits.map((h) => h.key),
      [2, 1],
    );
    close(hits[0]?.score, 1);
    close(hits[1]?.score, raw1 / raw2);
  });

  it("sums query terms (with query term frequency) and divides by the MaxScore bound", () => {
    const k1 = 0.9;
    const b = 0.4;
    const index = build("bm25", { k1, b });
    assert.deepEqual(index.options.bm25, { k1, b });
    // Query: banana ×2, date. Best banana impact: max over d0 (tf 1, len 3) and d1 (tf 1, len 2) = d1.
    const banana = [idf(2) * impact(1, 0, k1, b), idf(2) * impact(1, 1, k1, b)];
    const date = idf(1) * impact(1, 2, k1, b);
    const bound = 2 * Math.max(...banana) + date;
    const expected = [(2 * (banana[0] ?? 0)) / bound, (2 * (banana[1] ?? 0)) / bound, date / bound];
    const hits = index.searchTerms(["banana", "date", "banana"], { topK: 3 });
    const order = [0, 1, 2].sort((x, y) => (expected[y] ?? 0) - (expected[x] ?? 0));
    assert.deepEqual(
      hits.map((h) => h.key),
      order,
    );
    for (const hit of hits) close(hit.score, expected[hit.key] ?? NaN, `d${hit.key}`);
  });

  it("normalisation does not change the ranking (same order as raw BM25)", () => {
    const { k1, b } = DEFAULT_BM25;
    const raw = (d: number): number => {
      let s = 0;
      const terms = DOCS[d] ?? [];
      for (const q of ["apple", "cherry", "date"]) {
        const tf = terms.filter((t) => t === q).length;
        if (tf > 0) s += idf(DOCS.filter((doc) => doc.includes(q)).length) * impact(tf, d, k1, b);
      }
      return s;
    };
    const hits = build("bm25").searchTerms(["apple", "cherry", "date"], { topK: 3 });
    const order = [0, 1, 2].sort((x, y) => raw(y) - raw(x));
    assert.deepEqual(
      hits.map((h) => h.key),
      order,
    );
    for (const hit of hits) assert.ok(hit.score > 0 && hit.score <= 1);
  });

  it("rejects bad parameters", () => {
    assert.throws(() => build("bm25", { b: 1.5 }), RangeError);
    assert.throws(() => build("bm25", { k1: -1 }), RangeError);
    assert.throws(() => SegmentedIndex.create({ scorer: "nope" as "bm25" }), RangeError);
  });
});

describe("search options and edge cases", () => {
  const texts = [
    "Cats purr when they are content.",
    "Dogs bark at the postman.",
    "The cat chased the dog around the garden.",
    "A garden full of roses.",
    "The dog and the cat sleep.",
  ];
  const index = (scorer: "tfidf" | "bm25"): SegmentedIndex => indexOf(texts, { scorer });

  for (const scorer of ["tfidf", "bm25"] as const) {
    it(`${scorer}: analyses queries like documents`, () => {
      const hits = index(scorer).search("barking DOGS", { topK: 5 });
      assert.equal(hits[0]?.key, 1);
      assert.deepEqual(hits.map((h) => h.key).sort(), [1, 2, 4]);
    });

    it(`${scorer}: empty, stop-word-only and unknown queries return []`, () => {
      const idx = index(scorer);
      assert.deepEqual(idx.search("", { topK: 5 }), []);
      assert.deepEqual(idx.search("the and of", { topK: 5 }), []);
      assert.deepEqual(idx.search("zebra unicorn", { topK: 5 }), []);
      assert.deepEqual(idx.searchTerms([], { topK: 5 }), []);
    });

    it(`${scorer}: honours topK, minScore and accept`, () => {
      const idx = index(scorer);
      const all = idx.search("cat dog garden", { topK: 10 });
      assert.equal(all.length, 5);
      for (let i = 1; i < all.length; i++) assert.ok((all[i - 1]?.score ?? 0) >= (all[i]?.score ?? 0));
      assert.deepEqual(idx.search("cat dog garden", { topK: 2 }), all.slice(0, 2));
      const threshold = all[2]?.score ?? 0;
      assert.deepEqual(
        idx.search("cat dog garden", { topK: 10, minScore: threshold }),
        all.filter((h) => h.score >= threshold),
      );
      assert.deepEqual(idx.search("cat dog garden", { topK: 10, minScore: 1.01 }), []);
      const even = (key: number): boolean => key % 2 === 0;
      assert.deepEqual(
        idx.search("cat dog garden", { topK: 10, accept: even }),
        all.filter((h) => even(h.key)),
      );
      assert.deepEqual(
        idx.search("cat dog garden", { topK: 1, accept: (k) => k !== all[0]?.key }),
        all.slice(1, 2),
      );
    });

    it(`${scorer}: breaks ties by lower key`, () => {
      const six = Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? "same words here" : "other text"));
      const hits = indexOf(six, { scorer }).search("words", { topK: 2 });
      assert.deepEqual(
        hits.map((h) => h.key),
        [0, 2],
      );
      assert.equal(hits[0]?.score, hits[1]?.score);
    });

    it(`${scorer}: validates search options`, () => {
      const idx = index(scorer);
      assert.throws(() => idx.search("cat", { topK: 0 }), RangeError);
      assert.throws(() => idx.search("cat", { topK: 1.5 }), RangeError);
      assert.throws(() => idx.search("cat", { topK: 1, minScore: NaN }), RangeError);
    });
  }

  it("an accept callback may search the same index (re-entrancy)", () => {
    const idx = index("bm25");
    const expected = idx.search("cat dog", { topK: 5 });
    const hits = idx.search("cat dog", {
      topK: 5,
      accept: () => idx.search("garden roses", { topK: 1 }).length === 1,
    });
    assert.deepEqual(hits, expected);
    assert.deepEqual(idx.search("cat dog", { topK: 5 }), expected);
  });

  it("a throwing accept callback leaves the index usable", () => {
    const idx = index("tfidf");
    const expected = idx.search("cat dog", { topK: 5 });
    assert.throws(() =>
      idx.search("cat dog", {
        topK: 5,
        accept: () => {
          throw new Error("boom");
        },
      }),
    );
    assert.deepEqual(idx.search("cat dog", { topK: 5 }), expected);
  });

  it("an empty index returns []", () => {
    const idx = SegmentedIndex.create({ scorer: "bm25" });
    assert.equal(idx.liveDocumentCount, 0);
    assert.deepEqual(idx.search("anything", { topK: 3 }), []);
  });

  it("documents without terms are never returned", () => {
    for (const scorer of ["tfidf", "bm25"] as const) {
      assert.deepEqual(
        indexOf(["", "the of", "real content"], { scorer })
          .search("content", { topK: 5 })
          .map((h) => h.key),
        [2],
      );
    }
  });

  it("an index of only term-less documents finds nothing", () => {
    const idx = indexOf(["", "the of"], { scorer: "bm25" });
    assert.equal(idx.totalLength, 0);
    assert.deepEqual(idx.search("the", { topK: 3 }), []);
  });

  it("uses the index's analyzer for documents and queries", () => {
    const idx = indexOf(["running dogs"], { scorer: "bm25", analyzer: { stemming: false } });
    assert.deepEqual(idx.options.analyzer, { stemming: false, stopWords: true });
    assert.deepEqual(idx.search("run", { topK: 1 }), []);
    assert.equal(idx.search("running", { topK: 1 }).length, 1);
  });
});
