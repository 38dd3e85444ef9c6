/**
 * Vector storage types and their conversions. Vectors are L2-normalised at write, so cosine similarity is
 * a dot product; the stored form is then:
 *
 * - `f32`: the normalised vector as is (4 bytes a dimension);
 * - `f16`: IEEE half precision, round to nearest even (2 bytes a dimension; Node 20 has no Float16Array,
 *   so the bits are kept in a Uint16Array and decoded through a 65 536-entry table);
 * - `i8`: symmetric scalar quantisation with one scale per vector (1 byte a dimension + 4 bytes a vector):
 *   code = round(x / max|x| · 127), x ≈ code · scale. Per vector rather than per segment because the
 *   largest component of a normalised embedding varies a lot from one vector to the next, and a scale per
 *   vector keeps the full 8 bits for each one.
 */

export type VectorStorage = "f32" | "f16" | "i8";
export const VECTOR_STORAGES: readonly VectorStorage[] = ["f32", "f16", "i8"];

/** Stored codes of a vector set, one row of `dimension` entries per vector. */
export type VectorCodes = Float32Array | Uint16Array | Int8Array;

export function bytesPerDimension(storage: VectorStorage): number {
  return storage === "f32" ? 4 : storage === "f16" ? 2 : 1;
}

/**
 * The vector scaled to unit length, as a new Float32Array. Throws on a wrong length, a non-finite entry or
 * a zero vector (it has no direction: no cosine to anything).
 */
export function normalized(vector: ArrayLike<number>, dimension: number, what = "vector"): Float32Array {
  if (vector.length !== dimension) {
    throw new RangeError(`${what} has ${vector.length} dimensions, expected ${dimension}`);
  }
  let sum = 0;
  for (let i = 0; i < dimension; i++) {
    const x = vector[i] ?? NaN;
    if (!Number.isFinite(x)) throw new RangeError(`${what} has a non-finite entry at ${i}`);
    sum += x * x;
  }
  if (sum === 0 || !Number.isFinite(sum))
    throw new RangeError(`${what} has no length (all zeros or too large)`);
  const inverse = 1 / Math.sqrt(sum);
  const out = new Float32Array(dimension);
  for (let i = 0; i < dimension; i++) out[i] = (vector[i] ?? 0) * inverse;
  return out;
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** IEEE 754 half-precision bits of x, rounded to nearest even (overflow → ±Infinity). */
export function toF16Bits(x: number): number {
  f32Scratch[0] = x;
  const bits = u32Scratch[0] ?? 0;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  const mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 : 0);
  const e = exponent - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign; // below half the smallest subnormal: ±0
    const m = mantissa | 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    let rounded = m >>> shift;
    const rest = m & ((1 << shift) - 1);
    if (rest > half || (rest === half && (rounded & 1) !== 0)) rounded++;
    return sign | rounded;
  }
  let out = (e << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (out & 1) !== 0)) out++; // may carry into the exponent: correct
  return sign | out;
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >>> 10) & 0x1f;
  const mantissa = h & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa !== 0 ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

let f16Table: Float32Array | null = null;

/** Half-precision bits → value, for every 16-bit pattern (256 KiB, built on first use). */
export function f16Table16(): Float32Array {
  if (f16Table === null) {
    f16Table = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) f16Table[h] = halfToFloat(h);
  }
  return f16Table;
}

/** Writes one normalised vector's codes at row `row` (and its i8 scale). */
export function encodeRow(
  storage: VectorStorage,
  unit: Float32Array,
  codes: VectorCodes,
  scales: Float32Array | null,
  row: number,
): void {
  const dimension = unit.length;
  const base = row * dimension;
  if (storage === "f32") {
    (codes as Float32Array).set(unit, base);
  } else if (storage === "f16") {
    const out = codes as Uint16Array;
    for (let i = 0; i < dimension; i++) out[base + i] = toF16Bits(unit[i] ?? 0);
  } else {
    let max = 0;
    for (let i = 0; i < dimension; i++) max = Math.max(max, Math.abs(unit[i] ?? 0));
    const out = codes as Int8Array;
    const factor = 127 / max;
    for (let i = 0; i < dimension; i++) out[base + i] = Math.round((unit[i] ?? 0) * factor);
    (scales as Float32Array)[row] = max / 127;
  }
}

export function allocateCodes(storage: VectorStorage, length: number): VectorCodes {
  return storage === "f32"
    ? new Float32Array(length)
    : storage === "f16"
      ? new Uint16Array(length)
      : new Int8Array(length);
}
