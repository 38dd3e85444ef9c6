/**
 * The index-wide term table: each term string once (term → global id), the live document frequency of
 * every term, and how many segments hold it (a term no segment holds is forgotten and its id reused).
 *
 * Memory (#14: a million chunks hold over a million distinct terms): a `Map<string, number>` plus a
 * `string[]` cost about 100 bytes a term. Here a term whose UTF-16 code units are all below 256 (Latin-1:
 * nearly every term of Latin-script text) is stored as one byte per code unit in a single arena and found
 * through an open-addressing hash table of ids: about 20 bytes a term plus its characters. Other terms
 * (any code unit ≥ 256: CJK, Cyrillic, …) are kept in an ordinary Map.
 */

import { Buffer } from "node:buffer";
import { FNV_OFFSET, FNV_PRIME, hashWord } from "../scanner.js";

/** `starts[id]` of a term kept in the Map, not in the arena. */
const WIDE = 0xffffffff;
const EMPTY = 0;
/** The hash table is grown beyond this load. */
const MAX_LOAD = 0.7;

/** FNV-1a over the code units, then murmur3's fmix32 (linear probing wants well-mixed low bits). */
function hashOf(term: string): number {
  return fmix32(hashWord(term));
}

/** {@link hashOf} of the term stored as bytes[start, end). */
function hashOfBytes(bytes: Uint8Array, start: number, end: number): number {
  let h = FNV_OFFSET;
  for (let i = start; i < end; i++) h = Math.imul(h ^ (bytes[i] ?? 0), FNV_PRIME);
  return fmix32(h);
}

/** Final mix of a 32-bit hash (murmur3's fmix32): spreads FNV-1a's low bits over the table. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * A copy of a string that does not keep a larger string alive (V8 represents substrings of 13+
 * characters as views into their parent; the vocabulary must not pin whole documents).
 */
export function detach(word: string): string {
  if (word.length < 13) return word;
  let copy = "";
  for (let i = 0; i < word.length; i += 4096) {
    const codes: number[] = [];
    const end = Math.min(word.length, i + 4096);
    for (let k = i; k < end; k++) codes.push(word.charCodeAt(k));
    copy += String.fromCharCode(...codes);
  }
  return copy;
}

function isLatin1(term: string): boolean {
  for (let i = 0; i < term.length; i++) if (term.charCodeAt(i) > 0xff) return false;
  return term.length > 0;
}

export class TermDictionary {
  /** Latin-1 terms' code units, one byte each, at [starts[id], starts[id] + lengths[id]). */
  private arena = new Uint8Array(1 << 16);
  private arenaText = Buffer.from(this.arena.buffer);
  private arenaLength = 0;
  /** Arena bytes of forgotten terms (reclaimed by compaction). */
  private garbage = 0;
  private starts = new Uint32Array(1024);
  private lengths = new Uint32Array(1024);
  /** Open addressing, linear probing: id + 1 of an arena term, or EMPTY. */
  private table = new Int32Array(2048);
  private tableCount = 0;
  /** Terms with a code unit ≥ 256, and the empty term. */
  private readonly wide = new Map<string, number>();
  private readonly wideTerms = new Map<number, string>();
  private df = new Uint32Array(1024);
  /** Segments holding each term; 0: the id is not in use. */
  private segmentCounts = new Uint32Array(1024);
  private idCount = 0;
  private readonly freeIds: number[] = [];
  private liveTerms = 0;
  /** Bumped whenever a term is forgotten (its id may then be reused): ids cached elsewhere hold until it changes. */
  forgetEpoch = 0;
  /** Where the last probeAscii ended, and the hash it computed (fields, so that loading allocates nothing). */
  private probedSlot = 0;
  private probedHash = 0;

  /** Distinct terms with live df > 0. */
  get vocabularySize(): number {
    return this.liveTerms;
  }

  idOf(term: string): number | undefined {
    if (!isLatin1(term)) return this.wide.get(term);
    const entry = this.table[this.slotOf(term, hashOf(term))] ?? EMPTY;
    return entry === EMPTY ? undefined : entry - 1;
  }

  termOf(id: number): string {
    if ((this.segmentCounts[id] ?? 0) === 0) throw new Error(`term id ${id} is not in use`);
    const start = this.starts[id] ?? 0;
    if (start === WIDE) return this.wideTerms.get(id) ?? "";
    return this.arenaText.toString("latin1", start, start + (this.lengths[id] ?? 0));
  }

  documentFrequency(id: number): number {
    return this.df[id] ?? 0;
  }

  /** The id of `term`, created if new; counts one more segment holding it. */
  acquire(term: string): number {
    let id: number;
    if (!isLatin1(term)) {
      const known = this.wide.get(term);
      if (known !== undefined) id = known;
      else {
        id = this.newId();
        this.starts[id] = WIDE;
        // Decoded terms are slices of a segment's whole dictionary text: keep a copy, not the text.
        const owned = detach(term);
        this.wide.set(owned, id);
        this.wideTerms.set(id, owned);
      }
    } else {
      const hash = hashOf(term);
      let slot = this.slotOf(term, hash);
      const entry = this.table[slot] ?? EMPTY;
      if (entry !== EMPTY) id = entry - 1;
      else {
        id = this.newId();
        this.store(id, term);
        if ((this.tableCount + 1) / this.table.length > MAX_LOAD) {
          this.growTable();
          slot = this.slotOf(term, hash);
        }
        this.table[slot] = id + 1;
        this.tableCount++;
      }
    }
    this.segmentCounts[id] = (this.segmentCounts[id] ?? 0) + 1;
    return id;
  }

  /**
   * `acquire` with the lookup already done: `known` is `idOf(term)` as of a moment since which the
   * dictionary has not changed (a prepared write checks this with the index version). Batched writes
   * resolve each term of a new segment once, in `prepare`, not again here.
   */
  acquireResolved(term: string, known: number | undefined): number {
    if (known === undefined) return this.acquire(term);
    this.segmentCounts[known] = (this.segmentCounts[known] ?? 0) + 1;
    return known;
  }

  /** {@link TermDictionary.idOf} of the term whose ASCII characters are bytes[start, end): no string is made. */
  idOfAscii(bytes: Uint8Array, start: number, end: number): number | undefined {
    if (end === start) return this.idOf("");
    const id = this.probeAscii(bytes, start, end);
    return id < 0 ? undefined : id;
  }

  /** The id of the ASCII term bytes[start, end), −1 when absent (probedSlot: the slot it has or would take). */
  private probeAscii(bytes: Uint8Array, start: number, end: number): number {
    const length = end - start;
    const hash = (this.probedHash = hashOfBytes(bytes, start, end));
    const { table, arena, starts, lengths } = this;
    const mask = table.length - 1;
    let slot = hash & mask;
    for (; ; slot = (slot + 1) & mask) {
      const entry = table[slot] ?? EMPTY;
      if (entry === EMPTY) {
        this.probedSlot = slot;
        return -1;
      }
      const candidate = entry - 1;
      if (lengths[candidate] !== length) continue;
      const at = starts[candidate] ?? 0;
      let i = 0;
      while (i < length && arena[at + i] === bytes[start + i]) i++;
      if (i === length) {
        this.probedSlot = slot;
        return candidate;
      }
    }
  }

  /**
   * {@link TermDictionary.acquire} of the term whose ASCII characters are bytes[start, end) (a loaded
   * segment's dictionary text): no string is made.
   */
  acquireAscii(bytes: Uint8Array, start: number, end: number): number {
    const length = end - start;
    let id = this.probeAscii(bytes, start, end);
    let slot = this.probedSlot;
    const hash = this.probedHash;
    if (id < 0) {
      if (length === 0) return this.acquire("");
      id = this.newId();
      this.storeBytes(id, bytes, start, end);
      if ((this.tableCount + 1) / this.table.length > MAX_LOAD) {
        this.growTable();
        const grown = this.table;
        slot = hash & (grown.length - 1);
        while (grown[slot] !== EMPTY) slot = (slot + 1) & (grown.length - 1);
      }
      this.table[slot] = id + 1;
      this.tableCount++;
    }
    this.segmentCounts[id] = (this.segmentCounts[id] ?? 0) + 1;
    return id;
  }

  /**
   * One more segment holds each of these terms (all already in use). A tight loop over the counts: a
   * merge's apply retains every term of the merged segment on the event loop.
   */
  retainAll(ids: Uint32Array): void {
    const counts = this.segmentCounts;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] ?? 0;
      const count = counts[id] ?? 0;
      // A term in use is held by at least one segment (acquire counts the first).
      if (count === 0) throw new Error(`term id ${id} is not in use`);
      counts[id] = count + 1;
    }
  }

  /** One segment fewer holds each of these terms; forgets those that no segment holds any more. */
  releaseAll(ids: Uint32Array): void {
    const counts = this.segmentCounts;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] ?? 0;
      const count = (counts[id] ?? 0) - 1;
      if (count < 0) throw new Error(`term id ${id} is not in use`);
      if (count === 0) this.forget(id);
      counts[id] = count;
    }
  }

  addDocumentFrequency(id: number, delta: number): void {
    const before = this.df[id] ?? 0;
    const after = before + delta;
    if (after < 0) throw new Error("term dictionary: negative document frequency");
    this.df[id] = after;
    if (before === 0 && after > 0) this.liveTerms++;
    else if (before > 0 && after === 0) this.liveTerms--;
  }

  /** Called while the id's segment count is still 1 (the caller sets it to 0 afterwards). */
  private forget(id: number): void {
    if ((this.df[id] ?? 0) !== 0) throw new Error("term dictionary: released a term with live documents");
    const start = this.starts[id] ?? 0;
    if (start === WIDE) {
      this.wide.delete(this.wideTerms.get(id) ?? "");
      this.wideTerms.delete(id);
    } else {
      this.removeFromTable(id);
      this.garbage += this.lengths[id] ?? 0;
      this.lengths[id] = 0;
    }
    this.starts[id] = 0;
    this.freeIds.push(id);
    this.forgetEpoch++;
  }

  /** A free id (a forgotten one first), with room in the per-id arrays. */
  private newId(): number {
    const id = this.freeIds.pop() ?? this.idCount++;
    if (id >= this.df.length) {
      // Grows by half: per-id arrays are 16 bytes an id, doubling would leave up to half unused.
      const capacity = Math.max(id + 1, Math.ceil(this.df.length * 1.5));
      const grow = (array: Uint32Array): Uint32Array<ArrayBuffer> => {
        const next = new Uint32Array(capacity);
        next.set(array);
        return next;
      };
      this.df = grow(this.df);
      this.segmentCounts = grow(this.segmentCounts);
      this.starts = grow(this.starts);
      this.lengths = grow(this.lengths);
    }
    return id;
  }

  /** Room for `length` more bytes at the arena's end. */
  private reserve(length: number): void {
    if (this.arenaLength + length > this.arena.length) {
      const live = this.arenaLength - this.garbage;
      if (this.garbage > live) this.compact(live + length);
      else this.resizeArena(Math.max(this.arenaLength + length, Math.ceil(this.arena.length * 1.5)), false);
    }
  }

  private storeBytes(id: number, bytes: Uint8Array, from: number, to: number): void {
    const length = to - from;
    this.reserve(length);
    this.arena.set(bytes.subarray(from, to), this.arenaLength);
    this.starts[id] = this.arenaLength;
    this.lengths[id] = length;
    this.arenaLength += length;
  }

  /** Copies a Latin-1 term's code units into the arena. */
  private store(id: number, term: string): void {
    const length = term.length;
    this.reserve(length);
    const arena = this.arena;
    const start = this.arenaLength;
    for (let i = 0; i < length; i++) arena[start + i] = term.charCodeAt(i);
    this.starts[id] = start;
    this.lengths[id] = length;
    this.arenaLength = start + length;
  }

  /** Rewrites the arena without forgotten terms' bytes, with room for `need` bytes and as much again. */
  private compact(need: number): void {
    this.resizeArena(Math.max(1 << 16, Math.ceil(need * 1.5)), true);
  }

  private resizeArena(capacity: number, dropGarbage: boolean): void {
    const next = new Uint8Array(capacity);
    if (!dropGarbage) next.set(this.arena.subarray(0, this.arenaLength));
    else {
      let length = 0;
      for (let id = 0; id < this.idCount; id++) {
        const start = this.starts[id] ?? 0;
        if ((this.segmentCounts[id] ?? 0) === 0 || start === WIDE) continue;
        const n = this.lengths[id] ?? 0;
        next.set(this.arena.subarray(start, start + n), length);
        this.starts[id] = length;
        length += n;
      }
      this.arenaLength = length;
      this.garbage = 0;
    }
    this.arena = next;
    this.arenaText = Buffer.from(next.buffer);
  }

  /** The slot holding `term`, or the empty slot where it would go. */
  private slotOf(term: string, hash: number): number {
    const { table, arena, starts, lengths } = this;
    const mask = table.length - 1;
    const length = term.length;
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const entry = table[slot] ?? EMPTY;
      if (entry === EMPTY) return slot;
      const id = entry - 1;
      if (lengths[id] !== length) continue;
      const start = starts[id] ?? 0;
      let i = 0;
      while (i < length && arena[start + i] === term.charCodeAt(i)) i++;
      if (i === length) return slot;
    }
  }

  private hashOfId(id: number): number {
    const start = this.starts[id] ?? 0;
    return hashOfBytes(this.arena, start, start + (this.lengths[id] ?? 0));
  }

  private growTable(): void {
    const old = this.table;
    const table = new Int32Array(old.length * 2);
    const mask = table.length - 1;
    for (const entry of old) {
      if (entry === EMPTY) continue;
      let slot = this.hashOfId(entry - 1) & mask;
      while (table[slot] !== EMPTY) slot = (slot + 1) & mask;
      table[slot] = entry;
    }
    this.table = table;
  }

  /** Removes an arena term's entry (backward-shift deletion: no tombstones, probes stay short). */
  private removeFromTable(id: number): void {
    const table = this.table;
    const mask = table.length - 1;
    let slot = this.hashOfId(id) & mask;
    while (table[slot] !== id + 1) {
      if (table[slot] === EMPTY) throw new Error(`term dictionary: term id ${id} is not in the table`);
      slot = (slot + 1) & mask;
    }
    let hole = slot;
    for (let next = (hole + 1) & mask; table[next] !== EMPTY; next = (next + 1) & mask) {
      const entry = table[next] ?? EMPTY;
      const home = this.hashOfId(entry - 1) & mask;
      // The entry may move into the hole unless its home lies cyclically in (hole, next].
      const between = hole <= next ? home > hole && home <= next : home > hole || home <= next;
      if (!between) {
        table[hole] = entry;
        hole = next;
      }
    }
    table[hole] = EMPTY;
    this.tableCount--;
  }
}
