/**
 * Bounded top-k collector: a binary min-heap of (score, key) pairs ("ordinal" below: the document key) in two typed arrays. The root is
 * the weakest hit kept so far, so a candidate only costs one comparison unless it gets in, then O(log k).
 *
 * Order: higher score first; on equal scores the lower ordinal first (deterministic results).
 */

import type { SearchHit } from "./types.js";

export class TopK {
  readonly capacity: number;
  private readonly scores: Float64Array;
  private readonly ordinals: Uint32Array;
  private count = 0;

  /** @param capacity how many hits to keep, an integer ≥ 1 */
  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > 0xffffffff) {
      throw new RangeError(`TopK capacity must be an integer ≥ 1, got ${capacity}`);
    }
    this.capacity = capacity;
    this.scores = new Float64Array(capacity);
    this.ordinals = new Uint32Array(capacity);
  }

  get size(): number {
    return this.count;
  }

  /** Score of the weakest kept hit once full, else -Infinity: candidates must beat it to get in. */
  get threshold(): number {
    return this.count < this.capacity ? -Infinity : (this.scores[0] ?? -Infinity);
  }

  /** Would `offer(ordinal, score)` keep this hit? (Lets callers skip costly checks for hits that lose.) */
  wouldAccept(ordinal: number, score: number): boolean {
    if (this.count < this.capacity) return true;
    const rootScore = this.scores[0] ?? -Infinity;
    return score > rootScore || (score === rootScore && ordinal < (this.ordinals[0] ?? 0));
  }

  /** Offers a hit; returns whether it was kept. */
  offer(ordinal: number, score: number): boolean {
    if (this.count < this.capacity) {
      this.siftUp(this.count++, ordinal, score);
      return true;
    }
    if (!this.wouldAccept(ordinal, score)) return false;
    this.siftDown(0, ordinal, score);
    return true;
  }

  /** The kept hits, best first. Empties the collector. */
  drain(): SearchHit[] {
    const hits: SearchHit[] = new Array<SearchHit>(this.count);
    // Repeatedly pop the weakest hit into the back of the result.
    for (let out = this.count - 1; out >= 0; out--) {
      hits[out] = { key: this.ordinals[0] ?? 0, score: this.scores[0] ?? 0 };
      const last = --this.count;
      if (last > 0) this.siftDown(0, this.ordinals[last] ?? 0, this.scores[last] ?? 0);
    }
    return hits;
  }

  /** True when hit a ranks below hit b (a is "smaller" in the min-heap). */
  private static weaker(scoreA: number, ordinalA: number, scoreB: number, ordinalB: number): boolean {
    return scoreA < scoreB || (scoreA === scoreB && ordinalA > ordinalB);
  }

  private siftUp(index: number, ordinal: number, score: number): void {
    const { scores, ordinals } = this;
    let i = index;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const parentScore = scores[parent] ?? 0;
      const parentOrdinal = ordinals[parent] ?? 0;
      if (!TopK.weaker(score, ordinal, parentScore, parentOrdinal)) break;
      scores[i] = parentScore;
      ordinals[i] = parentOrdinal;
      i = parent;
    }
    scores[i] = score;
    ordinals[i] = ordinal;
  }

  /** Places (ordinal, score) at `index`, replacing what was there, and restores the heap below it. */
  private siftDown(index: number, ordinal: number, score: number): void {
    const { scores, ordinals } = this;
    const n = this.count;
    let i = index;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      let childScore = scores[child] ?? 0;
      let childOrdinal = ordinals[child] ?? 0;
      const right = child + 1;
      if (right < n) {
        const rightScore = scores[right] ?? 0;
        const rightOrdinal = ordinals[right] ?? 0;
        if (TopK.weaker(rightScore, rightOrdinal, childScore, childOrdinal)) {
          child = right;
          childScore = rightScore;
          childOrdinal = rightOrdinal;
        }
      }
      if (!TopK.weaker(childScore, childOrdinal, score, ordinal)) break;
      scores[i] = childScore;
      ordinals[i] = childOrdinal;
      i = child;
    }
    scores[i] = score;
    ordinals[i] = ordinal;
  }
}
