/**
 * What this process did, for /rag/stats and /metrics: requests served per kind (the process's and each
 * tenant's share, #23), query latencies, and segment counters (loaded, bytes, merges) per index and in
 * total. Counters only; the figures that live elsewhere (indices in the store, running merges, the
 * reader cache) are handed in when a report is made.
 */
import type { ChangeFeed, IndexKey, IndexMeta, IndexStore } from "../store/types.js";
import { indexTotals } from "../store/types.js";
import { cacheKey, round } from "./common.js";
import type { SegmentCounters } from "./types.js";

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

export type ActivityKind = "queries" | "builds" | "documentWrites" | "writeRetries";
/** What one tenant's requests did in this process: its share of /rag/stats (#23). */
type Activity = Record<ActivityKind, number> & { latencies: LatencyWindow };
/** Tenants whose activity is kept; past it the longest-known is forgotten (bounded memory). */
const MAX_TENANTS_TRACKED = 10_000;

const zeroCounters = (): SegmentCounters => ({ segmentsLoaded: 0, bytesLoaded: 0, mergesCompleted: 0 });

/** Figures of the parts the counters do not hold, read by the façade when a report is made. */
export interface LiveFigures {
  /** Running merges of the tenant's indices (of all, for null). */
  runningMerges: number;
  loadedIndices: number;
  feed: ChangeFeed | null;
}

export class ServiceStats {
  private readonly startedAt = Date.now();
  private readonly latencies = new LatencyWindow();
  private readonly counters = { queries: 0, builds: 0, documentWrites: 0, writeRetries: 0 };
  private readonly activity = new Map<string, Activity>();
  /** Segment counters of this process, all indices (monotonic: /metrics counters read them). */
  readonly segmentTotals: SegmentCounters = zeroCounters();
  private readonly segmentCounters = new Map<string, SegmentCounters & { tenantId: string }>();

  /** Counts one request of `tenantId` in the process's figures and in the tenant's own. */
  countActivity(tenantId: string, kind: ActivityKind, latencyMs?: number): void {
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

  /** Adds to an index's segment counters and the process's totals. */
  countSegments(key: IndexKey, change: Partial<SegmentCounters>): void {
    const indexId = cacheKey(key);
    let counters = this.segmentCounters.get(indexId);
    if (!counters) {
      counters = { tenantId: key.tenantId, ...zeroCounters() };
      this.segmentCounters.set(indexId, counters);
    }
    for (const field of ["segmentsLoaded", "bytesLoaded", "mergesCompleted"] as const) {
      counters[field] += change[field] ?? 0;
      this.segmentTotals[field] += change[field] ?? 0;
    }
  }

  /** An index created again under this name starts its own counts (the process totals keep them). */
  forgetIndex(key: IndexKey): void {
    this.segmentCounters.delete(cacheKey(key));
  }

  /** One index's segment counters (zeros when it has none). */
  indexCounters(key: IndexKey): SegmentCounters {
    const counters = this.segmentCounters.get(cacheKey(key));
    return {
      segmentsLoaded: counters?.segmentsLoaded ?? 0,
      bytesLoaded: counters?.bytesLoaded ?? 0,
      mergesCompleted: counters?.mergesCompleted ?? 0,
    };
  }

  /** Segment counters of one tenant's indices (null: the process's totals, deleted indices included). */
  private countersOf(tenantId: string | null): SegmentCounters {
    if (tenantId === null) return { ...this.segmentTotals };
    const sum = zeroCounters();
    for (const counters of this.segmentCounters.values()) {
      if (counters.tenantId !== tenantId) continue;
      sum.segmentsLoaded += counters.segmentsLoaded;
      sum.bytesLoaded += counters.bytesLoaded;
      sum.mergesCompleted += counters.mergesCompleted;
    }
    return sum;
  }

  /**
   * The whole system's figures (tenantId null), or one tenant's share: its indices, its requests'
   * counts and latencies, its storage; process-wide figures (memory, cache) are left out for it.
   */
  async report(store: IndexStore, tenantId: string | null, liveFigures: () => LiveFigures) {
    const indices = await store.listIndices(tenantId);
    const live = liveFigures();
    const memory = process.memoryUsage();
    const segments = this.countersOf(tenantId);
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
      vectors: vectorTotals(indices),
      tenants_count: new Set(indices.map((m) => m.tenantId)).size,
      queries_served: counts.queries,
      builds_served: counts.builds,
      document_writes_served: counts.documentWrites,
      write_retries: counts.writeRetries,
      merges: { completed: segments.mergesCompleted, running: live.runningMerges },
      loaded: { segments_loaded: segments.segmentsLoaded, bytes_loaded: segments.bytesLoaded },
      query_latency: latencies.summary(),
      storage: { backend: store.kind, size_bytes: await storageBytes(store, tenantId, indices) },
      uptime_s: Math.round((Date.now() - this.startedAt) / 1000),
      ...(tenantId === null
        ? {
            cache: { loaded_indices: live.loadedIndices, validation: validationMode(live.feed) },
            memory: { rss_bytes: memory.rss, heap_used_bytes: memory.heapUsed },
          }
        : {}),
    };
  }
}

/**
 * Indices with embeddings, their vectors (one per live chunk) and their models; per index, with
 * dimension and bytes, in GET /rag/stats/{index_name}.
 */
function vectorTotals(indices: IndexMeta[]) {
  const withVectors = indices.filter((meta) => meta.vectors !== null);
  return {
    indices_count: withVectors.length,
    count: withVectors.reduce((sum, meta) => sum + meta.chunksCount, 0),
    models: [...new Set(withVectors.map((meta) => meta.vectors!.model))].sort(),
  };
}

/** The store's whole size, or the sum of one tenant's indices. */
async function storageBytes(store: IndexStore, tenantId: string | null, indices: IndexMeta[]) {
  return tenantId === null ? await store.sizeBytes() : indices.reduce((sum, m) => sum + m.sizeBytes, 0);
}

/** How cached indices are validated now (see reader-cache.ts). */
function validationMode(feed: ChangeFeed | null) {
  return feed === null ? "per_query" : feed.live ? "change_feed" : "per_query_feed_down";
}
