/**
 * The RAG service's vector directory (RagServiceOptions.vectorDirectory: the server's VECTOR_SPILL_DIR):
 * the codes of a segment with a graph live in it while the served index holds the segment; an index the
 * reader cache lets go (replaced) keeps its files while a query that acquired it is still running, and
 * gives them back when that query ends; a deleted index leaves nothing open.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";

import type { Embedder } from "../../src/rag/retrieval/embedder.js";
import { RagService } from "../../src/rag/service.js";
import { RamDirectory } from "../../src/rag/search/index.js";
import { DEFAULT_GRAPH_THRESHOLD } from "../../src/rag/search/vectors/segment-vectors.js";
import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import { HashEmbedder } from "../helpers/hash-embedder.js";

const KEY = { tenantId: "default", name: "spilled" };
const DIMENSION = 8;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-service-directory-"));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Enough one-chunk documents for the service's segment to get an HNSW graph (its codes spill). */
const documents = Array.from({ length: DEFAULT_GRAPH_THRESHOLD }, (_, i) => ({
  id: `d${i}`,
  text: `entry ${i} about lighthouse ${i % 97} and harbour ${i % 89}`,
}));

/** An embedder whose query embedding waits for `open()`: a query held between its load and its search. */
class GatedEmbedder implements Embedder {
  readonly description = "gated hash embedder (tests)";
  readonly model: string;
  readonly dimension: number;
  private readonly inner: HashEmbedder;
  private gate: Promise<void> | null = null;
  open: () => void = () => undefined;
  constructor(inner: HashEmbedder) {
    this.inner = inner;
    this.model = inner.model;
    this.dimension = DIMENSION;
  }
  /** Holds the next embeddings until `open()`. */
  shut(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }
  async close(): Promise<void> {}
  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    if (this.gate !== null) await this.gate;
    return this.inner.embed(texts);
  }
}

describe("the service's vector directory", () => {
  it("holds the served index's codes, through a replace during a query, until the index is deleted", async () => {
    const directory = new RamDirectory();
    const store = SqliteIndexStore.open(dir);
    const service = new RagService(store, { vectorDirectory: directory });
    const embedder = new HashEmbedder("hash-test", DIMENSION);
    const build = (mode: "create" | "replace") =>
      service.build({
        key: KEY,
        documents,
        chunkSize: 1000,
        overlap: 0,
        scorer: "bm25",
        mode,
        embedding: { embedder, storage: "i8" },
      });
    try {
      await build("create");
      assert.equal(directory.openFiles, 1, "the written segment's codes are in the directory");

      const gated = new GatedEmbedder(embedder);
      gated.shut();
      const query = service.query({
        key: KEY,
        query: "lighthouse 7 harbour",
        topK: 5,
        minScore: 0,
        retrieval: "dense",
        embedderFor: () => gated,
      });
      // The query has acquired the served index and waits for its embedding: replace the index now.
      await new Promise((resolve) => setImmediate(resolve));
      await build("replace");
      assert.equal(directory.openFiles, 2, "the replaced index keeps its file while the query holds it");
      gated.open();
      // Its search reads the replaced index's codes: it answers rather than failing on a closed file
      // (its hits are keys of the replaced index, which the store no longer holds: no results).
      const answered = await query;
      assert.equal(answered.retrieval, "dense");
      assert.deepEqual(answered.results, []);
      assert.equal(directory.openFiles, 1, "the query is over: the replaced index's file is closed");

      await service.deleteIndex(KEY);
      assert.equal(directory.openFiles, 0);
    } finally {
      await service.close();
      await store.close();
    }
  });
});
