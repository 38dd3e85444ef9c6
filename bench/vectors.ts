/**
 * Dense vectors in the engine (issue #26), measured in one run next to hnswlib:
 *
 *   node --import tsx bench/vectors.ts [--quick] [--sizes 100000,1000000] [--storages f32,f16,i8]
 *                                       [--queries 200] [--threads 0] [--no-reference] [--merge]
 *
 * Per size: clustered synthetic 384-d vectors (scripts/lib/synthetic-vectors.ts, seeded), queries from the
 * same distribution. Per storage type (f32, f16, i8): one segment's vectors built with their HNSW graph
 * (src/rag/search/vectors, USearch; the graph walks its i8 copy, candidates rescored on the stored codes),
 * recall@10 of the graph against exact search over the same stored
 * vectors, query p50/p99 (k = 10, one thread, rescoring included; every subject's queries interleaved
 * with the others', three timed passes) and build time; the i8 set is encoded,
 * and a child process that only loads those bytes (as a server would from its store, spilling the codes
 * to disk as VECTOR_SPILL_DIR has it: the walk reads the graph's copy) and answers the queries reports
 * its resident memory. The reference, hnswlib-node (HNSW in C++, f32, the same M = 16,
 * efConstruction = 128, ef = 64), is built over the same vectors in the same run; its query p50 next to
 * ours is the ratio of the issue's target (≤ 1.5×). `--quick`: 20,000 vectors.
 * Writes bench/results/vectors.json (rows: bench/lib/summary-rows.ts); `--merge` keeps the runs of other
 * sizes already there (a long size measured in its own invocation), each run with its own command.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import hnswlib from "hnswlib-node";

import { clusteredVectors, rowOf, rowsOf } from "../scripts/lib/synthetic-vectors.js";
import { LiveDocs } from "../src/rag/search/core/live-docs.js";
import { DEFAULT_HNSW } from "../src/rag/search/vectors/ann.js";
import { VECTOR_STORAGES, type VectorStorage } from "../src/rag/search/vectors/quantize.js";
import {
  DEFAULT_GRAPH_SCALAR,
  prepareQuery,
  SegmentVectors,
} from "../src/rag/search/vectors/segment-vectors.js";
import { FsDirectory } from "../src/rag/search/fs-directory.js";
import { decodeVectors, encodeVectors } from "../src/rag/search/vectors/vector-codec.js";
import { quantile } from "./lib/report.js";
import { readResult, writeResult } from "./lib/result.js";

const DIMENSION = 384;
const K = 10;
const SEED = 26;
const OVERSAMPLES = [1, 2, 5, 10, 20];

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    sizes: { type: "string" },
    storages: { type: "string", default: VECTOR_STORAGES.join(",") },
    queries: { type: "string", default: "200" },
    threads: { type: "string", default: "0" },
    "no-reference": { type: "boolean", default: false },
    merge: { type: "boolean", default: false },
    serve: { type: "string" }, // child mode: load this encoded file, answer the queries in --query-file
    "query-file": { type: "string" },
  },
});

interface Latency {
  p50Ms: number;
  p99Ms: number;
}

function latencyOf(samples: number[]): Latency {
  return { p50Ms: quantile(samples, 0.5), p99Ms: quantile(samples, 0.99) };
}

function rssMb(): { rssMb: number; peakRssMb: number } {
  const status = readFileSync("/proc/self/status", "utf8");
  const field = (name: string) =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) / 1024;
  return { rssMb: field("VmRSS"), peakRssMb: field("VmHWM") };
}

/** Child mode: what a server holds once it has loaded a segment's vectors from its bytes. */
async function serve(file: string, queryFile: string): Promise<void> {
  const before = rssMb();
  // As a server does (VECTOR_SPILL_DIR): the codes of a set with a graph go to a file beside the input.
  const directory = FsDirectory.open(path.join(path.dirname(file), "spill"));
  const started = performance.now();
  const set = decodeVectors(readFileSync(file), { directory });
  const loadMs = performance.now() - started;
  const queries = new Float32Array(readFileSync(queryFile).buffer.slice(0));
  const samples: number[] = [];
  for (let q = 0; q < queries.length / DIMENSION; q++) {
    const t = performance.now();
    set.search(prepareQuery(rowOf(queries, DIMENSION, q), DIMENSION), K, null);
    samples.push(performance.now() - t);
  }
  // Freed buffers' memory goes back on a background thread after a collection: collect, wait, collect.
  global.gc?.();
  await new Promise((resolve) => setTimeout(resolve, 500));
  global.gc?.();
  const after = rssMb();
  const residentBytes = set.residentBytes;
  console.log(
    JSON.stringify({ loadMs, before, after, count: set.count, residentBytes, query: latencyOf(samples) }),
  );
}

/** Our vectors at one storage type: build time, recall@10 against exact (none and a tenth deleted). */
function buildOurs(storage: VectorStorage, rows: Float32Array[], units: Float32Array[], threads: number) {
  let started = performance.now();
  const set = SegmentVectors.build(DIMENSION, rows, { storage, threads, graphThreshold: 1 });
  const buildMs = performance.now() - started;
  started = performance.now();
  const truth = units.map((u) => new Set(set.search(u, K, null, { exact: true }).map((h) => h.doc)));
  const exactMs = (performance.now() - started) / units.length;
  let found = 0;
  units.forEach((u, i) => {
    for (const hit of set.search(u, K, null)) if (truth[i]!.has(hit.doc)) found++;
  });
  // A tenth deleted: the live-docs filter on the graph's answers.
  const live = new LiveDocs(set.count);
  for (let d = 0; d < set.count; d += 10) live.delete(d);
  let foundFiltered = 0;
  for (const u of units.slice(0, 50)) {
    const exact = new Set(set.search(u, K, live, { exact: true }).map((h) => h.doc));
    for (const hit of set.search(u, K, live)) if (exact.has(hit.doc)) foundFiltered++;
  }
  // Recall as the candidates asked of the graph grow (the walk's ef is at least what is asked for).
  const recallByOversample: Record<string, number> = {};
  for (const oversample of OVERSAMPLES) {
    let hits = 0;
    units.forEach((u, i) => {
      for (const hit of set.search(u, K, null, { oversample })) if (truth[i]!.has(hit.doc)) hits++;
    });
    recallByOversample[oversample] = hits / (K * units.length);
  }
  const encodedBytes = encodeVectors(set).byteLength;
  const result: Record<string, unknown> = {
    storage,
    buildMs,
    recallAt10: found / (K * units.length),
    recallAt10TenthDeleted: foundFiltered / (K * Math.min(50, units.length)),
    recallByOversample,
    exactQueryMeanMs: exactMs,
    vectorBytes: set.byteSize,
    encodedBytes,
  };
  return { set, truth, result };
}

/** hnswlib-node over the same vectors (f32 only), with our HNSW parameters; recall against `truth`. */
function buildReference(rows: Float32Array[], plain: number[][], truth: Array<Set<number>> | null) {
  const index = new hnswlib.HierarchicalNSW("cosine", DIMENSION);
  index.initIndex(rows.length, DEFAULT_HNSW.connectivity, DEFAULT_HNSW.expansionAdd, SEED);
  const started = performance.now();
  rows.forEach((row, label) => index.addPoint(Array.from(row), label));
  const buildMs = performance.now() - started;
  index.setEf(DEFAULT_HNSW.expansionSearch);
  let found = 0;
  plain.forEach((q, i) => {
    for (const n of index.searchKnn(q, K).neighbors) if (truth?.[i]?.has(n)) found++;
  });
  const result: Record<string, unknown> = {
    library: "hnswlib-node",
    buildMs,
    recallAt10: truth === null ? null : found / (K * plain.length),
  };
  return { index, result };
}

/**
 * Query latency of every subject, interleaved: each query is run by all of them back to back, in an order
 * that rotates, for `passes` passes after an untimed one, so load changes on the machine hit all alike.
 */
function interleavedLatency(subjects: Array<(q: number) => void>, queryCount: number, passes = 3): Latency[] {
  const samples = subjects.map(() => [] as number[]);
  for (let pass = 0; pass <= passes; pass++) {
    for (let q = 0; q < queryCount; q++) {
      for (let i = 0; i < subjects.length; i++) {
        const s = (i + q + pass) % subjects.length;
        const t = performance.now();
        subjects[s]!(q);
        if (pass > 0) samples[s]!.push(performance.now() - t);
      }
    }
  }
  return samples.map(latencyOf);
}

function serveInChild(encoded: Uint8Array, queries: Float32Array): Record<string, unknown> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-vectors-bench-"));
  try {
    const file = path.join(dir, "vectors.bin");
    const queryFile = path.join(dir, "queries.f32");
    writeFileSync(file, encoded);
    writeFileSync(queryFile, new Uint8Array(queries.buffer, queries.byteOffset, queries.byteLength));
    const self = path.resolve(import.meta.dirname, "vectors.ts");
    const child = spawnSync(
      process.execPath,
      ["--expose-gc", "--import", "tsx", self, "--serve", file, "--query-file", queryFile],
      { encoding: "utf8", maxBuffer: 1 << 20 },
    );
    if (child.status !== 0) throw new Error(`serving child failed: ${child.stderr}`);
    return JSON.parse(child.stdout.trim().split("\n").at(-1) ?? "{}") as Record<string, unknown>;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function measureSize(size: number, storages: VectorStorage[], queryCount: number, threads: number) {
  const started = performance.now();
  const all = clusteredVectors({ count: size + queryCount, dimension: DIMENSION, seed: SEED });
  const rows = rowsOf(all, DIMENSION).slice(0, size);
  const queryMatrix = all.slice(size * DIMENSION);
  const queries = rowsOf(queryMatrix, DIMENSION);
  const units = queries.map((q) => prepareQuery(q, DIMENSION));
  console.error(`${size}: ${Math.round(performance.now() - started)} ms to generate`);
  const built = storages.map((storage) => {
    const one = buildOurs(storage, rows, units, threads);
    console.error(`${size} ${storage}: ${JSON.stringify(one.result)}`);
    return one;
  });
  const serving = built.find((b) => b.set.storage === "i8");
  const servingResult = serving
    ? { storage: "i8", ...serveInChild(encodeVectors(serving.set), queryMatrix) }
    : null;
  const plain = queries.map((q) => Array.from(q)); // hnswlib's API takes arrays: converted before timing
  const reference = args["no-reference"]
    ? null
    : buildReference(rows, plain, built.find((b) => b.set.storage === "f32")?.truth ?? null);
  if (reference) console.error(`${size} hnswlib: ${JSON.stringify(reference.result)}`);
  const subjects: Array<(q: number) => void> = built.map(
    ({ set }) =>
      (q) =>
        void set.search(units[q]!, K, null),
  );
  if (reference) subjects.push((q) => void reference.index.searchKnn(plain[q]!, K));
  const latencies = interleavedLatency(subjects, queryCount);
  const ours = built.map((b, i) => ({ ...b.result, query: latencies[i] }));
  const referenceResult = reference ? { ...reference.result, query: latencies[built.length] } : null;
  console.error(`${size} query latency: ${JSON.stringify(latencies)}`);
  return {
    size,
    dimension: DIMENSION,
    queries: queryCount,
    ours,
    reference: referenceResult,
    serving: servingResult,
  };
}

type SizeRun = {
  size: number;
  command?: string;
  ours: Array<Record<string, unknown>>;
  serving: unknown;
  reference: unknown;
};

/**
 * `--merge`: the runs already there, with this run's measurements in place of theirs — per storage type,
 * so that a long size can be measured one storage per invocation. A run that measured some storages of a
 * size keeps the others' figures (and the serving and reference figures it did not measure); its command
 * then names both invocations.
 */
function mergeRuns(kept: SizeRun[], measured: SizeRun[]): SizeRun[] {
  const bySize = new Map(kept.map((run) => [run.size, run]));
  for (const run of measured) {
    const old = bySize.get(run.size);
    if (old === undefined) {
      bySize.set(run.size, run);
      continue;
    }
    const storages = new Set(run.ours.map((o) => o.storage));
    bySize.set(run.size, {
      ...run,
      command: old.ours.some((o) => !storages.has(o.storage))
        ? `${old.command}; ${run.command}`
        : run.command,
      ours: [...old.ours.filter((o) => !storages.has(o.storage)), ...run.ours].sort((a, b) =>
        String(a.storage).localeCompare(String(b.storage)),
      ),
      serving: run.serving ?? old.serving,
      reference: run.reference ?? old.reference,
    });
  }
  return [...bySize.values()];
}

function main(): void {
  if (args.serve !== undefined) return void serve(args.serve, args["query-file"] ?? "");
  const sizes = (args.sizes ?? (args.quick ? "20000" : "100000,1000000")).split(",").map(Number);
  const storages = args.storages.split(",") as VectorStorage[];
  for (const s of storages) if (!VECTOR_STORAGES.includes(s)) throw new Error(`unknown storage ${s}`);
  const queryCount = Number(args.queries);
  const threads = Number(args.threads);
  const command = `node --import tsx bench/vectors.ts ${process.argv.slice(2).join(" ")}`.trim();
  const measured = sizes.map((size) => ({ command, ...measureSize(size, storages, queryCount, threads) }));
  const previous = args.merge ? readResult("vectors") : null;
  const kept = ((previous?.details.runs as SizeRun[] | undefined) ?? []).map((run) => ({
    ...run,
    command: run.command ?? previous?.command ?? "",
  }));
  const runs = mergeRuns(kept, measured).sort((a, b) => a.size - b.size);
  const file = writeResult("vectors", [...new Set(runs.map((run) => run.command))].join("; "), {
    hnsw: DEFAULT_HNSW,
    graphScalar: DEFAULT_GRAPH_SCALAR,
    k: K,
    threads,
    cores: os.availableParallelism(),
    runs,
  });
  console.log(`wrote ${file}`);
}

main();
