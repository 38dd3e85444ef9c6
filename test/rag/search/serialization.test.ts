import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { IndexBuilder, SearchIndex } from "../../../src/rag/search/index.js";

const TEXTS = [
  "The quick brown fox jumps over the lazy dog.",
  "Foxes are small omnivorous mammals; a fox's den is called an earth.",
  "Dogs were domesticated from wolves 15,000 years ago.",
  "我爱北京天安门 — Beijing's Tiananmen square.",
  "Lazy afternoons: the dog sleeps, the cat purrs, the fox waits.",
  "",
];
const QUERIES = ["fox", "lazy dog", "wolves domesticated", "北京", "the", "", "cat fox dog earth square"];

function sameResults(a: SearchIndex, b: SearchIndex): void {
  for (const query of QUERIES) {
    for (const topK of [1, 3, 100]) {
      assert.deepEqual(b.search(query, { topK }), a.search(query, { topK }), `${query} @${topK}`);
    }
  }
}

describe("serialisation", () => {
  for (const scorer of ["tfidf", "bm25"] as const) {
    it(`${scorer}: round trip gives identical hits and options`, () => {
      const builder = new IndexBuilder({ stopWords: ["the", "are"] });
      for (const text of TEXTS) builder.add(text);
      const index = builder.build({ scorer, bm25: { k1: 1.5 } });
      const bytes = index.serialize();
      assert.ok(bytes instanceof Uint8Array);
      assert.equal(new TextDecoder().decode(bytes.subarray(0, 4)), "LXSI");
      const loaded = SearchIndex.deserialize(bytes);
      assert.deepEqual(loaded.options, index.options);
      assert.equal(loaded.scorer, scorer);
      assert.equal(loaded.documentCount, index.documentCount);
      assert.equal(loaded.vocabularySize, index.vocabularySize);
      assert.equal(loaded.postingCount, index.postingCount);
      sameResults(index, loaded);
      // Serialising again gives the same bytes.
      assert.deepEqual(loaded.serialize(), bytes);
    });
  }

  it("reads from an unaligned view and does not depend on the caller's buffer afterwards", () => {
    const builder = new IndexBuilder();
    for (const text of TEXTS) builder.add(text);
    const index = builder.build({ scorer: "bm25" });
    const bytes = index.serialize();
    const buffer = new Uint8Array(bytes.byteLength + 3);
    buffer.set(bytes, 3);
    const loaded = SearchIndex.deserialize(buffer.subarray(3));
    buffer.fill(0);
    sameResults(index, loaded);
  });

  it("handles term frequencies above 65535 and terms given verbatim", () => {
    const builder = new IndexBuilder();
    builder.addTerms(new Array<string>(70_000).fill("x"));
    builder.addTerms(["x", "new\nline", "", "é"]);
    const index = builder.build({ scorer: "tfidf" });
    const loaded = SearchIndex.deserialize(index.serialize());
    for (const terms of [["x"], ["new\nline"], [""], ["é", "x"]]) {
      assert.deepEqual(loaded.searchTerms(terms, { topK: 5 }), index.searchTerms(terms, { topK: 5 }));
    }
    assert.equal(loaded.searchTerms(["x"], { topK: 5 }).length, 2);
  });

  it("round-trips an empty index", () => {
    const loaded = SearchIndex.deserialize(new IndexBuilder().build({ scorer: "tfidf" }).serialize());
    assert.equal(loaded.documentCount, 0);
    assert.deepEqual(loaded.search("x", { topK: 1 }), []);
  });

  it("rejects damaged or foreign data", () => {
    const builder = new IndexBuilder();
    for (const text of TEXTS) builder.add(text);
    const bytes = builder.build({ scorer: "bm25" }).serialize();
    assert.throws(() => SearchIndex.deserialize(new Uint8Array(10)), /corrupt/);
    assert.throws(
      () => SearchIndex.deserialize(new TextEncoder().encode("not an index at all, really")),
      /magic/,
    );
    assert.throws(() => SearchIndex.deserialize(bytes.subarray(0, bytes.length - 1)), /corrupt/);
    const future = bytes.slice();
    new DataView(future.buffer).setUint32(4, 99, true);
    assert.throws(() => SearchIndex.deserialize(future), /version 99/);
    const scrambled = bytes.slice();
    // Overwrite the first document ordinals (right after the term dictionary offsets) with garbage.
    const view = new DataView(scrambled.buffer);
    const vocabularySize = view.getUint32(12, true);
    const optionsLength = view.getUint32(24, true);
    const postingsStart = 32 + ((optionsLength + 3) & ~3) + 4 * vocabularySize + 4 * (vocabularySize + 1);
    view.setUint32(postingsStart, 0xffffff, true);
    assert.throws(() => SearchIndex.deserialize(scrambled), /corrupt/);
  });
});

describe("deserialising from a Node Buffer", () => {
  it("reads a Buffer (a view into a larger ArrayBuffer, as fs and SQLite return) like a Uint8Array", () => {
    const builder = new IndexBuilder();
    for (let i = 0; i < 200; i++) builder.add(`document ${i} about topic ${i % 7} and more words ${i * 13}`);
    const index = builder.build({ scorer: "bm25" });
    const bytes = index.serialize();
    // A Buffer whose bytes start 8 bytes into a larger ArrayBuffer.
    const backing = Buffer.alloc(bytes.byteLength + 16);
    const view = backing.subarray(8, 8 + bytes.byteLength);
    view.set(bytes);
    const loaded = SearchIndex.deserialize(view);
    assert.deepEqual(loaded.search("topic 3 words", { topK: 5 }), index.search("topic 3 words", { topK: 5 }));
  });
});
