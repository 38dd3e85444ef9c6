/**
 * The engine's Directory port (search/directory.ts), given per index in its options: codes of segments
 * with a graph go to the index's directory and nowhere else; each file is released exactly when nothing
 * can read it any more (a merge or catch-up dropped its segment; the index was closed and its last
 * reader released it; a prepared write or merge was discarded), counted by RamDirectory's open files,
 * never left to the garbage collector.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";

import {
  IndexWriter,
  mergeNow,
  RamDirectory,
  SegmentedIndex,
  type SearchIndexOptions,
  type StoredSegment,
} from "../../../src/rag/search/index.js";
import { FsDirectory } from "../../../src/rag/search/fs-directory.js";
import { encodeVectorsOffThread } from "../../../src/rag/search/indexer/vector-build.js";
import { SegmentVectors, prepareQuery } from "../../../src/rag/search/vectors/segment-vectors.js";
import { decodeVectors, encodeVectors } from "../../../src/rag/search/vectors/vector-codec.js";
import { clusteredVectors, rowsOf } from "../../../scripts/lib/synthetic-vectors.js";
import { hashVector } from "../../helpers/hash-embedder.js";
import { makeProse, seededRandom } from "../../helpers/text-fixtures.js";

const DIMENSION = 12;
/** Segments of 60 documents or more get a graph, so their codes go to the directory. */
const OPTIONS: SearchIndexOptions = {
  scorer: "bm25",
  vectors: { dimension: DIMENSION, storage: "i8", graphThreshold: 60 },
};
const random = seededRandom(5);
const texts = Array.from({ length: 300 }, () => makeProse(random, 30));
const embed = (batch: readonly string[]) => batch.map((text) => hashVector(text, DIMENSION));

/** Three stored segments of 100 documents each (with graphs), written by an index in memory. */
function storedSegments(): { stored: StoredSegment[]; state: SegmentedIndex["state"] } {
  const writer = SegmentedIndex.create(OPTIONS);
  const stored: StoredSegment[] = [];
  for (let i = 0; i < texts.length; i += 100) {
    const batch = texts.slice(i, i + 100);
    const write = new IndexWriter(writer).prepare({ add: batch, vectors: embed(batch) });
    stored.push({ bytes: write.segment!.bytes, deleted: [], vectors: write.segment!.vectors });
    write.apply();
  }
  return { stored, state: writer.state };
}

const dense = (index: SegmentedIndex, q = "storage engine") =>
  index.searchDense(hashVector(q, DIMENSION), { topK: 10 });

describe("a RamDirectory", () => {
  it("keeps a copy of the bytes, reads them at positions and refuses reads once closed", () => {
    const directory = new RamDirectory();
    const bytes = Uint8Array.from([1, 2, 3, 4, 5]);
    const file = directory.create(bytes);
    bytes.fill(0);
    const into = new Uint8Array(3);
    file.read(into, 2);
    assert.deepEqual([...into], [3, 4, 5]);
    assert.throws(() => file.read(new Uint8Array(2), 4), RangeError);
    assert.equal(directory.openFiles, 1);
    file.close();
    file.close();
    assert.equal(directory.openFiles, 0);
    assert.throws(() => file.read(into, 0), /closed/);
  });

  it("holds a decoded set's codes; the set answers as in memory, bit for bit, until released", () => {
    const rows = rowsOf(clusteredVectors({ count: 208, dimension: 16, seed: 3 }), 16);
    const bytes = encodeVectors(
      SegmentVectors.build(16, rows.slice(0, 200), { storage: "f16", graphThreshold: 50 }),
    );
    const directory = new RamDirectory();
    const memory = decodeVectors(bytes);
    const spilled = decodeVectors(bytes, { directory });
    assert.equal(spilled.spilled, true);
    assert.equal(directory.openFiles, 1);
    for (const q of rows.slice(200).map((row) => prepareQuery(row, 16))) {
      assert.deepEqual(spilled.search(q, 10, null), memory.search(q, 10, null));
      assert.deepEqual(spilled.exactSearch(q, 200, null), memory.exactSearch(q, 200, null));
      for (let d = 0; d < 200; d += 17) assert.ok(Object.is(spilled.score(d, q), memory.score(d, q)));
    }
    spilled.release();
    assert.equal(directory.openFiles, 0);
    assert.throws(() => spilled.readCodes(), /closed/);
  });
});

describe("an FsDirectory", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-fs-directory-"));
  after(() => fs.rmSync(root, { recursive: true, force: true }));
  /** This process's open descriptors on files of `dir` (unlinked ones included: "… (deleted)"). */
  const openIn = (dir: string) =>
    fs
      .readdirSync("/proc/self/fd")
      .map((fd) => {
        try {
          return fs.readlinkSync(`/proc/self/fd/${fd}`);
        } catch {
          return ""; // the descriptor readdir itself used, closed by now
        }
      })
      .filter((target) => target.startsWith(`${dir}/`)).length;

  it("writes a file it unlinks at once, reads it at positions, and closes its descriptor on close", (t) => {
    if (!fs.existsSync("/proc/self/fd")) return t.skip("no /proc/self/fd here");
    const dir = path.join(root, "codes");
    const directory = FsDirectory.open(dir);
    const bytes = Uint8Array.from({ length: 3000 }, (_, i) => i % 251);
    const file = directory.create(bytes);
    assert.deepEqual(fs.readdirSync(dir), []);
    assert.equal(openIn(dir), 1);
    const into = new Uint8Array(10);
    file.read(into, 2500);
    assert.deepEqual(into, bytes.subarray(2500, 2510));
    assert.throws(() => file.read(new Uint8Array(10), 2995), RangeError);
    file.close();
    file.close();
    assert.equal(openIn(dir), 0);
    assert.throws(() => file.read(into, 0), /closed/);
  });
});

describe("an index's spill files", () => {
  it("go to the index's own directory: indices with other directories, or none, keep theirs apart", () => {
    const { stored, state } = storedSegments();
    const a = new RamDirectory();
    const b = new RamDirectory();
    const inA = SegmentedIndex.load({ ...OPTIONS, directory: a }, stored, state);
    const inB = SegmentedIndex.load({ ...OPTIONS, directory: b }, stored.slice(0, 1), state);
    const inMemory = SegmentedIndex.load(OPTIONS, stored, state);
    assert.equal(a.openFiles, 3);
    assert.equal(b.openFiles, 1);
    assert.ok(inMemory.segments().every(({ id }) => inMemory.segmentById(id)!.vectors!.spilled === false));
    assert.deepEqual(dense(inA), dense(inMemory));
    inA.close();
    inB.close();
    assert.equal(a.openFiles + b.openFiles, 0);
  });

  it("of a merge's old segments are released when the merge is applied, not before", () => {
    const { stored, state } = storedSegments();
    const directory = new RamDirectory();
    const index = SegmentedIndex.load({ ...OPTIONS, directory }, stored, state);
    const expected = dense(index);
    const result = mergeNow(index, [0, 1]);
    const merge = index.prepareMerge(result);
    assert.equal(directory.openFiles, 4, "the merged segment's codes are in the directory too");
    assert.deepEqual(dense(index), expected, "the old segments still answer until the merge is applied");
    merge.apply();
    assert.equal(directory.openFiles, 2, "the two merged segments' files are closed");
    assert.deepEqual(dense(index), expected);
    index.close();
    assert.equal(directory.openFiles, 0);
  });

  it("of a discarded merge, a discarded write or a write that fails to prepare are released", async () => {
    const { stored, state } = storedSegments();
    const directory = new RamDirectory();
    const index = SegmentedIndex.load({ ...OPTIONS, directory }, stored, state);
    const merge = index.prepareMerge(mergeNow(index, [1, 2]));
    assert.equal(directory.openFiles, 4);
    merge.discard();
    assert.equal(directory.openFiles, 3);
    assert.throws(() => merge.apply(), /discarded/);

    const batch = texts.slice(0, 80);
    const encodedVectors = await encodeVectorsOffThread(OPTIONS.vectors!, embed(batch));
    const write = new IndexWriter(index).prepare({ add: batch, encodedVectors });
    assert.equal(directory.openFiles, 4);
    write.discard();
    write.discard();
    assert.equal(directory.openFiles, 3);
    assert.throws(
      () =>
        new IndexWriter(index).prepare({ add: batch, encodedVectors, delete: [{ key: 9999, text: "x" }] }),
      /not a live document/,
    );
    assert.equal(directory.openFiles, 3);
    const applied = new IndexWriter(index).prepare({ add: batch, encodedVectors });
    applied.apply();
    applied.discard(); // applied: the index owns the file now
    assert.equal(directory.openFiles, 4);
    index.close();
    assert.equal(directory.openFiles, 0);
  });

  it("of a catch-up's dropped segments go at once; a catch-up that fails keeps nothing it decoded", () => {
    const { stored, state } = storedSegments();
    const directory = new RamDirectory();
    const index = SegmentedIndex.load({ ...OPTIONS, directory }, stored.slice(0, 2), state);
    assert.equal(directory.openFiles, 2);
    assert.throws(() =>
      index.applyChanges({
        addSegments: [stored[2]!],
        removeSegmentIds: [],
        tombstones: [{ segmentId: 7, ordinal: 0 }],
        state,
      }),
    );
    assert.equal(directory.openFiles, 2);
    index.applyChanges({ addSegments: [stored[2]!], removeSegmentIds: [0], tombstones: [], state });
    assert.equal(directory.openFiles, 2);
    assert.deepEqual(
      index.segments().map(({ id }) => id),
      [1, 2],
    );
    index.close();
    assert.equal(directory.openFiles, 0);
  });

  it("of a closed index stay open while a reader holds it, and go when the last one releases it", () => {
    const { stored, state } = storedSegments();
    const directory = new RamDirectory();
    const index = SegmentedIndex.load({ ...OPTIONS, directory }, stored, state);
    const expected = dense(index);
    const first = index.acquire();
    const second = index.acquire();
    index.close();
    index.close();
    assert.equal(index.released, false);
    assert.equal(directory.openFiles, 3);
    assert.deepEqual(dense(index), expected, "a reader still searches the index it holds");
    first.release();
    first.release(); // a lease is released once
    assert.equal(directory.openFiles, 3);
    second.release();
    assert.equal(index.released, true);
    assert.equal(directory.openFiles, 0);
    assert.throws(() => index.acquire(), /closed/);
  });
});
