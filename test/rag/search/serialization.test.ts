/**
 * Segment bytes: a versioned little-endian format; loading them gives identical results, from any view.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { decodeSegment, encodeSegment } from "../../../src/rag/search/core/segment-codec.js";
import { IndexWriter, SegmentedIndex, type SearchIndexOptions } from "../../../src/rag/search/index.js";

const TEXTS = [
  "The quick brown fox jumps over the lazy dog.",
  "Foxes are small omnivorous mammals; a fox's den is called an earth.",
  "Dogs were domesticated from wolves 15,000 years ago.",
  "我爱北京天安门 — Beijing's Tiananmen square.",
  "Lazy afternoons: the dog sleeps, the cat purrs, the fox waits.",
  "",
];
const QUERIES = ["fox", "lazy dog", "wolves domesticated", "北京", "the", "", "cat fox dog earth square"];

function sameResults(a: SegmentedIndex, b: SegmentedIndex): void {
  for (const query of QUERIES) {
    for (const topK of [1, 3, 100]) {
      assert.deepEqual(b.search(query, { topK }), a.search(query, { topK }), `${query} @${topK}`);
    }
  }
}

function build(options: SearchIndexOptions, texts: readonly string[]) {
  const index = SegmentedIndex.create(options);
  const write = new IndexWriter(index).prepare({ add: texts });
  write.apply();
  return { index, write, bytes: write.segment?.bytes ?? new Uint8Array(0) };
}

describe("segment bytes", () => {
  for (const scorer of ["tfidf", "bm25"] as const) {
    it(`${scorer}: load gives identical hits and statistics`, () => {
      const options = { scorer, bm25: { k1: 1.5 }, analyzer: { stopWords: ["the", "are"] } };
      const { index, write, bytes } = build(options, TEXTS);
      assert.equal(new TextDecoder().decode(bytes.subarray(0, 4)), "LXSG");
      const loaded = SegmentedIndex.load(options, [{ bytes, deleted: [] }], write.state);
      assert.deepEqual(loaded.options, index.options);
      assert.equal(loaded.scorer, scorer);
      assert.equal(loaded.liveDocumentCount, index.liveDocumentCount);
      assert.equal(loaded.vocabularySize, index.vocabularySize);
      assert.equal(loaded.postingCount, index.postingCount);
      assert.equal(loaded.totalLength, index.totalLength);
      assert.deepEqual(loaded.segments(), index.segments());
      sameResults(index, loaded);
      // Encoding the decoded data again gives the same bytes.
      const { id, data } = decodeSegment(bytes);
      assert.deepEqual(encodeSegment(id, data), bytes);
    });
  }

  it("loads tombstoned ordinals: deleted documents neither match nor count", () => {
    const { bytes, write } = build({ scorer: "bm25" }, TEXTS);
    const loaded = SegmentedIndex.load({ scorer: "bm25" }, [{ bytes, deleted: [0, 4] }], write.state);
    const fresh = build(
      { scorer: "bm25" },
      TEXTS.filter((_, i) => i !== 0 && i !== 4),
    ).index;
    assert.equal(loaded.liveDocumentCount, 4);
    assert.equal(loaded.deletedDocumentCount, 2);
    assert.equal(loaded.totalLength, fresh.totalLength);
    assert.equal(loaded.documentFrequency("fox"), 1);
    assert.equal(loaded.locate(0), undefined);
    assert.deepEqual(loaded.locate(1), { segmentId: 0, ordinal: 1 });
    assert.deepEqual(
      loaded.search("fox", { topK: 5 }).map((hit) => hit.key),
      [1],
    );
  });

  it("reads from an unaligned view and does not depend on the caller's buffer afterwards", () => {
    const { index, bytes, write } = build({ scorer: "bm25" }, TEXTS);
    const buffer = new Uint8Array(bytes.byteLength + 3);
    buffer.set(bytes, 3);
    const loaded = SegmentedIndex.load(
      { scorer: "bm25" },
      [{ bytes: buffer.subarray(3), deleted: [] }],
      write.state,
    );
    buffer.fill(0);
    sameResults(index, loaded);
  });

  it("reads a Node Buffer (a view into a larger ArrayBuffer, as fs and SQLite return)", () => {
    const texts = Array.from(
      { length: 200 },
      (_, i) => `document ${i} about topic ${i % 7} and more words ${i * 13}`,
    );
    const { index, bytes, write } = build({ scorer: "bm25" }, texts);
    const backing = Buffer.alloc(bytes.byteLength + 16);
    const view = backing.subarray(8, 8 + bytes.byteLength);
    view.set(bytes);
    const loaded = SegmentedIndex.load({ scorer: "bm25" }, [{ bytes: view, deleted: [] }], write.state);
    assert.deepEqual(loaded.search("topic 3 words", { topK: 5 }), index.search("topic 3 words", { topK: 5 }));
  });

  it("keeps term frequencies above 65,535 exact", () => {
    const texts = ["rare", "many ".repeat(70_000), "many rare", "many ".repeat(65_535)];
    const { bytes } = build({ scorer: "tfidf" }, texts);
    const { data } = decodeSegment(bytes);
    const many = data.terms.indexOf("mani");
    const start = data.termOffsets[many] ?? 0;
    assert.deepEqual([...data.termFreqs.subarray(start, start + 3)], [70_000, 1, 65_535]);
    assert.ok(data.termFreqs instanceof Uint32Array);
  });

  it("stores frequencies below 256 in one byte each (format version 2)", () => {
    const { bytes } = build({ scorer: "bm25" }, TEXTS);
    assert.equal(new DataView(bytes.buffer, bytes.byteOffset).getUint32(4, true), 2);
    assert.ok(decodeSegment(bytes).data.termFreqs instanceof Uint8Array);
    const wide = build({ scorer: "bm25" }, ["many ".repeat(300), "many rare"]);
    assert.ok(decodeSegment(wide.bytes).data.termFreqs instanceof Uint16Array);
  });

  it("loads version 1 segments (two-byte frequencies) of older databases", () => {
    const texts = [...TEXTS, "many ".repeat(300)];
    const { index, write, bytes } = build({ scorer: "bm25" }, texts);
    const v1 = bytes.slice();
    new DataView(v1.buffer).setUint32(4, 1, true);
    const loaded = SegmentedIndex.load({ scorer: "bm25" }, [{ bytes: v1, deleted: [] }], write.state);
    sameResults(index, loaded);
    // One-byte frequencies did not exist in version 1.
    const narrow = build({ scorer: "bm25" }, TEXTS).bytes.slice();
    new DataView(narrow.buffer).setUint32(4, 1, true);
    assert.throws(
      () => SegmentedIndex.load({ scorer: "bm25" }, [{ bytes: narrow, deleted: [] }], write.state),
      /frequency width 1/,
    );
  });

  it("rejects a dictionary text that is not UTF-8 or term ends outside it", () => {
    const { bytes, write } = build({ scorer: "bm25" }, TEXTS);
    const load = (b: Uint8Array) =>
      SegmentedIndex.load({ scorer: "bm25" }, [{ bytes: b, deleted: [] }], write.state);
    const view = new DataView(bytes.buffer, bytes.byteOffset);
    const termCount = view.getUint32(12, true);
    const textLength = view.getUint32(24, true);
    const textStart = bytes.byteLength - textLength;
    const text = bytes.subarray(textStart);
    const wide = text.findIndex((byte) => byte >= 0x80);
    assert.ok(wide >= 0, "the fixture has a non-ASCII term");
    const invalid = bytes.slice();
    invalid[textStart + wide] = 0xff;
    assert.throws(() => load(invalid), /corrupt/);
    const truncated = bytes.slice();
    truncated[textStart + wide + 1] = 0x41; // a continuation byte replaced by "A"
    assert.throws(() => load(truncated), /corrupt/);
    // The last term ending past the text, or before its start.
    for (const delta of [1, -1000]) {
      const shifted = bytes.slice();
      const ends = new DataView(shifted.buffer, 40 + 8 * view.getUint32(8, true), 4 * termCount);
      ends.setUint32(
        4 * (termCount - 1),
        Math.max(0, ends.getUint32(4 * (termCount - 1), true) + delta),
        true,
      );
      assert.throws(() => load(shifted), /corrupt/);
    }
    // Nothing was half loaded: the intact bytes still load.
    assert.equal(load(bytes).liveDocumentCount, write.liveDocumentCount);
  });

  it("an empty index has no segment and finds nothing", () => {
    const index = SegmentedIndex.create({ scorer: "tfidf" });
    const write = new IndexWriter(index).prepare({ add: [] });
    assert.equal(write.segment, null);
    write.apply();
    const loaded = SegmentedIndex.load({ scorer: "tfidf" }, [], write.state);
    assert.equal(loaded.liveDocumentCount, 0);
    assert.deepEqual(loaded.search("x", { topK: 1 }), []);
  });

  it("rejects damaged or foreign data", () => {
    const { bytes } = build({ scorer: "bm25" }, TEXTS);
    const load = (b: Uint8Array) =>
      SegmentedIndex.load({ scorer: "bm25" }, [{ bytes: b, deleted: [] }], { nextKey: 6, nextSegmentId: 1 });
    assert.throws(() => load(new Uint8Array(10)), /corrupt/);
    assert.throws(() => load(new TextEncoder().encode("not a segment at all, really, not at all")), /magic/);
    assert.throws(() => load(bytes.subarray(0, bytes.length - 1)), /corrupt/);
    const future = bytes.slice();
    new DataView(future.buffer).setUint32(4, 99, true);
    assert.throws(() => load(future), /version 99/);
    const scrambled = bytes.slice();
    // Overwrite the first key with one larger than the second: keys must ascend.
    new DataView(scrambled.buffer).setUint32(40, 0xffffff, true);
    assert.throws(() => load(scrambled), /corrupt/);
    assert.throws(
      () =>
        SegmentedIndex.load({ scorer: "bm25" }, [{ bytes, deleted: [6] }], { nextKey: 6, nextSegmentId: 1 }),
      RangeError,
    );
  });
});
