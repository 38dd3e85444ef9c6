/**
 * What bench/segments.ts and its engine worker (bench/lib/segments-engine.ts) share: the corpus (the
 * scale corpus of corpus-scale.ts, grown from the Debian documentation corpus or SciFact), latency
 * summaries, and the worker's parameters and result.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { repoRoot } from "./bench-env.js";
import { quantile } from "./report.js";

export const TOP_K = 10;

export interface Latency {
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  count: number;
}

export function latency(times: readonly number[]): Latency {
  return {
    mean: times.length ? times.reduce((a, b) => a + b, 0) / times.length : Number.NaN,
    p50: quantile(times, 0.5),
    p90: quantile(times, 0.9),
    p99: quantile(times, 0.99),
    max: times.length ? Math.max(...times) : Number.NaN,
    count: times.length,
  };
}

/** The base corpus: Debian's documentation when prepared (bench/prepare-debian-corpus.sh), else SciFact. */
export function baseCorpus(): { name: string; dir: string } | null {
  const debian = path.join(repoRoot, "bench/data/debian");
  if (collectionAvailable(debian)) return { name: "debian", dir: debian };
  const scifact = path.resolve(repoRoot, process.env.LECTERN_IR_DIR ?? "../shared/ir/scifact");
  return collectionAvailable(scifact) ? { name: "scifact", dir: scifact } : null;
}

const collectionAvailable = (dir: string): boolean =>
  existsSync(path.join(dir, "corpus.jsonl")) && existsSync(path.join(dir, "queries.jsonl"));

/** The first `count` queries of the collection's queries.jsonl ({_id, text} per line). */
export function loadQueries(dir: string, count: number): string[] {
  return readFileSync(path.join(dir, "queries.jsonl"), "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .slice(0, count)
    .map((line) => String((JSON.parse(line) as { text?: unknown }).text ?? ""));
}

/**
 * The i-th text appended one by one after the corpus (engine, HTTP and Lucene alike): chunk
 * `chunks + i` of the same generator, so it looks like the corpus without being in it.
 */
export const extraChunkIndex = (chunks: number, i: number): number => chunks + i;

export interface EngineParameters {
  dir: string;
  name: string;
  chunks: number;
  queries: number;
  batchSize: number;
  /** One-document adds and deletes timed after the batched ingestion. */
  writeSamples: number;
}

/** Every step's figures as it ends (a worker stopped by its budget still reports the steps it finished). */
export interface EngineResult {
  /** Set when the worker was stopped before its last step. */
  incomplete?: string;
  chunks: number;
  characters?: number;
  queries: number;
  /** One-shot build of every chunk (analysis included). */
  oneShotMs?: number;
  oneShotPeakRssMB?: number;
  /** Batched ingestion with the merge policy running: until the last batch is visible to queries. */
  batchedMs?: number;
  /** … and until the merges it started have ended. */
  batchedSettledMs?: number;
  batches?: number;
  batchLatency?: Latency;
  mergesRun?: number;
  segmentsAfterBatched?: number;
  batchedPeakRssMB?: number;
  /** Queries right after batched ingestion (many segments). */
  queryManySegments?: Latency;
  /** The same queries after merging to one segment. */
  queryMerged?: Latency;
  /** The same queries on the one-shot index. */
  queryOneShot?: Latency;
  mergeToOneMs?: number;
  /** Identical top-10 hits (keys and scores) between the many-segment and the merged index. */
  sameHitsQueries?: number;
  appendOne?: Latency;
  deleteOne?: Latency;
}
