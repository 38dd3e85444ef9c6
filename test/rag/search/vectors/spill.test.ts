/**
 * Spilled codes (vectors/spill.ts): a set with a graph decoded with a directory (here FsDirectory, the
 * server's) keeps its codes in an unlinked file, not in memory, and answers every question (search, exact search,
 * filtered scan, scores, vectors, merges, encodes) exactly as the same set held in memory does; an
 * index whose segments spill answers dense and hybrid queries as one that does not, through a merge.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { reciprocalRankFusion } from "../../../../src/rag/retrieval/fusion.js";
import { LiveDocs } from "../../../../src/rag/search/core/live-docs.js";
import {
  IndexWriter,
  mergeInBackground,
  SegmentedIndex,
  type SearchIndexOptions,
} from "../../../../src/rag/search/index.js";
import { VECTOR_STORAGES, type VectorStorage } from "../../../../src/rag/search/vectors/quantize.js";
import {
  mergeSegmentVectors,
  prepareQuery,
  SegmentVectors,
} from "../../../../src/rag/search/vectors/segment-vectors.js";
import { FsDirectory } from "../../../../src/rag/search/fs-directory.js";
import { decodeVectors, encodeVectors } from "../../../../src/rag/search/vectors/vector-codec.js";
import { clusteredVectors, rowsOf } from "../../../../scripts/lib/synthetic-vectors.js";
import { hashVector } from "../../../helpers/hash-embedder.js";
import { makeProse, seededRandom } from "../../../helpers/text-fixtures.js";

const root = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-spill-test-"));
const spillDir = path.join(root, "spill");
let directory: FsDirectory;
before(() => {
  directory = FsDirectory.open(spillDir);
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

/** The same encoded set decoded twice: with the spill directory, and without. */
function decodedBoth(bytes: Uint8Array): { memory: SegmentVectors; spilled: SegmentVectors } {
  return { memory: decodeVectors(bytes), spilled: decodeVectors(bytes, { directory }) };
}

function encodedSet(storage: VectorStorage, count: number, dimension: number, seed: number) {
  const rows = rowsOf(clusteredVectors({ count: count + 8, dimension, seed }), dimension);
  const set = SegmentVectors.build(dimension, rows.slice(0, count), { storage, graphThreshold: 50 });
  return { bytes: encodeVectors(set), queries: rows.slice(count).map((q) => prepareQuery(q, dimension)) };
}

/** Every question a set answers, asked of both: the same answers, bit for bit. */
function assertSameAnswers(memory: SegmentVectors, spilled: SegmentVectors, queries: Float32Array[]): void {
  const live = new LiveDocs(memory.count);
  for (let d = 0; d < memory.count; d += 7) live.delete(d);
  const accept = (d: number) => d % 3 !== 1;
  for (const q of queries) {
    for (const k of [1, 10, memory.count]) {
      for (const deleted of [null, live]) {
        assert.deepEqual(spilled.search(q, k, deleted), memory.search(q, k, deleted));
        assert.deepEqual(spilled.exactSearch(q, k, deleted), memory.exactSearch(q, k, deleted));
        assert.deepEqual(
          spilled.exactSearch(q, k, deleted, accept),
          memory.exactSearch(q, k, deleted, accept),
        );
      }
    }
  }
  const q = queries[0]!;
  for (let d = 0; d < memory.count; d++) {
    assert.ok(Object.is(spilled.score(d, q), memory.score(d, q)), `score of ${d}`);
    assert.deepEqual(spilled.vector(d), memory.vector(d));
  }
}

describe("spilled vector codes", () => {
  for (const storage of VECTOR_STORAGES) {
    it(`${storage}: a set with a graph spills its codes and answers as the set in memory`, () => {
      const { bytes, queries } = encodedSet(storage, 300, 24, 5);
      const { memory, spilled } = decodedBoth(bytes);
      assert.equal(memory.spilled, false);
      assert.equal(spilled.spilled, true);
      assert.ok(spilled.graph !== null && memory.graph !== null);
      assert.deepEqual(fs.readdirSync(spillDir), [], "the spill file is unlinked at once");
      assert.equal(spilled.byteSize, memory.byteSize);
      assert.equal(spilled.residentBytes, memory.scales?.byteLength ?? 0);
      assert.equal(memory.residentBytes, memory.byteSize);
      assert.deepEqual(spilled.readCodes(), memory.readCodes());
      assert.deepEqual(spilled.scales, memory.scales);
      assertSameAnswers(memory, spilled, queries);
      assert.deepEqual(encodeVectors(spilled), encodeVectors(memory));
      // A copy is the caller's: changing it changes nothing in the set.
      const copy = spilled.copyCodes();
      copy.fill(0);
      assert.deepEqual(spilled.readCodes(), memory.readCodes());
    });
  }

  it("an exact scan reads the file a block at a time (rows across block ends)", () => {
    // 1,500 rows of 384-d f32 are 2.2 MiB: three blocks of 1 MiB, the last one short.
    const { bytes, queries } = encodedSet("f32", 1500, 384, 9);
    const { memory, spilled } = decodedBoth(bytes);
    assert.equal(spilled.spilled, true);
    const live = new LiveDocs(memory.count);
    for (let d = 600; d < 1400; d++) live.delete(d);
    for (const q of queries.slice(0, 3)) {
      assert.deepEqual(spilled.exactSearch(q, 1500, null), memory.exactSearch(q, 1500, null));
      assert.deepEqual(spilled.search(q, 10, live), memory.search(q, 10, live));
    }
  });

  it("sets without a graph keep their codes in memory", () => {
    const rows = rowsOf(clusteredVectors({ count: 40, dimension: 8, seed: 2 }), 8);
    const set = decodeVectors(encodeVectors(SegmentVectors.build(8, rows, { storage: "i8" })));
    assert.equal(set.graph, null);
    assert.equal(set.spilled, false);
  });

  it("a merge of spilled sets equals the merge of the same sets in memory", () => {
    const a = decodedBoth(encodedSet("i8", 200, 16, 1).bytes);
    const b = decodedBoth(encodedSet("i8", 120, 16, 2).bytes);
    const maps = [new Int32Array(200).fill(-1), new Int32Array(120).fill(-1)];
    let next = 0;
    for (let d = 0; d < 200; d += 2) maps[0]![d] = next++;
    for (let d = 119; d >= 0; d -= 3) maps[1]![d] = next++;
    const options = { graphThreshold: 50 };
    const fromMemory = mergeSegmentVectors([a.memory, b.memory], maps, options);
    const fromSpilled = mergeSegmentVectors([a.spilled, b.spilled], maps, options);
    assert.deepEqual(fromSpilled.readCodes(), fromMemory.readCodes());
    assert.deepEqual(fromSpilled.scales, fromMemory.scales);
    const q = prepareQuery(rowsOf(clusteredVectors({ count: 1, dimension: 16, seed: 8 }), 16)[0]!, 16);
    assert.deepEqual(fromSpilled.exactSearch(q, next, null), fromMemory.exactSearch(q, next, null));
  });

  it("the directory is made again if it went away; codes stay in memory if it cannot be written", async () => {
    const { bytes, queries } = encodedSet("f16", 120, 12, 4);
    const { memory } = decodedBoth(bytes);
    fs.rmSync(spillDir, { recursive: true });
    const again = decodeVectors(bytes, { directory });
    assert.equal(again.spilled, true);
    assert.ok(fs.statSync(spillDir).isDirectory());
    fs.rmSync(spillDir, { recursive: true });
    fs.writeFileSync(spillDir, ""); // a file where the directory should be: every open fails
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on("warning", onWarning);
    try {
      const kept = decodeVectors(bytes, { directory });
      assert.equal(kept.spilled, false);
      assertSameAnswers(memory, kept, queries.slice(0, 2));
      await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
      assert.ok(
        warnings.some((w) => /vector codes kept in memory/.test(w)),
        String(warnings),
      );
    } finally {
      process.off("warning", onWarning);
      fs.rmSync(spillDir, { force: true });
    }
    assert.equal(directory.location, spillDir);
  });
});

describe("an index whose segments spill", () => {
  const DIMENSION = 16;
  const random = seededRandom(17);
  const texts = Array.from({ length: 450 }, () => makeProse(random, 40));
  const embed = (batch: readonly string[]) => batch.map((text) => hashVector(text, DIMENSION));
  const queries = ["storage index engine", "crash write overlap", "merge segment vectors"];

  for (const storage of ["i8", "f32"] as const) {
    it(`${storage}: answers dense and hybrid queries as one in memory, before and after a merge`, async () => {
      const options: SearchIndexOptions = {
        scorer: "bm25",
        vectors: { dimension: DIMENSION, storage, graphThreshold: 100 },
      };
      // The same segments (graphs included) loaded twice: once in memory, once spilled.
      const memory = SegmentedIndex.create(options);
      const stored = [];
      for (let i = 0; i < texts.length; i += 150) {
        const batch = texts.slice(i, i + 150);
        const write = new IndexWriter(memory).prepare({ add: batch, vectors: embed(batch) });
        stored.push({ bytes: write.segment!.bytes, deleted: [], vectors: write.segment!.vectors });
        write.apply();
      }
      const spilled = SegmentedIndex.load({ ...options, directory }, stored, memory.state);
      const segments = (index: SegmentedIndex) =>
        index.segments().map(({ id }) => index.segmentById(id)!.vectors!);
      assert.ok(segments(spilled).every((v) => v.spilled && v.graph !== null));
      assert.ok(segments(memory).every((v) => !v.spilled && v.graph !== null));
      for (const key of [4, 150, 151, 449]) {
        for (const index of [memory, spilled])
          new IndexWriter(index).prepare({ delete: [{ key, text: texts[key]! }] }).apply();
      }
      assertSameQueries(memory, spilled);

      const ids = memory.segments().map(({ id }) => id);
      const merged = await Promise.all([memory, spilled].map((index) => mergeInBackground(index, ids)));
      memory.prepareMerge(merged[0]!).apply();
      const merge = spilled.prepareMerge(merged[1]!);
      merge.apply();
      assert.ok(segments(spilled).every((v) => v.spilled && v.graph !== null));
      // The graphs of the two merges are built apart (threads make them differ): exact answers agree,
      // and the spilled result agrees in full with its own bytes loaded in memory.
      const exact = (index: SegmentedIndex, q: string) =>
        index.searchDense(hashVector(q, DIMENSION), { topK: 50, exact: true });
      for (const q of queries) assert.deepEqual(exact(spilled, q), exact(memory, q));
      const reloaded = SegmentedIndex.load(
        options,
        [{ bytes: merge.segment.bytes, deleted: [], vectors: merge.segment.vectors }],
        spilled.state,
      );
      assertSameQueries(reloaded, spilled);
    });
  }

  /** Dense (through the graph, exact, filtered) and hybrid (BM25 + dense, RRF) answers, compared. */
  function assertSameQueries(expected: SegmentedIndex, actual: SegmentedIndex): void {
    const accept = (key: number) => key % 4 !== 0;
    for (const q of queries) {
      const vector = hashVector(q, DIMENSION);
      for (const options of [{ topK: 10 }, { topK: 50, exact: true }, { topK: 10, accept }]) {
        assert.deepEqual(actual.searchDense(vector, options), expected.searchDense(vector, options));
      }
      const hybrid = (index: SegmentedIndex) =>
        reciprocalRankFusion(
          {
            lexical: index.search(q, { topK: 50 }),
            dense: index.searchDense(vector, { topK: 50 }),
          },
          {},
          10,
        );
      assert.deepEqual(hybrid(actual), hybrid(expected));
    }
  }
});
