/**
 * Disk-full handling of the SQLite store (issue #23): a slack file of DISK_RESERVE_BYTES beside the
 * database, written (not sparse) while there is room. Writes that add data go ahead only while the
 * slack is in place; when the disk fills, a delete that fails for lack of space releases the slack
 * and runs again in the room it leaves, so deleting stays possible on a full disk and nothing
 * committed is lost. The slack is put back as soon as there is room again. Its blocks are taken when
 * written (no fsync needed: file systems account for space at write time, ENOSPC comes then).
 */
import fs from "node:fs";
import path from "node:path";
import { isStorageFull, storageFull } from "../../core/errors.js";

/** Written in pieces so that a nearly full disk fails early, not after a large allocation. */
const PIECE = 1024 * 1024;

export class StorageReserve {
  private present = false;
  /** A write failed for lack of room since the last reclaim: the next delete gives room back. */
  private tight = false;

  constructor(
    readonly file: string,
    readonly bytes: number,
  ) {}

  /** Puts the slack in place if it is not; false when the disk has no room for it. */
  ensure(): boolean {
    if (this.bytes === 0 || this.present) return true;
    try {
      const have = fs.statSync(this.file, { throwIfNoEntry: false })?.size ?? 0;
      if (have < this.bytes) {
        const fd = fs.openSync(this.file, "a");
        try {
          const zeros = Buffer.alloc(Math.min(PIECE, this.bytes));
          for (let written = have; written < this.bytes;) {
            const n = Math.min(zeros.length, this.bytes - written);
            fs.writeSync(fd, zeros, 0, n);
            written += n;
          }
        } finally {
          fs.closeSync(fd);
        }
      }
      this.present = true;
      return true;
    } catch (error) {
      if (!isStorageFull(error)) throw error;
      // Whatever part was written stays: it is slack a later delete can release too.
      return false;
    }
  }

  /** Frees the slack's room for a delete. */
  release(): void {
    fs.rmSync(this.file, { force: true });
    this.present = false;
  }

  /** Bytes free on the file system of the slack file, for this process. */
  private freeBytes(): number {
    const info = fs.statfsSync(path.dirname(this.file));
    return info.bavail * info.bsize;
  }

  /**
   * Runs a write that adds data: refused (507) while the slack cannot be put in place, or while less
   * than its size is free besides it (the room a delete's WAL frames need, kept free as a
   * watermark: writes stop before the disk is full, as Elasticsearch's flood stage does).
   */
  guardWrite<T>(run: () => T): T {
    this.checkRoom();
    try {
      return run();
    } catch (error) {
      if (isStorageFull(error)) this.tight = true;
      throw error;
    }
  }

  /** guardWrite for a write that completes later (one committed on another thread). */
  async guardWriteAsync<T>(run: () => Promise<T>): Promise<T> {
    this.checkRoom();
    try {
      return await run();
    } catch (error) {
      if (isStorageFull(error)) this.tight = true;
      throw error;
    }
  }

  private checkRoom(): void {
    if (!this.ensure()) throw storageFull("the slack kept for deletes cannot be put back");
    if (this.bytes > 0 && this.freeBytes() < this.bytes) {
      this.tight = true;
      throw storageFull(`less than DISK_RESERVE_BYTES (${this.bytes}) free`);
    }
  }

  /**
   * Runs a delete; if the disk is full, once more after releasing the slack. `reclaim` then gives
   * freed room back to the file system (checkpoint, incremental vacuum) so the slack may return.
   */
  guardDelete<T>(run: () => T, reclaim: () => void): T {
    let result: T;
    try {
      result = run();
    } catch (error) {
      if (!isStorageFull(error) || this.bytes === 0) throw error;
      this.release();
      result = run();
    }
    // Without a reserve (DISK_RESERVE_BYTES=0) there is nothing to put back: no reclaim.
    if (this.bytes > 0 && (this.tight || !this.present || this.freeBytes() < this.bytes)) {
      // The checkpoint inside reclaim copies the WAL into the database file first, which may need
      // room too: the slack's, put back right after.
      this.release();
      try {
        reclaim();
        this.tight = false;
      } catch (error) {
        if (!isStorageFull(error)) throw error;
      }
      this.ensure();
    }
    return result;
  }
}
