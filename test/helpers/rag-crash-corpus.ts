/** Deterministic documents for the RAG crash tests, shared by the tests and their child processes. */
import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import type { IndexWrite } from "../../src/rag/store/types.js";
import { makeProse, seededRandom } from "./text-fixtures.js";

export const CRASH_INDEX = "crashy";
export const CRASH_TENANT = "crash-tenant";
/** A query whose terms occur in both versions of the index. */
export const CRASH_QUERY = {
  index_name: CRASH_INDEX,
  tenant_id: CRASH_TENANT,
  query: "tenant snapshot version after a crash write",
  top_k: 20,
};

/** `count` documents with ids `${prefix}${i}`, about `length` characters each. */
export function crashDocuments(count: number, prefix: string, seed: number, length = 1500) {
  const random = seededRandom(seed);
  return Array.from({ length: count }, (_, i) => ({
    id: `${prefix}${i}`,
    title: `${prefix} document ${i}`,
    text: makeProse(random, length),
    metadata: { n: i, version: prefix },
  }));
}

/** The big `replace` build the child starts and the parent kills. */
export function crashBuildRequest(count: number) {
  return {
    index_name: CRASH_INDEX,
    tenant_id: CRASH_TENANT,
    mode: "replace",
    scorer: "bm25",
    chunk_size: 400,
    overlap: 40,
    documents: crashDocuments(count, "v2-", 2),
  };
}

/**
 * The app's own SQLite store on `dataDir`, telling `report` "writing" right before the write
 * transaction of a build and "written <ms>" after it.
 */
export function openReportingStore(dataDir: string, report: (line: string) => void): SqliteIndexStore {
  const store = SqliteIndexStore.open(dataDir);
  const write = store.write.bind(store);
  store.write = async (change: IndexWrite) => {
    report("writing");
    const started = performance.now();
    const meta = await write(change);
    report(`written ${Math.round(performance.now() - started)}`);
    return meta;
  };
  return store;
}

/** SQLite's integrity check of the store on `dataDir` ("ok" when intact). */
export function integrity(dataDir: string): string {
  const store = SqliteIndexStore.open(dataDir);
  try {
    return store.integrityCheck();
  } finally {
    void store.close();
  }
}
