/**
 * The term cache an index's writes share: a segment built through it is the segment built without it,
 * also after the cache is emptied at its limit; dictionary ids it caches are dropped once a term is
 * forgotten (its id may be reused), so later writes still count every term under its own id.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { IndexWriter, mergeNow, SegmentedIndex } from "../../../src/rag/search/index.js";
import { SegmentWriter } from "../../../src/rag/search/indexer/segment-writer.js";
import { TermCache } from "../../../src/rag/search/term-cache.js";

const BATCHES = [
  ["Running runners ran the running race.", "The cats are purring; a cat purrs."],
  ["Gardens of roses, a rose garden.", "Dogs bark, the dog barked at running cats."],
  ["Internationalization and internationalisation differ.", "The quick brown fox jumps over the lazy dog."],
  ["Roses are red, violets are blue.", "Cats and dogs and roses."],
];

function segmentOf(texts: readonly string[], cache?: TermCache) {
  const writer = new SegmentWriter({}, cache);
  for (const text of texts) writer.add(text);
  const data = writer.finish(
    Uint32Array.from(texts, (_, i) => i),
    1,
  );
  // Local term ids follow first occurrence either way; compare term by term.
  return {
    terms: [...data.terms],
    offsets: [...data.termOffsets],
    docIds: [...data.docIds],
    freqs: [...data.termFreqs],
    lengths: [...data.docLengths],
  };
}

describe("TermCache", () => {
  it("builds the same segments as fresh analysis, before and after it is emptied at its limit", () => {
    const cache = new TermCache(8);
    let generations = 0;
    for (const batch of [...BATCHES, ...BATCHES]) {
      const before = cache.generation;
      assert.deepEqual(segmentOf(batch, cache), segmentOf(batch));
      if (cache.generation !== before) generations++;
    }
    assert.ok(generations > 0, "the cache was emptied at least once");
  });

  it("drops cached dictionary ids when a term is forgotten", () => {
    const index = SegmentedIndex.create({ scorer: "bm25" });
    const writer = new IndexWriter(index);
    const first = writer.prepare({ add: ["zebra quagga"] });
    first.apply();
    // The second write finds zebra and quagga in the dictionary: their ids are cached.
    const second = writer.prepare({ add: ["quagga zebra", "okapi"] });
    second.apply();
    // Delete every document with zebra and quagga; merging their segments away forgets both terms.
    writer
      .prepare({
        delete: [
          { key: first.keys[0] as number, text: "zebra quagga" },
          { key: second.keys[0] as number, text: "quagga zebra" },
        ],
      })
      .apply();
    const epoch = index.dictionary.forgetEpoch;
    const ids = index.segments().map((segment) => segment.id);
    index.prepareMerge(mergeNow(index, ids)).apply();
    assert.ok(index.dictionary.forgetEpoch > epoch, "terms were forgotten");
    // New terms may take the freed ids; the old ones come back under ids of their own.
    writer.prepare({ add: ["gnu wildebeest", "zebra okapi", "quagga zebra zebra"] }).apply();
    const fresh = SegmentedIndex.create({ scorer: "bm25" });
    new IndexWriter(fresh)
      .prepare({ add: ["okapi", "gnu wildebeest", "zebra okapi", "quagga zebra zebra"] })
      .apply();
    for (const query of ["zebra", "quagga", "okapi", "gnu", "wildebeest zebra"]) {
      assert.deepEqual(
        index.search(query, { topK: 10 }).map((hit) => hit.score),
        fresh.search(query, { topK: 10 }).map((hit) => hit.score),
        query,
      );
    }
    assert.equal(index.vocabularySize, fresh.vocabularySize);
  });
});
