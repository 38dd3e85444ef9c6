/**
 * The approximate (HNSW) graph of one large segment, through USearch.
 *
 * Why USearch (npm `usearch`, Apache-2.0, Unum Cloud): a maintained single-header C++ HNSW with SIMD
 * kernels for f32, f16 and i8, whose npm package ships prebuilt N-API binaries (linux-x64/arm64, macOS,
 * Windows), so `npm ci` compiles nothing; it stores vectors in the same three forms as we do, so the graph
 * is built and searched on exactly our stored codes. hnswlib-node (the reference in bench/vectors.ts) has
 * no prebuilt binary (node-gyp at install) and only f32; faiss-node downloads at install. 2.25.x is the
 * last line that supports Node 20 (2.26 requires Node 22).
 *
 * Like Lucene's per-segment HNSW (Lucene99HnswVectorsFormat), a graph is built once, when its segment is
 * written or merged, never updated: a segment is immutable and deletions are a live-docs bitset applied
 * to the graph's answers (see SegmentVectors.search). Keys are the local ordinals.
 *
 * Persisted, not rebuilt on load: building is the costly part (minutes for 1M vectors on 2 cores) and a
 * replica loading a segment must not pay it. The binding only saves to and loads from a file path, so the
 * bytes go through a private temporary file. USearch's file is its vector matrix (u32 rows, u32 row bytes,
 * the rows in its slot order) followed by the graph. Where every row is byte for byte one of our rows
 * (i8 storage walked as i8, the default), only the graph is kept, with which of our rows fills each slot
 * (a multi-threaded build fills slots out of key order), and the file is put back together from our codes
 * on load. Where the walk's copy is another form than the storage (f32 or f16 walked as i8), the whole
 * file is kept. The graph's codes only steer the walk: every candidate is rescored with our stored codes. That is also why
 * the graph's copy defaults to i8 whatever our storage (SegmentVectors' `graphScalar`): the walk is bound
 * by memory reads, and i8 rows are a quarter of f32's.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";

import { encodeRow, type VectorCodes, type VectorStorage } from "./quantize.js";

/**
 * USearch's native index, as its package's CommonJS wrapper builds it (2.25.x). Why the native class and
 * not the wrapper's `Index`: the wrapper turns every vector it is given into a Float32Array, and USearch
 * then casts floats to i8 as `x · 127 / |x|`, which for a unit 384-d vector (components ≈ ±0.05) uses
 * about ±6 of the ±127 codes: a walk over 4-bit vectors. Given an Int8Array, the native class keeps the
 * codes as they are: ours, scaled per vector to the full ±127 (quantize.ts), and USearch's i8 cosine is
 * scale-free. At 100k × 384-d, recall@10 asking the graph for 10 candidates: 0.82 → 0.96.
 * Loaded through its CommonJS entry (`createRequire`): the ESM build finds its binary through `bindings`'
 * stack-trace lookup, which never returns on a worker thread (merges build graphs on one).
 */
interface NativeIndex {
  add(keys: BigUint64Array, vectors: Float32Array | Int8Array, threads: number): void;
  search(
    query: Float32Array | Int8Array,
    k: number,
    threads: number,
  ): [BigUint64Array, Float32Array, BigUint64Array];
  size(): number;
  dimensions(): number;
  save(file: string): void;
  load(file: string): void;
}
type NativeIndexClass = new (
  dimensions: number,
  metric: string,
  quantization: string,
  connectivity: number,
  expansionAdd: number,
  expansionSearch: number,
  multi: boolean,
) => NativeIndex;

const requireHere = createRequire(import.meta.url);
const usearchEntry = requireHere.resolve("usearch");
// usearch/javascript/dist/cjs/usearch.js → the package root, where its prebuilt binaries are.
const usearchRoot = path.resolve(path.dirname(usearchEntry), "../../..");
const nodeGypBuild = createRequire(usearchEntry)("node-gyp-build") as (dir: string) => {
  CompiledIndex: NativeIndexClass;
};
const { CompiledIndex } = nodeGypBuild(usearchRoot);

export interface HnswParams {
  /** Neighbours per node (HNSW M): more = better recall, bigger graph, slower build. */
  connectivity: number;
  /** Candidate list while building (efConstruction). */
  expansionAdd: number;
  /** Candidate list while searching (ef); a search asks for at least as many as it wants back. */
  expansionSearch: number;
}

export const DEFAULT_HNSW: HnswParams = { connectivity: 16, expansionAdd: 128, expansionSearch: 64 };

export interface AnnMatch {
  doc: number;
  /** USearch's cosine distance (1 − cosine of the codes); callers rescore with the exact stored score. */
  distance: number;
}

function newIndex(dimension: number, scalar: VectorStorage, params: HnswParams): NativeIndex {
  return new CompiledIndex(
    dimension,
    "cos",
    scalar,
    params.connectivity,
    params.expansionAdd,
    params.expansionSearch,
    false,
  );
}

/**
 * The rows as the native index is given them: i8 codes as they are (ours, or ours made from the stored
 * rows: the walk's copy is i8 whatever the storage); f32 values for an f32 or f16 copy (f16 bits as their
 * exactly representable f32 values).
 */
function bindingRows(
  storage: VectorStorage,
  scalar: VectorStorage,
  dimension: number,
  codes: VectorCodes,
  f16: Float32Array,
): Float32Array | Int8Array {
  if (scalar === "i8") {
    if (storage === "i8") return codes as Int8Array;
    const out = new Int8Array(codes.length);
    const row = new Float32Array(dimension);
    const scale = new Float32Array(1);
    for (let r = 0; r < codes.length / dimension; r++) {
      for (let i = 0; i < dimension; i++) {
        const code = codes[r * dimension + i] ?? 0;
        row[i] = storage === "f16" ? (f16[code] ?? 0) : code;
      }
      encodeRow("i8", row, out, scale, r);
    }
    return out;
  }
  if (storage === "f32") return codes as Float32Array;
  const out = new Float32Array(codes.length);
  for (let i = 0; i < codes.length; i++)
    out[i] = storage === "f16" ? (f16[codes[i] ?? 0] ?? 0) : (codes[i] ?? 0);
  return out;
}

/** The query in the form the walk compares: i8 codes scaled to the full range for an i8 copy. */
function bindingQuery(scalar: VectorStorage, unitQuery: Float32Array): Float32Array | Int8Array {
  if (scalar !== "i8") return unitQuery;
  const out = new Int8Array(unitQuery.length);
  encodeRow("i8", unitQuery, out, new Float32Array(1), 0);
  return out;
}

function withTempFile<T>(run: (file: string) => T): T {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-hnsw-"));
  try {
    return run(path.join(dir, "graph.usearch"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function codeBytes(codes: VectorCodes): Uint8Array {
  return new Uint8Array(codes.buffer, codes.byteOffset, codes.byteLength);
}

export class AnnGraph {
  private constructor(
    private readonly index: NativeIndex,
    /** The form of USearch's own copy of the vectors, which the walk compares (see `build`). */
    readonly scalar: VectorStorage,
    readonly params: HnswParams,
  ) {}

  /**
   * Builds the graph over `count` rows of codes (stored as `storage`), the walk comparing USearch's own
   * `scalar` copy of them. `threads` 0 = all cores. Synchronous and CPU-bound: call it where blocking is
   * fine (segment write or merge, off the query path; a worker thread in a server: the binding loads there).
   */
  static build(
    storage: VectorStorage,
    scalar: VectorStorage,
    dimension: number,
    codes: VectorCodes,
    f16: Float32Array,
    params: HnswParams = DEFAULT_HNSW,
    threads = 0,
  ): AnnGraph {
    const count = codes.length / dimension;
    const index = newIndex(dimension, scalar, params);
    const keys = new BigUint64Array(count);
    for (let d = 0; d < count; d++) keys[d] = BigInt(d);
    if (count > 0) index.add(keys, bindingRows(storage, scalar, dimension, codes, f16), threads);
    return new AnnGraph(index, scalar, params);
  }

  /** The graph's bytes (USearch's file without its copy of the vectors; see the module comment). */
  serialize(codes: VectorCodes): Uint8Array {
    const file = withTempFile((f) => {
      this.index.save(f);
      return readFileSync(f);
    });
    const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
    const rows = view.getUint32(0, true);
    const rowBytes = view.getUint32(4, true);
    const ours = codeBytes(codes);
    const matrixEnd = 8 + rows * rowBytes;
    const slots =
      rows * rowBytes === ours.byteLength ? rowsBySlot(file.subarray(8, matrixEnd), ours, rowBytes) : null;
    // Not our rows (i8, or a layout this module does not know): keep the whole file.
    if (slots === null) return Buffer.concat([new Uint8Array([FULL_FILE]), file]);
    const graph = file.subarray(matrixEnd);
    if (slots.every((row, slot) => row === slot)) return Buffer.concat([new Uint8Array([OUR_ROWS]), graph]);
    return Buffer.concat([new Uint8Array([OUR_ROWS_BY_SLOT, 0, 0, 0]), new Uint8Array(slots.buffer), graph]);
  }

  /** Loads bytes made by `serialize` over the same codes; null when they cannot be read (rebuild then). */
  static deserialize(
    bytes: Uint8Array,
    scalar: VectorStorage,
    dimension: number,
    codes: VectorCodes,
    params: HnswParams,
  ): AnnGraph | null {
    const count = codes.length / dimension;
    const file = usearchFile(bytes, count, dimension * codes.BYTES_PER_ELEMENT, codeBytes(codes));
    if (file === null) return null;
    const index = newIndex(dimension, scalar, params);
    try {
      withTempFile((f) => {
        writeFileSync(f, file);
        index.load(f);
      });
    } catch {
      return null;
    }
    if (index.size() !== count || index.dimensions() !== dimension) return null;
    return new AnnGraph(index, scalar, params);
  }

  get size(): number {
    return this.index.size();
  }

  /** Up to `wanted` nearest rows to the (unit) query, nearest first. */
  search(unitQuery: Float32Array, wanted: number): AnnMatch[] {
    const size = this.index.size();
    const k = Math.min(wanted, size);
    if (k <= 0) return [];
    // One thread: queries run side by side on the event loop's callers, not inside one search.
    const [keys, distances, counts] = this.index.search(bindingQuery(this.scalar, unitQuery), k, 1);
    const found = Number(counts[0] ?? 0n);
    const out: AnnMatch[] = [];
    for (let i = 0; i < found; i++) {
      const key = keys[i] ?? 0n;
      if (key >= BigInt(size)) continue;
      out.push({ doc: Number(key), distance: distances[i] ?? 0 });
    }
    return out;
  }
}

/** How `serialize` kept USearch's rows: the whole file, none (they are ours in order), our rows by slot. */
const FULL_FILE = 1;
const OUR_ROWS = 0;
const OUR_ROWS_BY_SLOT = 2;

/** FNV-1a of row r (rowBytes long) of `bytes`. */
function rowHash(bytes: Uint8Array, r: number, rowBytes: number): number {
  let h = 0x811c9dc5;
  for (let i = r * rowBytes, end = i + rowBytes; i < end; i++) h = Math.imul(h ^ (bytes[i] ?? 0), 0x01000193);
  return h >>> 0;
}

function sameRow(a: Uint8Array, ra: number, b: Uint8Array, rb: number, rowBytes: number): boolean {
  for (let i = 0; i < rowBytes; i++) if (a[ra * rowBytes + i] !== b[rb * rowBytes + i]) return false;
  return true;
}

/**
 * For each of USearch's slots, one of our rows with the same bytes (equal rows are interchangeable), or
 * null if a slot holds a row we do not have. A multi-threaded build fills slots out of key order.
 */
function rowsBySlot(matrix: Uint8Array, ours: Uint8Array, rowBytes: number): Uint32Array | null {
  const rows = rowBytes === 0 ? 0 : ours.byteLength / rowBytes;
  const head = new Map<number, number>();
  const next = new Int32Array(rows).fill(-1);
  for (let r = rows - 1; r >= 0; r--) {
    const h = rowHash(ours, r, rowBytes);
    next[r] = head.get(h) ?? -1;
    head.set(h, r);
  }
  const slots = new Uint32Array(rows);
  for (let slot = 0; slot < rows; slot++) {
    let r = head.get(rowHash(matrix, slot, rowBytes)) ?? -1;
    while (r >= 0 && !sameRow(matrix, slot, ours, r, rowBytes)) r = next[r] ?? -1;
    if (r < 0) return null;
    slots[slot] = r;
  }
  return slots;
}

/** USearch's file back from `serialize`'s bytes and our rows; null when the bytes are not of that form. */
function usearchFile(bytes: Uint8Array, rows: number, rowBytes: number, ours: Uint8Array): Uint8Array | null {
  const kind = bytes[0];
  if (kind === FULL_FILE) return bytes.subarray(1);
  if (kind !== OUR_ROWS && kind !== OUR_ROWS_BY_SLOT) return null;
  const header = new Uint8Array(8);
  const view = new DataView(header.buffer);
  view.setUint32(0, rows, true);
  view.setUint32(4, rowBytes, true);
  if (kind === OUR_ROWS) return Buffer.concat([header, ours, bytes.subarray(1)]);
  if (bytes.byteLength < 4 + 4 * rows) return null;
  const slots = new Uint32Array(rows);
  new Uint8Array(slots.buffer).set(bytes.subarray(4, 4 + 4 * rows));
  const matrix = new Uint8Array(rows * rowBytes);
  for (let slot = 0; slot < rows; slot++) {
    const r = slots[slot] ?? 0;
    if (r >= rows) return null;
    matrix.set(ours.subarray(r * rowBytes, (r + 1) * rowBytes), slot * rowBytes);
  }
  return Buffer.concat([header, matrix, bytes.subarray(4 + 4 * rows)]);
}
