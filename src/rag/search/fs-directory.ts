/**
 * A Directory (directory.ts) of files in one folder of the file system: the server's (VECTOR_SPILL_DIR).
 *
 * A file is unlinked as soon as it is written: its open descriptor keeps it, so a crash or a kill leaves
 * nothing behind, and its room goes back when it is closed (once the index no longer reads it).
 */
import { closeSync, mkdirSync, openSync, readSync, unlinkSync, writeSync } from "node:fs";
import path from "node:path";

import type { Directory, DirectoryFile } from "./directory.js";

/** The bytes of one write call. */
const WRITE_BYTES = 64 << 20;

let fileCounter = 0;

export class FsDirectory implements Directory {
  private constructor(readonly location: string) {}

  /** The directory at `dir`, made if missing (0700: the files are an index's content). */
  static open(dir: string): FsDirectory {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    return new FsDirectory(dir);
  }

  create(bytes: Uint8Array): DirectoryFile {
    const fd = this.openUnlinked();
    try {
      for (let at = 0; at < bytes.byteLength;) {
        const end = Math.min(bytes.byteLength, at + WRITE_BYTES);
        at += writeSync(fd, bytes, at, end - at, at);
      }
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    return new FsFile(fd, bytes.byteLength);
  }

  /** A new file for reading and writing, unlinked at once (module comment). */
  private openUnlinked(): number {
    const file = path.join(
      this.location,
      `vectors-${process.pid}-${++fileCounter}-${Date.now().toString(36)}.codes`,
    );
    let fd: number;
    try {
      fd = openSync(file, "wx+", 0o600);
    } catch (error) {
      // The folder went away under us (a tmp cleaner, a test's cleanup): make it again, once.
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      mkdirSync(this.location, { recursive: true, mode: 0o700 });
      fd = openSync(file, "wx+", 0o600);
    }
    try {
      unlinkSync(file);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    return fd;
  }
}

class FsFile implements DirectoryFile {
  /** -1 once closed: a closed descriptor's number may be another file's by then. */
  private fd: number;

  constructor(
    fd: number,
    readonly byteLength: number,
  ) {
    this.fd = fd;
  }

  read(into: Uint8Array, position: number): void {
    if (this.fd < 0) throw new Error("directory file read after it was closed");
    for (let done = 0; done < into.byteLength;) {
      const read = readSync(this.fd, into, done, into.byteLength - done, position + done);
      if (read === 0) throw new RangeError("directory file read past its end");
      done += read;
    }
  }

  close(): void {
    if (this.fd < 0) return;
    const fd = this.fd;
    this.fd = -1;
    closeSync(fd);
  }
}
