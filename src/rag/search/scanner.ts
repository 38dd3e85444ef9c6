/**
 * The word segmentation of the analyzer as a hand-written scanner: the same words as the UAX #29-style
 * regex in analyzer.ts (`TOKEN_PATTERN`, kept there as the specification and checked against this in
 * the tests), found without a regex, and with a hash of every word computed on the way so that the index
 * builder can look words up without cutting them out of the text ({@link WordTable}).
 *
 * A word is a run of word characters (letters, marks, digits, connector punctuation: \p{L}\p{M}\p{N}\p{Pc}),
 * possibly joined by one "mid" character: `' ’ . : ·` between a letter or mark and a letter ("don't",
 * "e.g"), `. , ; ' ’` between digits ("3.5", "1,000"). The input must already be NFKC-normalised and
 * lower-cased (the scanner does not change characters).
 */

const LETTER = 1;
const MARK = 2;
const DIGIT = 4;
const CONNECTOR = 8;
const KNOWN = 16;
const WORD_CHARACTER = LETTER | MARK | DIGIT | CONNECTOR;
/** Not a class: set by `classAt` on a character of two code units. */
const WIDE = 32;

const IS_LETTER = /^\p{L}$/u;
const IS_MARK = /^\p{M}$/u;
const IS_DIGIT = /^\p{N}$/u;
const IS_CONNECTOR = /^\p{Pc}$/u;

/** Character classes of the BMP, filled lazily (0 = not yet looked at); astral ones in a map. */
const bmpClasses = new Uint8Array(0x10000);
const astralClasses = new Map<number, number>();

function classify(codePoint: number): number {
  const ch = String.fromCodePoint(codePoint);
  return (
    KNOWN |
    (IS_LETTER.test(ch) ? LETTER : 0) |
    (IS_MARK.test(ch) ? MARK : 0) |
    (IS_DIGIT.test(ch) ? DIGIT : 0) |
    (IS_CONNECTOR.test(ch) ? CONNECTOR : 0)
  );
}

for (let c = 0; c < 0x80; c++) bmpClasses[c] = classify(c);

function classOf(codePoint: number): number {
  if (codePoint < 0x10000) {
    const known = bmpClasses[codePoint] ?? 0;
    if (known !== 0) return known;
    const computed = classify(codePoint);
    bmpClasses[codePoint] = computed;
    return computed;
  }
  let known = astralClasses.get(codePoint);
  if (known === undefined) astralClasses.set(codePoint, (known = classify(codePoint)));
  return known;
}

export const FNV_OFFSET = 0x811c9dc5;
export const FNV_PRIME = 0x01000193;

/**
 * Iterates over the words of a text: `reset(text)`, then `while (scanner.next())` read `start`, `end`
 * (UTF-16 offsets) and `hash` (FNV-1a of the UTF-16 code units).
 */
export class WordScanner {
  start = 0;
  end = 0;
  hash = 0;
  private text = "";
  private position = 0;

  reset(text: string): void {
    this.text = text;
    this.position = 0;
  }

  next(): boolean {
    const text = this.text;
    const length = text.length;
    let i = this.position;
    // Skip to the first word character.
    let kind = 0;
    while (i < length) {
      kind = classAt(text, i);
      if ((kind & WORD_CHARACTER) !== 0) break;
      i += (kind & WIDE) !== 0 ? 2 : 1;
    }
    if (i >= length) {
      this.position = length;
      return false;
    }
    const start = i;
    let hash = FNV_OFFSET;
    let previousKind = 0;
    for (;;) {
      // A run of word characters; `kind` describes the character at i.
      while ((kind & WORD_CHARACTER) !== 0) {
        hash = Math.imul(hash ^ text.charCodeAt(i), FNV_PRIME);
        if ((kind & WIDE) !== 0) hash = Math.imul(hash ^ text.charCodeAt(++i), FNV_PRIME);
        i++;
        previousKind = kind;
        if (i >= length) {
          kind = 0;
          break;
        }
        kind = classAt(text, i);
      }
      // At i: a non-word character (or the end). A mid character joins two runs.
      if (i + 1 >= length) break;
      const mid = text.charCodeAt(i);
      const nextKind = classAt(text, i + 1);
      const joins =
        ((previousKind & (LETTER | MARK)) !== 0 &&
          (nextKind & LETTER) !== 0 &&
          (mid === 0x27 || mid === 0x2019 || mid === 0x2e || mid === 0x3a || mid === 0xb7)) ||
        ((previousKind & DIGIT) !== 0 &&
          (nextKind & DIGIT) !== 0 &&
          (mid === 0x2e || mid === 0x2c || mid === 0x3b || mid === 0x27 || mid === 0x2019));
      if (!joins) break;
      hash = Math.imul(hash ^ mid, FNV_PRIME);
      i++;
      kind = nextKind;
    }
    this.start = start;
    this.end = i;
    this.hash = hash >>> 0;
    this.position = i;
    return true;
  }
}

/** The class of the character at i, with WIDE when it takes two code units (an astral code point). */
function classAt(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c < 0x80) return bmpClasses[c] ?? 0;
  const codePoint = codePointAt(text, i, c);
  return codePoint > 0xffff ? classOf(codePoint) | WIDE : classOf(codePoint);
}

/** The code point at i, given its first code unit c (a lone surrogate stands for itself). */
function codePointAt(text: string, i: number, c: number): number {
  if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
    const low = text.charCodeAt(i + 1);
    if (low >= 0xdc00 && low <= 0xdfff) return ((c - 0xd800) << 10) + (low - 0xdc00) + 0x10000;
  }
  return c;
}

/** The words of an NFKC-normalised, lower-cased text. */
export function scanWords(text: string): string[] {
  const scanner = new WordScanner();
  scanner.reset(text);
  const words: string[] = [];
  while (scanner.next()) words.push(text.slice(scanner.start, scanner.end));
  return words;
}

/** FNV-1a of a whole string, as {@link WordScanner} computes it for a word. */
export function hashWord(word: string): number {
  let hash = FNV_OFFSET;
  for (let i = 0; i < word.length; i++) hash = Math.imul(hash ^ word.charCodeAt(i), FNV_PRIME);
  return hash >>> 0;
}

/** Stored values are offset by this, so that 0 means "empty" (values must be ≥ −1). */
const OCCUPIED = 2;

/**
 * Open-addressing hash table: word → integer, looked up by a range of a text (no substring is made).
 * Grows by doubling up to `limit` words; `set` returns false when that many are held (the caller clears
 * it). Each slot is [hash, value, offset, length] in one Int32Array, and the words' characters are kept
 * in one Uint16Array pool in insertion order, so frequent words (seen first) sit together: a lookup
 * touches a slot and a few pool entries, never a string object scattered over the heap.
 */
export class WordTable {
  private entries = new Int32Array(0);
  private pool = new Uint16Array(1 << 12);
  private poolLength = 0;
  private mask = 0;
  private count = 0;

  /** @param limit how many words it holds at most */
  constructor(readonly limit: number) {
    this.allocate(1024);
  }

  get size(): number {
    return this.count;
  }

  private allocate(capacity: number): void {
    this.entries = new Int32Array(capacity * 4);
    this.mask = capacity - 1;
  }

  /** The value for text[start, end) with hash `hash` (from the scanner), or `missing`. */
  get(text: string, start: number, end: number, hash: number, missing: number): number {
    const length = end - start;
    const { entries, mask, pool } = this;
    const h = hash | 0;
    for (let slot = h & mask; ; slot = (slot + 1) & mask) {
      const e = 4 * slot;
      const stored = entries[e + 1] ?? 0;
      if (stored === 0) return missing;
      if (entries[e] !== h || entries[e + 3] !== length) continue;
      const offset = entries[e + 2] ?? 0;
      let k = 0;
      while (k < length && pool[offset + k] === text.charCodeAt(start + k)) k++;
      if (k === length) return stored - OCCUPIED;
    }
  }

  /** Adds a word that is not in the table (value ≥ −1); false (and nothing added) when the table is full. */
  set(word: string, hash: number, value: number): boolean {
    if (value < -1) throw new RangeError("WordTable values must be ≥ −1");
    if (this.count >= this.limit) return false;
    if (2 * (this.count + 1) > this.entries.length / 4) {
      const old = this.entries;
      this.allocate((old.length / 4) * 2);
      for (let e = 0; e < old.length; e += 4) {
        if (old[e + 1] !== 0) this.insert(old[e] ?? 0, old[e + 1] ?? 0, old[e + 2] ?? 0, old[e + 3] ?? 0);
      }
    }
    if (this.poolLength + word.length > this.pool.length) {
      const next = new Uint16Array(Math.max(this.pool.length * 2, this.poolLength + word.length));
      next.set(this.pool.subarray(0, this.poolLength));
      this.pool = next;
    }
    const offset = this.poolLength;
    for (let i = 0; i < word.length; i++) this.pool[offset + i] = word.charCodeAt(i);
    this.poolLength += word.length;
    this.insert(hash | 0, value + OCCUPIED, offset, word.length);
    this.count++;
    return true;
  }

  private insert(hash: number, stored: number, offset: number, length: number): void {
    const { entries, mask } = this;
    let slot = hash & mask;
    while (entries[4 * slot + 1] !== 0) slot = (slot + 1) & mask;
    const e = 4 * slot;
    entries[e] = hash;
    entries[e + 1] = stored;
    entries[e + 2] = offset;
    entries[e + 3] = length;
  }

  clear(): void {
    this.allocate(1024);
    this.pool = new Uint16Array(1 << 12);
    this.poolLength = 0;
    this.count = 0;
  }
}
