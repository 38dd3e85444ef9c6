/**
 * Binary format of one segment's vectors (integers little-endian; sections 4-byte aligned), in the style of
 * core/segment-codec.ts:
 *
 * | size    | content                                                           |
 * |---------|-------------------------------------------------------------------|
 * | 4       | magic "LXVC"                                                      |
 * | 4       | u32 format version (1)                                            |
 * | 4       | u32 vector count N                                                |
 * | 4       | u32 dimension D                                                   |
 * | 4       | u32 storage: 0 f32, 1 f16, 2 i8; + 256 × (graph codes' form + 1)    |
 * | 4       | u32 HNSW connectivity                                             |
 * | 4       | u32 HNSW expansion at build                                       |
 * | 4       | u32 HNSW expansion at search                                      |
 * | 8       | f64 byte length G of the graph (0: no graph, searched exactly)    |
 * | 4N      | f32 scale of each vector (i8 only; absent otherwise)              |
 * | N·D·b   | codes, row d = document d (b = 4, 2 or 1), zero-padded to 4       |
 * | G       | the graph (ann.ts: USearch's index, without its rows where they are ours) |
 *
 * The graph is stored rather than rebuilt on load (building 1M vectors takes minutes; a replica loads a
 * new segment in the time it takes to read it). Should a graph not load (bytes written by another USearch
 * version), it is rebuilt from the codes with the recorded parameters: the codes are the source of truth.
 */
import { assertLittleEndian, bytesOf, HEADER_BYTES, padded, withHeader } from "../core/binary-header.js";
import { AnnGraph, type HnswParams } from "./ann.js";
import { bytesPerDimension, f16Table16, type VectorCodes, type VectorStorage } from "./quantize.js";
import type { Directory } from "../directory.js";
import { checkDimension, SegmentVectors } from "./segment-vectors.js";
import { SpilledCodes } from "./spill.js";

const MAGIC = 0x4356584c; // "LXVC" read as a little-endian u32
export const VECTOR_FORMAT_VERSION = 1;
const STORAGES: readonly VectorStorage[] = ["f32", "f16", "i8"];

/** The largest part `toParts` cuts (SQLite and PostgreSQL cap one value at 1 GB; stay well below). */
export const VECTOR_PART_BYTES = 64 * 1024 * 1024;

function corrupt(reason: string): Error {
  return new Error(`vector bytes are corrupt: ${reason}`);
}

export function encodeVectors(set: SegmentVectors): Uint8Array {
  assertLittleEndian("vector codec");
  const stored = set.readCodes();
  const graph = set.graph === null ? null : set.graph.serialize(stored);
  const params = set.graph?.params;
  const codes = bytesOf(stored);
  const scales = set.scales === null ? new Uint8Array(0) : bytesOf(set.scales);
  const total = HEADER_BYTES + scales.byteLength + padded(codes.byteLength) + (graph?.byteLength ?? 0);
  const header = [
    MAGIC,
    VECTOR_FORMAT_VERSION,
    set.count,
    set.dimension,
    STORAGES.indexOf(set.storage) | ((STORAGES.indexOf(set.graph?.scalar ?? set.storage) + 1) << 8),
    params?.connectivity ?? 0,
    params?.expansionAdd ?? 0,
    params?.expansionSearch ?? 0,
  ];
  // The f64: the graph's length (0: none).
  const out = withHeader(total, header, graph?.byteLength ?? 0);
  let offset = HEADER_BYTES;
  out.set(scales, offset);
  offset += scales.byteLength;
  out.set(codes, offset);
  offset += padded(codes.byteLength);
  if (graph !== null) out.set(graph, offset);
  return out;
}

/** A typed view on `bytes` where aligned (and views are wanted), else a copy. */
function typedAt<T extends VectorCodes | Float32Array>(
  make: new (buffer: ArrayBufferLike, offset: number, length: number) => T,
  copy: new (length: number) => T,
  bytes: Uint8Array,
  offset: number,
  length: number,
  bytesPer: number,
  copyAlways: boolean,
): T {
  const at = bytes.byteOffset + offset;
  if (!copyAlways && at % bytesPer === 0) return new make(bytes.buffer, at, length);
  const out = new copy(length);
  bytesOf(out).set(bytes.subarray(offset, offset + length * bytesPer));
  return out;
}

export interface DecodeVectorOptions {
  /** Threads for a graph that has to be rebuilt (0 = all cores). */
  threads?: number;
  /** Where the codes of a set with a graph go (spill.ts); none: they stay in memory. */
  directory?: Directory | null;
}

/**
 * Reads bytes made by `encodeVectors`. Without a graph the codes are views on the bytes where aligned
 * (keep them unmodified); with one they are written to a file of `options.directory` where one is given
 * (spill.ts: the walk reads USearch's copy, rescoring reads rows from the file; the set's owner releases
 * it), else copied; either way the bytes (mostly graph, which USearch copies into its own memory) are not
 * kept alive by the codes.
 */
export function decodeVectors(bytes: Uint8Array, options: DecodeVectorOptions = {}): SegmentVectors {
  if (bytes.byteLength < HEADER_BYTES) throw corrupt("shorter than the header");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u32 = (i: number) => view.getUint32(4 * i, true);
  if (u32(0) !== MAGIC) throw corrupt("bad magic");
  if (u32(1) !== VECTOR_FORMAT_VERSION) throw corrupt(`unknown format version ${u32(1)}`);
  const count = u32(2);
  const dimension = u32(3);
  const storage = STORAGES[u32(4) & 0xff];
  const graphByte = u32(4) >>> 8; // 0: the graph's codes are of the storage's form
  const graphScalar = graphByte === 0 ? storage : STORAGES[graphByte - 1];
  if (storage === undefined || graphScalar === undefined) throw corrupt(`unknown storage ${u32(4)}`);
  try {
    checkDimension(dimension);
  } catch {
    throw corrupt(`dimension ${dimension}`);
  }
  const params: HnswParams = { connectivity: u32(5), expansionAdd: u32(6), expansionSearch: u32(7) };
  const graphLength = view.getFloat64(32, true);
  const scaleBytes = storage === "i8" ? 4 * count : 0;
  const codeBytes = count * dimension * bytesPerDimension(storage);
  const graphAt = HEADER_BYTES + scaleBytes + padded(codeBytes);
  if (!Number.isSafeInteger(graphLength) || graphLength < 0 || graphAt + graphLength !== bytes.byteLength) {
    throw corrupt(`length ${bytes.byteLength} does not match the header`);
  }
  const hasGraph = graphLength > 0;
  const scales =
    storage === "i8" ? typedAt(Float32Array, Float32Array, bytes, HEADER_BYTES, count, 4, hasGraph) : null;
  const codesAt = HEADER_BYTES + scaleBytes;
  // Spilled, the codes are only read here (to load the graph): a view on the bytes will do.
  const directory = options.directory ?? null;
  const spilled =
    hasGraph && directory !== null
      ? SpilledCodes.write(directory, bytes.subarray(codesAt, codesAt + codeBytes), storage, dimension, count)
      : null;
  const copy = hasGraph && spilled === null;
  const length = count * dimension;
  const codes =
    storage === "f32"
      ? typedAt(Float32Array, Float32Array, bytes, codesAt, length, 4, copy)
      : storage === "f16"
        ? typedAt(Uint16Array, Uint16Array, bytes, codesAt, length, 2, copy)
        : typedAt(Int8Array, Int8Array, bytes, codesAt, length, 1, copy);
  const set = new SegmentVectors(dimension, storage, spilled ?? codes, scales);
  if (hasGraph) {
    const graph = bytes.subarray(graphAt);
    try {
      set.graph =
        AnnGraph.deserialize(graph, graphScalar, dimension, codes, params) ??
        AnnGraph.build(storage, graphScalar, dimension, codes, f16Table16(), params, options.threads ?? 0);
    } catch (error) {
      set.release();
      throw error;
    }
  }
  return set;
}

/** Cuts encoded bytes into parts of at most `partBytes` (rows of a store), views on `bytes`. */
export function toParts(bytes: Uint8Array, partBytes = VECTOR_PART_BYTES): Uint8Array[] {
  if (!Number.isInteger(partBytes) || partBytes < 1) throw new RangeError("part size must be ≥ 1 byte");
  const parts: Uint8Array[] = [];
  for (let at = 0; at < bytes.byteLength; at += partBytes) parts.push(bytes.subarray(at, at + partBytes));
  return parts;
}

/** The bytes `toParts` cut, put back together (in order). */
export function fromParts(parts: readonly Uint8Array[]): Uint8Array {
  return parts.length === 1 ? (parts[0] as Uint8Array) : Buffer.concat(parts);
}
