/**
 * A segment built apart from its index (indexer/segment-build.ts, what a large write's worker thread
 * does) and numbered by `IndexWriter.prepare({ built })` makes the same index as `add` of the same
 * texts: same hits and scores, statistics, vocabulary, keys and stored bytes but for the avgdl its
 * bounds were computed at; deletes in the same batch and terms past ASCII included. Loading its
 * stored bytes gives the same index again.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { IndexWriter, SegmentedIndex, type SearchHit } from "../../../src/rag/search/index.js";
import { SegmentBuilder } from "../../../src/rag/search/indexer/segment-build.js";
import { analysisOf } from "../../../src/rag/service/write-prep.js";

const FIRST = [
  "Cats purr when they are content.",
  "Dogs bark at the postman.",
  "The cat chased the dog around the garden.",
];
const SECOND = [
  "A garden full of roses, and Zoë's café crème.",
  "The dog and the cat sleep in the garden.",
  "Roses are red, violets are blue; naïve déjà vu.",
  "Postman Pat and his black and white cat.",
];
const QUERIES = ["cat", "dog garden", "roses café", "postman bark", "déjà naïve", "sleep cat dog"];

function hits(index: SegmentedIndex): SearchHit[][] {
  return QUERIES.map((query) => index.search(query, { topK: 10 }));
}

function built(scorer: "bm25" | "tfidf", texts: readonly string[]) {
  const { analyzer, scorer: parameters } = analysisOf({ scorer, chunkSize: 1000, overlap: 0 }, null);
  const builder = new SegmentBuilder(analyzer, parameters);
  for (const text of texts) builder.add(text);
  return builder.finish()!;
}

for (const scorer of ["bm25", "tfidf"] as const) {
  describe(`IndexWriter.prepare({ built }) (${scorer})`, () => {
    it("equals an add of the same texts, a delete in the same batch included", () => {
      const [byText, byBuilt] = [SegmentedIndex.create({ scorer }), SegmentedIndex.create({ scorer })];
      for (const index of [byText, byBuilt]) new IndexWriter(index).prepare({ add: FIRST }).apply();
      const deleted = [{ key: 1, text: FIRST[1]! }];
      const a = new IndexWriter(byText).prepare({ add: SECOND, delete: deleted });
      const b = new IndexWriter(byBuilt).prepare({ built: built(scorer, SECOND), delete: deleted });
      for (const field of [
        "keys",
        "tombstones",
        "state",
        "liveDocumentCount",
        "totalLength",
        "vocabularySize",
      ] as const)
        assert.deepEqual(b[field], a[field], field);
      assert.equal(b.segment?.id, a.segment?.id);
      assert.equal(b.segment?.documentCount, a.segment?.documentCount);
      // The same bytes but for the avgdl the bounds were computed at (header bytes 32 … 39).
      const strip = (bytes: Uint8Array) => Buffer.concat([bytes.subarray(0, 32), bytes.subarray(40)]);
      assert.deepEqual(strip(b.segment!.bytes), strip(a.segment!.bytes));
      a.apply();
      b.apply();
      assert.deepEqual(hits(byBuilt), hits(byText));
      assert.equal(byBuilt.vocabularySize, byText.vocabularySize);
      assert.equal(byBuilt.liveDocumentCount, byText.liveDocumentCount);
    });

    it("a built segment loads back from its bytes to the same index", () => {
      const index = SegmentedIndex.create({ scorer });
      const write = new IndexWriter(index).prepare({ built: built(scorer, [...FIRST, ...SECOND]) });
      write.apply();
      const loaded = SegmentedIndex.load(
        { scorer },
        [{ bytes: write.segment!.bytes.slice(), deleted: [] }],
        index.state,
      );
      assert.deepEqual(hits(loaded), hits(index));
      const reference = SegmentedIndex.create({ scorer });
      new IndexWriter(reference).prepare({ add: [...FIRST, ...SECOND] }).apply();
      assert.deepEqual(hits(index), hits(reference));
    });

    it("refuses texts and a built segment together", () => {
      const index = SegmentedIndex.create({ scorer });
      assert.throws(
        () => new IndexWriter(index).prepare({ add: FIRST, built: built(scorer, SECOND) }),
        /not both/,
      );
    });
  });
}
