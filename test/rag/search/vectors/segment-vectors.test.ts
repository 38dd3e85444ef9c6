import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";

import { LiveDocs } from "../../../../src/rag/search/core/live-docs.js";
import { VECTOR_STORAGES, type VectorStorage } from "../../../../src/rag/search/vectors/quantize.js";
import { searchSegments, type VectorSegment } from "../../../../src/rag/search/vectors/search-segments.js";
import {
  mergeSegmentVectors,
  prepareQuery,
  SegmentVectors,
  type VectorHit,
} from "../../../../src/rag/search/vectors/segment-vectors.js";
import { clusteredVectors, rowsOf } from "../../../../scripts/lib/synthetic-vectors.js";

const storage = fc.constantFrom(...VECTOR_STORAGES);
/** Few distinct values, so that equal vectors and equal scores (ties) are common. */
const entry = fc.integer({ min: -3, max: 3 });

/** Brute force from the decoded vectors: the reference the engine's exact search must equal. */
function reference(set: SegmentVectors, unit: Float32Array, k: number, live: LiveDocs | null): VectorHit[] {
  const all: VectorHit[] = [];
  for (let doc = 0; doc < set.count; doc++) {
    if (live?.isDeleted(doc)) continue;
    const v = set.vector(doc);
    let score = 0;
    for (let i = 0; i < v.length; i++) score += unit[i]! * v[i]!;
    all.push({ doc, score });
  }
  return all.sort((a, b) => b.score - a.score || a.doc - b.doc).slice(0, k);
}

/** Same scores in the same order (within rounding), every returned doc live and scored as the reference. */
function assertMatches(
  actual: VectorHit[],
  expected: VectorHit[],
  set: SegmentVectors,
  unit: Float32Array,
  live: LiveDocs | null,
): void {
  assert.equal(actual.length, expected.length);
  actual.forEach((hit, i) => {
    assert.ok(
      Math.abs(hit.score - expected[i]!.score) < 1e-5,
      `rank ${i}: ${hit.score} vs ${expected[i]!.score}`,
    );
    assert.ok(!live?.isDeleted(hit.doc), `deleted doc ${hit.doc} returned`);
    assert.ok(
      Math.abs(hit.score - reference(set, unit, set.count, null).find((h) => h.doc === hit.doc)!.score) <
        1e-5,
    );
    if (i > 0) {
      const before = actual[i - 1]!;
      assert.ok(before.score > hit.score || (before.score === hit.score && before.doc < hit.doc), "order");
    }
  });
}

const setAndDeletes = fc.integer({ min: 1, max: 6 }).chain((dimension) =>
  fc.record({
    dimension: fc.constant(dimension),
    vectors: fc.array(fc.array(entry, { minLength: dimension, maxLength: dimension }), {
      minLength: 1,
      maxLength: 60,
    }),
    query: fc.array(entry, { minLength: dimension, maxLength: dimension }),
    deletes: fc.array(fc.nat(), { maxLength: 40 }),
    k: fc.integer({ min: 1, max: 15 }),
  }),
);

function liveOf(count: number, deletes: number[]): LiveDocs {
  const live = new LiveDocs(count);
  for (const d of deletes) live.delete(d % count);
  return live;
}

const nonZero = (v: number[]) => (v.every((x) => x === 0) ? v.map((_, i) => (i === 0 ? 1 : 0)) : v);

describe("segment vectors: exact search", () => {
  it("equals brute force over the live documents, for every storage", () => {
    fc.assert(
      fc.property(setAndDeletes, storage, ({ dimension, vectors, query, deletes, k }, kind) => {
        const set = SegmentVectors.build(dimension, vectors.map(nonZero), { storage: kind });
        const unit = prepareQuery(nonZero(query), dimension);
        const live = liveOf(set.count, deletes);
        assertMatches(set.search(unit, k, live), reference(set, unit, k, live), set, unit, live);
        assertMatches(set.search(unit, k, null), reference(set, unit, k, null), set, unit, null);
      }),
      { numRuns: 300 },
    );
  });

  it("never returns a deleted document through the graph, whatever share is deleted", () => {
    const dimension = 16;
    const rows = rowsOf(clusteredVectors({ count: 600, dimension, seed: 11 }), dimension);
    for (const kind of VECTOR_STORAGES) {
      const set = SegmentVectors.build(dimension, rows, { storage: kind, graphThreshold: 100, threads: 1 });
      assert.ok(set.graph !== null);
      fc.assert(
        fc.property(
          fc.double({ min: 0, max: 1, noNaN: true }),
          fc.nat(),
          fc.integer({ min: 1, max: 50 }),
          (share, seed, k) => {
            const live = new LiveDocs(set.count);
            for (let d = 0; d < set.count; d++)
              if (((d * 2654435761 + seed) >>> 0) / 2 ** 32 < share) live.delete(d);
            const unit = prepareQuery(rows[seed % rows.length]!, dimension);
            const hits = set.search(unit, k, live);
            assert.equal(hits.length, Math.min(k, live.liveCount));
            for (const hit of hits) assert.ok(!live.isDeleted(hit.doc), `deleted ${hit.doc} returned`);
            assert.equal(new Set(hits.map((h) => h.doc)).size, hits.length);
          },
        ),
        { numRuns: 60 },
      );
    }
  });

  it("keeps f16 and i8 close to f32 (top-10 overlap)", () => {
    const dimension = 384;
    const data = rowsOf(clusteredVectors({ count: 3050, dimension, seed: 3 }), dimension);
    const rows = data.slice(0, 3000);
    const sets = new Map(
      VECTOR_STORAGES.map((kind) => [kind, SegmentVectors.build(dimension, rows, { storage: kind })]),
    );
    const overlap = new Map<VectorStorage, number>([
      ["f16", 0],
      ["i8", 0],
    ]);
    for (const query of data.slice(3000)) {
      const unit = prepareQuery(query, dimension);
      const truth = new Set(
        sets
          .get("f32")!
          .search(unit, 10, null)
          .map((h) => h.doc),
      );
      for (const kind of ["f16", "i8"] as const) {
        const found = sets
          .get(kind)!
          .search(unit, 10, null)
          .filter((h) => truth.has(h.doc)).length;
        overlap.set(kind, overlap.get(kind)! + found / 10 / 50);
      }
    }
    assert.ok(overlap.get("f16")! >= 0.98, `f16 overlap ${overlap.get("f16")}`);
    assert.ok(overlap.get("i8")! >= 0.85, `i8 overlap ${overlap.get("i8")}`);
  });
});

describe("segment vectors: merge and cross-segment search", () => {
  const segmentsArb = fc.integer({ min: 1, max: 5 }).chain((dimension) =>
    fc.record({
      dimension: fc.constant(dimension),
      segments: fc.array(
        fc.record({
          vectors: fc.array(fc.array(entry, { minLength: dimension, maxLength: dimension }), {
            minLength: 1,
            maxLength: 25,
          }),
          deletes: fc.array(fc.nat(), { maxLength: 12 }),
        }),
        { minLength: 1, maxLength: 5 },
      ),
      query: fc.array(entry, { minLength: dimension, maxLength: dimension }),
      k: fc.integer({ min: 1, max: 20 }),
    }),
  );

  it("merge keeps every live vector, as stored, at its new ordinal", () => {
    fc.assert(
      fc.property(segmentsArb, storage, fc.nat(), ({ dimension, segments }, kind, seed) => {
        const inputs = segments.map((s) =>
          SegmentVectors.build(dimension, s.vectors.map(nonZero), { storage: kind }),
        );
        const lives = segments.map((s, i) => liveOf(inputs[i]!.count, s.deletes));
        // New order: the live documents of all inputs, interleaved by a seeded shuffle (as a key merge would).
        const sources: Array<[number, number]> = [];
        inputs.forEach((input, i) => {
          for (let d = 0; d < input.count; d++) if (!lives[i]!.isDeleted(d)) sources.push([i, d]);
        });
        sources.sort(
          (a, b) =>
            ((a[0] * 31 + a[1] * 17 + seed) % 7) - ((b[0] * 31 + b[1] * 17 + seed) % 7) ||
            a[0] - b[0] ||
            a[1] - b[1],
        );
        const maps = inputs.map((input) => new Int32Array(input.count).fill(-1));
        sources.forEach(([i, d], to) => (maps[i]![d] = to));
        const merged = mergeSegmentVectors(inputs, maps, {});
        assert.equal(merged.count, sources.length);
        sources.forEach(([i, d], to) => assert.deepEqual(merged.vector(to), inputs[i]!.vector(d)));
      }),
      { numRuns: 200 },
    );
  });

  it("searchSegments equals brute force over all live documents, ties by segment then doc", () => {
    fc.assert(
      fc.property(segmentsArb, storage, ({ dimension, segments, query, k }, kind) => {
        const list: VectorSegment[] = segments.map((s, i) => {
          const vectors = SegmentVectors.build(dimension, s.vectors.map(nonZero), { storage: kind });
          return { id: 100 - i, vectors, live: liveOf(vectors.count, s.deletes) };
        });
        const unit = prepareQuery(nonZero(query), dimension);
        const all = list.flatMap((s, position) =>
          reference(s.vectors, unit, s.vectors.count, s.live).map((h) => ({ ...h, position, segment: s.id })),
        );
        all.sort((a, b) => b.score - a.score || a.position - b.position || a.doc - b.doc);
        const expected = all.slice(0, k);
        const actual = searchSegments(list, nonZero(query), k);
        assert.equal(actual.length, expected.length);
        actual.forEach((hit, i) => {
          assert.ok(Math.abs(hit.score - expected[i]!.score) < 1e-5);
          const owner = list.find((s) => s.id === hit.segment)!;
          assert.ok(!owner.live!.isDeleted(hit.doc));
        });
      }),
      { numRuns: 300 },
    );
  });

  it("orders equal scores by segment position, then document", () => {
    const a = SegmentVectors.build(
      2,
      [
        [1, 0],
        [1, 0],
      ],
      { storage: "f32" },
    );
    const b = SegmentVectors.build(
      2,
      [
        [1, 0],
        [0, 1],
      ],
      { storage: "f32" },
    );
    const hits = searchSegments(
      [
        { id: 7, vectors: b, live: null },
        { id: 3, vectors: a, live: null },
      ],
      [2, 0],
      4,
    );
    assert.deepEqual(
      hits.map((h) => [h.segment, h.doc]),
      [
        [7, 0],
        [3, 0],
        [3, 1],
        [7, 1],
      ],
    );
    assert.throws(() => searchSegments([{ id: 1, vectors: a, live: null }], [1, 0, 0], 1), /3 dimensions/);
  });
});
