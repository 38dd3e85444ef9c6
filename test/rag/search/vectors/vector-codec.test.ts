import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";

import { f16Table16, toF16Bits, VECTOR_STORAGES } from "../../../../src/rag/search/vectors/quantize.js";
import { prepareQuery, SegmentVectors } from "../../../../src/rag/search/vectors/segment-vectors.js";
import {
  decodeVectors,
  encodeVectors,
  fromParts,
  toParts,
} from "../../../../src/rag/search/vectors/vector-codec.js";
import { clusteredVectors, rowsOf } from "../../../../scripts/lib/synthetic-vectors.js";

const storage = fc.constantFrom(...VECTOR_STORAGES);
const finite = fc.float({ min: -4, max: 4, noNaN: true, noDefaultInfinity: true });

/** Vectors of a dimension, none all zeros (a zero vector has no direction and is refused). */
function vectorSet(maxCount: number) {
  return fc.integer({ min: 1, max: 12 }).chain((dimension) =>
    fc.record({
      dimension: fc.constant(dimension),
      vectors: fc.array(
        fc.array(finite, { minLength: dimension, maxLength: dimension }).map((v) => {
          v[0] = (v[0] ?? 0) === 0 ? 1 : v[0]!;
          return v;
        }),
        { maxLength: maxCount },
      ),
    }),
  );
}

function sameSet(a: SegmentVectors, b: SegmentVectors): void {
  assert.equal(b.count, a.count);
  assert.equal(b.dimension, a.dimension);
  assert.equal(b.storage, a.storage);
  assert.deepEqual(Array.from(b.readCodes()), Array.from(a.readCodes()));
  assert.deepEqual(
    b.scales === null ? null : Array.from(b.scales),
    a.scales === null ? null : Array.from(a.scales),
  );
  assert.equal(b.graph === null, a.graph === null);
  assert.equal(b.graph?.scalar, a.graph?.scalar);
}

describe("vector codec", () => {
  it("decode(encode(set)) is the same set, searched the same (no graph)", () => {
    fc.assert(
      fc.property(vectorSet(40), storage, ({ dimension, vectors }, kind) => {
        const set = SegmentVectors.build(dimension, vectors, { storage: kind });
        const back = decodeVectors(encodeVectors(set));
        sameSet(set, back);
        if (set.count > 0) {
          const query = prepareQuery(vectors[0]!, dimension);
          assert.deepEqual(back.search(query, 5, null), set.search(query, 5, null));
        }
      }),
      { numRuns: 200 },
    );
  });

  it("keeps the graph: a decoded set with a graph searches as the original", () => {
    fc.assert(
      fc.property(
        vectorSet(60),
        storage,
        storage,
        fc.integer({ min: 1, max: 3 }),
        ({ dimension, vectors }, kind, graphScalar, threads) => {
          const options = { storage: kind, graphScalar, graphThreshold: 1, threads };
          const set = SegmentVectors.build(dimension, vectors, options);
          const back = decodeVectors(encodeVectors(set));
          sameSet(set, back);
          if (set.count > 0) {
            assert.equal(back.graph?.size, set.count);
            const query = prepareQuery(vectors[vectors.length - 1]!, dimension);
            assert.deepEqual(back.search(query, 3, null), set.search(query, 3, null));
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it("keeps no second copy of rows with a graph of the same form, whatever the build's threads", () => {
    const dimension = 48;
    const rows = rowsOf(clusteredVectors({ count: 3000, dimension, seed: 5 }), dimension);
    for (const kind of ["f32", "f16", "i8"] as const) {
      for (const threads of [1, 2]) {
        const options = { storage: kind, graphScalar: kind, graphThreshold: 1, threads };
        const set = SegmentVectors.build(dimension, rows, options);
        const graph = set.graph!.serialize(set.readCodes());
        // First byte: 1 = USearch's whole file kept, else only the graph (+ slot order). i8 included: the
        // native index is given our codes as they are (ann.ts).
        assert.notEqual(graph[0], 1, `${kind}, ${threads} thread(s)`);
        const back = decodeVectors(encodeVectors(set));
        for (const q of [0, 1234, 2999]) {
          const unit = prepareQuery(rows[q]!, dimension);
          assert.deepEqual(back.search(unit, 10, null), set.search(unit, 10, null));
        }
      }
    }
    // Walked as i8, f32 rows keep USearch's whole file: its i8 copy is made from them, not stored.
    const walkedAsI8 = SegmentVectors.build(dimension, rows, { storage: "f32", graphThreshold: 1 });
    assert.equal(walkedAsI8.graph!.serialize(walkedAsI8.readCodes())[0], 1);
  });

  it("reads bytes at any alignment, and parts put back together", () => {
    fc.assert(
      fc.property(
        vectorSet(20),
        storage,
        fc.integer({ min: 0, max: 7 }),
        fc.integer({ min: 1, max: 97 }),
        (input, kind, shift, part) => {
          const set = SegmentVectors.build(input.dimension, input.vectors, { storage: kind });
          const bytes = encodeVectors(set);
          const shifted = new Uint8Array(bytes.byteLength + shift);
          shifted.set(bytes, shift);
          sameSet(set, decodeVectors(shifted.subarray(shift)));
          const parts = toParts(bytes, part);
          assert.ok(parts.every((p) => p.byteLength <= part));
          sameSet(set, decodeVectors(fromParts(parts.map((p) => p.slice()))));
        },
      ),
      { numRuns: 100 },
    );
  });

  it("rejects truncated, extended or mislabelled bytes", () => {
    const set = SegmentVectors.build(
      3,
      [
        [1, 2, 3],
        [0, 1, 0],
      ],
      { storage: "i8" },
    );
    const bytes = encodeVectors(set);
    assert.throws(() => decodeVectors(bytes.subarray(0, bytes.byteLength - 1)), /corrupt/);
    assert.throws(() => decodeVectors(new Uint8Array([...bytes, 0])), /corrupt/);
    assert.throws(() => decodeVectors(bytes.subarray(0, 10)), /corrupt/);
    const badStorage = bytes.slice();
    badStorage[16] = 9;
    assert.throws(() => decodeVectors(badStorage), /corrupt/);
    const badMagic = bytes.slice();
    badMagic[0] = 0;
    assert.throws(() => decodeVectors(badMagic), /corrupt/);
  });

  it("refuses vectors of the wrong length, non-finite entries and zero vectors", () => {
    assert.throws(() => SegmentVectors.build(3, [[1, 2]], { storage: "f32" }), /2 dimensions, expected 3/);
    assert.throws(() => SegmentVectors.build(2, [[1, NaN]], { storage: "f16" }), /non-finite/);
    assert.throws(() => SegmentVectors.build(2, [[0, 0]], { storage: "i8" }), /no length/);
    assert.throws(() => prepareQuery([0, 0], 2), /no length/);
    assert.throws(() => SegmentVectors.build(0, [], { storage: "f32" }), /dimension/);
  });
});

describe("f16 conversion", () => {
  it("rounds every float32 to the nearest half (ties to even)", () => {
    const table = f16Table16();
    fc.assert(
      fc.property(fc.float({ noNaN: true }), (x) => {
        const h = toF16Bits(x);
        const value = table[h]!;
        if (Math.abs(x) >= 65520) return assert.equal(value, Math.sign(x) * Infinity);
        // No other half is nearer; on a tie the chosen one has an even mantissa.
        for (const other of [h - 1, h + 1, h ^ 0x8000]) {
          if (other < 0 || other > 0xffff || ((other >>> 10) & 0x1f) === 0x1f) continue;
          const d = Math.abs(table[other]! - x) - Math.abs(value - x);
          assert.ok(d > 0 || (d === 0 && (h & 1) === 0) || table[other] === value, `${x} → ${value}`);
        }
      }),
      { numRuns: 20_000 },
    );
    assert.equal(toF16Bits(1), 0x3c00);
    assert.equal(toF16Bits(-2), 0xc000);
    assert.equal(toF16Bits(65504), 0x7bff);
    assert.equal(toF16Bits(2 ** -24), 1);
    assert.equal(toF16Bits(2 ** -26), 0);
  });
});
