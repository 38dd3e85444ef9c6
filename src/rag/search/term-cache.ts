/**
 * TermCache: what the analyzer made of every word an index's writes met (normalised word → term, or
 * stop word), shared by the index's segment writers, plus the term's id in the index's dictionary.
 *
 * Why: a batch of a thousand documents meets tens of thousands of distinct words, nearly all met by earlier
 * batches. Without it every batch would stem them again, look each up in a fresh word table and a fresh
 * term map, and look each term up in the dictionary: a batched ingestion then costs about twice a one-shot
 * build. Here a word is looked up straight from the text (no substring) and leads to a term slot; a segment
 * writer maps slots to its local term ids with an array, not a string map.
 *
 * Bounded: past `limit` words it is emptied, between two segments (slots stay valid while one is built).
 */

import { WordTable } from "./scanner.js";

/** Returned by `word` for a word not in the cache. */
export const UNKNOWN_WORD = -2;
/** A stop word's slot. */
export const STOP_WORD = -1;

export class TermCache {
  /** Normalised word → term slot, or STOP_WORD. */
  readonly words: WordTable;
  private readonly slots = new Map<string, number>();
  /** Slot → term. */
  readonly terms: string[] = [];
  /** Slot → the term's id in the dictionary (−1: not looked up), valid while `dictionaryEpoch` holds. */
  private dictionaryIds = new Int32Array(1024).fill(-1);
  private dictionaryEpoch = -1;
  /** Bumped whenever the cache is emptied: writers holding slots from before must not use them. */
  generation = 0;

  constructor(readonly limit = 200_000) {
    // The table itself never refuses a word: the limit is enforced between segments, by `trim`.
    this.words = new WordTable(Number.MAX_SAFE_INTEGER);
  }

  /** Empties the cache if it holds more than `limit` words (call before a segment is built). */
  trim(): void {
    if (this.words.size <= this.limit) return;
    this.words.clear();
    this.slots.clear();
    this.terms.length = 0;
    this.dictionaryIds = new Int32Array(1024).fill(-1);
    this.generation++;
  }

  /** The slot of `term` (a string that pins no larger one), added if new. */
  slotOf(term: string): number {
    let slot = this.slots.get(term);
    if (slot === undefined) {
      slot = this.terms.length;
      this.terms.push(term);
      this.slots.set(term, slot);
      if (slot >= this.dictionaryIds.length) {
        const grown = new Int32Array(this.dictionaryIds.length * 2).fill(-1);
        grown.set(this.dictionaryIds);
        this.dictionaryIds = grown;
      }
    }
    return slot;
  }

  /**
   * The dictionary id of the term in `slot`, through `lookUp` when not cached. `epoch` is the dictionary's
   * `forgetEpoch`: ids are only reused after a term is forgotten, so cached ids hold while it is unchanged.
   */
  dictionaryId(
    slot: number,
    epoch: number,
    lookUp: (term: string) => number | undefined,
  ): number | undefined {
    if (epoch !== this.dictionaryEpoch) {
      this.dictionaryIds.fill(-1);
      this.dictionaryEpoch = epoch;
    }
    const cached = this.dictionaryIds[slot] ?? -1;
    if (cached >= 0) return cached;
    const id = lookUp(this.terms[slot] ?? "");
    // A term not in the dictionary yet is not cached: the write being prepared may add it.
    if (id !== undefined) this.dictionaryIds[slot] = id;
    return id;
  }
}
