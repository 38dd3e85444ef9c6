/**
 * Stored codes kept in the index's Directory (directory.ts) rather than in memory, for segments whose
 * search walks an HNSW graph.
 *
 * As Lucene's quantized HNSW (Lucene99ScalarQuantizedVectorsFormat) does: the walk reads the graph's own
 * copy of the vectors, in memory (USearch's, native), and the stored vectors are read from the directory
 * only for the few candidates being rescored. Keeping our codes in the heap as well would hold every
 * vector twice (at 1M × 384-d i8: 384 MB each). So a set with a graph decoded for an index with a
 * directory writes its codes to a file there and reads rows back at positions: a candidate's row to
 * rescore it, blocks of rows for an exact scan, all of them for a merge or an encode. Sets without a
 * graph (searched by brute force on every query) keep their codes in memory, as does every set of an
 * index without a directory.
 *
 * The file is released (`release`) by whoever owns the set: the index while the set's segment is in it
 * (segmented-index.ts: when a merge or a catch-up drops the segment, or when the index is closed and no
 * reader holds it any more), or a prepared write or merge that was never applied (its `discard`).
 */
import type { Directory, DirectoryFile } from "../directory.js";
import { allocateCodes, bytesPerDimension, type VectorCodes, type VectorStorage } from "./quantize.js";

/** The bytes of one read call (a block of an exact scan, a slice of a full read). */
const BLOCK_BYTES = 1 << 20;
const READ_BYTES = 64 << 20;

/** `count` rows of `dimension` codes of one storage type, in a directory file read at positions. */
export class SpilledCodes {
  /** Elements (count × dimension), as a typed array's length. */
  readonly length: number;
  private readonly rowBytes: number;
  private readonly scratch: VectorCodes;
  private readonly scratchBytes: Uint8Array;

  private constructor(
    private readonly file: DirectoryFile,
    readonly storage: VectorStorage,
    readonly dimension: number,
    readonly count: number,
  ) {
    this.length = count * dimension;
    this.rowBytes = dimension * bytesPerDimension(storage);
    this.scratch = allocateCodes(storage, dimension);
    this.scratchBytes = bytesOf(this.scratch);
  }

  /**
   * Writes `bytes` (count rows of codes, little-endian as in memory) to a new file of `directory`. Null
   * when the directory refuses (the caller keeps the codes in memory then; a warning says why).
   */
  static write(
    directory: Directory,
    bytes: Uint8Array,
    storage: VectorStorage,
    dimension: number,
    count: number,
  ): SpilledCodes | null {
    if (bytes.byteLength !== count * dimension * bytesPerDimension(storage))
      throw new RangeError("spill: the bytes are not count rows of codes");
    let file: DirectoryFile;
    try {
      file = directory.create(bytes);
    } catch (error) {
      process.emitWarning(
        `vector codes kept in memory: writing them to ${directory.location} failed (${(error as Error).message})`,
        { code: "LECTERN_VECTOR_SPILL" },
      );
      return null;
    }
    return new SpilledCodes(file, storage, dimension, count);
  }

  /** Closes the file; reading the codes afterwards throws. */
  release(): void {
    this.file.close();
  }

  /** Document d's codes, in a scratch row that the next `row` call overwrites. */
  row(doc: number): VectorCodes {
    this.file.read(this.scratchBytes, doc * this.rowBytes);
    return this.scratch;
  }

  /**
   * Every row in order, a block at a time: `visit(block, first, rows)` gets rows first … first + rows − 1
   * at the start of `block` (a buffer reused from one block to the next).
   */
  forEachBlock(visit: (block: VectorCodes, first: number, rows: number) => void): void {
    const perBlock = Math.max(1, Math.floor(BLOCK_BYTES / this.rowBytes));
    const block = allocateCodes(this.storage, Math.min(perBlock, this.count) * this.dimension);
    const bytes = bytesOf(block);
    for (let first = 0; first < this.count; first += perBlock) {
      const rows = Math.min(perBlock, this.count - first);
      this.file.read(bytes.subarray(0, rows * this.rowBytes), first * this.rowBytes);
      visit(block, first, rows);
    }
  }

  /** All codes, read into a new array (the caller's to keep, change or transfer). */
  readAll(): VectorCodes {
    const out = allocateCodes(this.storage, this.length);
    const bytes = bytesOf(out);
    for (let at = 0; at < bytes.byteLength; at += READ_BYTES) {
      this.file.read(bytes.subarray(at, Math.min(bytes.byteLength, at + READ_BYTES)), at);
    }
    return out;
  }
}

function bytesOf(array: VectorCodes): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}
