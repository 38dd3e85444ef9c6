/**
 * Writes, deletes and merges: prepared writes and merges change nothing until applied and refuse to
 * apply to an index that changed; deletes check the text; deletes racing a merge become tombstones of the
 * merged segment; the worker-thread merge equals the inline one; the tiered policy keeps segments few.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  IndexWriter,
  mergeInBackground,
  mergeNow,
  SegmentedIndex,
  TieredMergePolicy,
  type SearchHit,
  type SegmentInfo,
} from "../../../src/rag/search/index.js";

const TEXTS = [
  "Cats purr when they are content.",
  "Dogs bark at the postman.",
  "The cat chased the dog around the garden.",
  "A garden full of roses.",
  "The dog and the cat sleep.",
  "Roses are red, violets are blue.",
];
const QUERIES = ["cat", "dog garden", "roses", "postman bark", "sleep cat dog"];

function results(index: SegmentedIndex): SearchHit[][] {
  return QUERIES.map((query) => index.search(query, { topK: 10 }));
}

/** An index written in three batches: segments 0, 1, 2; keys 0 … 5. */
function threeSegments(): { index: SegmentedIndex; writer: IndexWriter; bytes: Uint8Array[] } {
  const index = SegmentedIndex.create({ scorer: "bm25" });
  const writer = new IndexWriter(index);
  const bytes: Uint8Array[] = [];
  for (const batch of [TEXTS.slice(0, 2), TEXTS.slice(2, 4), TEXTS.slice(4)]) {
    const write = writer.prepare({ add: batch });
    write.apply();
    bytes.push(write.segment?.bytes ?? new Uint8Array(0));
  }
  return { index, writer, bytes };
}

describe("IndexWriter", () => {
  it("a prepared write changes nothing until applied, and reports the state after it", () => {
    const { index, writer } = threeSegments();
    const before = results(index);
    const prepared = writer.prepare({
      add: ["Violets and roses in the garden."],
      delete: [{ key: 1, text: TEXTS[1] ?? "" }],
    });
    assert.deepEqual(results(index), before);
    assert.deepEqual(prepared.keys, [6]);
    assert.equal(prepared.segment?.id, 3);
    assert.equal(prepared.segment?.documentCount, 1);
    assert.deepEqual(prepared.tombstones, [{ segmentId: 0, ordinal: 1 }]);
    assert.deepEqual(prepared.state, { nextKey: 7, nextSegmentId: 4 });
    assert.deepEqual(index.state, { nextKey: 6, nextSegmentId: 3 });
    prepared.apply();
    assert.deepEqual(index.state, prepared.state);
    assert.equal(index.liveDocumentCount, prepared.liveDocumentCount);
    assert.equal(index.totalLength, prepared.totalLength);
    assert.equal(index.vocabularySize, prepared.vocabularySize);
    assert.equal(index.locate(1), undefined);
    assert.deepEqual(index.locate(6), { segmentId: 3, ordinal: 0 });
    assert.deepEqual(index.search("postman", { topK: 5 }), [], "the deleted document's only term is gone");
    assert.equal(index.documentFrequency("postman"), 0);
  });

  it("apply() refuses a write prepared before another change", () => {
    const { writer } = threeSegments();
    const first = writer.prepare({ add: ["one"] });
    const second = writer.prepare({ add: ["two"] });
    first.apply();
    assert.throws(() => second.apply(), /changed since/);
    assert.throws(() => first.apply(), /already applied/);
  });

  it("deletes must name live documents with their exact text", () => {
    const { writer } = threeSegments();
    assert.throws(() => writer.prepare({ delete: [{ key: 99, text: "x" }] }), RangeError);
    assert.throws(() => writer.prepare({ delete: [{ key: 0, text: "Cats purr" }] }), /does not match/);
    assert.throws(
      () => writer.prepare({ delete: [{ key: 0, text: "Dogs purr when they are content." }] }),
      /does not match/,
    );
    assert.throws(
      () =>
        writer.prepare({
          delete: [
            { key: 0, text: TEXTS[0] ?? "" },
            { key: 0, text: TEXTS[0] ?? "" },
          ],
        }),
      RangeError,
    );
    writer.prepare({ delete: [{ key: 0, text: TEXTS[0] ?? "" }] }).apply();
    assert.throws(() => writer.prepare({ delete: [{ key: 0, text: TEXTS[0] ?? "" }] }), RangeError);
  });
});

describe("merges", () => {
  it("mergeInBackground (worker thread) gives the same result as mergeNow", async () => {
    const { index, writer } = threeSegments();
    writer.prepare({ delete: [{ key: 2, text: TEXTS[2] ?? "" }] }).apply();
    const inline = mergeNow(index, [2, 0]);
    const background = await mergeInBackground(index, [2, 0]);
    assert.deepEqual(background, inline);
    const before = results(index);
    const merge = index.prepareMerge(background);
    assert.deepEqual(merge.removedSegmentIds, [2, 0]);
    assert.deepEqual(merge.tombstones, []);
    assert.deepEqual(merge.state, { nextKey: 6, nextSegmentId: 4 });
    merge.apply();
    assert.deepEqual(
      index.segments().map(({ id, documentCount, deletedCount }) => ({ id, documentCount, deletedCount })),
      [
        { id: 3, documentCount: 4, deletedCount: 0 },
        { id: 1, documentCount: 2, deletedCount: 1 },
      ],
    );
    assert.deepEqual(results(index), before);
  });

  it("the index stays usable while a background merge runs", async () => {
    const { index, writer } = threeSegments();
    const pending = mergeInBackground(index, [0, 1, 2]);
    writer.prepare({ add: ["Another cat in the garden."] }).apply();
    const during = results(index);
    const merge = index.prepareMerge(await pending);
    merge.apply();
    assert.deepEqual(results(index), during);
    assert.deepEqual(
      index.segments().map(({ id }) => id),
      [4, 3],
    );
  });

  it("deletes made while a background merge snapshots are kept out of or tombstoned in the merged segment", async () => {
    const { index, writer } = threeSegments();
    // The snapshot takes one source per event-loop turn: these deletes land before segment 1 is copied
    // (key 3) and after segment 0 was (key 0); both must be gone once the merge is applied.
    const pending = mergeInBackground(index, [0, 1]);
    writer.prepare({ delete: [{ key: 3, text: TEXTS[3] ?? "" }] }).apply();
    writer.prepare({ delete: [{ key: 0, text: TEXTS[0] ?? "" }] }).apply();
    const before = results(index);
    const merge = index.prepareMerge(await pending);
    merge.apply();
    assert.deepEqual(results(index), before);
    assert.equal(index.liveDocumentCount, 4);
    const fresh = SegmentedIndex.create({ scorer: "bm25" });
    new IndexWriter(fresh)
      .prepare({ add: [TEXTS[1] ?? "", TEXTS[2] ?? "", TEXTS[4] ?? "", TEXTS[5] ?? ""] })
      .apply();
    const scores = (target: SegmentedIndex): number[][] =>
      results(target).map((hits) => hits.map(({ score }) => score).sort((a, b) => a - b));
    assert.deepEqual(scores(index), scores(fresh));
  });

  it("a background merge fails if a source leaves the index while it is being snapshotted", async () => {
    const { index } = threeSegments();
    const pending = mergeInBackground(index, [0, 1]);
    // Segment 0 is copied already; segment 1 is merged away before its turn comes.
    index.prepareMerge(mergeNow(index, [1, 2])).apply();
    await assert.rejects(pending, /segment 1 left the index/);
  });

  it("deletes committed while a merge ran become tombstones of the merged segment", () => {
    const { index, writer, bytes } = threeSegments();
    const result = mergeNow(index, [0, 1]);
    // Key 3 is in segment 1 (ordinal 1): after the merge it is ordinal 3 of the merged segment.
    writer.prepare({ delete: [{ key: 3, text: TEXTS[3] ?? "" }] }).apply();
    const before = results(index);
    const merge = index.prepareMerge(result);
    assert.deepEqual(merge.tombstones, [{ segmentId: 3, ordinal: 3 }]);
    merge.apply();
    assert.equal(index.locate(3), undefined);
    assert.equal(index.deletedDocumentCount, 1);
    assert.deepEqual(results(index), before);
    // The store's view (merged bytes + the carried tombstone) loads to the same index.
    const loaded = SegmentedIndex.load(
      { scorer: "bm25" },
      [
        { bytes: merge.segment.bytes, deleted: [3] },
        { bytes: bytes[2] ?? new Uint8Array(0), deleted: [] },
      ],
      index.state,
    );
    assert.deepEqual(loaded.segments(), index.segments());
    assert.deepEqual(results(loaded), before);
  });

  it("a document deleted during a merge no longer sets the normalisation (its frontier point goes)", () => {
    for (const scorer of ["bm25", "tfidf"] as const) {
      const index = SegmentedIndex.create({ scorer });
      const writer = new IndexWriter(index);
      writer.prepare({ add: ["apple apple"] }).apply();
      writer.prepare({ add: ["apple banana cherry"] }).apply();
      const result = mergeNow(index, [0, 1]);
      writer.prepare({ delete: [{ key: 0, text: "apple apple" }] }).apply();
      assert.deepEqual(index.search("apple", { topK: 5 }), [{ key: 1, score: 1 }]);
      index.prepareMerge(result).apply();
      assert.deepEqual(index.search("apple", { topK: 5 }), [{ key: 1, score: 1 }], scorer);
    }
  });

  it("a merge prepared before another change, or of a segment that is gone, is refused", () => {
    const { index, writer } = threeSegments();
    const result = mergeNow(index, [0, 1]);
    const merge = index.prepareMerge(result);
    writer.prepare({ add: ["late"] }).apply();
    assert.throws(() => merge.apply(), /changed since/);
    index.prepareMerge(mergeNow(index, [0, 2])).apply();
    assert.throws(() => index.prepareMerge(result), /no longer in the index/);
    assert.throws(() => mergeNow(index, [0]), RangeError);
    assert.throws(() => mergeNow(index, []), RangeError);
  });
});

describe("TieredMergePolicy", () => {
  const info = (id: number, documentCount: number, deletedCount = 0): SegmentInfo => ({
    id,
    documentCount,
    deletedCount,
    byteLength: documentCount * 100,
  });

  it("leaves a small number of segments alone", () => {
    const policy = new TieredMergePolicy();
    assert.deepEqual(policy.findMerges([]), []);
    assert.deepEqual(policy.findMerges([info(0, 100_000), info(1, 5_000), info(2, 300)]), []);
  });

  it("merges many small segments of similar size, at most maxMergeAtOnce at a time", () => {
    const policy = new TieredMergePolicy({
      segmentsPerTier: 4,
      maxMergeAtOnce: 5,
      floorSegmentDocuments: 10,
    });
    const segments = [info(0, 100_000), ...Array.from({ length: 40 }, (_, i) => info(i + 1, 5 + (i % 9)))];
    const merges = policy.findMerges(segments);
    assert.ok(merges.length > 0);
    const seen = new Set<number>();
    for (const group of merges) {
      assert.ok(group.length >= 2 && group.length <= 5, `group ${JSON.stringify(group)}`);
      assert.ok(!group.includes(0), "the large segment is not merged with small ones");
      for (const id of group) {
        assert.ok(!seen.has(id), "groups are disjoint");
        seen.add(id);
      }
    }
  });

  it("rewrites a segment with too many deletes on its own", () => {
    const policy = new TieredMergePolicy({ deletesPctAllowed: 20 });
    assert.deepEqual(policy.findMerges([info(0, 1000, 300), info(1, 1000, 100)]), [[0]]);
  });

  it("keeps the segment count logarithmic as one-document writes accumulate", () => {
    const index = SegmentedIndex.create({ scorer: "bm25" });
    const writer = new IndexWriter(index);
    const policy = new TieredMergePolicy({ segmentsPerTier: 4, maxMergeAtOnce: 4, floorSegmentDocuments: 2 });
    for (let i = 0; i < 300; i++) {
      writer.prepare({ add: [`document ${i} about topic ${i % 7}`] }).apply();
      for (const group of policy.findMerges(index.segments())) {
        index.prepareMerge(mergeNow(index, group)).apply();
      }
    }
    assert.equal(index.liveDocumentCount, 300);
    assert.ok(index.segments().length <= 16, `${index.segments().length} segments`);
    assert.deepEqual(
      index.search("topic 3", { topK: 3 }).map((hit) => hit.key),
      [3, 10, 17],
    );
  });

  it("validates its options", () => {
    assert.throws(() => new TieredMergePolicy({ maxMergeAtOnce: 1 }), RangeError);
    assert.throws(() => new TieredMergePolicy({ deletesPctAllowed: 120 }), RangeError);
  });
});
