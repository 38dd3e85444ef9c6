/**
 * The segmented index's vectors: what a write must give, what a load refuses, dense search with a
 * filter, and a background merge whose result is large enough for a graph (built on the merge worker,
 * loaded with the merged segment) answering as exact search does.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  IndexWriter,
  mergeInBackground,
  SegmentedIndex,
  type SearchHit,
} from "../../../src/rag/search/index.js";
import { perSegmentK } from "../../../src/rag/search/core/dense.js";
import { hashVector } from "../../helpers/hash-embedder.js";
import { makeProse, seededRandom } from "../../helpers/text-fixtures.js";

const DIMENSION = 12;
const embed = (texts: readonly string[]) => texts.map((text) => hashVector(text, DIMENSION));

function texts(count: number, seed: number): string[] {
  const random = seededRandom(seed);
  return Array.from({ length: count }, () => makeProse(random, 60));
}

describe("vectors in the segmented index", () => {
  it("a write gives one vector per added text, of the index's dimension; a lexical index takes none", () => {
    const index = SegmentedIndex.create({
      scorer: "bm25",
      vectors: { dimension: DIMENSION, storage: "f32" },
    });
    const writer = new IndexWriter(index);
    assert.throws(() => writer.prepare({ add: ["a b"] }), /keeps vectors: 1 texts need 1 vectors, got 0/);
    assert.throws(() => writer.prepare({ add: ["a b"], vectors: [new Float32Array(3)] }), /3 dimensions/);
    const lexical = new IndexWriter(SegmentedIndex.create({ scorer: "bm25" }));
    assert.throws(() => lexical.prepare({ add: ["a"], vectors: embed(["a"]) }), /keeps no vectors/);
    assert.equal(SegmentedIndex.create({ scorer: "bm25" }).vectorStats(), null);
    // A delete-only write needs no vector.
    const write = writer.prepare({ add: ["alpha beta"], vectors: embed(["alpha beta"]) });
    write.apply();
    writer.prepare({ delete: [{ key: 0, text: "alpha beta" }] }).apply();
    assert.deepEqual(index.vectorStats(), { count: 0, dimension: DIMENSION, bytes: DIMENSION * 4 });
    assert.deepEqual(index.searchDense(embed(["alpha"])[0]!, { topK: 5 }), []);
  });

  it("a load refuses segments whose vectors do not match the index", () => {
    const index = SegmentedIndex.create({
      scorer: "bm25",
      vectors: { dimension: DIMENSION, storage: "f16" },
    });
    const write = new IndexWriter(index).prepare({ add: ["x y"], vectors: embed(["x y"]) });
    const segment = write.segment!;
    const state = write.state;
    const stored = { bytes: segment.bytes, deleted: [], vectors: segment.vectors };
    assert.throws(
      () => SegmentedIndex.load({ scorer: "bm25" }, [stored], state),
      /has vectors, the index has none/,
    );
    assert.throws(
      () =>
        SegmentedIndex.load(
          { scorer: "bm25", vectors: { dimension: DIMENSION, storage: "f16" } },
          [{ ...stored, vectors: null }],
          state,
        ),
      /has no vectors/,
    );
    assert.throws(
      () =>
        SegmentedIndex.load(
          { scorer: "bm25", vectors: { dimension: DIMENSION, storage: "i8" } },
          [stored],
          state,
        ),
      /f16 vectors, the index 12-d i8/,
    );
  });

  it("dense search with a filter equals brute force over the accepted live documents", () => {
    const index = SegmentedIndex.create({
      scorer: "bm25",
      vectors: { dimension: DIMENSION, storage: "f32" },
    });
    const writer = new IndexWriter(index);
    const all = [...texts(30, 1), ...texts(30, 1)]; // duplicates: ties
    for (let i = 0; i < all.length; i += 20) {
      const batch = all.slice(i, i + 20);
      writer.prepare({ add: batch, vectors: embed(batch) }).apply();
    }
    writer
      .prepare({
        delete: [
          { key: 3, text: all[3]! },
          { key: 40, text: all[40]! },
        ],
      })
      .apply();
    const query = hashVector("storage index engine", DIMENSION);
    const accept = (key: number) => key % 3 !== 0;
    const unfiltered = index.searchDense(query, { topK: 1000 });
    const expected: SearchHit[] = unfiltered.filter((hit) => accept(hit.key)).slice(0, 7);
    assert.deepEqual(index.searchDense(query, { topK: 7, accept }), expected);
    assert.ok(!unfiltered.some((hit) => hit.key === 3 || hit.key === 40), "deleted documents never appear");
    assert.equal(unfiltered.length, all.length - 2);
  });

  it("each segment asked for its share of k answers as asking each for k, even where one holds the whole top k", () => {
    const random = seededRandom(11);
    const index = SegmentedIndex.create({
      scorer: "bm25",
      vectors: { dimension: DIMENSION, storage: "f16" },
    });
    const writer = new IndexWriter(index);
    const query = "storage index engine";
    // Segments of skewed sizes; the 5-document one holds near-copies of the query (the whole top 5, and
    // ties: two exact copies), so its share of k (1 of 5) is too few and it must be asked again.
    const batches = [texts(300, 2), texts(40, 3), [query, query, `${query} a`, `${query} b`, `${query} c`]];
    for (let i = 0; i < 12; i++) batches.push(texts(1 + Math.floor(random() * 8), 20 + i));
    for (const batch of batches) writer.prepare({ add: batch, vectors: embed(batch) }).apply();
    writer.prepare({ delete: [{ key: 7, text: batches[0]![7]! }] }).apply();
    // The reference: every live document's score, all segments asked for all of k (one merged segment).
    const single = SegmentedIndex.create({
      scorer: "bm25",
      vectors: { dimension: DIMENSION, storage: "f16" },
    });
    const live = batches.flat().filter((_, key) => key !== 7);
    new IndexWriter(single).prepare({ add: live, vectors: embed(live) }).apply();
    const keyOf = batches
      .flat()
      .map((_, key) => key)
      .filter((key) => key !== 7);
    for (const [q, text] of [query, "crash write overlap", "merge policy tiers"].entries()) {
      for (const topK of [1, 3, 5, 10, 37, 400]) {
        const vector = hashVector(text, DIMENSION);
        const expected = single
          .searchDense(vector, { topK })
          .map((hit) => ({ key: keyOf[hit.key]!, score: hit.score }));
        assert.deepEqual(index.searchDense(vector, { topK }), expected, `query ${q}, top ${topK}`);
      }
    }
    assert.ok(perSegmentK(50, 0.1) < 50 && perSegmentK(50, 1) === 50 && perSegmentK(50, 1e-6) === 1);
  });

  it("a merge in the background builds a large result's graph; it answers as exact search", async () => {
    const options = {
      scorer: "bm25" as const,
      vectors: { dimension: DIMENSION, storage: "i8" as const, graphThreshold: 100 },
    };
    const index = SegmentedIndex.create(options);
    const writer = new IndexWriter(index);
    const all = texts(180, 7);
    for (let i = 0; i < all.length; i += 60) {
      const batch = all.slice(i, i + 60);
      writer.prepare({ add: batch, vectors: embed(batch) }).apply();
    }
    writer.prepare({ delete: [{ key: 5, text: all[5]! }] }).apply();
    const ids = index.segments().map((segment) => segment.id);
    const query = hashVector("crash write overlap", DIMENSION);
    const before = index.searchDense(query, { topK: 1000, exact: true });
    const result = await mergeInBackground(index, ids);
    // A delete while the merge ran becomes a tombstone of the merged segment: never a hit.
    const gone = before[0]!.key;
    writer.prepare({ delete: [{ key: gone, text: all[gone]! }] }).apply();
    const merge = index.prepareMerge(result);
    assert.ok(merge.segment.vectors instanceof Uint8Array);
    assert.deepEqual(merge.tombstones.length, 1);
    merge.apply();
    assert.deepEqual(
      index.segments().map((segment) => segment.id),
      [merge.segment.id],
    );
    assert.ok(index.segmentById(merge.segment.id)!.vectors?.graph, "the merged segment has its graph");
    // Codes are copied as stored: the same scores as before the merge, less the deleted document.
    const exact = index.searchDense(query, { topK: 10, exact: true });
    assert.deepEqual(exact, before.filter((hit) => hit.key !== gone).slice(0, 10));
    // Through the graph: the same hits (rescored exactly) but for what an approximate walk may miss.
    const approximate = index.searchDense(query, { topK: 10 });
    const found = approximate.filter((hit) => exact.some((e) => e.key === hit.key && e.score === hit.score));
    assert.ok(found.length >= 9, `graph recall ${found.length}/10`);
    // Loaded from the merged segment's bytes, it answers the same.
    const loaded = SegmentedIndex.load(
      options,
      [
        {
          bytes: merge.segment.bytes,
          deleted: merge.tombstones.map((t) => t.ordinal),
          vectors: merge.segment.vectors,
        },
      ],
      index.state,
    );
    assert.deepEqual(loaded.searchDense(query, { topK: 10, exact: true }), exact);
  });
});
