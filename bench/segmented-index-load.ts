/**
 * Resident memory of a process serving a stored index: loads segment files (as a service loads its
 * segment rows) and reports memory once the loading garbage is gone, then query latency.
 *
 *   node --expose-gc --import tsx bench/segmented-index-load.ts SEGMENT_FILE... [--scorer tfidf]
 */

import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

import { SegmentedIndex, type ScorerName } from "../src/rag/search/index.js";

const MB = 1024 * 1024;
const args = process.argv.slice(2);
const scorerFlag = args.indexOf("--scorer");
const scorer: ScorerName = scorerFlag >= 0 ? (args[scorerFlag + 1] as ScorerName) : "bm25";
const files = args.filter((arg, i) => !arg.startsWith("--") && (scorerFlag < 0 || i !== scorerFlag + 1));

const before = process.memoryUsage().rss;
let start = performance.now();
let segments: { bytes: Uint8Array; deleted: number[] }[] | null = files.map((file) => ({
  bytes: readFileSync(file),
  deleted: [],
}));
const index = SegmentedIndex.load({ scorer }, segments, { nextKey: 0xffffff00, nextSegmentId: 1 << 20 });
segments = null;
const loadMs = performance.now() - start;
const gc = (globalThis as { gc?: () => void }).gc;
gc?.();
await new Promise((resolve) => setTimeout(resolve, 500));
gc?.();
const { rss, heapUsed, arrayBuffers } = process.memoryUsage();
process.stdout.write(
  `${index.liveDocumentCount.toLocaleString("en")} documents, ${index.postingCount.toLocaleString("en")} postings, ` +
    `${index.vocabularySize.toLocaleString("en")} terms, ${index.segments().length} segment(s); load ${(loadMs / 1000).toFixed(1)} s\n` +
    `rss ${(rss / MB).toFixed(0)} MB (node before loading: ${(before / MB).toFixed(0)} MB), heap ${(heapUsed / MB).toFixed(0)} MB, ` +
    `array buffers ${(arrayBuffers / MB).toFixed(0)} MB\n`,
);
start = performance.now();
let hits = 0;
for (let q = 0; q < 200; q++)
  hits += index.search(`qax qbx q${String.fromCharCode(97 + (q % 26))}x`, { topK: 10 }).length;
process.stdout.write(
  `200 queries: ${((performance.now() - start) / 200).toFixed(2)} ms each (${hits} hits)\n`,
);
