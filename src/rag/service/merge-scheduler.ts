/**
 * The merge scheduler (Lucene's MergeScheduler; the policy that picks is TieredMergePolicy). After a
 * committed write, or a whole load of an index another process wrote, the policy may pick segments
 * to merge; the merge runs on a worker thread (never awaited by the request) and is committed under
 * the index's write exclusion. One merge per index at a time; a merge that lost its base (the index
 * was replaced, deleted, or another replica merged the same segments) is dropped and logged, never
 * breaking the index.
 */
import {
  mergeInBackground,
  type MergeResult,
  type SegmentedIndex,
  type TieredMergePolicy,
} from "../search/index.js";
import type { IndexKey, IndexStore } from "../store/types.js";
import { cacheKey } from "./common.js";
import type { ReaderCache } from "./reader-cache.js";
import type { ServiceStats } from "./stats.js";
import type { ServiceLog } from "./types.js";
import type { WriteExclusion } from "./write-exclusion.js";

export interface MergeSchedulerOptions {
  store: IndexStore;
  readers: ReaderCache;
  exclusion: WriteExclusion;
  stats: ServiceStats;
  policy: TieredMergePolicy;
  log: ServiceLog;
}

export class MergeScheduler {
  /** Per index: its running merge (at most one), settled when that merge is committed or dropped. */
  private readonly merging = new Map<string, Promise<void>>();
  private closing = false;

  constructor(private readonly options: MergeSchedulerOptions) {}

  /** Starts no more merges, and lets none commit; resolves once the running ones settled. */
  async close(): Promise<void> {
    this.closing = true;
    await this.settled();
  }

  /** Resolves once no merge is running (one that finishes may start the next: those are awaited too). */
  async settled(): Promise<void> {
    while (this.merging.size > 0) await Promise.all(this.merging.values());
  }

  /** Running merges of one index. */
  runningOf(key: IndexKey): number {
    return this.merging.has(cacheKey(key)) ? 1 : 0;
  }

  /** Running merges of one tenant's indices (null: of all). */
  runningOfTenant(tenantId: string | null): number {
    let running = 0;
    for (const indexId of this.merging.keys())
      if (tenantId === null || indexId.startsWith(`${tenantId}\u0000`)) running++;
    return running;
  }

  /** Starts the merge the policy picks for an index, unless one is running or the service is closing. */
  schedule(key: IndexKey): void {
    const indexId = cacheKey(key);
    if (this.closing || this.merging.has(indexId)) return;
    if (!this.pick(key)) return;
    const running = (async () => {
      // Taking the merge's snapshot (encoding its segments) is synchronous work: not in the turn of
      // the write that asked for it, whose reply goes out first. The pick is made again then.
      await new Promise((resolve) => setImmediate(resolve));
      const current = this.closing ? undefined : this.pick(key);
      return current ? this.run(key, current.engine, current.segmentIds) : false;
    })().then(
      (committed) => {
        this.merging.delete(indexId);
        // One merge may make the next worthwhile (a tier filled up); a dropped one is not retried.
        if (committed) this.schedule(key);
      },
      (error: unknown) => {
        this.merging.delete(indexId);
        this.options.log.warn({ err: error, index: key.name, tenant: key.tenantId }, "segment merge dropped");
      },
    );
    this.merging.set(indexId, running);
  }

  /** The cached index of `key` and the first merge its policy proposes, if any. */
  private pick(key: IndexKey): { engine: SegmentedIndex; segmentIds: number[] } | undefined {
    const engine = this.options.readers.cachedEngine(key);
    const segmentIds = engine ? this.options.policy.findMerges(engine.segments())[0] : undefined;
    return engine && segmentIds && segmentIds.length > 0 ? { engine, segmentIds } : undefined;
  }

  /**
   * Merges segments on a worker thread, then commits the merge under the index's write exclusion.
   * False when it was not committed (the service closing, or nothing left to commit it to: logged).
   */
  private async run(key: IndexKey, engine: SegmentedIndex, segmentIds: number[]): Promise<boolean> {
    // Held while the snapshot reads the segments (across event-loop turns), as a query holds it.
    const lease = engine.acquire();
    let result: MergeResult;
    try {
      result = await mergeInBackground(engine, segmentIds);
    } finally {
      lease.release();
    }
    if (this.closing) return false;
    const outcome = await this.options.exclusion.once(key, () =>
      this.options.readers.mutate(key, () => this.commitLocked(key, engine, result)),
    );
    if (outcome !== "committed" && outcome !== "closing") {
      this.options.log.warn(
        { index: key.name, tenant: key.tenantId, segmentIds },
        `segment merge dropped: ${outcome}`,
      );
    }
    return outcome === "committed";
  }

  /**
   * Commits a merge only if the cached index is still the one it merged (not replaced, reloaded or
   * deleted), caught up with other writers: "committed", else why not. Under the writers' and mutation lock.
   */
  private async commitLocked(key: IndexKey, engine: SegmentedIndex, result: MergeResult): Promise<string> {
    const { store, readers } = this.options;
    if (this.closing) return "closing";
    if (readers.cachedEngine(key) !== engine) return "the index was replaced, reloaded or deleted";
    const meta = await store.getMeta(key);
    if (!meta) return "the index was deleted";
    const base = await readers.baseLocked(key, meta);
    if (base.engine !== engine) return "the index was reloaded";
    const validity = readers.validity(key);
    const prepared = engine.prepareMerge(result);
    let committed;
    try {
      committed = await store.commitMerge({
        key,
        expectedVersion: meta.version,
        removedSegmentIds: [...prepared.removedSegmentIds],
        segment: prepared.segment,
        tombstones: [...prepared.tombstones],
        engine: { ...prepared.state, totalLength: engine.totalLength },
      });
    } catch (error) {
      prepared.discard(); // its merged segment's file, if any: nothing will read it
      throw error;
    }
    readers.applyCommitted(key, engine, prepared, committed, validity);
    this.options.stats.countSegments(key, { mergesCompleted: 1 });
    return "committed";
  }
}
