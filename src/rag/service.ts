/**
 * The RAG service: what the routes call. It turns documents into chunks and chunks into engine
 * documents, and commits each write as one store change that costs what it adds: one new segment,
 * the tombstones of the chunks it replaces or deletes, their rows, the index's statistics. Queries
 * are answered from a cache of loaded indices (a SegmentedIndex per index: postings and statistics
 * only); the texts and metadata of the top-k chunks are then read from the store by engine key.
 * No HTTP here: routes translate requests to these calls, and its errors are domain errors
 * (core/errors.ts) that core/http.ts maps to statuses.
 *
 * Cache validity. With a store that has no change feed (SQLite), every query asks the store for the
 * index's version (a microsecond there) and catches up when it changed. With a change feed
 * (PostgreSQL LISTEN/NOTIFY, shared by replicas), a cached index is served with no round trip while
 * the feed is live and nothing was announced for it since it was validated; an announcement makes it
 * untrusted, and while the feed is down (or after it reconnects, for what was validated before) the
 * per-query version check is back. A stale cached index catches up with what changed since its
 * version (`loadChanges`: new segments, dropped segment ids, new tombstones), never a whole reload,
 * unless the index was recreated in between.
 *
 * Writers. Writes of one index are serialised in this process (KeyedMutex) and, when the store offers
 * it, across processes (`withWriteLock`). A write that still finds its base version stale (another
 * replica committed in between: a 409 StaleVersionError from the store) is retried here: the cached
 * index catches up and the change is recomputed, up to MAX_WRITE_ATTEMPTS times with a short jittered
 * backoff, then the 409 reaches the client.
 *
 * Mutations. A cached SegmentedIndex is changed in place (a write's `apply`, a catch-up, a merge), each
 * a synchronous step, so a query's search never sees half of one. They are serialised per index by a
 * second lock (`mutations`) that queries take only when they must catch up, so a query never waits
 * behind writers queued for the store's lock.
 *
 * Merges. After a committed write the merge policy may pick segments to merge; the merge runs on a
 * worker thread (never awaited by the request) and is committed under the index's write exclusion.
 * One merge per index at a time; a merge that lost its base (the index was replaced, deleted, or
 * another replica merged the same segments) is dropped and logged, never breaking the index.
 */
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { badRequest, conflict, notFound } from "../core/errors.js";
import { KeyedMutex } from "../core/keyed-mutex.js";
import { extractiveAnswer } from "./answer.js";
import { chunkDocument } from "./ingest/chunker.js";
import { pageAt } from "./ingest/loaders.js";
import {
  IndexWriter,
  SegmentedIndex,
  TieredMergePolicy,
  mergeInBackground,
  type IndexState,
  type PreparedMerge,
  type PreparedWrite,
  type ScorerName,
  type SegmentInfo,
} from "./search/index.js";
import { expandedQuery, FEEDBACK_CHUNKS } from "./retrieval/expansion.js";
import { StaleVersionError, internal } from "./store/common.js";
import type {
  ChangeFeed,
  ChunkHit,
  ChunkRecord,
  DocumentRecord,
  IndexChange,
  IndexKey,
  IndexMeta,
  IndexSettings,
  IndexStore,
  Metadata,
  StoredChunk,
} from "./store/types.js";
import { indexTotals } from "./store/types.js";

/** The one message of a query, stats or write on an index the tenant does not have. */
const indexNotFound = (key: IndexKey) =>
  notFound(`Index "${key.name}" does not exist for tenant "${key.tenantId}"`);

export interface DocumentInput {
  id?: string;
  text: string;
  title?: string | null;
  metadata?: Metadata;
  source?: string | null;
  /** sha256 (hex) of the source file's bytes, for folder sync; null or absent otherwise. */
  contentHash?: string | null;
  /** For paged sources (PDF): where each page starts in `text`, so chunks can carry their page. */
  pageStarts?: number[];
}

export interface BuildInput {
  key: IndexKey;
  documents: DocumentInput[];
  chunkSize: number;
  overlap: number;
  scorer: ScorerName;
  mode: "create" | "replace" | "append";
  /** Create the index even with no text (an OpenAI vector store starts empty). */
  allowEmpty?: boolean;
}

export interface BuildOutput {
  meta: IndexMeta;
  documentsCount: number;
  chunksCount: number;
  buildMs: number;
}

export type AnswerMode = "none" | "extractive" | "generative";

export interface QueryInput {
  key: IndexKey;
  query: string;
  topK: number;
  minScore: number;
  filter?: Metadata;
  /** A compiled metadata predicate (OpenAI's comparison and compound filters); with `filter`, both hold. */
  predicate?: (metadata: Metadata) => boolean;
  /** RM3 pseudo-relevance feedback (src/rag/retrieval/expansion.ts). */
  expand?: boolean;
}

export interface QueryResult {
  text: string;
  score: number;
  document_id: string;
  file: string;
  chunk_id: string;
  title: string | null;
  metadata: Metadata;
}

export interface QueryOutput {
  results: QueryResult[];
  elapsedMs: number;
  /** For answer composition. */
  loaded: LoadedIndex;
}

/**
 * One index as served: its meta at the version the engine index was brought to, and the engine index
 * (postings and statistics; chunk texts stay in the store). The engine index object lives on across
 * versions (writes, catch-ups and merges change it in place); a LoadedIndex is made per version.
 */
export interface LoadedIndex {
  meta: IndexMeta;
  engine: SegmentedIndex;
}

/** Segments and bytes read from the store into the cache, and merges committed, by this process. */
export interface SegmentCounters {
  segmentsLoaded: number;
  bytesLoaded: number;
  mergesCompleted: number;
}

/** One index's segments and this process's counters of it, for GET /rag/stats/{name}. */
export interface IndexStats {
  meta: IndexMeta;
  segments: SegmentInfo[];
  deletedChunks: number;
  merges: { completed: number; running: number };
  loaded: { segmentsLoaded: number; bytesLoaded: number };
}

/** Where the service reports what it drops on the floor (a merge that could not be committed). */
export interface ServiceLog {
  warn(details: object, message: string): void;
}

export interface RagServiceOptions {
  /** Picks the segments to merge after a write; Lucene's tiered defaults when left out. */
  mergePolicy?: TieredMergePolicy;
  log?: ServiceLog;
}

/** A bounded record of recent latencies, for mean and p95 in /rag/stats. */
class LatencyWindow {
  private readonly values: number[] = [];
  private next = 0;
  constructor(private readonly size = 1000) {}
  add(ms: number): void {
    if (this.values.length < this.size) this.values.push(ms);
    else this.values[this.next] = ms;
    this.next = (this.next + 1) % this.size;
  }
  summary(): { mean_ms: number; p95_ms: number; samples: number } {
    if (this.values.length === 0) return { mean_ms: 0, p95_ms: 0, samples: 0 };
    const sorted = [...this.values].sort((a, b) => a - b);
    const mean = sorted.reduce((sum, v) => sum + v, 0) / sorted.length;
    const p95 = sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.95) - 1)] ?? 0;
    return { mean_ms: round(mean), p95_ms: round(p95), samples: sorted.length };
  }
}

const round = (ms: number) => Math.round(ms * 1000) / 1000;

type ActivityKind = "queries" | "builds" | "documentWrites" | "writeRetries";
/** What one tenant's requests did in this process: its share of /rag/stats (#23). */
type Activity = Record<ActivityKind, number> & { latencies: LatencyWindow };
/** Tenants whose activity is kept; past it the longest-known is forgotten (bounded memory). */
const MAX_TENANTS_TRACKED = 10_000;
const cacheKey = (key: IndexKey) => `${key.tenantId}\u0000${key.name}`;

/** Attempts of one write that keeps meeting a stale version before its 409 reaches the client. */
export const MAX_WRITE_ATTEMPTS = 5;

/**
 * A filtered query first asks the engine for this many times top_k candidates, then twice as many
 * each round, until top_k pass the filter or the engine has no more.
 */
const FILTER_OVERFETCH = 4;

/** Chunks read per store call when re-indexing an index of the old format. */
const LEGACY_BATCH = 2000;

/** Before retry n (1, 2, …): a few ms at first, doubling, capped at 200 ms; ±50% jitter. */
function retryDelayMs(retry: number): number {
  return Math.min(200, 5 * 2 ** (retry - 1)) * (0.5 + Math.random());
}

/** What the engine indexes for a chunk: the title with every chunk, as it is often its best summary. */
const engineText = (title: string | null | undefined, text: string) => (title ? `${title}\n${text}` : text);

const engineStateOf = (meta: IndexMeta): IndexState => ({
  nextKey: meta.engine.nextKey,
  nextSegmentId: meta.engine.nextSegmentId,
});

/** The old format (chunks, no segments): the service re-indexes it once, on first load. */
const LEGACY = Symbol("legacy index");

/** A loaded index and what it was validated against (see "Cache validity" above). */
interface CacheEntry {
  loaded: LoadedIndex;
  /** Feed epoch the version was validated in; null when the feed was not live. */
  epoch: number | null;
  /** The index's change stamp when validated. */
  stamp: number;
}

type Validity = Omit<CacheEntry, "loaded">;

const defaultLog: ServiceLog = { warn: (details, message) => console.warn(message, details) };

export class RagService {
  private readonly cache = new Map<string, CacheEntry>();
  /** Per index: bumped by each announced change that invalidates the cached version. */
  private readonly stamps = new Map<string, number>();
  private changeCount = 0;
  private readonly feed: ChangeFeed | null;
  private readonly writers = new KeyedMutex();
  /** Serialises in-place changes of a cached engine index (see "Mutations" above). */
  private readonly mutations = new KeyedMutex();
  private readonly mergePolicy: TieredMergePolicy;
  private readonly log: ServiceLog;
  /** Per index: its running merge (at most one), settled when that merge is committed or dropped. */
  private readonly merging = new Map<string, Promise<void>>();
  private closing = false;
  private readonly startedAt = Date.now();
  private readonly latencies = new LatencyWindow();
  private readonly counters = { queries: 0, builds: 0, documentWrites: 0, writeRetries: 0 };
  private readonly activity = new Map<string, Activity>();
  /** Segment counters of this process, all indices (monotonic: /metrics counters read them). */
  private readonly segmentTotals: SegmentCounters = { segmentsLoaded: 0, bytesLoaded: 0, mergesCompleted: 0 };
  private readonly segmentCounters = new Map<string, SegmentCounters & { tenantId: string }>();

  constructor(
    readonly store: IndexStore,
    options: RagServiceOptions = {},
  ) {
    this.mergePolicy = options.mergePolicy ?? new TieredMergePolicy();
    this.log = options.log ?? defaultLog;
    this.feed = store.subscribe ? store.subscribe((change) => this.changed(change)) : null;
  }

  /**
   * Stops listening to the store's changes and starting merges, and waits for running merges (which
   * no longer commit), so the store can be closed after it. The store itself is closed by its owner.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.feed?.close();
    await this.mergesSettled();
  }

  /** Resolves once no merge is running (one that finishes may start the next: those are awaited too). */
  async mergesSettled(): Promise<void> {
    while (this.merging.size > 0) await Promise.all(this.merging.values());
  }

  /** True when cached indices are invalidated by the store's change feed rather than checked per query. */
  get changeFeedLive(): boolean {
    return this.feed?.live ?? false;
  }

  /** Segments loaded, bytes loaded and merges completed by this process, all indices. */
  get segmentCountersTotal(): Readonly<SegmentCounters> {
    return this.segmentTotals;
  }

  async build(input: BuildInput): Promise<BuildOutput> {
    const started = performance.now();
    const documents = normaliseDocuments(input.documents);
    const settings: IndexSettings = {
      scorer: input.scorer,
      chunkSize: input.chunkSize,
      overlap: input.overlap,
    };
    const output = await this.exclusiveWithRetries(input.key, async () => {
      const existing = await this.store.getMeta(input.key);
      if (input.mode === "create" && existing) {
        throw conflict(`Index "${input.key.name}" already exists; use mode "replace" or "append"`);
      }
      if (input.mode === "append" && !existing) {
        throw notFound(`Index "${input.key.name}" does not exist; build it with mode "create" first`);
      }
      // An append keeps the index's own chunking and scorer, so old and new chunks rank alike.
      const effective = input.mode === "append" && existing ? settingsOf(existing) : settings;
      return this.commit(
        input.key,
        input.mode === "append" ? "update" : input.mode,
        effective,
        existing,
        documents,
        [],
        input.allowEmpty,
      );
    });
    this.countActivity(input.key.tenantId, "builds");
    return { ...output, buildMs: round(performance.now() - started) };
  }

  /** Adds documents to an existing index, replacing those whose id is already there. */
  async upsertDocuments(key: IndexKey, inputs: DocumentInput[]): Promise<BuildOutput> {
    return this.applyDocumentChanges(key, { upsert: inputs, deleteIds: [] });
  }

  /**
   * Upserts and deletes documents of an existing index in one atomic write (folder sync). Deleting an
   * id the index does not hold is a no-op; an id both upserted and deleted is upserted.
   */
  async applyDocumentChanges(
    key: IndexKey,
    change: { upsert: DocumentInput[]; deleteIds: string[] },
  ): Promise<BuildOutput> {
    const started = performance.now();
    const documents = normaliseDocuments(change.upsert);
    const upserted = new Set(documents.map((document) => document.id));
    const deleteIds = [...new Set(change.deleteIds)].filter((id) => !upserted.has(id));
    const output = await this.exclusiveWithRetries(key, async () => {
      const existing = await this.requireMeta(key);
      if (documents.length === 0 && deleteIds.length === 0) {
        return { meta: existing, documentsCount: 0, chunksCount: 0 };
      }
      return this.commit(key, "update", settingsOf(existing), existing, documents, deleteIds);
    });
    this.countActivity(key.tenantId, "documentWrites");
    return { ...output, buildMs: round(performance.now() - started) };
  }

  async deleteDocument(key: IndexKey, documentId: string): Promise<IndexMeta> {
    const output = await this.exclusiveWithRetries(key, async () => {
      const existing = await this.requireMeta(key);
      if (!(await this.store.hasDocument(key, documentId))) {
        throw notFound(`Document "${documentId}" is not in index "${key.name}"`);
      }
      return this.commit(key, "update", settingsOf(existing), existing, [], [documentId]);
    });
    this.countActivity(key.tenantId, "documentWrites");
    return output.meta;
  }

  async deleteIndex(key: IndexKey): Promise<void> {
    await this.exclusiveWithRetries(key, async () => {
      this.cache.delete(cacheKey(key));
      if (!(await this.store.deleteIndex(key))) throw notFound(`Index "${key.name}" does not exist`);
      // An index created again under this name starts its own counts (the process totals keep them).
      this.segmentCounters.delete(cacheKey(key));
    });
  }

  async listIndices(tenantId: string | null): Promise<IndexMeta[]> {
    return this.store.listIndices(tenantId);
  }

  /** Every document's id, source and content hash (folder sync). A missing index is a 404. */
  async listDocuments(
    key: IndexKey,
  ): Promise<Array<{ id: string; source: string | null; contentHash: string | null }>> {
    await this.requireMeta(key);
    return this.store.listDocuments(key);
  }

  async requireMeta(key: IndexKey): Promise<IndexMeta> {
    const meta = await this.store.getMeta(key);
    if (!meta) throw indexNotFound(key);
    return meta;
  }

  async query(input: QueryInput): Promise<QueryOutput> {
    const started = performance.now();
    const loaded = await this.load(input.key);
    const equality =
      input.filter && Object.keys(input.filter).length > 0 ? metadataFilter(input.filter) : undefined;
    const predicate = input.predicate;
    const filter =
      equality && predicate ? (m: Metadata) => equality(m) && predicate(m) : (equality ?? predicate);
    const hits = await this.topChunks(input, loaded.engine, filter);
    const results = hits.map(({ chunk, score }): QueryResult => ({
      text: chunk.text,
      score: Math.round(score * 1e6) / 1e6,
      document_id: chunk.documentId,
      file: chunk.source ?? chunk.documentId,
      chunk_id: chunk.chunkId,
      title: chunk.title,
      metadata: chunk.metadata,
    }));
    const elapsedMs = round(performance.now() - started);
    this.countActivity(input.key.tenantId, "queries", elapsedMs);
    return { results, elapsedMs, loaded };
  }

  /**
   * The top k hits whose chunk the store still holds and that pass the filter, best first. The engine
   * is asked for more candidates each round until k are accepted or it has none left: the accepted
   * ones among its top n are then exactly the top k of a search restricted to accepted chunks.
   */
  private async topChunks(
    input: QueryInput,
    engine: SegmentedIndex,
    filter: ((metadata: Metadata) => boolean) | undefined,
  ): Promise<Array<{ chunk: ChunkHit; score: number }>> {
    let expanded: Map<string, number> | undefined;
    if (input.expand) {
      const first = { ...input, expand: false, topK: FEEDBACK_CHUNKS, minScore: 0 };
      const feedback = await this.topChunks(first, engine, filter);
      const texts = feedback.map(({ chunk, score }) => ({
        text: engineText(chunk.title, chunk.text),
        score,
      }));
      expanded = expandedQuery(engine, input.query, texts);
    }
    const fetched = new Map<number, ChunkHit | null>();
    let candidates = filter ? input.topK * FILTER_OVERFETCH : input.topK;
    for (;;) {
      const options = { topK: candidates, minScore: input.minScore };
      const hits = expanded ? engine.searchBoosted(expanded, options) : engine.search(input.query, options);
      const unread = hits.filter((hit) => !fetched.has(hit.key)).map((hit) => hit.key);
      if (unread.length > 0) {
        for (const chunk of await this.store.getChunks(input.key, unread))
          fetched.set(chunk.engineKey, chunk);
        // A key the store no longer has was deleted by a write committed since the search.
        for (const key of unread) if (!fetched.has(key)) fetched.set(key, null);
      }
      const accepted: Array<{ chunk: ChunkHit; score: number }> = [];
      for (const hit of hits) {
        const chunk = fetched.get(hit.key);
        if (!chunk || (filter && !filter(chunk.metadata))) continue;
        accepted.push({ chunk, score: hit.score });
        if (accepted.length === input.topK) return accepted;
      }
      if (hits.length < candidates) return accepted;
      candidates *= 2;
    }
  }

  extractive(query: string, results: QueryResult[], loaded: LoadedIndex): string | null {
    return extractiveAnswer(query, results, (text) => loaded.engine.analyze(text));
  }

  /** Counts one request of `tenantId` in the process's figures and in the tenant's own. */
  private countActivity(tenantId: string, kind: ActivityKind, latencyMs?: number): void {
    let activity = this.activity.get(tenantId);
    if (!activity) {
      if (this.activity.size >= MAX_TENANTS_TRACKED) this.activity.delete(this.activity.keys().next().value!);
      activity = {
        queries: 0,
        builds: 0,
        documentWrites: 0,
        writeRetries: 0,
        latencies: new LatencyWindow(200),
      };
      this.activity.set(tenantId, activity);
    }
    this.counters[kind]++;
    activity[kind]++;
    if (latencyMs !== undefined) {
      this.latencies.add(latencyMs);
      activity.latencies.add(latencyMs);
    }
  }

  /**
   * The whole system's figures (tenantId null), or one tenant's share: its indices, its requests'
   * counts and latencies, its storage; process-wide figures (memory, cache) are left out for it.
   */
  async stats(tenantId: string | null = null) {
    const indices = await this.store.listIndices(tenantId);
    const memory = process.memoryUsage();
    const segments = this.countersOf(tenantId);
    let running = 0;
    for (const indexId of this.merging.keys())
      if (tenantId === null || indexId.startsWith(`${tenantId}\u0000`)) running++;
    const own = tenantId === null ? null : this.activity.get(tenantId);
    const counts =
      tenantId === null
        ? this.counters
        : (own ?? { queries: 0, builds: 0, documentWrites: 0, writeRetries: 0 });
    const latencies = tenantId === null ? this.latencies : (own?.latencies ?? new LatencyWindow(1));
    const totals = indexTotals(indices);
    return {
      indices_count: totals.indices,
      documents_count: totals.documents,
      chunks_count: totals.chunks,
      segments_count: totals.segments,
      deleted_chunks: totals.deletedChunks,
      tenants_count: new Set(indices.map((m) => m.tenantId)).size,
      queries_served: counts.queries,
      builds_served: counts.builds,
      document_writes_served: counts.documentWrites,
      write_retries: counts.writeRetries,
      merges: { completed: segments.mergesCompleted, running },
      loaded: { segments_loaded: segments.segmentsLoaded, bytes_loaded: segments.bytesLoaded },
      query_latency: latencies.summary(),
      storage: {
        backend: this.store.kind,
        size_bytes:
          tenantId === null ? await this.store.sizeBytes() : indices.reduce((sum, m) => sum + m.sizeBytes, 0),
      },
      uptime_s: Math.round((Date.now() - this.startedAt) / 1000),
      ...(tenantId === null
        ? {
            cache: {
              loaded_indices: this.cache.size,
              validation:
                this.feed === null ? "per_query" : this.feed.live ? "change_feed" : "per_query_feed_down",
            },
            memory: { rss_bytes: memory.rss, heap_used_bytes: memory.heapUsed },
          }
        : {}),
    };
  }

  /** One index's segments (loading it if needed) and this process's segment counters of it. */
  async indexStats(key: IndexKey): Promise<IndexStats> {
    const loaded = await this.load(key);
    const indexId = cacheKey(key);
    const counters = this.segmentCounters.get(indexId);
    return {
      meta: loaded.meta,
      // By id (the order segments were written in), whatever order the engine holds them in.
      segments: loaded.engine.segments().sort((a, b) => a.id - b.id),
      deletedChunks: loaded.engine.deletedDocumentCount,
      merges: { completed: counters?.mergesCompleted ?? 0, running: this.merging.has(indexId) ? 1 : 0 },
      loaded: { segmentsLoaded: counters?.segmentsLoaded ?? 0, bytesLoaded: counters?.bytesLoaded ?? 0 },
    };
  }

  /** Segment counters of one tenant's indices (null: the process's totals, deleted indices included). */
  private countersOf(tenantId: string | null): SegmentCounters {
    if (tenantId === null) return { ...this.segmentTotals };
    const sum: SegmentCounters = { segmentsLoaded: 0, bytesLoaded: 0, mergesCompleted: 0 };
    for (const counters of this.segmentCounters.values()) {
      if (counters.tenantId !== tenantId) continue;
      sum.segmentsLoaded += counters.segmentsLoaded;
      sum.bytesLoaded += counters.bytesLoaded;
      sum.mergesCompleted += counters.mergesCompleted;
    }
    return sum;
  }

  private count(key: IndexKey, change: Partial<SegmentCounters>): void {
    const indexId = cacheKey(key);
    let counters = this.segmentCounters.get(indexId);
    if (!counters) {
      counters = { tenantId: key.tenantId, segmentsLoaded: 0, bytesLoaded: 0, mergesCompleted: 0 };
      this.segmentCounters.set(indexId, counters);
    }
    for (const field of ["segmentsLoaded", "bytesLoaded", "mergesCompleted"] as const) {
      counters[field] += change[field] ?? 0;
      this.segmentTotals[field] += change[field] ?? 0;
    }
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
      const validity = this.validity(indexId);
      const meta = await this.store.getMeta(key);
      if (!meta) {
        this.cache.delete(indexId);
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
      await this.exclusiveWithRetries(key, () =>
        this.mutations.run(indexId, () => this.reindexLegacyLocked(key)),
      );
    }
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

  private validity(indexId: string): Validity {
    return { epoch: this.feed?.live ? this.feed.epoch : null, stamp: this.stamps.get(indexId) ?? 0 };
  }

  private remember(indexId: string, loaded: LoadedIndex, validity: Validity): void {
    this.cache.set(indexId, { loaded, ...validity });
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
    const indexId = cacheKey(key);
    const cached = this.cache.get(indexId);
    if (cached && cached.loaded.meta.version >= meta.version) return cached.loaded;
    // Not when it was recreated since (deleted and built again: its segment ids and keys may repeat
    // the old ones) or replaced with another scorer (the engine index's own setting).
    if (
      cached &&
      cached.loaded.meta.createdAt === meta.createdAt &&
      cached.loaded.meta.scorer === meta.scorer
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
      this.cache.delete(indexId);
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
      this.cache.delete(indexId);
      this.log.warn({ err: error, index: key.name, tenant: key.tenantId }, "catch-up failed; reloading");
      return undefined;
    }
    this.count(key, { segmentsLoaded: delta.addedSegments.length, bytesLoaded: delta.bytesLoaded });
    const loaded: LoadedIndex = { meta: delta.meta, engine };
    this.remember(indexId, loaded, validity);
    return loaded;
  }

  private async loadWholeLocked(key: IndexKey, validity: Validity): Promise<LoadedIndex | typeof LEGACY> {
    const indexId = cacheKey(key);
    const stored = await this.store.loadIndex(key);
    if (!stored) {
      this.cache.delete(indexId);
      throw indexNotFound(key);
    }
    if (stored.segments.length === 0 && stored.meta.chunksCount > 0) return LEGACY;
    const engine = SegmentedIndex.load(
      { scorer: stored.meta.scorer },
      stored.segments,
      engineStateOf(stored.meta),
    );
    let bytes = 0;
    for (const segment of stored.segments) bytes += segment.bytes.byteLength;
    this.count(key, { segmentsLoaded: stored.segments.length, bytesLoaded: bytes });
    const loaded: LoadedIndex = { meta: stored.meta, engine };
    this.remember(indexId, loaded, validity);
    // An index written by another process (the CLI, a replica) may be waiting for a merge.
    this.scheduleMerge(key);
    return loaded;
  }

  /**
   * Exactly the store's current version of an index, the base of a write (under the writers' and the
   * mutation lock); a different version after catching up means another writer got in first (stale).
   * An index of the old format is re-indexed first, and that version is the base.
   */
  private async baseLocked(key: IndexKey, meta: IndexMeta): Promise<LoadedIndex> {
    const loaded = await this.refreshLocked(key, meta, this.validity(cacheKey(key)));
    if (loaded === LEGACY) return this.reindexLegacyLocked(key);
    if (loaded.meta.version !== meta.version) {
      throw new StaleVersionError(key, loaded.meta.version, meta.version);
    }
    return loaded;
  }

  /**
   * An index written before segments existed (chunks, no segments): its chunks, read in engine key
   * order (the migration gave each chunk its old ordinal as key), become one segment, committed as a
   * write that changes no chunk. Under the writers' and the mutation lock.
   */
  private async reindexLegacyLocked(key: IndexKey): Promise<LoadedIndex> {
    const indexId = cacheKey(key);
    const validity = this.validity(indexId);
    const stored = await this.store.loadIndex(key);
    if (!stored) throw indexNotFound(key);
    if (stored.segments.length > 0 || stored.meta.chunksCount === 0) {
      // Another process re-indexed it meanwhile.
      const loaded = await this.loadWholeLocked(key, validity);
      if (loaded === LEGACY) throw internal(`index "${key.name}" could not be re-indexed`);
      return loaded;
    }
    const chunks: Array<{ engineKey: number; text: string }> = [];
    const documentIds = (await this.store.listDocuments(key)).map((document) => document.id);
    for (let from = 0; from < documentIds.length; from += LEGACY_BATCH) {
      const batch = await this.store.getDocumentChunks(key, documentIds.slice(from, from + LEGACY_BATCH));
      for (const { title, chunks: ofDocument } of batch.values()) {
        for (const chunk of ofDocument)
          chunks.push({ engineKey: chunk.engineKey, text: engineText(title, chunk.text) });
      }
    }
    chunks.sort((a, b) => a.engineKey - b.engineKey);
    const engine = SegmentedIndex.create({ scorer: stored.meta.scorer });
    const prepared = new IndexWriter(engine).prepare({ add: chunks.map((chunk) => chunk.text) });
    // The engine numbers documents from 0 in the order given: the stored keys must be just that.
    if (prepared.keys.some((engineKey, i) => engineKey !== chunks[i]!.engineKey)) {
      throw internal(`index "${key.name}" of the old format has chunk keys that are not 0 … n-1`);
    }
    const meta = await this.store.write({
      key,
      mode: "update",
      settings: settingsOf(stored.meta),
      upsert: [],
      deleteDocumentIds: [],
      segment: prepared.segment,
      tombstones: [],
      engine: writtenState(prepared),
      vocabularySize: prepared.vocabularySize,
      expectedVersion: stored.meta.version,
    });
    return this.applyCommitted(key, engine, prepared, meta, validity);
  }

  /** Makes a committed write visible in the cache; if that fails, the index is reloaded when next used. */
  private applyCommitted(
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
      this.cache.delete(indexId);
      this.log.warn({ err: error, index: key.name, tenant: key.tenantId }, "committed change not applied");
    }
    return loaded;
  }

  /** An announced change: untrust the cached index unless it already is that version or newer. */
  private changed(change: IndexChange): void {
    const indexId = cacheKey(change);
    const cached = this.cache.get(indexId);
    if (cached && change.version !== null && cached.loaded.meta.version >= change.version) return;
    if (change.version === null) this.cache.delete(indexId);
    this.stamps.set(indexId, ++this.changeCount);
  }

  /**
   * Runs one write of an index: alone in this process, under the store's cross-process writer lock
   * when it has one, and again (the cached index catching up) when its base version was stale.
   */
  private async exclusiveWithRetries<T>(key: IndexKey, work: () => Promise<T>): Promise<T> {
    const attempts = async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await work();
        } catch (error) {
          if (!(error instanceof StaleVersionError)) throw error;
          if (attempt >= MAX_WRITE_ATTEMPTS) {
            throw conflict(
              `Index "${key.name}" kept being changed by other writers (${attempt} attempts); retry the request`,
              { retryAfter: "1" },
            );
          }
          this.countActivity(key.tenantId, "writeRetries");
          await sleep(retryDelayMs(attempt));
        }
      }
    };
    return this.exclusiveOnce(key, attempts);
  }

  /** `work` alone among this index's writers, in this process and (store lock) across processes. */
  private exclusiveOnce<T>(key: IndexKey, work: () => Promise<T>): Promise<T> {
    return this.writers.run(cacheKey(key), () =>
      this.store.withWriteLock ? this.store.withWriteLock(key, work) : work(),
    );
  }

  /**
   * Chunks the new documents, prepares the engine change (their chunks added as one segment; the
   * chunks of replaced and deleted documents, read back from the store, subtracted), commits it as one
   * store write and applies it to the cached index. Its cost grows with the change, not the index.
   */
  private async commit(
    key: IndexKey,
    mode: "create" | "replace" | "update",
    settings: IndexSettings,
    existing: IndexMeta | undefined,
    documents: DocumentRecord[],
    deleteDocumentIds: string[],
    allowEmpty = false,
  ): Promise<Omit<BuildOutput, "buildMs">> {
    const chunked = documents.map((document) => ({
      document,
      chunks: withPages(
        chunkDocument(document, { chunkSize: settings.chunkSize, overlap: settings.overlap }),
        pageStartsOf.get(document),
      ),
    }));
    const added = chunked.flatMap(({ document, chunks }) =>
      chunks.map((chunk) => engineText(document.title, chunk.text)),
    );
    if (mode !== "update" && added.length === 0 && !allowEmpty) {
      throw badRequest("The documents contain no text to index");
    }
    const indexId = cacheKey(key);
    const output = await this.mutations.run(indexId, async () => {
      const validity = this.validity(indexId);
      let engine: SegmentedIndex;
      let expectedVersion: number | null = null;
      const deleted: Array<{ key: number; text: string }> = [];
      if (mode === "update" && existing) {
        const base = await this.baseLocked(key, existing);
        engine = base.engine;
        expectedVersion = base.meta.version;
        const replacedIds = [...new Set([...deleteDocumentIds, ...documents.map((d) => d.id)])];
        const replaced = await this.store.getDocumentChunks(key, replacedIds);
        for (const { title, chunks } of replaced.values()) {
          for (const chunk of chunks)
            deleted.push({ key: chunk.engineKey, text: engineText(title, chunk.text) });
        }
      } else {
        // A replaced index goes on numbering keys and segments where the old one stopped, so that a
        // replica holding the old one can catch up (drop every old segment, add the new one).
        engine = existing
          ? SegmentedIndex.load({ scorer: settings.scorer }, [], engineStateOf(existing))
          : SegmentedIndex.create({ scorer: settings.scorer });
        expectedVersion = existing && mode !== "create" ? existing.version : null;
      }
      const prepared = new IndexWriter(engine).prepare({ add: added, delete: deleted });
      let next = 0;
      const upsert = chunked.map(({ document, chunks }) => ({
        document,
        chunks: chunks.map((chunk): StoredChunk => ({ ...chunk, engineKey: prepared.keys[next++]! })),
      }));
      const meta = await this.store.write({
        key,
        mode,
        settings,
        upsert,
        deleteDocumentIds,
        segment: prepared.segment,
        tombstones: [...prepared.tombstones],
        engine: writtenState(prepared),
        vocabularySize: prepared.vocabularySize,
        expectedVersion,
      });
      this.applyCommitted(key, engine, prepared, meta, validity);
      return { meta, documentsCount: documents.length, chunksCount: added.length };
    });
    this.scheduleMerge(key);
    return output;
  }

  /** Starts the merge the policy picks for an index, unless one is running or the service is closing. */
  private scheduleMerge(key: IndexKey): void {
    const indexId = cacheKey(key);
    if (this.closing || this.merging.has(indexId)) return;
    const picked = this.pickMerge(indexId);
    if (!picked) return;
    const running = (async () => {
      // Taking the merge's snapshot (encoding its segments) is synchronous work: not in the turn of
      // the write that asked for it, whose reply goes out first. The pick is made again then.
      await new Promise((resolve) => setImmediate(resolve));
      const current = this.closing ? undefined : this.pickMerge(indexId);
      return current ? this.runMerge(key, current.engine, current.segmentIds) : false;
    })().then(
      (committed) => {
        this.merging.delete(indexId);
        // One merge may make the next worthwhile (a tier filled up); a dropped one is not retried.
        if (committed) this.scheduleMerge(key);
      },
      (error: unknown) => {
        this.merging.delete(indexId);
        this.log.warn({ err: error, index: key.name, tenant: key.tenantId }, "segment merge dropped");
      },
    );
    this.merging.set(indexId, running);
  }

  /** The cached index of `indexId` and the first merge its policy proposes, if any. */
  private pickMerge(indexId: string): { engine: SegmentedIndex; segmentIds: number[] } | undefined {
    const engine = this.cache.get(indexId)?.loaded.engine;
    const segmentIds = engine ? this.mergePolicy.findMerges(engine.segments())[0] : undefined;
    return engine && segmentIds && segmentIds.length > 0 ? { engine, segmentIds } : undefined;
  }

  /**
   * Merges segments on a worker thread, then commits the merge under the index's write exclusion:
   * only if the cached index is still the one it merged (not replaced, reloaded or deleted), caught
   * up with other writers. False when it was not committed (the service closing, or nothing left to
   * commit it to: logged).
   */
  private async runMerge(key: IndexKey, engine: SegmentedIndex, segmentIds: number[]): Promise<boolean> {
    const indexId = cacheKey(key);
    const result = await mergeInBackground(engine, segmentIds);
    if (this.closing) return false;
    const outcome = await this.exclusiveOnce(key, () =>
      this.mutations.run(indexId, async () => {
        if (this.closing) return "closing";
        if (this.cache.get(indexId)?.loaded.engine !== engine)
          return "the index was replaced, reloaded or deleted";
        const meta = await this.store.getMeta(key);
        if (!meta) return "the index was deleted";
        const base = await this.baseLocked(key, meta);
        if (base.engine !== engine) return "the index was reloaded";
        const validity = this.validity(indexId);
        const prepared = engine.prepareMerge(result);
        const committed = await this.store.commitMerge({
          key,
          expectedVersion: meta.version,
          removedSegmentIds: [...prepared.removedSegmentIds],
          segment: prepared.segment,
          tombstones: [...prepared.tombstones],
          engine: { ...prepared.state, totalLength: engine.totalLength },
        });
        this.applyCommitted(key, engine, prepared, committed, validity);
        this.count(key, { mergesCompleted: 1 });
        return "committed";
      }),
    );
    if (outcome !== "committed" && outcome !== "closing") {
      this.log.warn(
        { index: key.name, tenant: key.tenantId, segmentIds },
        `segment merge dropped: ${outcome}`,
      );
    }
    return outcome === "committed";
  }
}

/** The engine state a write stores: the engine's counters after it, and the live length total. */
function writtenState(prepared: PreparedWrite) {
  return { ...prepared.state, totalLength: prepared.totalLength };
}

function settingsOf(meta: IndexMeta): IndexSettings {
  return { scorer: meta.scorer, chunkSize: meta.chunkSize, overlap: meta.overlap };
}

/**
 * Fills in ids (a content hash when none is given, so re-sending a document does not duplicate it)
 * and rejects two different documents claiming one id in the same request.
 */
const LONE_SURROGATES = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const toWellFormed = (text: string) => text.replace(LONE_SURROGATES, "\uFFFD");

/** Page offsets of paged documents (PDF), beside the record so the store never sees them. */
const pageStartsOf = new WeakMap<DocumentRecord, number[]>();

/**
 * Gives each chunk of a paged document its page: the (1-based) page holding most of its text, and,
 * when it spans several, all of them in `pages`.
 */
function withPages(chunks: ChunkRecord[], pageStarts: number[] | undefined): ChunkRecord[] {
  if (!pageStarts) return chunks;
  for (const chunk of chunks) {
    const first = pageAt(pageStarts, chunk.start);
    const last = pageAt(pageStarts, Math.max(chunk.start, chunk.end - 1));
    let page = first;
    let most = 0;
    for (let p = first; p <= last; p++) {
      const from = Math.max(chunk.start, pageStarts[p - 1]!);
      const to = Math.min(chunk.end, pageStarts[p] ?? Infinity);
      if (to - from > most) [page, most] = [p, to - from];
    }
    const pages = Array.from({ length: last - first + 1 }, (_, i) => first + i);
    chunk.metadata = { ...chunk.metadata, page, ...(pages.length > 1 ? { pages } : {}) };
  }
  return chunks;
}

export function normaliseDocuments(inputs: DocumentInput[]): DocumentRecord[] {
  const byId = new Map<string, DocumentRecord>();
  inputs.forEach((input, position) => {
    // Whitespace-only text would be stored as a document with no chunks that no query can find.
    if (input.text.trim() === "") {
      const which = input.source ? `File "${input.source}"` : `documents[${position}]`;
      throw badRequest(`${which} has no text to index (empty or only whitespace)`, [
        { path: `/documents/${position}/text`, message: "empty or only whitespace" },
      ]);
    }
    const id = input.id ?? createHash("sha256").update(input.text).digest("hex").slice(0, 16);
    const record: DocumentRecord = {
      id,
      // Lone UTF-16 surrogates cannot be stored as UTF-8: replace them now, so what is served from
      // memory is what is served after a restart.
      title: input.title == null ? null : toWellFormed(input.title),
      text: toWellFormed(input.text),
      metadata: input.metadata ?? {},
      source: input.source ?? null,
      contentHash: input.contentHash ?? null,
    };
    if (input.pageStarts) pageStartsOf.set(record, input.pageStarts);
    const previous = byId.get(id);
    if (previous && (previous.text !== record.text || input.id !== undefined)) {
      throw badRequest(
        `Document id "${id}" appears more than once in this request (documents[${position}])`,
        [{ path: `/documents/${position}/id`, message: "duplicate id" }],
      );
    }
    byId.set(id, record);
  });
  return [...byId.values()];
}

/** Equality on every filter key; values compared as JSON so arrays and objects work too. */
function metadataFilter(filter: Metadata): (metadata: Metadata) => boolean {
  const expected = Object.entries(filter).map(([key, value]) => [key, JSON.stringify(value)] as const);
  return (metadata) =>
    expected.every(
      ([key, value]) =>
        Object.prototype.hasOwnProperty.call(metadata, key) && JSON.stringify(metadata[key]) === value,
    );
}
