/**
 * The in-process part of bench/segments.ts, run as a child process (with --expose-gc) so that its
 * memory and time are its own:
 *
 *   node --expose-gc --import tsx bench/lib/segments-engine.ts '<EngineParameters as JSON>'
 *
 * Prints one line of JSON (EngineResult). Measures: a one-shot build of the whole corpus; batched
 * ingestion (batchSize documents per write, the merge policy running as the service runs it); query
 * latency right after the batched ingestion (many segments) and after merging to one segment, on the
 * same queries; the cost of one-document adds and deletes.
 */
import {
  IndexWriter,
  SegmentedIndex,
  TieredMergePolicy,
  mergeInBackground,
} from "../../src/rag/search/index.js";
import { seededRandom } from "../../scripts/lib/seeded-random.js";
import { loadBaseChunks, scaledChunk } from "./corpus-scale.js";
import {
  TOP_K,
  extraChunkIndex,
  latency,
  loadQueries,
  type EngineParameters,
  type EngineResult,
  type Latency,
} from "./segments-common.js";

const MB = 1024 * 1024;

function log(message: string): void {
  process.stderr.write(`[segments:engine] ${message}\n`);
}

const gc = (): void => (globalThis as { gc?: () => void }).gc?.();

/** One warm-up pass, then one timed pass (as the Lucene harness does). */
function timeQueries(queries: readonly string[], search: (query: string) => unknown): Latency {
  for (const q of queries) search(q);
  const times: number[] = [];
  for (const q of queries) {
    const start = performance.now();
    search(q);
    times.push(performance.now() - start);
  }
  return latency(times);
}

/**
 * Merges as the service does (src/rag/service.ts): after a write, unless a merge is running, the
 * policy's first pick is merged on a worker thread, committed, and the policy asked again.
 */
class BackgroundMerges {
  private running: Promise<void> | null = null;
  private readonly policy = new TieredMergePolicy();
  merges = 0;
  constructor(private readonly index: SegmentedIndex) {}

  schedule(): void {
    if (this.running) return;
    const ids = this.policy.findMerges(this.index.segments())[0];
    if (!ids || ids.length === 0) return;
    this.running = mergeInBackground(this.index, ids).then((result) => {
      this.index.prepareMerge(result).apply();
      this.merges++;
      this.running = null;
      this.schedule();
    });
  }

  /** Resolves once no merge is running and the policy picks none. */
  async settle(): Promise<void> {
    while (this.running) await this.running;
  }
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

async function main(p: EngineParameters): Promise<void> {
  const base = loadBaseChunks(p.dir);
  const queries = loadQueries(p.dir, p.queries);
  const result: EngineResult = { chunks: p.chunks, queries: queries.length };
  /** One JSON line per finished step: the parent keeps the last one if it has to stop this worker. */
  const report = (figures: Partial<EngineResult>): void => {
    Object.assign(result, figures);
    process.stdout.write(`${JSON.stringify(result)}\n`);
  };
  const chunkText = (i: number): string => scaledChunk(base, i);
  let peakRss = 0;
  const sampleRss = (): void => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  };
  // One-shot: every text in one write (the texts are made before the clock starts).
  gc();
  peakRss = 0;
  let texts: string[] | null = Array.from({ length: p.chunks }, (_, i) => chunkText(i));
  const characters = texts.reduce((sum, text) => sum + text.length, 0);
  sampleRss();
  let started = performance.now();
  let oneShot: SegmentedIndex | null = SegmentedIndex.create({ scorer: "bm25" });
  new IndexWriter(oneShot).prepare({ add: texts }).apply();
  const oneShotMs = performance.now() - started;
  sampleRss();
  const oneShotPeakRssMB = peakRss / MB;
  texts = null;
  log(`one-shot build of ${p.chunks} chunks: ${(oneShotMs / 1000).toFixed(1)} s`);
  const oneShotIndex = oneShot;
  const queryOneShot = timeQueries(queries, (q) => oneShotIndex.search(q, { topK: TOP_K }));
  report({ characters, oneShotMs, oneShotPeakRssMB, queryOneShot });
  oneShot = null;
  gc();

  // Batched, merges running in the background as the service runs them.
  peakRss = 0;
  const index = SegmentedIndex.create({ scorer: "bm25" });
  const writer = new IndexWriter(index);
  const merges = new BackgroundMerges(index);
  const keys = new Uint32Array(p.chunks);
  const batchTimes: number[] = [];
  /** Making the texts is the corpus generator's time, not ingestion's: subtracted. */
  let generationMs = 0;
  started = performance.now();
  for (let first = 0; first < p.chunks; first += p.batchSize) {
    const count = Math.min(p.batchSize, p.chunks - first);
    const generationStart = performance.now();
    const batch = Array.from({ length: count }, (_, j) => chunkText(first + j));
    const batchStart = performance.now();
    generationMs += batchStart - generationStart;
    const prepared = writer.prepare({ add: batch });
    prepared.apply();
    for (let j = 0; j < count; j++) keys[first + j] = prepared.keys[j]!;
    merges.schedule();
    batchTimes.push(performance.now() - batchStart);
    // Lets a finished merge be committed between writes, as between two requests.
    await yieldToEventLoop();
    if (first % 100_000 === 0) {
      sampleRss();
      log(`batched: ${first} documents, ${index.segments().length} segments, ${merges.merges} merges`);
    }
  }
  const batchedMs = performance.now() - started - generationMs;
  await merges.settle();
  const batchedSettledMs = performance.now() - started - generationMs;
  sampleRss();
  const segmentsAfterBatched = index.segments().length;
  log(
    `batched: ${(batchedMs / 1000).toFixed(1)} s (${(batchedSettledMs / 1000).toFixed(1)} s with merges), ` +
      `${segmentsAfterBatched} segments`,
  );
  const manyHits = queries.map((q) => index.search(q, { topK: TOP_K }));
  const queryManySegments = timeQueries(queries, (q) => index.search(q, { topK: TOP_K }));
  report({
    batchedMs,
    batchedSettledMs,
    batches: batchTimes.length,
    batchLatency: latency(batchTimes),
    mergesRun: merges.merges,
    segmentsAfterBatched,
    batchedPeakRssMB: peakRss / MB,
    queryManySegments,
  });

  // Merged to one segment.
  started = performance.now();
  const all = index.segments().map((segment) => segment.id);
  if (all.length > 1) index.prepareMerge(await mergeInBackground(index, all)).apply();
  const mergeToOneMs = performance.now() - started;
  const queryMerged = timeQueries(queries, (q) => index.search(q, { topK: TOP_K }));
  const sameHitsQueries = queries.filter((q, i) => {
    const before = manyHits[i] ?? [];
    const after = index.search(q, { topK: TOP_K });
    return (
      before.length === after.length &&
      before.every((h, j) => h.key === after[j]?.key && h.score === after[j]?.score)
    );
  }).length;
  report({ mergeToOneMs, queryMerged, sameHitsQueries });

  // One-document writes (no merges running meanwhile).
  const appendTimes: number[] = [];
  const deleteTimes: number[] = [];
  const random = seededRandom(14);
  const deleted = new Set<number>();
  for (let i = 0; i < p.writeSamples; i++) {
    const text = chunkText(extraChunkIndex(p.chunks, i));
    let t = performance.now();
    writer.prepare({ add: [text] }).apply();
    appendTimes.push(performance.now() - t);
    let victim: number;
    do victim = Math.floor(random() * p.chunks);
    while (deleted.has(victim));
    deleted.add(victim);
    const victimText = chunkText(victim);
    t = performance.now();
    writer.prepare({ delete: [{ key: keys[victim]!, text: victimText }] }).apply();
    deleteTimes.push(performance.now() - t);
  }
  report({ appendOne: latency(appendTimes), deleteOne: latency(deleteTimes) });
}

const parameters = JSON.parse(process.argv[2] ?? "{}") as EngineParameters;
await main(parameters);
