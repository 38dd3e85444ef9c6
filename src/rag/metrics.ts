/** RAG-specific Prometheus metrics: stored counts, segments, merges, query and build durations. */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { RagService, SegmentCounters } from "./service.js";
import { indexTotals, type IndexStore } from "./store/types.js";

export interface RagMetrics {
  queries: Counter<"answer_mode">;
  queryDuration: Histogram;
  builds: Counter<"kind">;
  buildDuration: Histogram<"kind">;
}

export function createRagMetrics(registry: Registry, store: IndexStore, service: RagService): RagMetrics {
  const totals = async () => indexTotals(await store.listIndices(null));
  for (const [name, help, field] of [
    ["lectern_rag_indices", "Indices in the store, all tenants", "indices"],
    ["lectern_rag_documents", "Documents in the store, all tenants", "documents"],
    ["lectern_rag_chunks", "Chunks in the store, all tenants", "chunks"],
    ["lectern_rag_segments", "Index segments in the store, all tenants", "segments"],
    [
      "lectern_rag_deleted_chunks",
      "Deleted chunks still held by a segment until its next merge, all tenants",
      "deletedChunks",
    ],
  ] as const) {
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        this.set((await totals())[field]);
      },
    });
  }
  // The service counts these itself (a merge or a catch-up happens outside any request); each scrape
  // adds what it counted since the previous one, so the counters stay monotonic.
  for (const [name, help, field] of [
    ["lectern_rag_merges_total", "Segment merges committed by this process", "mergesCompleted"],
    ["lectern_rag_segments_loaded_total", "Segments this process read from the store", "segmentsLoaded"],
    [
      "lectern_rag_segment_bytes_loaded_total",
      "Bytes of the segments this process read from the store",
      "bytesLoaded",
    ],
  ] as const satisfies ReadonlyArray<readonly [string, string, keyof SegmentCounters]>) {
    let reported = 0;
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        const total = service.segmentCountersTotal[field];
        if (total > reported) this.inc(total - reported);
        reported = total;
      },
    });
  }
  return {
    queries: new Counter({
      name: "lectern_rag_queries_total",
      help: "Queries answered, by answer mode",
      labelNames: ["answer_mode"],
      registers: [registry],
    }),
    queryDuration: new Histogram({
      name: "lectern_rag_query_duration_seconds",
      help: "Retrieval time of a query (search and result assembly, answer excluded)",
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1],
      registers: [registry],
    }),
    builds: new Counter({
      name: "lectern_rag_writes_total",
      help: "Index writes committed, by kind (build, append, documents, sync)",
      labelNames: ["kind"],
      registers: [registry],
    }),
    buildDuration: new Histogram({
      name: "lectern_rag_write_duration_seconds",
      help: "Time to chunk, index and commit a write, by kind",
      labelNames: ["kind"],
      buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers: [registry],
    }),
  };
}
