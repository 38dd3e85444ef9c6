/**
 * Stored codes kept on disk rather than in memory, for segments whose search walks an HNSW graph.
 *
 * As Lucene's quantized HNSW (Lucene99ScalarQuantizedVectorsFormat) does: the walk reads the graph's own
 * copy of the vectors, in memory (USearch's, native), and the stored vectors are read from disk only for
 * the few candidates being rescored. Keeping our codes in the heap as well would hold every vector twice
 * (at 1M × 384-d i8: 384 MB each). So a set with a graph writes its codes to a spill file and reads rows
 * back with positioned reads: a candidate's row to rescore it, blocks of rows for an exact scan, all of
 * them for a merge or an encode. Sets without a graph (searched by brute force on every query) keep their
 * codes in memory, as does every set while no spill directory is configured (the default).
 *
 * A spill file is unlinked as soon as it is created: the open descriptor keeps it, and a crash or kill
 * leaves nothing behind. The descriptor is closed when its set is garbage collected (FinalizationRegistry):
 * segments are shared by index versions, and a query may search an old version after an await, so no
 * point in the code knows that a set is read for the last time.
 */
import { close, mkdirSync, openSync, readSync, unlinkSync, writeSync } from "node:fs";
import path from "node:path";

import { allocateCodes, bytesPerDimension, type VectorCodes, type VectorStorage } from "./quantize.js";

let spillDir: string | null = null;
let spillCounter = 0;

/**
 * Where sets with a graph put their codes from now on (null: in memory, the default). Creates the
 * directory (0700: the codes are the index's content). Sets decoded before keep their codes where they are.
 */
export function configureVectorSpill(dir: string | null): void {
  if (dir !== null) mkdirSync(dir, { recursive: true, mode: 0o700 });
  spillDir = dir;
}

export function vectorSpillDir(): string | null {
  return spillDir;
}

/** The bytes of one read or write call (a block of an exact scan, a slice of a write). */
const BLOCK_BYTES = 1 << 20;
const WRITE_BYTES = 64 << 20;

const descriptors = new FinalizationRegistry<number>((fd) => close(fd, () => undefined));

/** Opens a new file in `dir` for reading and writing and unlinks it at once (module comment). */
function openUnlinked(dir: string): number {
  const file = path.join(dir, `vectors-${process.pid}-${++spillCounter}-${Date.now().toString(36)}.codes`);
  let fd: number;
  try {
    fd = openSync(file, "wx+", 0o600);
  } catch (error) {
    // The directory went away under us (a tmp cleaner, a test's cleanup): make it again, once.
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    fd = openSync(file, "wx+", 0o600);
  }
  try {
    unlinkSync(file);
  } catch (error) {
    close(fd, () => undefined);
    throw error;
  }
  return fd;
}

/** `count` rows of `dimension` codes of one storage type, in an unlinked file read with positioned reads. */
export class SpilledCodes {
  /** Elements (count × dimension), as a typed array's length. */
  readonly length: number;
  private readonly rowBytes: number;
  private readonly scratch: VectorCodes;
  private readonly scratchBytes: Uint8Array;

  private constructor(
    private readonly fd: number,
    readonly storage: VectorStorage,
    readonly dimension: number,
    readonly count: number,
  ) {
    this.length = count * dimension;
    this.rowBytes = dimension * bytesPerDimension(storage);
    this.scratch = allocateCodes(storage, dimension);
    this.scratchBytes = bytesOf(this.scratch);
    descriptors.register(this, fd);
  }

  /**
   * Writes `bytes` (count rows of codes, little-endian as in memory) to a new spill file in the configured
   * directory. Null when none is configured, or when the disk refuses (the caller keeps the codes in
   * memory then; a warning says why).
   */
  static write(
    bytes: Uint8Array,
    storage: VectorStorage,
    dimension: number,
    count: number,
  ): SpilledCodes | null {
    const dir = spillDir;
    if (dir === null) return null;
    if (bytes.byteLength !== count * dimension * bytesPerDimension(storage))
      throw new RangeError("spill: the bytes are not count rows of codes");
    let fd = -1;
    try {
      fd = openUnlinked(dir);
      for (let at = 0; at < bytes.byteLength;) {
        const end = Math.min(bytes.byteLength, at + WRITE_BYTES);
        at += writeSync(fd, bytes, at, end - at, at);
      }
    } catch (error) {
      if (fd >= 0) close(fd, () => undefined);
      process.emitWarning(
        `vector codes kept in memory: writing them to ${dir} failed (${(error as Error).message})`,
        { code: "LECTERN_VECTOR_SPILL" },
      );
      return null;
    }
    return new SpilledCodes(fd, storage, dimension, count);
  }

  /** Document d's codes, in a scratch row that the next `row` call overwrites. */
  row(doc: number): VectorCodes {
    this.readAt(this.scratchBytes, doc * this.rowBytes);
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
      this.readAt(bytes.subarray(0, rows * this.rowBytes), first * this.rowBytes);
      visit(block, first, rows);
    }
  }

  /** All codes, read into a new array (the caller's to keep, change or transfer). */
  readAll(): VectorCodes {
    const out = allocateCodes(this.storage, this.length);
    const bytes = bytesOf(out);
    for (let at = 0; at < bytes.byteLength; at += WRITE_BYTES) {
      this.readAt(bytes.subarray(at, Math.min(bytes.byteLength, at + WRITE_BYTES)), at);
    }
    return out;
  }

  private readAt(into: Uint8Array, position: number): void {
    for (let done = 0; done < into.byteLength;) {
      const read = readSync(this.fd, into, done, into.byteLength - done, position + done);
      if (read === 0) throw new Error("vector spill file ends before its codes do");
      done += read;
    }
  }
}

function bytesOf(array: VectorCodes): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}
