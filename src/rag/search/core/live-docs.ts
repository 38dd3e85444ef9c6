/** Per-segment tombstones: a bitset over local ordinals, allocated on the first delete. */
export class LiveDocs {
  private bits: Uint32Array | null = null;
  private deleted = 0;

  constructor(readonly documentCount: number) {}

  get deletedCount(): number {
    return this.deleted;
  }

  get liveCount(): number {
    return this.documentCount - this.deleted;
  }

  /** The bitset (bit d set = deleted), or null while nothing is deleted (lets loops skip the check). */
  get deletedBits(): Uint32Array | null {
    return this.bits;
  }

  isDeleted(ordinal: number): boolean {
    const bits = this.bits;
    return bits !== null && ((bits[ordinal >>> 5] ?? 0) & (1 << (ordinal & 31))) !== 0;
  }

  /** Marks a document deleted; returns false if it already was. */
  delete(ordinal: number): boolean {
    if (!Number.isInteger(ordinal) || ordinal < 0 || ordinal >= this.documentCount) {
      throw new RangeError(`ordinal ${ordinal} is outside the segment (0 … ${this.documentCount - 1})`);
    }
    if (this.isDeleted(ordinal)) return false;
    this.bits ??= new Uint32Array((this.documentCount + 31) >>> 5);
    this.bits[ordinal >>> 5] = (this.bits[ordinal >>> 5] ?? 0) | (1 << (ordinal & 31));
    this.deleted++;
    return true;
  }

  /** The deleted ordinals, ascending. */
  deletedOrdinals(): Uint32Array {
    const out = new Uint32Array(this.deleted);
    let n = 0;
    for (let d = 0; d < this.documentCount && n < this.deleted; d++) if (this.isDeleted(d)) out[n++] = d;
    return out;
  }
}
