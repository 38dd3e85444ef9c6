/**
 * The reader cache (Lucene's SearcherManager, Tantivy's IndexReader and its reload policy): one loaded
 * engine index per index (a SegmentedIndex: postings and statistics only), kept current with the store.
 *
 * Validity. With a store that has no change feed (SQLite), every query asks the store for the index's
 * version (a microsecond there) and catches up when it changed. With a change feed (PostgreSQL
 * LISTEN/NOTIFY, shared by replicas), a cached index is served with no round trip while the feed is
 * live and nothing was announced for it since it was validated; an announcement makes it untrusted,
 * and while the feed is down (or after it reconnects, for what was validated before) the per-query
 * version check is back. A stale cached index catches up with what changed since its version
 * (`loadChanges`: new segments, dropped segment ids, new tombstones), never a whole reload, unless the
 * index was recreated in between.
 *
 * Mutations. A cached SegmentedIndex is changed in place (a write's `apply`, a catch-up, a merge), each
 * a synchronous step, so a query's search never sees half of one. They are serialised per index by a
 * lock (`mutations`) that queries take only when they must catch up, so a query never waits behind
 * writers queued for the store's lock: refresh is off the path of a query that finds its index current.
 *
 * Lifetime (SearcherManager's acquire/release). The cache owns each engine it holds and closes it when
 * it lets it go (replaced by a whole load or a new build, forgotten, failed, or the cache closed); a
 * query `acquire`s the served engine and releases it when done, so an engine let go in the middle of a
 * query keeps its files (vector codes in the directory) until that query is over, and no longer.
 */
import { KeyedMutex } from "../../core/keyed-mutex.js";
import {
  SegmentedIndex,
  type Directory,
  type IndexLease,
  type PreparedMerge,
  type PreparedWrite,
} from "../search/index.js";
import { StaleVersionError, internal } from "../store/common.js";
import type { ChangeFeed, IndexChange, IndexKey, IndexMeta, IndexStore } from "../store/types.js";
import { cacheKey, engineOptionsOf, engineStateOf, indexNotFound } from "./common.js";
import { commitLegacyReindex, isLegacy } from "./legacy.js";
import type { ServiceStats } from "./stats.js";
import type { LoadedIndex, ServiceLog } from "./types.js";
import type { WriteExclusion } from "./write-exclusion.js";

/** An index of the old format, found while loading: re-indexed under the writers' exclusion. */
const LEGACY = Symbol("legacy index");

/** A loaded index and what it was validated against (see "Validity" above). */
interface CacheEntry {
  loaded: LoadedIndex;
  /** Feed epoch the version was validated in; null when the feed was not live. */
  epoch: number | null;
  /** The index's change stamp when validated. */
  stamp: number;
}

export type Validity = Omit<CacheEntry, "loaded">;

export interface ReaderCacheOptions {
  store: IndexStore;
  exclusion: WriteExclusion;
  stats: ServiceStats;
  log: ServiceLog;
  /** An index was loaded whole: one written by another process may be waiting for a merge. */
  onLoadedWhole: (key: IndexKey) => void;
  /** Where loaded indices keep vector codes (RagServiceOptions.vectorDirectory); none: memory. */
  directory?: Directory;
}

export class ReaderCache {
  private readonly cache = new Map<string, CacheEntry>();
  /** Per index: bumped by each announced change that invalidates the cached version. */
  private readonly stamps = new Map<string, number>();
  private changeCount = 0;
  readonly feed: ChangeFeed | null;
  /** Serialises in-place changes of a cached engine index (see "Mutations" above). */
  private readonly mutations = new KeyedMutex();
  private readonly store: IndexStore;

  constructor(private readonly options: ReaderCacheOptions) {
    this.store = options.store;
    this.feed = this.store.subscribe ? this.store.subscribe((change) => this.changed(change)) : null;
  }

  /** Stops listening to the store's changes and lets every loaded index go. */
  close(): void {
    this.feed?.close();
    for (const indexId of [...this.cache.keys()]) this.drop(indexId);
  }

  /** How many indices are loaded. */
  get size(): number {
    return this.cache.size;
  }

  /** The cached engine index of `key`, whatever its version. */
  cachedEngine(key: IndexKey): SegmentedIndex | undefined {
    return this.cache.get(cacheKey(key))?.loaded.engine;
  }

  /** Forgets an index (deleted): it is loaded again when next used. */
  forget(key: IndexKey): void {
    this.drop(cacheKey(key));
  }

  /**
   * The served version of an index (`load`), held for a reader until it releases the lease: its files
   * stay open through the reader's awaits even if the cache lets the engine go meanwhile.
   */
  async acquire(key: IndexKey): Promise<{ loaded: LoadedIndex; lease: IndexLease }> {
    for (;;) {
      const loaded = await this.load(key);
      // Let go (and released) between the load and now: load what replaced it.
      if (!loaded.engine.released) return { loaded, lease: loaded.engine.acquire() };
    }
  }

  /** Runs an in-place change of an index's cached engine, alone among its changes. */
  mutate<T>(key: IndexKey, work: () => Promise<T>): Promise<T> {
    return this.mutations.run(cacheKey(key), work);
  }

  /**
   * The served version of an index: from the cache while it is known current (announced changes, or
   * the store's version unchanged), else brought up to the store's version (catch-up or load).
   */
  async load(key: IndexKey): Promise<LoadedIndex> {
    const indexId = cacheKey(key);
    for (;;) {
      const cached = this.cache.get(indexId);
      if (cached && this.trusted(indexId, cached)) return cached.loaded;
      // Captured before reading the store: an announcement arriving meanwhile makes the entry untrusted.
      const validity = this.validity(key);
      const meta = await this.store.getMeta(key);
      if (!meta) {
        this.drop(indexId);
        throw indexNotFound(key);
      }
      if (cached && cached.loaded.meta.version === meta.version) {
        // Unless a write or a catch-up replaced the entry meanwhile: it is newer then.
        if (this.cache.get(indexId) === cached) this.remember(indexId, cached.loaded, validity);
        return cached.loaded;
      }
      const loaded = await this.mutations.run(indexId, () => this.refreshLocked(key, meta, validity));
      if (loaded !== LEGACY) return loaded;
      // Re-indexing is a write: under the writers' exclusion, then served as any other version.
      await this.options.exclusion.withRetries(key, () =>
        this.mutations.run(indexId, () => this.reindexLegacyLocked(key)),
      );
    }
  }

  /** What a cached entry made now is validated against: the feed's epoch and the index's stamp. */
  validity(key: IndexKey): Validity {
    const indexId = cacheKey(key);
    return { epoch: this.feed?.live ? this.feed.epoch : null, stamp: this.stamps.get(indexId) ?? 0 };
  }

  /**
   * Exactly the store's current version of an index, the base of a write (under the writers' and the
   * mutation lock); a different version after catching up means another writer got in first (stale).
   * An index of the old format is re-indexed first, and that version is the base.
   */
  async baseLocked(key: IndexKey, meta: IndexMeta): Promise<LoadedIndex> {
    const loaded = await this.refreshLocked(key, meta, this.validity(key));
    if (loaded === LEGACY) return this.reindexLegacyLocked(key);
    if (loaded.meta.version !== meta.version) {
      throw new StaleVersionError(key, loaded.meta.version, meta.version);
    }
    return loaded;
  }

  /** Makes a committed write visible in the cache; if that fails, the index is reloaded when next used. */
  applyCommitted(
    key: IndexKey,
    engine: SegmentedIndex,
    prepared: PreparedWrite | PreparedMerge,
    meta: IndexMeta,
    validity: Validity,
  ): LoadedIndex {
    const indexId = cacheKey(key);
    const loaded: LoadedIndex = { meta, engine };
    try {
      prepared.apply();
      this.remember(indexId, loaded, validity);
    } catch (error) {
      // Committed in the store but not applied here: the cached index is behind it, so drop it.
      prepared.discard();
      engine.close();
      this.drop(indexId);
      this.options.log.warn(
        { err: error, index: key.name, tenant: key.tenantId },
        "committed change not applied",
      );
    }
    return loaded;
  }

  /** An announced change: untrust the cached index unless it already is that version or newer. */
  private changed(change: IndexChange): void {
    const indexId = cacheKey(change);
    const cached = this.cache.get(indexId);
    if (cached && change.version !== null && cached.loaded.meta.version >= change.version) return;
    if (change.version === null) this.drop(indexId);
    this.stamps.set(indexId, ++this.changeCount);
  }

  /** Whether a cached entry may be served without asking the store. */
  private trusted(indexId: string, entry: CacheEntry): boolean {
    const feed = this.feed;
    return (
      feed !== null &&
      feed.live &&
      entry.epoch === feed.epoch &&
      entry.stamp === (this.stamps.get(indexId) ?? 0)
    );
  }

  /** Caches a served version; an engine it replaces is let go (closed: see "Lifetime" above). */
  private remember(indexId: string, loaded: LoadedIndex, validity: Validity): void {
    const before = this.cache.get(indexId)?.loaded.engine;
    this.cache.set(indexId, { loaded, ...validity });
    if (before !== undefined && before !== loaded.engine) before.close();
  }

  /** Forgets an index's cached engine and lets it go. */
  private drop(indexId: string): void {
    const entry = this.cache.get(indexId);
    this.cache.delete(indexId);
    entry?.loaded.engine.close();
  }

  /**
   * Brings the cached index to at least `meta.version` (holding the index's mutation lock): nothing
   * when another caller already did, a catch-up from the store's changes when the cached index is an
   * older version of the same index, else a whole load. LEGACY for an index of the old format.
   */
  private async refreshLocked(
    key: IndexKey,
    meta: IndexMeta,
    validity: Validity,
  ): Promise<LoadedIndex | typeof LEGACY> {
    const cached = this.cache.get(cacheKey(key));
    if (cached && cached.loaded.meta.version >= meta.version) return cached.loaded;
    // Not when it was recreated since (deleted and built again: its segment ids and keys may repeat
    // the old ones) or replaced with another scorer or embedding space (the engine index's own settings).
    if (
      cached &&
      cached.loaded.meta.createdAt === meta.createdAt &&
      cached.loaded.meta.scorer === meta.scorer &&
      sameSpace(cached.loaded.meta.vectors, meta.vectors)
    ) {
      const caughtUp = await this.catchUpLocked(key, cached.loaded, validity);
      if (caughtUp) return caughtUp;
    }
    return this.loadWholeLocked(key, validity);
  }

  /** Applies what changed in the store since the cached version; undefined when it cannot be applied. */
  private async catchUpLocked(
    key: IndexKey,
    cached: LoadedIndex,
    validity: Validity,
  ): Promise<LoadedIndex | undefined> {
    const indexId = cacheKey(key);
    const delta = await this.store.loadChanges(key, cached.meta.version);
    if (!delta) {
      this.drop(indexId);
      throw indexNotFound(key);
    }
    const engine = cached.engine;
    const held = new Set(engine.segments().map((segment) => segment.id));
    // Segment ids are never reused within an index's life: a repeated one means another index.
    if (delta.addedSegments.some((segment) => held.has(segment.id))) return undefined;
    const live = new Set(delta.liveSegmentIds);
    try {
      engine.applyChanges({
        addSegments: delta.addedSegments,
        removeSegmentIds: [...held].filter((id) => !live.has(id)),
        tombstones: delta.tombstones,
        state: engineStateOf(delta.meta),
      });
    } catch (error) {
      // The cached index may be half changed: forget it; the caller loads the index whole.
      this.drop(indexId);
      this.options.log.warn(
        { err: error, index: key.name, tenant: key.tenantId },
        "catch-up failed; reloading",
      );
      return undefined;
    }
    this.options.stats.countSegments(key, {
      segmentsLoaded: delta.addedSegments.length,
      bytesLoaded: delta.bytesLoaded,
    });
    const loaded: LoadedIndex = { meta: delta.meta, engine };
    this.remember(indexId, loaded, validity);
    return loaded;
  }

  private async loadWholeLocked(key: IndexKey, validity: Validity): Promise<LoadedIndex | typeof LEGACY> {
    const indexId = cacheKey(key);
    const stored = await this.store.loadIndex(key);
    if (!stored) {
      this.drop(indexId);
      throw indexNotFound(key);
    }
    if (isLegacy(stored)) return LEGACY;
    const engine = SegmentedIndex.load(
      engineOptionsOf(stored.meta, this.options.directory),
      stored.segments,
      engineStateOf(stored.meta),
    );
    let bytes = 0;
    for (const segment of stored.segments)
      bytes += segment.bytes.byteLength + (segment.vectors?.byteLength ?? 0);
    this.options.stats.countSegments(key, { segmentsLoaded: stored.segments.length, bytesLoaded: bytes });
    const loaded: LoadedIndex = { meta: stored.meta, engine };
    this.remember(indexId, loaded, validity);
    this.options.onLoadedWhole(key);
    return loaded;
  }

  /** Re-indexes an index of the old format (legacy.ts), under the writers' and the mutation lock. */
  private async reindexLegacyLocked(key: IndexKey): Promise<LoadedIndex> {
    const validity = this.validity(key);
    const stored = await this.store.loadIndex(key);
    if (!stored) throw indexNotFound(key);
    if (!isLegacy(stored)) {
      // Another process re-indexed it meanwhile.
      const loaded = await this.loadWholeLocked(key, validity);
      if (loaded === LEGACY) throw internal(`index "${key.name}" could not be re-indexed`);
      return loaded;
    }
    const { engine, prepared, meta } = await commitLegacyReindex(this.store, key, stored);
    return this.applyCommitted(key, engine, prepared, meta, validity);
  }
}

/** Whether two embedding spaces are the same (both absent included). */
function sameSpace(a: IndexMeta["vectors"], b: IndexMeta["vectors"]): boolean {
  if (a === null || b === null) return a === b;
  return a.model === b.model && a.dimension === b.dimension && a.storage === b.storage;
}
