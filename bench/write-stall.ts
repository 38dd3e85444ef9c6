/**
 * How long one large write with vectors holds the event loop (#26: a write of 10k vectors or more builds
 * its segment's HNSW graph on a worker thread, as merges do), against how long building the same
 * vectors (graph included) on the calling thread takes: the stall the write would cause with its graph
 * built on the loop.
 *
 *   node --import tsx bench/write-stall.ts [--sizes 20000,100000]
 *
 * Per size: N one-chunk documents with clustered synthetic 384-d vectors (scripts/lib/synthetic-vectors.ts;
 * the embedder below is a lookup, so embedding costs nothing), created as one index through RagService
 * on SQLite while a 5 ms timer records the longest gap between its ticks; then the same vectors built as
 * a segment's i8 vectors on this thread, timed. Prints one JSON line per size; no result file.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { clusteredVectors, rowsOf } from "../scripts/lib/synthetic-vectors.js";
import type { Embedder } from "../src/rag/retrieval/embedder.js";
import { buildSegmentVectors } from "../src/rag/search/core/dense.js";
import { RagService } from "../src/rag/service.js";
import { SqliteIndexStore } from "../src/rag/store/sqlite-store.js";

const DIMENSION = 384;
const { values: args } = parseArgs({ options: { sizes: { type: "string", default: "20000,100000" } } });

/** Each text's vector, made beforehand: the benchmark's input, as an embedding server's answers. */
class LookupEmbedder implements Embedder {
  readonly model = "clustered-384";
  readonly dimension = DIMENSION;
  readonly description = "precomputed clustered vectors (bench/write-stall.ts)";
  constructor(private readonly byText: Map<string, Float32Array>) {}
  embed(texts: readonly string[]): Promise<Float32Array[]> {
    return Promise.resolve(texts.map((text) => this.byText.get(text) ?? new Float32Array(DIMENSION).fill(1)));
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Runs `work`, recording the longest gap between the ticks of a 5 ms timer meanwhile. */
async function longestStall(work: () => Promise<unknown>): Promise<{ ms: number; stallMs: number }> {
  const started = performance.now();
  let last = started;
  let stall = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    stall = Math.max(stall, now - last);
    last = now;
  }, 5);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  const ended = performance.now();
  return { ms: ended - started, stallMs: Math.max(stall, ended - last) };
}

async function measure(size: number): Promise<Record<string, number>> {
  const rows = rowsOf(clusteredVectors({ count: size, dimension: DIMENSION, seed: 26 }), DIMENSION);
  const documents = rows.map((_, i) => ({ id: `d${i}`, text: `document ${i} of the write stall benchmark` }));
  const embedder = new LookupEmbedder(new Map(documents.map((d, i) => [d.text, rows[i]!])));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-write-stall-"));
  const store = SqliteIndexStore.open(dir);
  const service = new RagService(store);
  try {
    const write = await longestStall(() =>
      service.build({
        key: { tenantId: "default", name: "stall" },
        documents,
        chunkSize: 2000,
        overlap: 0,
        scorer: "bm25",
        mode: "create",
        embedding: { embedder, storage: "i8" },
      }),
    );
    const started = performance.now();
    buildSegmentVectors({ dimension: DIMENSION, storage: "i8" }, rows);
    const inPlaceMs = performance.now() - started;
    return {
      size,
      writeMs: Math.round(write.ms),
      longestStallMs: Math.round(write.stallMs),
      vectorsBuiltInPlaceMs: Math.round(inPlaceMs),
    };
  } finally {
    await service.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

for (const size of args.sizes.split(",").map(Number)) console.log(JSON.stringify(await measure(size)));
