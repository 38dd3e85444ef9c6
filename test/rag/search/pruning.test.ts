/**
 * Dynamic pruning (MaxScore with block-max windows, across segments with tombstones) must return exactly
 * what exhaustive scoring returns: the same keys with bit-identical scores, for both scorers, with topK,
 * minScore and accept filters; and both must equal a fresh one-segment build over the live documents.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { advanceTo, pruningCounters } from "../../../src/rag/search/core/maxscore.js";
import {
  IndexWriter,
  mergeNow,
  SegmentedIndex,
  type SearchHit,
  type SearchIndexOptions,
  type SearchOptions,
} from "../../../src/rag/search/index.js";
import { seededRandom as random } from "../../../scripts/lib/seeded-random.js";

const VERBATIM = { stemming: false, stopWords: false };

function indexOf(texts: readonly string[], options: SearchIndexOptions): SegmentedIndex {
  const index = SegmentedIndex.create(options);
  new IndexWriter(index).prepare({ add: texts }).apply();
  return index;
}

/**
 * The texts written in several batches (one large, then smaller ones), some documents deleted, two
 * segments merged while deletes happen: many segments, tombstones and a merged segment.
 */
function segmentedIndexOf(
  texts: readonly string[],
  options: SearchIndexOptions,
  next: () => number,
): { index: SegmentedIndex; live: Map<number, string> } {
  const index = SegmentedIndex.create(options);
  const writer = new IndexWriter(index);
  const live = new Map<number, string>();
  const write = (add: readonly string[], remove: readonly number[]): void => {
    const prepared = writer.prepare({
      add,
      delete: remove.map((key) => ({ key, text: live.get(key) ?? "" })),
    });
    prepared.apply();
    for (const key of remove) live.delete(key);
    prepared.keys.forEach((key, i) => live.set(key, add[i] ?? ""));
  };
  const deleteSome = (fraction: number): void => {
    const keys = [...live.keys()].filter(() => next() < fraction);
    if (keys.length > 0) write([], keys);
  };
  let start = 0;
  let size = Math.ceil(texts.length * 0.85);
  while (start < texts.length) {
    write(texts.slice(start, start + size), []);
    start += size;
    size = Math.max(1, Math.ceil(texts.length * 0.04));
    deleteSome(0.02);
  }
  const segments = index.segments();
  if (segments.length >= 3) {
    const result = mergeNow(index, [segments[1]?.id ?? 0, segments[2]?.id ?? 0]);
    deleteSome(0.02);
    index.prepareMerge(result).apply();
  }
  return { index, live };
}

/** A Zipf-like draw from [0, size): small ids are frequent, as words are. */
function zipf(next: () => number, size: number): number {
  return Math.min(size - 1, Math.floor(Math.exp(next() * Math.log(size + 1)) - 1));
}

interface Corpus {
  documents: string[][];
  vocabulary: number;
}

function randomCorpus(next: () => number, documentCount: number, vocabulary: number): Corpus {
  const documents: string[][] = [];
  for (let d = 0; d < documentCount; d++) {
    // Some empty and some long documents; lengths vary a lot, as chunks do.
    const length = next() < 0.01 ? 0 : 1 + Math.floor(next() * next() * 120);
    const terms: string[] = [];
    for (let i = 0; i < length; i++) terms.push(`w${zipf(next, vocabulary)}`);
    // Bursts: a term repeated many times (large tf).
    if (next() < 0.05) for (let i = 0; i < 30; i++) terms.push(`w${zipf(next, 50)}`);
    documents.push(terms);
  }
  return { documents, vocabulary };
}

function randomQuery(next: () => number, corpus: Corpus): string[] {
  const length = 1 + Math.floor(next() * 8);
  const terms: string[] = [];
  for (let i = 0; i < length; i++) {
    const r = next();
    // Mix frequent, rare and unknown terms; repeats give query term frequencies > 1.
    if (r < 0.05) terms.push("unknown-term");
    else if (r < 0.15 && terms.length > 0) terms.push(terms[0] ?? "w0");
    else if (r < 0.5) terms.push(`w${Math.floor(next() * 20)}`);
    else terms.push(`w${zipf(next, corpus.vocabulary)}`);
  }
  return terms;
}

function assertSameHits(pruned: SearchHit[], exhaustive: SearchHit[], context: string): void {
  assert.equal(pruned.length, exhaustive.length, `${context}: hit count`);
  for (let i = 0; i < exhaustive.length; i++) {
    const a = pruned[i];
    const b = exhaustive[i];
    assert.ok(
      a?.key === b?.key && Object.is(a?.score, b?.score),
      `${context}: hit ${i}: pruned ${JSON.stringify(a)} vs exhaustive ${JSON.stringify(b)}`,
    );
  }
}

function compare(
  index: SegmentedIndex,
  next: () => number,
  corpus: Corpus,
  queries: number,
  label: string,
): { hits: number; prunedQueries: number } {
  let hits = 0;
  for (let q = 0; q < queries; q++) {
    const terms = randomQuery(next, corpus);
    const topK = next() < 0.3 ? 1 + Math.floor(next() * 3) : 1 + Math.floor(next() * 60);
    const options: SearchOptions = { topK };
    const r = next();
    if (r < 0.3) options.minScore = next() * 0.6;
    const f = next();
    if (f < 0.3) {
      const modulus = 2 + Math.floor(next() * 5);
      const remainder = Math.floor(next() * modulus);
      options.accept = (key) => key % modulus === remainder;
    } else if (f < 0.4) {
      const allowed = new Set<number>();
      for (let i = 0; i < 50; i++) allowed.add(Math.floor(next() * corpus.documents.length));
      options.accept = (key) => allowed.has(key);
    }
    const exhaustive = index.searchTerms(terms, { ...options, exhaustive: true });
    const pruned = index.searchTerms(terms, { ...options, exhaustive: false });
    assertSameHits(pruned, exhaustive, `${label} query ${q} ${JSON.stringify({ terms, ...options })}`);
    hits += exhaustive.length;
  }
  return { hits, prunedQueries: queries };
}

describe("dynamic pruning", () => {
  it("advanceTo finds the first posting ≥ target", () => {
    const docIds = new Uint32Array([2, 3, 5, 8, 13, 21, 34, 55, 89]);
    for (let from = 0; from <= docIds.length; from++) {
      for (let target = 0; target < 100; target++) {
        let expected = from;
        while (expected < docIds.length && (docIds[expected] ?? 0) < target) expected++;
        assert.equal(
          advanceTo(docIds, from, docIds.length, target),
          expected,
          `from ${from} target ${target}`,
        );
      }
    }
  });

  // Sizes below and above one window (4,096 documents), lists shorter and longer than a block (64).
  const cases = [
    { seed: 1, documents: 300, vocabulary: 200, queries: 400 },
    { seed: 2, documents: 5000, vocabulary: 3000, queries: 300 },
    { seed: 3, documents: 20000, vocabulary: 20000, queries: 250 },
  ];
  for (const scorer of ["bm25", "tfidf"] as const) {
    for (const { seed, documents, vocabulary, queries } of cases) {
      it(`${scorer}: same hits and scores as exhaustive scoring (${documents} documents, seed ${seed})`, () => {
        const next = random(seed * 7919 + (scorer === "bm25" ? 1 : 2));
        const corpus = randomCorpus(next, documents, vocabulary);
        const bm25 = scorer === "bm25" && seed === 2 ? { k1: 0.9, b: 0.4 } : undefined;
        const options = { scorer, analyzer: VERBATIM, ...(bm25 && { bm25 }) };
        const { index, live } = segmentedIndexOf(
          corpus.documents.map((terms) => terms.join(" ")),
          options,
          next,
        );
        assert.ok(index.segments().length >= 3 && index.deletedDocumentCount > 0);
        const before = { ...pruningCounters };
        const { hits } = compare(index, next, corpus, queries, `${scorer}/${seed}`);
        assert.ok(hits > queries, "the queries must find something");
        // The cases must exercise pruning: non-essential terms, and for the larger ones skipped windows
        // and skipped blocks.
        assert.ok(pruningCounters.prunedWindows > before.prunedWindows, "no window had non-essential terms");
        // (Windows are per segment: skipping them needs a segment of several windows.)
        if (Math.max(...index.segments().map((segment) => segment.documentCount)) > 8192) {
          assert.ok(pruningCounters.skippedWindows > before.skippedWindows, "no window was skipped");
          assert.ok(pruningCounters.skippedBlocks > before.skippedBlocks, "no block was skipped");
        }
        // A fresh build over the live documents ranks identically (keys mapped by order).
        const keys = [...live.keys()].sort((a, b) => a - b);
        const fresh = indexOf(
          keys.map((key) => live.get(key) ?? ""),
          options,
        );
        const queryNext = random(seed);
        for (let q = 0; q < 30; q++) {
          const terms = randomQuery(queryNext, corpus);
          const expected = fresh
            .searchTerms(terms, { topK: 20, exhaustive: true })
            .map(({ key, score }) => ({ key: keys[key] ?? -1, score }));
          assertSameHits(index.searchTerms(terms, { topK: 20, exhaustive: false }), expected, `fresh ${q}`);
        }
      });
    }
  }

  it("text queries through the analyzer agree, with duplicates and ties", () => {
    const texts: string[] = [];
    const words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"];
    const next = random(99);
    for (let d = 0; d < 9000; d++) {
      // Many identical documents: exact score ties must be broken by key on both paths.
      const text =
        d % 3 === 0
          ? "alpha beta gamma"
          : Array.from({ length: 3 + Math.floor(next() * 20) }, () => words[zipf(next, words.length)]).join(
              " ",
            );
      texts.push(text);
    }
    for (const scorer of ["bm25", "tfidf"] as const) {
      const { index } = segmentedIndexOf(texts, { scorer }, random(5));
      for (const query of [
        "alpha",
        "alpha beta",
        "gamma delta theta",
        "eta eta zeta alpha",
        "beta gamma alpha",
      ]) {
        for (const topK of [1, 5, 10, 100, 5000]) {
          for (const minScore of [0, 0.3, 0.9]) {
            const options = { topK, minScore };
            const expected = index.search(query, { ...options, exhaustive: true });
            const context = `${scorer} ${query} ${JSON.stringify(options)}`;
            assertSameHits(index.search(query, { ...options, exhaustive: false }), expected, context);
            assertSameHits(index.search(query, options), expected, `${context} (automatic)`);
          }
        }
      }
    }
  });

  it("asks accept only about would-be hits, and allows a nested search from it", () => {
    const texts = Array.from({ length: 6000 }, (_, d) => (d % 2 === 0 ? "x y" : `x u${d}`));
    const index = indexOf(texts, { scorer: "bm25", analyzer: VERBATIM });
    let asked = 0;
    const hits = index.searchTerms(["x", "y"], {
      topK: 3,
      exhaustive: false,
      accept: (key) => {
        asked++;
        // A nested search must not disturb the outer one.
        assert.equal(index.searchTerms(["y"], { topK: 1, exhaustive: false }).length, 1);
        return key % 4 === 0;
      },
    });
    assert.deepEqual(
      hits.map((h) => h.key),
      [0, 4, 8],
    );
    assert.ok(asked < 100, `accept asked ${asked} times`);
  });
});
