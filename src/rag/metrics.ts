/** RAG-specific Prometheus metrics: stored counts, query and build durations. */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { IndexStore } from "./store/types.js";

export interface RagMetrics {
  queries: Counter<"answer_mode">;
  queryDuration: Histogram;
  builds: Counter<"kind">;
  buildDuration: Histogram<"kind">;
}

export function createRagMetrics(registry: Registry, store: IndexStore): RagMetrics {
  const totals = async () => {
    const indices = await store.listIndices(null);
    return {
      indices: indices.length,
      documents: indices.reduce((sum, meta) => sum + meta.documentsCount, 0),
      chunks: indices.reduce((sum, meta) => sum + meta.chunksCount, 0),
    };
  };
  for (const [name, help, field] of [
    ["lectern_rag_indices", "Indices in the store, all tenants", "indices"],
    ["lectern_rag_documents", "Documents in the store, all tenants", "documents"],
    ["lectern_rag_chunks", "Chunks in the store, all tenants", "chunks"],
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
      help: "Index writes committed, by kind (build, append, documents)",
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
