/**
 * A write's vectors built on a worker thread (indexer/vector-build.ts): the loop keeps turning while the
 * graph is built, the encoded result joins the segment as vectors built in place do (same exact scores,
 * a graph), bytes of another dimension, storage or count are refused, and a failure in the thread is a
 * rejection with its reason.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  buildsGraph,
  encodeVectorsOffThread,
  IndexWriter,
  SegmentedIndex,
} from "../../../src/rag/search/index.js";
import { hashVector } from "../../helpers/hash-embedder.js";
import { makeProse, seededRandom } from "../../helpers/text-fixtures.js";

const DIMENSION = 16;
const OPTIONS = { dimension: DIMENSION, storage: "i8" as const, graphThreshold: 50 };
const random = seededRandom(3);
const TEXTS = Array.from({ length: 400 }, () => makeProse(random, 40));
const VECTORS = TEXTS.map((text) => hashVector(text, DIMENSION));

/** Event-loop turns (setImmediate) counted while `work` is pending. */
async function turnsDuring<T>(work: Promise<T>): Promise<{ value: T; turns: number }> {
  let turns = 0;
  let pending = true;
  const spin = (): void => {
    if (!pending) return;
    turns++;
    setImmediate(spin);
  };
  setImmediate(spin);
  try {
    return { value: await work, turns };
  } finally {
    pending = false;
  }
}

describe("a write's vectors built on a worker thread", () => {
  it("keeps the loop turning, and joins the segment as vectors built in place do", async () => {
    assert.ok(buildsGraph(OPTIONS, TEXTS.length) && !buildsGraph(OPTIONS, 49));
    const { value: encoded, turns } = await turnsDuring(encodeVectorsOffThread(OPTIONS, VECTORS));
    // Built in place, the build would finish before the loop turned once.
    assert.ok(turns > 0, "the event loop turned while the graph was built");
    const inPlace = SegmentedIndex.create({ scorer: "bm25", vectors: OPTIONS });
    new IndexWriter(inPlace).prepare({ add: TEXTS, vectors: VECTORS }).apply();
    const offThread = SegmentedIndex.create({ scorer: "bm25", vectors: OPTIONS });
    const write = new IndexWriter(offThread).prepare({ add: TEXTS, encodedVectors: encoded });
    assert.equal(write.segment?.vectors, encoded);
    write.apply();
    const segment = offThread.segments()[0]!;
    assert.ok(offThread.segmentById(segment.id)!.vectors?.graph, "the segment has its graph");
    for (const query of ["storage index engine", "merge policy tiers"]) {
      const q = hashVector(query, DIMENSION);
      assert.deepEqual(
        offThread.searchDense(q, { topK: 20, exact: true }),
        inPlace.searchDense(q, { topK: 20, exact: true }),
      );
      const approximate = offThread.searchDense(q, { topK: 10 });
      assert.equal(approximate.length, 10);
    }
  });

  it("refuses bytes of another dimension, storage or count, and both forms at once", async () => {
    const encoded = await encodeVectorsOffThread(OPTIONS, VECTORS);
    const writerOf = (vectors: typeof OPTIONS | { dimension: number; storage: "f16" }) =>
      new IndexWriter(SegmentedIndex.create({ scorer: "bm25", vectors }));
    assert.throws(
      () => writerOf({ dimension: 8, storage: "f16" }).prepare({ add: TEXTS, encodedVectors: encoded }),
      /16-d i8 vectors, the index 8-d f16/,
    );
    assert.throws(
      () => writerOf(OPTIONS).prepare({ add: TEXTS.slice(1), encodedVectors: encoded }),
      /400 vectors for 399 documents/,
    );
    assert.throws(
      () => writerOf(OPTIONS).prepare({ add: TEXTS, vectors: VECTORS, encodedVectors: encoded }),
      /not both/,
    );
    assert.throws(
      () =>
        new IndexWriter(SegmentedIndex.create({ scorer: "bm25" })).prepare({
          add: TEXTS,
          encodedVectors: encoded,
        }),
      /keeps no vectors/,
    );
  });

  it("refuses a vector of the wrong length before the thread starts; a failure in it is a rejection", async () => {
    assert.throws(() => encodeVectorsOffThread(OPTIONS, [new Float32Array(3)]), /3 dimensions, the index 16/);
    const zero = [...VECTORS.slice(0, 60), new Float32Array(DIMENSION)];
    await assert.rejects(encodeVectorsOffThread(OPTIONS, zero), /vector 60 has no length/);
  });
});
