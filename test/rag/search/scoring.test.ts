import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { DEFAULT_BM25, IndexBuilder, type SearchIndex } from "../../../src/rag/search/index.js";

/*
 * Three documents given as terms (no analysis), so every number below can be checked by hand:
 *   d0 = apple apple banana        (length 3)
 *   d1 = banana cherry             (length 2)
 *   d2 = cherry cherry cherry date (length 4)   N = 3, avgdl = 3
 */
const DOCS = [
  ["apple", "apple", "banana"],
  ["banana", "cherry"],
  ["cherry", "cherry", "cherry", "date"],
];

function build(scorer: "tfidf" | "bm25", bm25?: { k1?: number; b?: number }): SearchIndex {
  const builder = new IndexBuilder();
  for (const terms of DOCS) builder.addTerms(terms);
  return builder.build({ scorer, ...(bm25 && { bm25 }) });
}

const close = (actual: number | undefined, expected: number, message?: string): void => {
  assert.ok(
    actual !== undefined && Math.abs(actual - expected) < 1e-12,
    `${message ?? ""} ${actual} ≠ ${expected}`,
  );
};

describe("tfidf scorer", () => {
  // Smoothed idf = ln((1 + N) / (1 + df)) + 1; sublinear tf = 1 + ln(tf).
  const idf1 = Math.log(4 / 2) + 1; // df = 1: apple, date
  const idf2 = Math.log(4 / 3) + 1; // df = 2: banana, cherry
  const tf = (n: number): number => 1 + Math.log(n);
  const d0 = { apple: tf(2) * idf1, banana: tf(1) * idf2 };
  const d1 = { banana: tf(1) * idf2, cherry: tf(1) * idf2 };
  const d2 = { cherry: tf(3) * idf2, date: tf(1) * idf1 };
  const norm = (v: Record<string, number>): number => Math.hypot(...Object.values(v));

  it("is the default scorer choice and exposes its stats", () => {
    const index = build("tfidf");
    assert.equal(index.scorer, "tfidf");
    assert.equal(index.documentCount, 3);
    assert.equal(index.vocabularySize, 4);
    assert.equal(index.postingCount, 6);
    assert.equal(index.documentFrequency("cherry"), 2);
    assert.equal(index.documentFrequency("zebra"), 0);
  });

  it("scores a one-term query with the cosine of the normalised vectors", () => {
    const hits = build("tfidf").searchTerms(["banana"], { topK: 10 });
    // The query vector has one component, so the cosine is w(banana, d) / ‖d‖.
    const s0 = d0.banana / norm(d0);
    const s1 = d1.banana / norm(d1);
    assert.ok(s1 > s0);
    assert.deepEqual(
      hits.map((h) => h.ordinal),
      [1, 0],
    );
    close(hits[0]?.score, s1);
    close(hits[1]?.score, s0);
  });

  it("weights query terms by sublinear tf · idf and normalises the query", () => {
    // Query: apple ×2, cherry ×1.
    const q = { apple: tf(2) * idf1, cherry: tf(1) * idf2 };
    const qn = norm(q);
    const expected = [
      (q.apple * d0.apple) / (qn * norm(d0)),
      (q.cherry * d1.cherry) / (qn * norm(d1)),
      (q.cherry * d2.cherry) / (qn * norm(d2)),
    ];
    const hits = build("tfidf").searchTerms(["apple", "cherry", "apple"], { topK: 3 });
    const order = [0, 1, 2].sort((a, b) => (expected[b] ?? 0) - (expected[a] ?? 0));
    assert.deepEqual(
      hits.map((h) => h.ordinal),
      order,
    );
    for (const hit of hits) close(hit.score, expected[hit.ordinal] ?? NaN, `d${hit.ordinal}`);
  });

  it("gives 1 to a document identical to the query", () => {
    const hits = build("tfidf").searchTerms(["banana", "cherry"], { topK: 1 });
    assert.equal(hits[0]?.ordinal, 1);
    close(hits[0]?.score, 1);
  });

  it("ignores unknown query terms", () => {
    const index = build("tfidf");
    assert.deepEqual(
      index.searchTerms(["banana", "zebra"], { topK: 3 }),
      index.searchTerms(["banana"], { topK: 3 }),
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
      hits.map((h) => h.ordinal),
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
      hits.map((h) => h.ordinal),
      order,
    );
    for (const hit of hits) close(hit.score, expected[hit.ordinal] ?? NaN, `d${hit.ordinal}`);
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
      hits.map((h) => h.ordinal),
      order,
    );
    for (const hit of hits) assert.ok(hit.score > 0 && hit.score <= 1);
  });

  it("rejects bad parameters", () => {
    assert.throws(() => build("bm25", { b: 1.5 }), RangeError);
    assert.throws(() => build("bm25", { k1: -1 }), RangeError);
    assert.throws(() => new IndexBuilder().build({ scorer: "nope" as "bm25" }), RangeError);
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
  const index = (scorer: "tfidf" | "bm25"): SearchIndex => {
    const builder = new IndexBuilder();
    for (const text of texts) builder.add(text);
    return builder.build({ scorer });
  };

  for (const scorer of ["tfidf", "bm25"] as const) {
    it(`${scorer}: analyses queries like documents`, () => {
      const hits = index(scorer).search("barking DOGS", { topK: 5 });
      assert.equal(hits[0]?.ordinal, 1);
      assert.deepEqual(hits.map((h) => h.ordinal).sort(), [1, 2, 4]);
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
      const even = (ordinal: number): boolean => ordinal % 2 === 0;
      assert.deepEqual(
        idx.search("cat dog garden", { topK: 10, accept: even }),
        all.filter((h) => even(h.ordinal)),
      );
      assert.deepEqual(
        idx.search("cat dog garden", { topK: 1, accept: (o) => o !== all[0]?.ordinal }),
        all.slice(1, 2),
      );
    });

    it(`${scorer}: breaks ties by lower ordinal`, () => {
      const builder = new IndexBuilder();
      for (let i = 0; i < 6; i++) builder.add(i % 2 === 0 ? "same words here" : "other text");
      const hits = builder.build({ scorer }).search("words", { topK: 2 });
      assert.deepEqual(
        hits.map((h) => h.ordinal),
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
    const idx = new IndexBuilder().build({ scorer: "bm25" });
    assert.equal(idx.documentCount, 0);
    assert.deepEqual(idx.search("anything", { topK: 3 }), []);
  });

  it("documents without terms are never returned", () => {
    const builder = new IndexBuilder();
    builder.add("");
    builder.add("the of");
    builder.add("real content");
    for (const scorer of ["tfidf", "bm25"] as const) {
      assert.deepEqual(
        builder
          .build({ scorer })
          .search("content", { topK: 5 })
          .map((h) => h.ordinal),
        [2],
      );
    }
  });

  it("a builder can build several indexes and keep adding", () => {
    const builder = new IndexBuilder();
    builder.add("alpha beta");
    const first = builder.build({ scorer: "tfidf" });
    assert.equal(builder.add("beta gamma"), 1);
    const second = builder.build({ scorer: "tfidf" });
    assert.equal(first.documentCount, 1);
    assert.equal(second.documentCount, 2);
    assert.deepEqual(
      second.search("beta", { topK: 5 }).map((h) => h.ordinal),
      [0, 1],
    );
  });

  it("uses the builder's analyzer and rejects a different one at build time", () => {
    const builder = new IndexBuilder({ stemming: false });
    builder.add("running dogs");
    const idx = builder.build({ scorer: "bm25", analyzer: { stemming: false } });
    assert.deepEqual(idx.options.analyzer, { stemming: false, stopWords: true });
    assert.deepEqual(idx.search("run", { topK: 1 }), []);
    assert.equal(idx.search("running", { topK: 1 }).length, 1);
    assert.throws(() => builder.build({ scorer: "bm25", analyzer: { stemming: true } }), /differs/);
  });
});
