/**
 * Hybrid retrieval on the segmented engine (issue #26), through the real RagService on a SQLite store in
 * a temporary directory:
 *
 *   node --import tsx bench/hybrid.ts [--quick] [--sizes 10000,100000,1000000] [--queries 200]
 *                                      [--append-samples 30]
 *
 * One index grows through the stages (10k, then each size asked for): built with mode "create", then
 * appended to in writes of up to 100,000 documents, merges running as the service runs them (awaited,
 * untimed, before each measurement). Documents are the scale corpus (bench/lib/corpus-scale.ts, grown
 * from the Debian documentation corpus or SciFact; one chunk each, as bench/segments.ts); every chunk
 * carries a 384-d vector stored as i8. At each stage:
 * 1. query latency of lexical, hybrid (lexical + dense fused by RRF, the service's default for an index
 *    with vectors) and dense retrieval, top 10, and of lexical and dense at the depth hybrid asks each
 *    for (candidatePool: 50), the collection's queries, interleaved (each query run by every subject
 *    back to back, the order rotating, one untimed pass then PASSES timed ones); the ratio hybrid ÷
 *    lexical at top 10 is the issue's (≤ 3× at 1M);
 * 2. one-document appends with their vector, each timed with its commit; the time spent in the embedder
 *    is subtracted (the issue excludes embedding time), and merges the appends start are awaited
 *    between samples, untimed; the p50 at N ÷ the p50 at 10k is the issue's (≤ 2× at 1M);
 * 3. a fresh child process (this script with --serve) opens the same store, loads the index by serving
 *    queries (hybrid and lexical), and reads its resident memory from /proc/self/status (the issue's
 *    ≤ 1.2 GB at 1M with 384-d i8 vectors), with process.memoryUsage()'s breakdown; as a server, it
 *    spills the codes of segments with a graph (VECTOR_SPILL_DIR; here inside the data directory).
 * The vectors come from SyntheticEmbedder below: seeded, clustered 384-d vectors derived from each text
 * (the distribution of scripts/lib/synthetic-vectors.ts), so that query and append vectors are as cheap
 * as a lookup. It is the benchmark's input, as an embedding server's answers would be, not a stand-in
 * for any of our code: the timed paths are the service's own. Its vectors carry no meaning (hybrid
 * results are not measured for relevance here; `npm run eval:ir` does that with a real model).
 * Writes bench/results/hybrid.json (rows: bench/lib/summary-rows.ts; section: bench/run-all.ts).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { gaussian } from "../scripts/lib/synthetic-vectors.js";
import { seededRandom } from "../scripts/lib/seeded-random.js";
import type { Embedder } from "../src/rag/retrieval/embedder.js";
import { FsDirectory } from "../src/rag/search/fs-directory.js";
import { RagService, type DocumentInput } from "../src/rag/service.js";
import { candidatePool } from "../src/rag/service/queries.js";
import { SqliteIndexStore } from "../src/rag/store/sqlite-store.js";
import type { IndexKey, VectorStorage } from "../src/rag/store/types.js";
import { repoRoot } from "./lib/bench-env.js";
import { loadBaseChunks, scaledChunk } from "./lib/corpus-scale.js";
import { fmt } from "./lib/report.js";
import { writeResult } from "./lib/result.js";
import { baseCorpus, latency, loadQueries, type Latency } from "./lib/segments-common.js";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    sizes: { type: "string" },
    queries: { type: "string" },
    "append-samples": { type: "string" },
    serve: { type: "string" }, // child mode: the data directory whose index to serve
  },
});

const QUICK = args.quick;
const DIMENSION = 384;
const CLUSTERS = 500;
const SPREAD = 0.8;
const SEED = 26;
const STORAGE: VectorStorage = "i8";
/** The size the append figure at N is compared with. */
const REFERENCE_SIZE = 10_000;
/** Documents per write while the index grows (one segment each). */
const WRITE_BATCH = 100_000;
const TOP_K = 10;
const CHUNKING = { chunkSize: 2000, overlap: 128 } as const;
const PASSES = 2;
const SERVE_QUERIES = 100;
const KEY: IndexKey = { tenantId: "default", name: "hybrid" };
type Retrieval = "lexical" | "hybrid" | "dense";
/**
 * What is timed per query: the three retrievals at top 10, and lexical and dense alone at the depth the
 * hybrid query asks each of them for (candidatePool), which tells where the hybrid query's time goes.
 */
const POOL = candidatePool(TOP_K);
const SUBJECTS: ReadonlyArray<{ name: string; retrieval: Retrieval; topK: number }> = [
  { name: "lexical", retrieval: "lexical", topK: TOP_K },
  { name: "hybrid", retrieval: "hybrid", topK: TOP_K },
  { name: "dense", retrieval: "dense", topK: TOP_K },
  { name: "lexicalPool", retrieval: "lexical", topK: POOL },
  { name: "densePool", retrieval: "dense", topK: POOL },
];

function log(message: string): void {
  process.stderr.write(`[hybrid ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/**
 * Seeded clustered vectors derived from each text: the text's FNV-1a hash picks one of CLUSTERS random
 * unit-scale centres and seeds the Gaussian noise added to it (norm ≈ SPREAD of the centre's), as
 * scripts/lib/synthetic-vectors.ts makes them. The same text always gets the same vector. Time spent in
 * `embed` is summed in `embedMs`, so that timed writes and queries can leave it out.
 */
class SyntheticEmbedder implements Embedder {
  readonly model = `synthetic-clustered-${DIMENSION}`;
  readonly dimension = DIMENSION;
  readonly description = "seeded clustered synthetic vectors (bench/hybrid.ts)";
  embedMs = 0;
  private readonly centres = new Float32Array(CLUSTERS * DIMENSION);
  private readonly scale = 1 / Math.sqrt(DIMENSION);

  constructor() {
    const normal = gaussian(seededRandom(SEED));
    for (let i = 0; i < this.centres.length; i++) this.centres[i] = normal() * this.scale;
  }

  vectorOf(text: string): Float32Array {
    let h = 0x811c9dc5;
    for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
    h >>>= 0;
    const centre = (h % CLUSTERS) * DIMENSION;
    const normal = gaussian(seededRandom(h ^ SEED));
    const out = new Float32Array(DIMENSION);
    for (let i = 0; i < DIMENSION; i++) out[i] = this.centres[centre + i]! + normal() * this.scale * SPREAD;
    return out;
  }

  embed(texts: readonly string[]): Promise<Float32Array[]> {
    const started = performance.now();
    const vectors = texts.map((text) => this.vectorOf(text));
    this.embedMs += performance.now() - started;
    return Promise.resolve(vectors);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

function memory(): { rssMB: number; peakRssMB: number } {
  const status = readFileSync("/proc/self/status", "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? NaN);
  return { rssMB: kb("VmRSS") / 1024, peakRssMB: kb("VmHWM") / 1024 };
}

const loadAverage = () => os.loadavg().map((v) => Math.round(v * 100) / 100);

/** process.memoryUsage() in MB: the heap, native memory tied to JS objects, and array buffers. */
function memoryBreakdown(): Record<string, number> {
  const usage = process.memoryUsage();
  const mb = (bytes: number) => Math.round((bytes / (1 << 20)) * 10) / 10;
  return {
    rssMB: mb(usage.rss),
    heapUsedMB: mb(usage.heapUsed),
    externalMB: mb(usage.external),
    arrayBuffersMB: mb(usage.arrayBuffers),
  };
}

const corpus = baseCorpus();
if (!corpus) {
  log("no base corpus: run `bash bench/prepare-debian-corpus.sh` (or set LECTERN_IR_DIR to SciFact)");
  process.exit(2);
}

/** Child mode: a fresh process serving the index in `dataDir`; prints its memory and load time. */
async function serve(dataDir: string): Promise<void> {
  const queries = loadQueries(corpus!.dir, SERVE_QUERIES);
  const before = memory();
  // As the RAG app does at start-up (VECTOR_SPILL_DIR, by default under DATA_DIR).
  const vectorDirectory = FsDirectory.open(path.join(dataDir, "vector-spill"));
  const store = SqliteIndexStore.open(dataDir);
  const service = new RagService(store, { vectorDirectory });
  const embedder = new SyntheticEmbedder();
  const ask = (query: string, retrieval: Retrieval) =>
    service.query({ key: KEY, query, topK: TOP_K, minScore: 0, retrieval, embedderFor: () => embedder });
  const started = performance.now();
  await ask(queries[0] ?? "", "hybrid");
  const firstQueryMs = performance.now() - started;
  const times: number[] = [];
  for (const [i, query] of queries.entries()) {
    const t = performance.now();
    await ask(query, i % 2 === 0 ? "hybrid" : "lexical");
    times.push(performance.now() - t);
  }
  const stats = await service.indexStats(KEY);
  // Freed buffers go back on a background thread after a collection: collect, wait, collect.
  global.gc?.();
  await new Promise((resolve) => setTimeout(resolve, 500));
  global.gc?.();
  const after = memory();
  const usage = memoryBreakdown();
  await service.close();
  await store.close();
  console.log(
    JSON.stringify({
      before,
      after,
      memoryUsage: usage,
      firstQueryMs,
      query: latency(times),
      chunks: stats.meta.chunksCount,
      vectors: stats.vectors,
    }),
  );
}

function serveInChild(dataDir: string): Record<string, unknown> {
  const child = spawnSync(
    process.execPath,
    ["--expose-gc", "--import", "tsx", path.join(repoRoot, "bench/hybrid.ts"), "--serve", dataDir],
    { encoding: "utf8", maxBuffer: 1 << 20, stdio: ["ignore", "pipe", "inherit"] },
  );
  if (child.status !== 0) return { error: `serving child exited ${child.status}` };
  return JSON.parse(child.stdout.trim().split("\n").at(-1) ?? "{}") as Record<string, unknown>;
}

interface Stage {
  chunks: number;
  /** Writing the documents that grew the index to this stage (embedding included), and merges after. */
  growMs: number;
  growEmbedMs: number;
  mergeWaitMs: number;
  segments: number;
  /** Each segment's documents, largest first (what a dense search walks: graphs from 10k, scans below). */
  segmentSizes: number[];
  vectors: unknown;
  /** Embedding time subtracted from the query figures (mean per query, ms). */
  queryEmbedMeanMs: number;
  /** By subject (SUBJECTS' names). */
  query: Record<string, Latency>;
  append: Latency;
  appendEmbedMeanMs: number;
  serving: Record<string, unknown>;
  loadAverage: number[];
}

async function measure(): Promise<void> {
  const sizes = (args.sizes ?? (QUICK ? "10000,30000" : "10000,100000")).split(",").map(Number);
  for (const size of sizes)
    if (!Number.isInteger(size) || size < 1) throw new Error(`bad size ${String(size)}`);
  const stages = [...new Set([REFERENCE_SIZE, ...sizes])].sort((a, b) => a - b);
  const queryCount = Number(args.queries ?? (QUICK ? 50 : 200));
  const appendSamples = Number(args["append-samples"] ?? (QUICK ? 10 : 30));
  const command = `node --import tsx bench/hybrid.ts ${process.argv.slice(2).join(" ")}`.trim();
  const loadAtStart = loadAverage();
  const started = performance.now();
  log(`loading the base corpus (${corpus!.name})`);
  const base = loadBaseChunks(corpus!.dir);
  const queries = loadQueries(corpus!.dir, queryCount);
  const largest = stages.at(-1)!;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "lectern-bench-hybrid-"));
  const store = SqliteIndexStore.open(dataDir);
  const service = new RagService(store);
  const embedder = new SyntheticEmbedder();
  const results: Stage[] = [];
  let indexed = 0;
  let appended = 0;
  try {
    for (const stage of stages) {
      const growStart = performance.now();
      const growEmbed = embedder.embedMs;
      while (indexed < stage) {
        const count = Math.min(WRITE_BATCH, stage - indexed);
        const documents: DocumentInput[] = Array.from({ length: count }, (_, j) => ({
          id: `c${indexed + j}`,
          text: scaledChunk(base, indexed + j),
        }));
        if (indexed === 0) {
          await service.build({
            key: KEY,
            documents,
            ...CHUNKING,
            scorer: "bm25",
            mode: "create",
            embedding: { embedder, storage: STORAGE },
          });
        } else {
          await service.upsertDocuments(KEY, documents, { embedder });
        }
        indexed += count;
        log(`${indexed.toLocaleString("en")} documents written`);
      }
      const growMs = performance.now() - growStart;
      const growEmbedMs = embedder.embedMs - growEmbed;
      const mergeStart = performance.now();
      await service.mergesSettled();
      const mergeWaitMs = performance.now() - mergeStart;
      log(`${stage.toLocaleString("en")}: queries`);
      const { query, queryEmbedMeanMs } = await timeQueries(service, embedder, queries);
      log(
        `${stage.toLocaleString("en")}: lexical p50 ${fmt(query.lexical?.p50)} ms, hybrid p50 ${fmt(query.hybrid?.p50)} ms, ` +
          `at depth ${POOL}: lexical ${fmt(query.lexicalPool?.p50)} ms, dense ${fmt(query.densePool?.p50)} ms; appends`,
      );
      // Appended texts come from beyond the largest stage, so none is already in the index.
      const { append, appendEmbedMeanMs } = await timeAppends(service, embedder, appendSamples, (i) => {
        const n = largest + appended + i;
        return { id: `x${n}`, text: scaledChunk(base, n) };
      });
      appended += appendSamples;
      await service.mergesSettled();
      const stats = await service.indexStats(KEY);
      log(`${stage.toLocaleString("en")}: append p50 ${fmt(append.p50)} ms; a fresh process serving it`);
      const serving = serveInChild(dataDir);
      log(`${stage.toLocaleString("en")}: serving RSS ${fmt(Number(get(serving, "after", "rssMB")))} MB`);
      results.push({
        chunks: stats.meta.chunksCount,
        growMs,
        growEmbedMs,
        mergeWaitMs,
        segments: stats.segments.length,
        segmentSizes: stats.segments.map((s) => s.documentCount).sort((a, b) => b - a),
        vectors: stats.vectors,
        queryEmbedMeanMs,
        query,
        append,
        appendEmbedMeanMs,
        serving,
        loadAverage: loadAverage(),
      });
    }
  } finally {
    await service.close();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  const file = writeResult("hybrid", command, {
    quick: QUICK,
    base: corpus!.name,
    sizes: stages,
    referenceSize: REFERENCE_SIZE,
    writeBatch: WRITE_BATCH,
    dimension: DIMENSION,
    storage: STORAGE,
    embedder: { model: embedder.model, clusters: CLUSTERS, spread: SPREAD, seed: SEED },
    topK: TOP_K,
    candidatePool: POOL,
    queries: queries.length,
    passes: PASSES,
    appendSamples,
    serveQueries: SERVE_QUERIES,
    cores: os.availableParallelism(),
    loadAverage: { start: loadAtStart, end: loadAverage() },
    seconds: Math.round((performance.now() - started) / 1000),
    stages: results,
  });
  log(`wrote ${path.relative(repoRoot, file)}`);
}

function get(obj: unknown, ...keys: string[]): unknown {
  let value = obj;
  for (const key of keys) value = (value as Record<string, unknown> | undefined)?.[key];
  return value;
}

/**
 * Every query by every subject, back to back in a rotating order, one untimed pass then PASSES timed;
 * the time the embedder spent on each query is subtracted from it.
 */
async function timeQueries(service: RagService, embedder: SyntheticEmbedder, queries: string[]) {
  const samples = SUBJECTS.map(() => [] as number[]);
  let embedMs = 0;
  let embedded = 0;
  for (let pass = 0; pass <= PASSES; pass++) {
    for (const [q, query] of queries.entries()) {
      for (let i = 0; i < SUBJECTS.length; i++) {
        const r = (i + q + pass) % SUBJECTS.length;
        const subject = SUBJECTS[r]!;
        const embedBefore = embedder.embedMs;
        const t = performance.now();
        await service.query({
          key: KEY,
          query,
          topK: subject.topK,
          minScore: 0,
          retrieval: subject.retrieval,
          embedderFor: () => embedder,
        });
        const elapsed = performance.now() - t;
        const spent = embedder.embedMs - embedBefore;
        if (pass === 0) continue;
        samples[r]!.push(elapsed - spent);
        if (spent > 0) {
          embedMs += spent;
          embedded++;
        }
      }
    }
  }
  const query = Object.fromEntries(SUBJECTS.map(({ name }, i) => [name, latency(samples[i]!)]));
  return { query, queryEmbedMeanMs: embedded > 0 ? embedMs / embedded : 0 };
}

/** One-document appends with their vector, each timed with its commit, less the embedder's time. */
async function timeAppends(
  service: RagService,
  embedder: SyntheticEmbedder,
  samples: number,
  documentOf: (i: number) => DocumentInput,
) {
  const times: number[] = [];
  let embedMs = 0;
  for (let i = 0; i < samples; i++) {
    const document = documentOf(i);
    await service.mergesSettled();
    const embedBefore = embedder.embedMs;
    const t = performance.now();
    await service.upsertDocuments(KEY, [document], { embedder });
    const elapsed = performance.now() - t;
    const spent = embedder.embedMs - embedBefore;
    embedMs += spent;
    times.push(elapsed - spent);
  }
  return { append: latency(times), appendEmbedMeanMs: samples > 0 ? embedMs / samples : 0 };
}

if (args.serve !== undefined) await serve(args.serve);
else await measure();
