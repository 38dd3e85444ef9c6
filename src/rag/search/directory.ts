/**
 * The engine's storage port (Tantivy's `Directory`): where an index keeps what it does not hold in the
 * heap. It is given in the index's options (`SearchIndexOptions.directory`), so the engine does no I/O
 * of its own and each index, test or tool chooses its own directory, or none (everything in memory).
 * Today it holds the stored vector codes of segments whose search walks an HNSW graph
 * (vectors/spill.ts). fs-directory.ts keeps them in files; RamDirectory, below, in the heap (tests).
 *
 * Reads are synchronous: a search rescores its graph walk's candidates inside one synchronous call (so
 * that no write or merge changes the index under it), a row at a time.
 */
export interface Directory {
  /** Where the files go, for messages. */
  readonly location: string;
  /**
   * A new file holding a copy of `bytes`. Throws when the directory cannot take them (no room, not
   * writable); the caller then keeps the bytes in memory.
   */
  create(bytes: Uint8Array): DirectoryFile;
}

/** An immutable file of a Directory, open until closed. */
export interface DirectoryFile {
  readonly byteLength: number;
  /** Fills `into` with the file's bytes from `position`; throws past its end, or once closed. */
  read(into: Uint8Array, position: number): void;
  /** Gives the file's room back (descriptor, memory); later calls do nothing. */
  close(): void;
}

/** A Directory in the heap: for tests, which count the files left open. */
export class RamDirectory implements Directory {
  readonly location = "memory";
  private readonly open = new Set<RamFile>();

  create(bytes: Uint8Array): DirectoryFile {
    const file = new RamFile(bytes.slice(), (closed) => this.open.delete(closed));
    this.open.add(file);
    return file;
  }

  /** Files created and not closed yet. */
  get openFiles(): number {
    return this.open.size;
  }
}

class RamFile implements DirectoryFile {
  private bytes: Uint8Array | null;
  readonly byteLength: number;

  constructor(
    bytes: Uint8Array,
    private readonly onClose: (file: RamFile) => void,
  ) {
    this.bytes = bytes;
    this.byteLength = bytes.byteLength;
  }

  read(into: Uint8Array, position: number): void {
    if (this.bytes === null) throw new Error("directory file read after it was closed");
    if (position < 0 || position + into.byteLength > this.byteLength)
      throw new RangeError("directory file read past its end");
    into.set(this.bytes.subarray(position, position + into.byteLength));
  }

  close(): void {
    if (this.bytes === null) return;
    this.bytes = null;
    this.onClose(this);
  }
}
