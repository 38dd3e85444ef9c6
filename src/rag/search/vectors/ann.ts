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
 * the rows in its slot order) followed by the graph. Where the rows are byte for byte our codes in our
 * order (f32 and f16 built on one thread), only the graph part is kept and the file is put back together
 * from our codes on load; otherwise the whole file is kept: a multi-threaded build fills slots out of
 * order, and for cosine USearch keeps its own i8 codes (each vector normalised, × 127), so its copy is not
 * ours. The graph's codes only steer the walk: every candidate is rescored with our stored codes.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Index, MetricKind, ScalarKind } from "usearch";
import type { VectorCodes, VectorStorage } from "./quantize.js";

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

function newIndex(dimension: number, storage: VectorStorage, params: HnswParams): Index {
  return new Index({
    dimensions: dimension,
    metric: MetricKind.Cos,
    quantization: storage === "f32" ? ScalarKind.F32 : storage === "f16" ? ScalarKind.F16 : ScalarKind.I8,
    connectivity: params.connectivity,
    expansion_add: params.expansionAdd,
    expansion_search: params.expansionSearch,
    multi: false,
  });
}

/** The codes as the binding takes them: f16 bits are given as their (exactly representable) f32 values. */
function bindingRows(
  storage: VectorStorage,
  codes: VectorCodes,
  f16: Float32Array,
): Float32Array | Int8Array {
  if (storage !== "f16") return codes as Float32Array | Int8Array;
  const out = new Float32Array(codes.length);
  for (let i = 0; i < codes.length; i++) out[i] = f16[codes[i] ?? 0] ?? 0;
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
    private readonly index: Index,
    readonly storage: VectorStorage,
    readonly params: HnswParams,
  ) {}

  /**
   * Builds the graph over `count` rows of codes. `threads` 0 = all cores. Synchronous and CPU-bound: call
   * it where blocking is fine (segment write or merge, off the query path; a worker thread in a server).
   */
  static build(
    storage: VectorStorage,
    dimension: number,
    codes: VectorCodes,
    f16: Float32Array,
    params: HnswParams = DEFAULT_HNSW,
    threads = 0,
  ): AnnGraph {
    const count = codes.length / dimension;
    const index = newIndex(dimension, storage, params);
    const keys = new BigUint64Array(count);
    for (let d = 0; d < count; d++) keys[d] = BigInt(d);
    if (count > 0) index.add(keys, bindingRows(storage, codes, f16), threads);
    return new AnnGraph(index, storage, params);
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
    const expected = codeBytes(codes);
    const matrixEnd = 8 + rows * rowBytes;
    if (
      rows * rowBytes !== expected.byteLength ||
      !Buffer.from(file.subarray(8, matrixEnd)).equals(expected)
    ) {
      // Not the layout this module knows (another USearch version): keep the whole file.
      return concat(new Uint8Array([1]), file);
    }
    return concat(new Uint8Array([0]), file.subarray(matrixEnd));
  }

  /** Loads bytes made by `serialize` over the same codes; null when they cannot be read (rebuild then). */
  static deserialize(
    bytes: Uint8Array,
    storage: VectorStorage,
    dimension: number,
    codes: VectorCodes,
    params: HnswParams,
  ): AnnGraph | null {
    if (bytes.byteLength < 1) return null;
    let file: Uint8Array;
    if (bytes[0] === 1) file = bytes.subarray(1);
    else if (bytes[0] === 0) {
      const header = new Uint8Array(8);
      const view = new DataView(header.buffer);
      const rowBytes = dimension * codes.BYTES_PER_ELEMENT;
      view.setUint32(0, codes.length / dimension, true);
      view.setUint32(4, rowBytes, true);
      file = concat(header, codeBytes(codes), bytes.subarray(1));
    } else return null;
    const index = newIndex(dimension, storage, params);
    try {
      withTempFile((f) => {
        writeFileSync(f, file);
        index.load(f);
      });
    } catch {
      return null;
    }
    if (index.size() !== codes.length / dimension || index.dimensions() !== dimension) return null;
    return new AnnGraph(index, storage, params);
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
    const matches = this.index.search(unitQuery, k, 1);
    const out: AnnMatch[] = [];
    for (let i = 0; i < matches.keys.length; i++) {
      const key = matches.keys[i] ?? 0n;
      if (key >= BigInt(size)) continue; // padding where fewer were found
      out.push({ doc: Number(key), distance: matches.distances[i] ?? 0 });
    }
    return out;
  }
}

function concat(...parts: Uint8Array[]): Uint8Array {
  let total = 0;
  for (const p of parts) total += p.byteLength;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.byteLength;
  }
  return out;
}
