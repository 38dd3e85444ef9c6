/**
 * Segmented index costs on synthetic chunks (#14): the cost of a one-document append and delete at scale,
 * query time over many segments vs one merged segment, merge time, and resident memory.
 *
 *   node --expose-gc --import tsx bench/segmented-index.ts [chunks=200000] [segments=20]
 *
 * Chunks are ~53 postings each over a Zipf vocabulary that reaches ~1.1M distinct terms at 1M chunks
 * (the reference corpus). Timings are medians over repeated operations.
 */

import { writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

import { encodeSegment } from "../src/rag/search/core/segment-codec.js";
import {
  IndexWriter,
  mergeInBackground,
  mergeNow,
  SegmentedIndex,
  TieredMergePolicy,
  type ScorerName,
} from "../src/rag/search/index.js";
import { SegmentWriter } from "../src/rag/search/indexer/segment-writer.js";
import { seededRandom } from "../scripts/lib/seeded-random.js";

const chunks = Number(process.argv[2] ?? 200_000);
const segmentCount = Number(process.argv[3] ?? 20);
const MB = 1024 * 1024;

/** A letters-only word for id n ("q" prefix: no stop word, stems stay distinct enough). */
function word(n: number): string {
  let s = "q";
  do {
    s += String.fromCharCode(97 + (n % 26));
    n = Math.floor(n / 26);
  } while (n > 0);
  return s + "x";
}

const next = seededRandom(42);
/** Log-uniform draws over this many ids: nearly all of them occur at 1M chunks (~1.1M distinct terms). */
const VOCABULARY = 1_100_000;
function chunkText(): string {
  const words: string[] = [];
  const length = 40 + Math.floor(next() * 50);
  for (let i = 0; i < length; i++) {
    // Zipf-like: exp of a uniform over log(vocabulary).
    words.push(word(Math.floor(Math.exp(next() * Math.log(VOCABULARY))) - 1));
  }
  return words.join(" ");
}

/** A full collection, then a pause so that array buffers are really freed (their sweeping is concurrent). */
async function settle(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  await new Promise((resolve) => setTimeout(resolve, 200));
  gc?.();
}

function memoryLine(): string {
  const { rss, heapUsed, arrayBuffers } = process.memoryUsage();
  return `rss ${(rss / MB).toFixed(0)} MB, heap ${(heapUsed / MB).toFixed(0)} MB, array buffers ${(arrayBuffers / MB).toFixed(0)} MB`;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

function time(run: () => void, rounds: number): number {
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const start = performance.now();
    run();
    times.push(performance.now() - start);
  }
  return median(times);
}

function log(message: string): void {
  process.stdout.write(`${message}\n`);
}

const scorer: ScorerName = (process.env["SCORER"] as ScorerName | undefined) ?? "bm25";
log(`${chunks.toLocaleString("en")} chunks, ${segmentCount} segments, ${scorer}`);

// Build the segments directly with segment writers (texts are generated, not kept).
let start = performance.now();
const segments: { bytes: Uint8Array; deleted: number[] }[] = [];
const perSegment = Math.ceil(chunks / segmentCount);
let keyBase = 0;
const keptTexts = new Map<number, string>(); // a few texts, for deletes
for (let s = 0; s < segmentCount; s++) {
  const writer = new SegmentWriter();
  const count = Math.min(perSegment, chunks - keyBase);
  for (let i = 0; i < count; i++) {
    const text = chunkText();
    if ((keyBase + i) % 997 === 0) keptTexts.set(keyBase + i, text);
    writer.add(text);
  }
  const data = writer.finish(
    Uint32Array.from({ length: count }, (_, i) => keyBase + i),
    writer.totalLength / count,
  );
  segments.push({ bytes: encodeSegment(s, data), deleted: [] });
  keyBase += count;
}
log(`generated and wrote ${segmentCount} segments: ${((performance.now() - start) / 1000).toFixed(1)} s`);
if (process.env["SAVE_SEGMENTS"] !== undefined) {
  // Only write the segments (for bench/segmented-index-load.ts, which measures a fresh process).
  segments.forEach(({ bytes }, s) => writeFileSync(`${process.env["SAVE_SEGMENTS"]}.${s}`, bytes));
  log(`segments written to ${process.env["SAVE_SEGMENTS"]}.0 … .${segmentCount - 1}`);
  process.exit(0);
}
start = performance.now();
let index: SegmentedIndex | null = SegmentedIndex.load({ scorer }, segments, {
  nextKey: keyBase,
  nextSegmentId: segmentCount,
});
segments.length = 0;
log(`loaded: ${((performance.now() - start) / 1000).toFixed(1)} s`);
await settle();
log(
  `postings ${index.postingCount.toLocaleString("en")}, vocabulary ${index.vocabularySize.toLocaleString("en")}, ` +
    memoryLine(),
);

const queries: string[] = [];
for (let q = 0; q < 200; q++) {
  const terms: string[] = [];
  const length = 2 + Math.floor(next() * 4);
  for (let i = 0; i < length; i++) terms.push(word(Math.floor(Math.exp(next() * Math.log(20_000))) - 1));
  queries.push(terms.join(" "));
}
function queryTimes(target: SegmentedIndex): { pruned: number; exhaustive: number } {
  for (const q of queries) target.search(q, { topK: 10 }); // warm-up
  const pruned: number[] = [];
  const exhaustive: number[] = [];
  for (const q of queries) {
    let t = performance.now();
    target.search(q, { topK: 10 });
    pruned.push(performance.now() - t);
    t = performance.now();
    target.search(q, { topK: 10, exhaustive: true });
    exhaustive.push(performance.now() - t);
  }
  const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length;
  return { pruned: mean(pruned), exhaustive: mean(exhaustive) };
}

const many = queryTimes(index);
log(
  `query over ${index.segments().length} segments: mean ${many.pruned.toFixed(2)} ms (exhaustive ${many.exhaustive.toFixed(2)} ms)`,
);

// One-document writes.
const writer = new IndexWriter(index);
const appendMs = time(() => writer.prepare({ add: [chunkText()] }).apply(), 50);
const deletable = [...keptTexts.entries()];
let d = 0;
const deleteMs = time(() => {
  const [key, text] = deletable[d++] ?? [0, ""];
  writer.prepare({ delete: [{ key, text }] }).apply();
}, 50);
// The tiny segments those writes made are merged away by the policy (as a service would, in the
// background), so that the comparison below is between the original layout and one merged segment.
const policy = new TieredMergePolicy({ floorSegmentDocuments: 1000 });
start = performance.now();
for (const group of policy.findMerges(index.segments())) {
  if (group.every((id) => (index?.segments().find((s) => s.id === id)?.documentCount ?? 0) < 1000)) {
    index.prepareMerge(mergeNow(index, group)).apply();
  }
}
log(
  `append one: ${appendMs.toFixed(2)} ms; delete one: ${deleteMs.toFixed(2)} ms (medians of 50); ` +
    `merging the small segments: ${(performance.now() - start).toFixed(0)} ms, now ${index.segments().length} segments`,
);

// Merge everything into one segment.
start = performance.now();
const ids = index.segments().map(({ id }) => id);
// On the worker thread, as a service merges; the event loop is only held for the snapshot.
const pending = mergeInBackground(index, ids);
const snapshotMs = performance.now() - start;
const result = await pending;
const mergeMs = performance.now() - start;
start = performance.now();
const prepared = index.prepareMerge(result);
const prepareMs = performance.now() - start;
start = performance.now();
prepared.apply();
const applyMs = performance.now() - start;
log(
  `merge all on the worker: ${(mergeMs / 1000).toFixed(1)} s (snapshot on the event loop ${snapshotMs.toFixed(0)} ms); ` +
    `prepareMerge ${prepareMs.toFixed(0)} ms; apply ${applyMs.toFixed(1)} ms`,
);
await settle();
log(`after the merge: ${memoryLine()}`);
if (process.env["SAVE"] !== undefined) {
  // For a resident-memory reading in a fresh process: node --import tsx bench/segmented-index-load.ts FILE
  writeFileSync(process.env["SAVE"], prepared.segment.bytes);
  log(
    `merged segment written to ${process.env["SAVE"]} (${(prepared.segment.bytes.byteLength / MB).toFixed(0)} MB)`,
  );
}
const one = queryTimes(index);
log(
  `query over 1 segment: mean ${one.pruned.toFixed(2)} ms (exhaustive ${one.exhaustive.toFixed(2)} ms); ` +
    `many/one ${(many.pruned / one.pruned).toFixed(2)}x (exhaustive ${(many.exhaustive / one.exhaustive).toFixed(2)}x)`,
);
index = null;
