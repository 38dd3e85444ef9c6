/**
 * TieredMergePolicy, after Lucene's: segments are sized by live documents (small ones count as
 * `floorSegmentDocuments`); the index may hold about `segmentsPerTier` segments per size tier (tiers grow
 * by `maxMergeAtOnce`), so the segment count stays logarithmic in the document count. When there are more,
 * the best-scoring run of up to `maxMergeAtOnce` segments of similar size is merged (score: the largest
 * segment's share of the merge, lower is better, favouring merges that reclaim deletes). A segment with
 * more than `deletesPctAllowed` % deleted documents is rewritten on its own.
 */

import type { SegmentInfo } from "../types.js";

export interface TieredMergePolicyOptions {
  segmentsPerTier?: number;
  maxMergeAtOnce?: number;
  floorSegmentDocuments?: number;
  deletesPctAllowed?: number;
}

export class TieredMergePolicy {
  readonly segmentsPerTier: number;
  readonly maxMergeAtOnce: number;
  readonly floorSegmentDocuments: number;
  readonly deletesPctAllowed: number;

  constructor(options: TieredMergePolicyOptions = {}) {
    this.segmentsPerTier = options.segmentsPerTier ?? 10;
    this.maxMergeAtOnce = options.maxMergeAtOnce ?? 10;
    this.floorSegmentDocuments = options.floorSegmentDocuments ?? 1000;
    this.deletesPctAllowed = options.deletesPctAllowed ?? 20;
    if (!(this.segmentsPerTier >= 2)) throw new RangeError("segmentsPerTier must be ≥ 2");
    if (!Number.isInteger(this.maxMergeAtOnce) || this.maxMergeAtOnce < 2) {
      throw new RangeError("maxMergeAtOnce must be an integer ≥ 2");
    }
    if (!(this.floorSegmentDocuments >= 1)) throw new RangeError("floorSegmentDocuments must be ≥ 1");
    if (!(this.deletesPctAllowed >= 0 && this.deletesPctAllowed <= 100)) {
      throw new RangeError("deletesPctAllowed must be within 0 … 100");
    }
  }

  /** Groups of segment ids to merge (disjoint), best first; [] when the index is in shape. */
  findMerges(segments: readonly SegmentInfo[]): number[][] {
    const merges: number[][] = [];
    const live = (s: SegmentInfo): number => s.documentCount - s.deletedCount;
    const size = (s: SegmentInfo): number => Math.max(live(s), this.floorSegmentDocuments);
    // Delete-heavy segments are rewritten alone.
    const remaining: SegmentInfo[] = [];
    for (const segment of segments) {
      const deletedPct =
        segment.documentCount === 0 ? 100 : (100 * segment.deletedCount) / segment.documentCount;
      if (segment.deletedCount > 0 && deletedPct > this.deletesPctAllowed) merges.push([segment.id]);
      else remaining.push(segment);
    }
    // How many segments the index may hold: segmentsPerTier per tier, tiers growing by maxMergeAtOnce.
    let eligible = remaining.slice().sort((a, b) => size(b) - size(a) || a.id - b.id);
    const total = eligible.reduce((sum, s) => sum + size(s), 0);
    let allowed = 0;
    let levelSize = this.floorSegmentDocuments;
    let left = total;
    for (;;) {
      const count = left / levelSize;
      if (count < this.segmentsPerTier) {
        allowed += Math.ceil(count);
        break;
      }
      allowed += this.segmentsPerTier;
      left -= this.segmentsPerTier * levelSize;
      levelSize *= this.maxMergeAtOnce;
    }
    allowed = Math.max(allowed, 1);
    while (eligible.length > allowed) {
      // Best run of consecutive (by size) segments; a merge needs at least two.
      let best: SegmentInfo[] | null = null;
      let bestScore = Infinity;
      for (let start = 0; start + 1 < eligible.length; start++) {
        const run = eligible.slice(start, start + this.maxMergeAtOnce);
        const runSize = run.reduce((sum, s) => sum + size(s), 0);
        const skew = size(run[0] as SegmentInfo) / runSize;
        const documents = run.reduce((sum, s) => sum + s.documentCount, 0);
        const liveRatio = documents === 0 ? 0 : run.reduce((sum, s) => sum + live(s), 0) / documents;
        const score = skew * Math.pow(runSize, 0.05) * liveRatio * liveRatio;
        if (score < bestScore) {
          bestScore = score;
          best = run;
        }
      }
      if (best === null) break;
      merges.push(best.map((s) => s.id));
      const taken = new Set(best);
      eligible = eligible.filter((s) => !taken.has(s));
      // The merged segment will count as one.
      allowed = Math.max(allowed - 1, 1);
    }
    return merges;
  }
}
