/**
 * What the segment and vector codecs (segment-codec.ts, vectors/vector-codec.ts) share: a 40-byte
 * little-endian header of eight u32 words and one f64, then 4-byte-aligned sections of typed arrays
 * written as their bytes.
 */

export const HEADER_BYTES = 40;

const IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Typed arrays are written as they lie in memory, so only little-endian machines read and write them. */
export function assertLittleEndian(codec: string): void {
  if (!IS_LITTLE_ENDIAN) throw new Error(`${codec}: big-endian platforms are not supported`);
}

/** A length rounded up to the 4-byte alignment of the next section. */
export function padded(length: number): number {
  return (length + 3) & ~3;
}

/** A typed array's own bytes (a view, not a copy). */
export function bytesOf(array: ArrayBufferView): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

/**
 * `total` zero bytes that start with the header: `words` (eight u32) and then the f64 `float`; written
 * into `out` when given (of `total` bytes).
 */
export function withHeader(
  total: number,
  words: readonly number[],
  float: number,
  out: Uint8Array = new Uint8Array(total),
): Uint8Array {
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  words.forEach((value, i) => view.setUint32(4 * i, value, true));
  view.setFloat64(32, float, true);
  return out;
}
