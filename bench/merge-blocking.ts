/**
 * How long a background merge holds the event loop (#14: "a merge never blocks queries or writes longer
 * than a commit"), and resident memory with many segments, on the scale corpus.
 *
 *   node --expose-gc --import tsx bench/merge-blocking.ts [chunks=200000] [segments=20] [corpus dir]
 *
 * Builds `segments` segments of scale-corpus chunks, loads them (as a service loads its segment rows),
 * reports load time and memory, then merges all of them as the service does (snapshot, worker,
 * prepareMerge, apply) while `monitorEventLoopDelay` (10 ms resolution) samples the event loop, and
 * reports the largest delay and the synchronous steps' own times.
 */

import { monitorEventLoopDelay, performance } from "node:perf_hooks";

import { encodeSegment } from "../src/rag/search/core/segment-codec.js";
import { mergeInBackground, SegmentedIndex } from "../src/rag/search/index.js";
import { SegmentWriter } from "../src/rag/search/indexer/segment-writer.js";
import { loadBaseChunks, scaledChunk } from "./lib/corpus-scale.js";

const chunks = Number(process.argv[2] ?? 200_000);
const segmentCount = Number(process.argv[3] ?? 20);
const corpusDir = process.argv[4] ?? "../shared/ir/scifact";
const MB = 1024 * 1024;

function log(message: string): void {
  process.stdout.write(`${message}\n`);
}

function memoryLine(): string {
  const { rss, heapUsed, arrayBuffers } = process.memoryUsage();
  return `rss ${(rss / MB).toFixed(0)} MB, heap ${(heapUsed / MB).toFixed(0)} MB, array buffers ${(arrayBuffers / MB).toFixed(0)} MB`;
}

/** A full collection, then a pause so that array buffers are really freed (their sweeping is concurrent). */
async function settle(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  await new Promise((resolve) => setTimeout(resolve, 200));
  gc?.();
}

const base = loadBaseChunks(corpusDir);
log(`${chunks.toLocaleString("en")} scale chunks (base ${base.length}), ${segmentCount} segments`);
let start = performance.now();
let segments: { bytes: Uint8Array; deleted: number[] }[] = [];
const perSegment = Math.ceil(chunks / segmentCount);
let keyBase = 0;
for (let s = 0; s < segmentCount && keyBase < chunks; s++) {
  const writer = new SegmentWriter();
  const count = Math.min(perSegment, chunks - keyBase);
  for (let i = 0; i < count; i++) writer.add(scaledChunk(base, keyBase + i));
  const data = writer.finish(
    Uint32Array.from({ length: count }, (_, i) => keyBase + i),
    writer.totalLength / count,
  );
  segments.push({ bytes: encodeSegment(s, data), deleted: [] });
  keyBase += count;
}
log(`generated ${segments.length} segments: ${((performance.now() - start) / 1000).toFixed(1)} s`);

start = performance.now();
const index = SegmentedIndex.load({ scorer: "bm25" }, segments, {
  nextKey: keyBase,
  nextSegmentId: segments.length,
});
segments = [];
log(`load: ${((performance.now() - start) / 1000).toFixed(1)} s`);
await settle();
log(
  `after load (${index.segments().length} segments, ${index.vocabularySize.toLocaleString("en")} terms, ` +
    `${index.postingCount.toLocaleString("en")} postings): ${memoryLine()}`,
);

// Merge everything while the event loop is sampled; the steps a service runs on the event loop are timed.
const delay = monitorEventLoopDelay({ resolution: 10 });
delay.enable();
// The histogram's first sample only sets its clock: a block before it would go unseen.
await new Promise((resolve) => setTimeout(resolve, 50));
const ids = index.segments().map(({ id }) => id);
start = performance.now();
const pending = mergeInBackground(index, ids);
const snapshotMs = performance.now() - start;
const result = await pending;
const mergeMs = performance.now() - start;
start = performance.now();
const prepared = index.prepareMerge(result);
const prepareMs = performance.now() - start;
// A tick between the steps, as in the service (prepare, store commit, then apply).
await new Promise((resolve) => setImmediate(resolve));
start = performance.now();
prepared.apply();
const applyMs = performance.now() - start;
// Let the sampler see the loop after apply (and any collection apply left behind).
await new Promise((resolve) => setTimeout(resolve, 100));
delay.disable();
log(
  `merge of ${ids.length} segments: ${(mergeMs / 1000).toFixed(1)} s to the result; on the event loop: ` +
    `snapshot ${snapshotMs.toFixed(0)} ms, prepareMerge ${prepareMs.toFixed(0)} ms, apply ${applyMs.toFixed(0)} ms; ` +
    `max event-loop delay ${(delay.max / 1e6).toFixed(0)} ms (p99 ${(delay.percentile(99) / 1e6).toFixed(0)} ms)`,
);
await settle();
log(`after the merge (${index.segments().length} segment): ${memoryLine()}`);
