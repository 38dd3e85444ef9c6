/**
 * The RAG service: what the routes call. A façade over its parts (service/), each with one of the
 * roles Lucene and Tantivy give them:
 * - documents.ts: document normalisation and chunking (ids, well-formed text, pages; pure);
 * - reader-cache.ts: the loaded engine indices and their refresh from the store (SearcherManager,
 *   IndexReader's reload policy), change feed or per-query version check;
 * - write-exclusion.ts: one writer per index, in this process and across processes, and the retries
 *   of a write whose base was stale (IndexWriter's write lock);
 * - write-coordinator.ts: each write chunked, prepared, committed as one store change and applied;
 * - merge-scheduler.ts: background merges picked by the merge policy and committed (MergeScheduler);
 * - queries.ts: top-k search, filters, chunk texts from the store;
 * - stats.ts: this process's counters and latencies for /rag/stats and /metrics.
 * No HTTP here: routes translate requests to these calls, and its errors are domain errors
 * (core/errors.ts) that core/http.ts maps to statuses.
 */
import { TieredMergePolicy } from "./search/index.js";
import type { DocumentListing, IndexKey, IndexMeta, IndexStore } from "./store/types.js";
import { defaultLog } from "./service/common.js";
import { MergeScheduler } from "./service/merge-scheduler.js";
import { Queries } from "./service/queries.js";
import { ReaderCache } from "./service/reader-cache.js";
import { ServiceStats } from "./service/stats.js";
import type {
  BuildInput,
  BuildOutput,
  DocumentChange,
  DocumentInput,
  IndexStats,
  LoadedIndex,
  QueryInput,
  QueryOutput,
  RagServiceOptions,
  SegmentCounters,
  WriteEmbedding,
} from "./service/types.js";
import { WriteCoordinator } from "./service/write-coordinator.js";
import { WriteExclusion } from "./service/write-exclusion.js";

export type * from "./service/types.js";
export { normaliseDocuments } from "./service/documents.js";
export { MAX_WRITE_ATTEMPTS } from "./service/write-exclusion.js";

export class RagService {
  private readonly figures = new ServiceStats();
  private readonly readers: ReaderCache;
  private readonly merges: MergeScheduler;
  private readonly writes: WriteCoordinator;
  private readonly queries: Queries;

  constructor(
    readonly store: IndexStore,
    options: RagServiceOptions = {},
  ) {
    const log = options.log ?? defaultLog;
    const stats = this.figures;
    const exclusion = new WriteExclusion(store, (key) => stats.countActivity(key.tenantId, "writeRetries"));
    this.readers = new ReaderCache({
      store,
      exclusion,
      stats,
      log,
      // An index written by another process (the CLI, a replica) may be waiting for a merge.
      onLoadedWhole: (key) => this.merges.schedule(key),
      directory: options.vectorDirectory,
    });
    const policy = options.mergePolicy ?? new TieredMergePolicy();
    this.merges = new MergeScheduler({ store, readers: this.readers, exclusion, stats, policy, log });
    this.writes = new WriteCoordinator({
      store,
      readers: this.readers,
      exclusion,
      merges: this.merges,
      stats,
      directory: options.vectorDirectory,
    });
    this.queries = new Queries(store, this.readers, stats);
  }

  /**
   * Stops listening to the store's changes and starting merges, and waits for running merges (which
   * no longer commit), so the store can be closed after it. The store itself is closed by its owner.
   */
  async close(): Promise<void> {
    const settled = this.merges.close();
    this.readers.close();
    await settled;
  }

  /** Resolves once no merge is running (one that finishes may start the next: those are awaited too). */
  mergesSettled(): Promise<void> {
    return this.merges.settled();
  }

  /** True when cached indices are invalidated by the store's change feed rather than checked per query. */
  get changeFeedLive(): boolean {
    return this.readers.feed?.live ?? false;
  }

  /** Segments loaded, bytes loaded and merges completed by this process, all indices. */
  get segmentCountersTotal(): Readonly<SegmentCounters> {
    return this.figures.segmentTotals;
  }

  build(input: BuildInput): Promise<BuildOutput> {
    return this.writes.build(input);
  }

  /** Adds documents to an existing index, replacing those whose id is already there. */
  upsertDocuments(key: IndexKey, inputs: DocumentInput[], embedding?: WriteEmbedding): Promise<BuildOutput> {
    return this.writes.applyDocumentChanges(key, { upsert: inputs, deleteIds: [], embedding });
  }

  /**
   * Upserts and deletes documents of an existing index in one atomic write (folder sync). Deleting an
   * id the index does not hold is a no-op; an id both upserted and deleted is upserted.
   */
  applyDocumentChanges(key: IndexKey, change: DocumentChange): Promise<BuildOutput> {
    return this.writes.applyDocumentChanges(key, change);
  }

  deleteDocument(key: IndexKey, documentId: string): Promise<IndexMeta> {
    return this.writes.deleteDocument(key, documentId);
  }

  deleteIndex(key: IndexKey): Promise<void> {
    return this.writes.deleteIndex(key);
  }

  listIndices(tenantId: string | null): Promise<IndexMeta[]> {
    return this.store.listIndices(tenantId);
  }

  /** Every document's id, source and content hash (folder sync). A missing index is a 404. */
  async listDocuments(key: IndexKey): Promise<DocumentListing[]> {
    await this.requireMeta(key);
    return this.store.listDocuments(key);
  }

  requireMeta(key: IndexKey): Promise<IndexMeta> {
    return this.writes.requireMeta(key);
  }

  query(input: QueryInput): Promise<QueryOutput> {
    return this.queries.query(input);
  }

  /**
   * The whole system's figures (tenantId null), or one tenant's share: its indices, its requests'
   * counts and latencies, its storage; process-wide figures (memory, cache) are left out for it.
   */
  stats(tenantId: string | null = null) {
    return this.figures.report(this.store, tenantId, () => ({
      runningMerges: this.merges.runningOfTenant(tenantId),
      loadedIndices: this.readers.size,
      feed: this.readers.feed,
    }));
  }

  /** One index's segments (loading it if needed) and this process's segment counters of it. */
  async indexStats(key: IndexKey): Promise<IndexStats> {
    const loaded = await this.readers.load(key);
    const counters = this.figures.indexCounters(key);
    return {
      meta: loaded.meta,
      // By id (the order segments were written in), whatever order the engine holds them in.
      segments: loaded.engine.segments().sort((a, b) => a.id - b.id),
      deletedChunks: loaded.engine.deletedDocumentCount,
      vectors: loaded.engine.vectorStats(),
      merges: { completed: counters.mergesCompleted, running: this.merges.runningOf(key) },
      loaded: { segmentsLoaded: counters.segmentsLoaded, bytesLoaded: counters.bytesLoaded },
    };
  }

  /**
   * The served version of an index: from the cache while it is known current (announced changes, or
   * the store's version unchanged), else brought up to the store's version (catch-up or load).
   */
  load(key: IndexKey): Promise<LoadedIndex> {
    return this.readers.load(key);
  }
}
