/**
 * The benchmark suite (`npm run bench`): runs the benchmarks of bench/lib/benchmarks.ts one after another,
 * each as a child process (`node --import tsx`) with a time budget, so the suite ends within
 * BENCH_BUDGET_MINUTES (75 by default; bench/segments.ts alone takes 18–25 on a loaded 2-core machine);
 * then reads bench/results/*.json (the format of bench/lib/result.ts), prints the summary table, and writes
 * docs/BENCHMARKS.md with that table, details per benchmark and plots (docs/img/*.svg).
 *
 *   npm run bench -- --list                      the benchmarks, their commands and what each compares
 *   npm run bench -- NAME...                     those benchmarks only, then the report
 *   npm run bench -- [--quick] [--skip a,b] [--report-only]
 *
 * --quick passes --quick to the scripts that take it; --report-only runs nothing and rebuilds the
 * report from the results already there. Each script's output is echoed and kept in
 * bench/results/logs/<script>.log; bench/results/run-all.json records what ran, how long, and how it ended.
 */
import { spawn, spawnSync } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { format, resolveConfig } from "prettier";
import { repoRoot, resultsDir } from "./lib/bench-env.js";
import { benchmarks, commandOf, type Benchmark } from "./lib/benchmarks.js";
import { fmt, machineInfo, markdownTable, textTable } from "./lib/report.js";
import { readResult, writeResult, type ResultRow } from "./lib/result.js";
import {
  collectionHeading,
  collectionNotes,
  collectionTable,
  type CollectionReport,
} from "./lib/retrieval-report.js";
import { generationReference, get, num } from "./lib/summary-rows.js";
import { lineChart, type Series } from "./lib/svg.js";

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    list: { type: "boolean", default: false },
    quick: { type: "boolean", default: false },
    /** Comma-separated names, as the positional arguments (kept for older habits). */
    only: { type: "string" },
    skip: { type: "string" },
    "report-only": { type: "boolean", default: false },
    /** Read results from another folder (with --report-only; for trying the report out). */
    results: { type: "string" },
  },
});

const BUDGET_S = Number(process.env.BENCH_BUDGET_MINUTES ?? 75) * 60;
const benchDir = path.join(repoRoot, "bench");
const docsDir = path.join(repoRoot, "docs");
const imgDir = path.join(docsDir, "img");
const logsDir = path.join(resultsDir, "logs");

/** The results whose rows make the summary table of docs/BENCHMARKS.md, in its order. */
const SUMMARY = [
  "retrieval",
  "scale",
  "llama-server",
  "generation",
  "concurrency",
  "http-floor",
  "segments",
  "models",
  "vectors",
  "hybrid",
];

interface RunRecord {
  script: string;
  args: string[];
  status: "ok" | "failed" | "timed out" | "skipped";
  exit_code: number | null;
  seconds: number;
  note?: string;
}

function listBenchmarks(): void {
  const rows = benchmarks.map((b) => [b.manual ? `${b.name} (by hand)` : b.name, commandOf(b), b.compares]);
  console.log(textTable(["benchmark", "command", "compares"], rows));
}

/** The benchmarks to run: those named (positionals or --only), else the whole suite; --skip leaves some out. */
function selected(): Benchmark[] {
  const names = [...positionals, ...(args.only?.split(",") ?? [])].map((n) => n.replace(/\.ts$/, ""));
  const skip = new Set(args.skip?.split(",").map((n) => n.replace(/\.ts$/, "")) ?? []);
  const unknown = [...names, ...skip].filter((n) => !benchmarks.some((b) => b.name === n));
  if (unknown.length > 0) {
    console.error(`unknown benchmark(s): ${unknown.join(", ")} (npm run bench -- --list)`);
    process.exit(2);
  }
  const chosen = benchmarks.filter((b) =>
    names.length > 0 ? names.includes(b.name) : !b.manual && !skip.has(b.name),
  );
  return chosen.sort((a, b) => Number(a.last ?? false) - Number(b.last ?? false));
}

async function runScript(benchmark: Benchmark, scriptArgs: string[], budget: number): Promise<RunRecord> {
  const { script } = benchmark;
  mkdirSync(logsDir, { recursive: true });
  const log = createWriteStream(path.join(logsDir, script.replace(/\.ts$/, ".log")));
  const started = performance.now();
  console.log(`\n=== ${script} ${scriptArgs.join(" ")} (budget ${Math.round(budget)} s)`);
  // Its own process group, so a script that overruns is stopped with every server it started.
  const child = spawn(process.execPath, ["--import", "tsx", path.join(benchDir, script), ...scriptArgs], {
    cwd: repoRoot,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => {
    if (benchmark.stdoutJson) stdout += chunk.toString();
    else process.stdout.write(chunk);
    log.write(chunk);
  });
  child.stderr.on("data", (chunk: Buffer) => {
    process.stderr.write(chunk);
    log.write(chunk);
  });
  let timedOut = false;
  const stopGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // Already gone.
    }
  };
  const timer = setTimeout(() => {
    timedOut = true;
    console.error(`\n${script}: over its budget of ${Math.round(budget)} s, stopping it`);
    stopGroup("SIGTERM");
    setTimeout(() => stopGroup("SIGKILL"), 5000).unref();
  }, budget * 1000);
  const code = await new Promise<number | null>((resolve) => child.once("close", (c) => resolve(c)));
  clearTimeout(timer);
  log.end();
  const seconds = Math.round((performance.now() - started) / 100) / 10;
  let note: string | undefined;
  if (benchmark.stdoutJson && code === 0) {
    try {
      const details = JSON.parse(stdout) as Record<string, unknown>;
      const relative = scriptArgs.map((a) => path.relative(repoRoot, a) || a);
      writeResult(benchmark.results[0]!, `node --import tsx bench/${script} ${relative.join(" ")}`, details);
    } catch {
      note = "its output was not JSON";
    }
  }
  return {
    script,
    // As typed in the repository (paths relative to it), so the record reads the same from any clone.
    args: scriptArgs.map((a) => (path.isAbsolute(a) ? path.relative(repoRoot, a) : a)),
    status: timedOut ? "timed out" : code === 0 ? "ok" : "failed",
    exit_code: code,
    seconds,
    note,
  };
}

// ---------------------------------------------------------------------------------------------------
// Reading the results (bench/lib/result.ts). The detail sections and plots read a result's details, with
// its benchmark, command, date and machine beside them; a missing file or field leaves its part out.

type Json = Record<string, unknown>;
const readDir = args.results ? path.resolve(args.results) : resultsDir;
function readDetails(name: string): Json | null {
  const result = readResult(name, readDir);
  if (!result) return null;
  const { benchmark, command, date, machine } = result;
  return { ...result.details, benchmark, command, date, machine };
}
const readRows = (name: string): ResultRow[] => readResult(name, readDir)?.rows ?? [];
const yesNo = (held: boolean | undefined) => (held === undefined ? "" : held ? "yes" : "**no**");

const latencyCells = (l: unknown): string[] => [
  fmt(num(get(l, "p50"))),
  fmt(num(get(l, "p90"))),
  fmt(num(get(l, "p99"))),
  fmt(num(get(l, "mean"))),
  String(num(get(l, "count")) ?? "–"),
];
const sizeLabel = (n: number | undefined): string =>
  n === undefined ? "?" : n >= 1_000_000 ? `${n / 1_000_000}M` : n >= 1000 ? `${n / 1000}k` : String(n);

/** "## Vectors": every figure of bench/results/vectors.json (bench/vectors.ts), per size and storage type. */
function vectorsSection(result: Json): string[] {
  const out = [
    "## Vectors",
    "",
    `\`${String(result.command)}\` — ${String(result.date)}, HNSW M = ${String(get(result, "hnsw", "connectivity"))}, ` +
      `efConstruction = ${String(get(result, "hnsw", "expansionAdd"))}, ef = ${String(get(result, "hnsw", "expansionSearch"))}, ` +
      `top ${String(result.k)}, build threads ${String(result.threads)} (0 = all ${String(result.cores)} cores), ` +
      `load average ${String(get(result, "machine", "load_average_1m"))} at the start.`,
    "",
    "Clustered synthetic 384-d vectors (scripts/lib/synthetic-vectors.ts, seeded). Ours: one segment's vectors " +
      "(src/rag/search/vectors, USearch HNSW walking its i8 copy of the vectors whatever the storage type) with " +
      "candidates rescored on the stored codes (f32, f16 or i8); recall@10 is against exact " +
      "search over the same stored vectors. The reference, hnswlib-node (f32), is built over the same vectors with " +
      "the same parameters in the same run; its recall is against our f32 exact search. Query latency: one thread.",
    "",
  ];
  const rows: string[][] = [];
  for (const run of (result.runs as Json[] | undefined) ?? []) {
    const size = fmt(num(run.size));
    for (const ours of (run.ours as Json[] | undefined) ?? [])
      rows.push([
        size,
        String(ours.storage),
        fmt(num(ours.recallAt10)),
        fmt(num(ours.recallAt10TenthDeleted)),
        fmt(num(get(ours, "query", "p50Ms"))),
        fmt(num(get(ours, "query", "p99Ms"))),
        fmt(num(ours.exactQueryMeanMs)),
        fmt((num(ours.buildMs) ?? NaN) / 1000),
        fmt((num(ours.encodedBytes) ?? NaN) / 2 ** 20),
      ]);
    const ref = run.reference as Json | null;
    if (ref)
      rows.push([
        size,
        `${String(ref.library)} (f32)`,
        fmt(num(ref.recallAt10)),
        "",
        fmt(num(get(ref, "query", "p50Ms"))),
        fmt(num(get(ref, "query", "p99Ms"))),
        "",
        fmt((num(ref.buildMs) ?? NaN) / 1000),
        "",
      ]);
  }
  out.push(
    markdownTable(
      [
        "vectors",
        "storage",
        "recall@10",
        "recall@10, a tenth deleted",
        "ANN p50 ms",
        "ANN p99 ms",
        "exact mean ms",
        "build s",
        "encoded MB",
      ],
      rows,
    ),
    "",
  );
  for (const run of (result.runs as Json[] | undefined) ?? []) {
    for (const ours of (run.ours as Json[] | undefined) ?? []) {
      const byOversample = ours.recallByOversample as Record<string, number> | undefined;
      if (byOversample)
        out.push(
          `- ${fmt(num(run.size))} ${String(ours.storage)}: recall@10 by candidates asked of the graph per wanted hit: ` +
            Object.entries(byOversample)
              .map(([oversample, recall]) => `${oversample} → ${fmt(recall)}`)
              .join(", ") +
            ".",
        );
    }
    const serving = run.serving as Json | null;
    if (serving)
      out.push(
        `- ${fmt(num(run.size))} i8 vectors loaded from their bytes in a fresh process in ` +
          `${fmt((num(serving.loadMs) ?? NaN) / 1000)} s: RSS ${fmt(num(get(serving, "after", "rssMb")))} MB ` +
          `(${fmt(num(get(serving, "before", "rssMb")))} MB before loading; peak ${fmt(num(get(serving, "after", "peakRssMb")))} MB).`,
      );
  }
  out.push("");
  return out;
}

/** "## Hybrid retrieval": every stage of bench/results/hybrid.json (bench/hybrid.ts). */
function hybridSection(result: Json): string[] {
  const load = get(result, "loadAverage") as Json | undefined;
  const out = [
    "## Hybrid retrieval",
    "",
    `\`${String(result.command)}\` — ${String(result.date)}, ${String(result.cores)} cores, load average ` +
      `${String((load?.start as number[] | undefined)?.join(" / "))} at the start and ` +
      `${String((load?.end as number[] | undefined)?.join(" / "))} at the end (1 / 5 / 15 min).`,
    "",
    "Through RagService on a SQLite store in a temporary directory. One index grows through the stages " +
      `(built, then appended to in writes of up to ${fmt(num(result.writeBatch))} documents, merges awaited ` +
      `untimed); the scale corpus from ${String(result.base)}, one chunk per document, each with a ` +
      `${String(result.dimension)}-d vector stored as ${String(result.storage)}. The vectors come from a seeded ` +
      "synthetic embedder in the benchmark (clustered vectors derived from each text): the benchmark's input, " +
      "its time subtracted from every figure (the issue excludes embedding time). Queries: the collection's " +
      `first ${fmt(num(result.queries))}, top ${String(result.topK)}, lexical, hybrid (RRF of the lexical and ` +
      "dense top 50 each) and dense, and lexical and dense alone at that depth of 50 (the pool; absent in " +
      "older results), interleaved, " +
      `${String(result.passes)} timed passes. Appends: ${fmt(num(result.appendSamples))} one-document writes per ` +
      "stage, each timed with its commit. Serving: a fresh process opens the store and serves " +
      `${fmt(num(result.serveQueries))} queries (hybrid and lexical), then its RSS is read from /proc.`,
    "",
  ];
  const rows: string[][] = [];
  for (const stage of (result.stages as Json[] | undefined) ?? []) {
    const q = (r: string, p: string) => num(get(stage, "query", r, p));
    const ratio = (p: string) => (q("hybrid", p) ?? NaN) / (q("lexical", p) ?? NaN);
    rows.push([
      fmt(num(stage.chunks)),
      fmt(num(stage.segments)),
      `${fmt(q("lexical", "p50"))} / ${fmt(q("lexical", "p99"))}`,
      `${fmt(q("hybrid", "p50"))} / ${fmt(q("hybrid", "p99"))}`,
      `${fmt(q("dense", "p50"))} / ${fmt(q("dense", "p99"))}`,
      `${fmt(q("lexicalPool", "p50"))} / ${fmt(q("densePool", "p50"))}`,
      `${fmt(ratio("p50"))} / ${fmt(ratio("p99"))}`,
      `${fmt(num(get(stage, "append", "p50")))} / ${fmt(num(get(stage, "append", "p99")))}`,
      fmt(num(get(stage, "serving", "after", "rssMB"))),
      fmt((num(get(stage, "serving", "firstQueryMs")) ?? NaN) / 1000),
    ]);
  }
  out.push(
    markdownTable(
      [
        "chunks",
        "segments",
        "lexical p50 / p99 ms",
        "hybrid p50 / p99 ms",
        "dense p50 / p99 ms",
        "at pool depth: lexical / dense p50 ms",
        "hybrid ÷ lexical",
        "append p50 / p99 ms",
        "serving RSS MB",
        "load + first query s",
      ],
      rows,
    ),
    "",
  );
  return out;
}

/** "## Segmented index": every figure of bench/results/segments.json, then its targets. */
function segmentsSection(result: Json): string[] {
  const engine = result.engine as Json | null | undefined;
  const http = result.http as Json | null | undefined;
  const lucene = result.lucene as Json | null | undefined;
  const chunks = num(result.chunks);
  const out = [
    "## Segmented index",
    "",
    `\`${String(result.command)}\` — ${String(result.date)}, ${fmt(chunks)} chunks grown from ${String(result.base)} ` +
      `(${fmt(num(result.baseChunks))} base chunks, bench/lib/corpus-scale.ts), ${String(result.queries)} queries ` +
      `(${String(result.httpQueries)} through HTTP), top ${String(result.topK)}, the whole run ${fmt(num(result.seconds))} s, ` +
      `load average ${String(get(result, "machine", "load_average_1m"))} at the start.`,
    "",
    "Three parts, one after the other: our engine in-process (a child process), the RAG app over HTTP " +
      "(`src/cli/serve.ts rag` in a child process, SQLite store in a temporary DATA_DIR, every write committed " +
      "before it answers), and Lucene (bench/lucene/LuceneBench.java on Debian's liblucene8-java). Every corpus " +
      "document is one chunk. Query latency is one timed pass after a warm-up pass.",
    "",
  ];
  const rows: string[][] = [];
  const lat = (part: string, figure: string, l: unknown) => rows.push([part, figure, ...latencyCells(l)]);
  if (engine && !("error" in engine)) {
    if (engine.queryManySegments)
      lat(
        "engine",
        `query, after batched ingestion (${String(engine.segmentsAfterBatched)} segments)`,
        engine.queryManySegments,
      );
    lat("engine", "query, merged to one segment", engine.queryMerged);
    if (engine.queryOneShot) lat("engine", "query, one-shot index", engine.queryOneShot);
    if (engine.batchLatency)
      lat("engine", `one write of ${String(result.batchSize ?? 1000)} documents`, engine.batchLatency);
    if (engine.appendOne) lat("engine", "add one document", engine.appendOne);
    if (engine.deleteOne) lat("engine", "delete one document", engine.deleteOne);
  }
  if (http && !("error" in http)) {
    for (const stage of (http.stages as Json[] | undefined) ?? []) {
      const cut = stage.cutShort ? " (samples cut short by the time budget)" : "";
      lat("HTTP", `append one document at ${sizeLabel(num(stage.chunks))} chunks${cut}`, stage.append);
      lat("HTTP", `delete one document at ${sizeLabel(num(stage.chunks))} chunks${cut}`, stage.delete);
    }
    lat(
      "HTTP",
      `POST of ${String(http.batchSize)} documents (batched ingestion)`,
      get(http, "ingestion", "batchLatency"),
    );
    lat("HTTP", "POST /rag/query right after ingestion", http.queryAfterIngestion);
    lat("HTTP", "POST /rag/query after a restart", get(http, "restart", "query"));
  }
  if (lucene && !("error" in lucene)) {
    lat("Lucene", `query (${String(lucene.segmentsAfterIndexing)} segment(s))`, lucene.query);
    lat("Lucene", "add one document + reopen (NRT)", lucene.nrtAddReopen);
    lat("Lucene", "delete one document + reopen (NRT)", lucene.nrtDeleteReopen);
    lat("Lucene", "add one document + commit", lucene.addCommit);
  }
  out.push(markdownTable(["part", "latency (ms)", "p50", "p90", "p99", "mean", "samples"], rows), "");

  const facts: string[] = [];
  if (engine && "error" in engine) facts.push(`engine: ${String(engine.error)}`);
  else if (engine) {
    if (engine.incomplete)
      facts.push(`engine: **stopped ${String(engine.incomplete)}**; its later figures are missing`);
    facts.push(
      `engine: one-shot build ${fmt((num(engine.oneShotMs) ?? NaN) / 1000)} s` +
        (engine.oneShotPeakRssMB === undefined ? "" : ` (peak RSS ${fmt(num(engine.oneShotPeakRssMB))} MB)`) +
        (engine.batchedMs === undefined
          ? ""
          : `; batched ingestion ${fmt((num(engine.batchedMs) ?? NaN) / 1000)} s in ${String(engine.batches)} writes ` +
            `(${fmt((num(engine.batchedSettledMs) ?? NaN) / 1000)} s until its merges ended; ${String(engine.mergesRun)} merges; ` +
            `peak RSS ${fmt(num(engine.batchedPeakRssMB))} MB)`) +
        (engine.mergeToOneMs === undefined
          ? ""
          : `; merging to one segment ${fmt((num(engine.mergeToOneMs) ?? NaN) / 1000)} s`) +
        (engine.sameHitsQueries === undefined
          ? ""
          : `; identical top ${String(result.topK)} before and after that merge on ${String(engine.sameHitsQueries)}/${String(engine.queries)} queries`) +
        ".",
    );
  }
  if (http && "error" in http) facts.push(`HTTP: ${String(http.error)}`);
  else if (http) {
    const ingestion = http.ingestion as Json;
    facts.push(
      `HTTP ingestion: ${fmt(num(ingestion.batchedDocuments))} documents in batches of ${String(http.batchSize)} in ` +
        `${fmt((num(ingestion.batchedMs) ?? NaN) / 1000)} s (${fmt(num(ingestion.documentsPerSecond))} documents/s)` +
        (ingestion.complete
          ? ""
          : `; **over its time budget**: the other ${fmt(num(ingestion.catchUpDocuments))} in large batches (${fmt((num(ingestion.catchUpMs) ?? NaN) / 1000)} s)`) +
        `; ${fmt(num(http.chunksAtEnd))} chunks at the end, ${fmt((num(http.diskBytes) ?? NaN) / 2 ** 20)} MB on disk.`,
      `HTTP server memory (VmRSS, /proc): ${fmt(num(get(http, "memoryAfterIngestion", "rssMB")))} MB after the ingestion ` +
        `(peak ${fmt(num(get(http, "memoryAfterIngestion", "peakRssMB")))} MB); after a restart, the index loaded from disk ` +
        `(first query ${fmt(num(get(http, "restart", "firstQueryMs")))} ms) and ${String(result.httpQueries)} queries served: ` +
        `${fmt(num(get(http, "restart", "memory", "rssMB")))} MB (peak ${fmt(num(get(http, "restart", "memory", "peakRssMB")))} MB).`,
    );
    const segmentsAfter = num(get(http, "statsAfterIngestion", "segments_count"));
    if (segmentsAfter !== undefined)
      facts.push(
        `HTTP index (GET /rag/stats/{name}): ${fmt(segmentsAfter)} segments after the ingestion and the one-document writes ` +
          `(${fmt(num(get(http, "statsAfterIngestion", "deleted_chunks")))} deleted chunks, ` +
          `${fmt(num(get(http, "statsAfterIngestion", "merges", "completed")))} merges completed, ` +
          `${fmt(num(get(http, "statsAfterIngestion", "merges", "running")))} running); after the restart ` +
          `${fmt(num(get(http, "statsAfterRestart", "segments_count")))} segments, ` +
          `${fmt((num(get(http, "statsAfterRestart", "loaded", "bytes_loaded")) ?? NaN) / 2 ** 20)} MB of segments loaded.`,
      );
  }
  if (lucene && "error" in lucene) facts.push(`Lucene: ${String(lucene.error)}`);
  else if (lucene) {
    facts.push(
      `Lucene ${String(lucene.lucene)} on ${String(lucene.java)} (-Xmx ${fmt(num(lucene.maxHeapMB))} MB): ${String(lucene.analyzer)}, ` +
        `${String(lucene.similarity)}, ${String(lucene.directory)}, ${fmt(num(lucene.ramBufferMB))} MB indexing buffer; ` +
        `${fmt(num(lucene.documents))} documents indexed and committed in ${fmt((num(lucene.indexMs) ?? NaN) / 1000)} s ` +
        (num(lucene.mergesSettledMs) === undefined
          ? ""
          : `(${fmt((num(lucene.mergesSettledMs) ?? NaN) / 1000)} s until its background merges ended) `) +
        `(${fmt((num(lucene.indexBytes) ?? NaN) / 2 ** 20)} MB, ${String(lucene.segmentsAfterIndexing)} segment(s)).`,
    );
  }
  out.push(...facts.map((line) => `- ${line}`), "");

  const targets = readRows("segments");
  if (targets.length > 0) {
    out.push(
      "Targets (#14), each a ratio taken within this run" +
        (result.quick ? " — a `--quick` run: the targets are for 1M chunks, these figures are not" : "") +
        ":",
      "",
      markdownTable(
        ["figure", "ours", "reference", "ratio", "target", "", "measured by"],
        targets.map((t) => [
          t.metric,
          t.value,
          t.reference,
          t.ratio,
          t.target,
          t.held === undefined ? "?" : t.held ? "HOLDS" : "**FAILS**",
          `\`${String(result.command)}\`${t.parts ? ` (${t.parts})` : ""}`,
        ]),
      ),
      "",
    );
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Plots.

function tokensPerSecondPlot(generation: Json | null): string {
  const series: Series[] = [];
  const byLevel = get(generation, "concurrency", "tokens_per_second") as
    Record<string, Record<string, Json>> | undefined;
  for (const [subject, levels] of Object.entries(byLevel ?? {})) {
    series.push({
      name:
        subject === "http"
          ? "/predict (HTTP)"
          : subject === "direct-8seq"
            ? "node-llama-cpp direct"
            : subject,
      dashed: subject.startsWith("direct"),
      points: Object.entries(levels).map(([level, s]) => ({
        x: Number(level),
        y: num(s.median) ?? Number.NaN,
      })),
    });
  }
  return lineChart(series, {
    title: `Aggregate tokens/s against concurrency (${String(generation?.model ?? "model")})`,
    xLabel: "requests in flight",
    yLabel: "tokens/s (all requests)",
    xLog: true,
    xTicks: [1, 2, 4, 8],
    yFromZero: true,
  });
}

/** One-document write latency (p50) against index size: ours over HTTP, Lucene's NRT as a reference. */
function writeLatencyPlot(segments: Json | null): string {
  const series: Series[] = [];
  const stages = (get(segments, "http", "stages") as Json[] | undefined) ?? [];
  for (const kind of ["append", "delete"]) {
    series.push({
      name: `HTTP ${kind}, commit included`,
      points: stages.map((s) => ({ x: num(s.chunks) ?? NaN, y: num(get(s, kind, "p50")) ?? NaN })),
    });
  }
  const lucene = segments?.lucene as Json | undefined;
  const documents = num(lucene?.documents);
  for (const [name, key] of [
    ["Lucene add + reopen (NRT)", "nrtAddReopen"],
    ["Lucene add + commit", "addCommit"],
  ] as const) {
    const y = num(get(lucene, key, "p50"));
    if (documents !== undefined && y !== undefined)
      series.push({ name, dashed: true, points: [{ x: documents, y }] });
  }
  return lineChart(series, {
    title: "One-document write latency (p50) against index size",
    xLabel: "chunks in the index",
    yLabel: "p50 latency (ms)",
    xLog: true,
    yLog: true,
    width: 720,
  });
}

/** Qwen2.5 sizes by embedding width: the shapes bench/llama-server.ts gives its synthetic models. */
const QWEN_SIZE_BY_EMBEDDING: Readonly<Record<number, string>> = { 896: "0.5B", 1536: "1.5B" };

/** "0.5B" or "1.5B": the size whose shape the result's model has (results without a shape are 0.5B). */
function modelSizeOf(result: Json | null): string {
  const embedding = num(get(result, "shape", "embedding")) ?? 896;
  return QWEN_SIZE_BY_EMBEDDING[embedding] ?? `e${embedding}`;
}

function llamaServerPlot(result: Json | null): string {
  const byLevel = (get(result, "concurrency", "tokens_per_second") ?? {}) as Record<
    string,
    Record<string, Json>
  >;
  const subjects = new Map<string, Series>();
  for (const [level, bySubject] of Object.entries(byLevel)) {
    for (const [subject, s] of Object.entries(bySubject)) {
      const series = subjects.get(subject) ?? {
        name: subject === "lectern" ? "Lectern /predict" : subject,
        dashed: subject === "llama-server",
        points: [],
      };
      series.points.push({ x: Number(level), y: num(s.median) ?? Number.NaN });
      subjects.set(subject, series);
    }
  }
  return lineChart([...subjects.values()], {
    title: `Aggregate tokens/s vs llama-server (${modelSizeOf(result)}-shaped Q4_K_M, ${String(result?.threads)} threads)`,
    xLabel: "requests in flight",
    yLabel: "tokens/s (all requests)",
    xLog: true,
    xTicks: [1, 4, 8, 16],
    yFromZero: true,
  });
}

function latencyPlot(retrieval: Json | null, scale: Json | null): string {
  const series = new Map<string, Series>();
  const add = (name: string, x: number | undefined, y: number | undefined, dashed = false) => {
    if (x === undefined || y === undefined) return;
    const s = series.get(name) ?? { name, points: [], dashed };
    s.points.push({ x, y });
    series.set(name, s);
  };
  for (const collection of (retrieval?.collections as Json[] | undefined) ?? []) {
    for (const engine of (collection.engines as Json[] | undefined) ?? []) {
      const name = String(engine.engine);
      add(name, num(engine.documents), num(get(engine, "query", "mean")), !name.startsWith("lectern"));
      if (engine.exhaustiveQuery)
        add(`${name} (exhaustive)`, num(engine.documents), num(get(engine, "exhaustiveQuery", "mean")));
    }
    const python = get(collection, "python", "engines") as Record<string, Json> | undefined;
    for (const [name, engine] of Object.entries(python ?? {})) {
      const label =
        name === "bm25" ? "numpy/scipy BM25" : name === "tfidf" ? "scikit-learn TF-IDF" : `python ${name}`;
      add(label, num(get(collection, "python", "documents")), num(get(engine, "query_ms", "mean")), true);
    }
  }
  for (const scorer of (scale?.scorers as Json[] | undefined) ?? []) {
    const name = `lectern ${String(scorer.scorer)}`;
    add(name, num(scale?.chunks), num(get(scorer, "pruned", "mean")));
    add(`${name} (exhaustive)`, num(scale?.chunks), num(get(scorer, "exhaustive", "mean")));
  }
  return lineChart([...series.values()], {
    title: "Mean query latency against index size (top 10, in-process)",
    xLabel: "documents indexed (chunks for the scale run)",
    yLabel: "mean query latency (ms)",
    xLog: true,
    yLog: true,
    width: 720,
  });
}

// ---------------------------------------------------------------------------------------------------
// The report.

function concurrencyTable(generation: Json): string {
  const conc = get(generation, "concurrency") as Json | undefined;
  const levels = (conc?.levels as number[] | undefined) ?? [1, 2, 4, 8];
  const rows = Object.entries((conc?.tokens_per_second as Record<string, Record<string, Json>>) ?? {}).map(
    ([subject, byLevel]) => [
      subject,
      ...levels.map((l) => fmt(num(byLevel[String(l)]?.median))),
      `${fmt(num(get(conc, "ratio_8_to_1", subject, "median")))}×`,
      `${fmt(num(get(conc, "ratio_8_to_1", subject, "p25")))}–${fmt(num(get(conc, "ratio_8_to_1", subject, "p75")))}`,
      levels.map((l) => fmt(num(get(conc, "cpu_us_per_token", subject, String(l), "median")))).join(" / "),
    ],
  );
  return markdownTable(
    [
      "aggregate tokens/s",
      ...levels.map((l) => `${l} in flight`),
      "8 ÷ 1",
      "p25–p75",
      `CPU µs/token at ${levels.join("/")}`,
    ],
    rows,
  );
}

/** Retrieval's tables and notes, as bench/retrieval.ts prints them (bench/lib/retrieval-report.ts). */
function retrievalSection(retrieval: Json): string[] {
  const collections = (retrieval.collections as unknown as CollectionReport[] | undefined) ?? [];
  const out = [
    "## Retrieval",
    "",
    `\`node --import tsx bench/retrieval.ts${retrieval.quick ? " --quick" : ""}\` — ${String(retrieval.date)}, ` +
      `load average ${String(get(retrieval, "machine", "load_average_1m") ?? (get(retrieval, "machine", "loadAverage") as number[] | undefined)?.[0] ?? "?")} at the start.`,
    "",
    "Each engine is built and queried in a child process of its own, on the same documents and queries: " +
      "Lectern's two scorers (default path with MaxScore pruning, and the exhaustive path that scores every " +
      "posting), minisearch and wink-bm25-text-search from npm, and scikit-learn's TfidfVectorizer + cosine and a " +
      "numpy/scipy BM25 (bench/python/ir_reference.py, run with /usr/bin/python3). Query latency is one timed pass " +
      "after a warm-up pass. The HTTP lines are the RAG app in a child process with its SQLite store.",
    "",
  ];
  for (const report of collections) {
    const [header, ...rows] = collectionTable(report);
    out.push(
      `### ${collectionHeading(report)}`,
      "",
      markdownTable(
        header!,
        rows.map((row) => row.map((cell) => cell.trim())),
      ),
      "",
      ...collectionNotes(report).map((line) => `- ${line}`),
      "",
    );
  }
  return out;
}

/** bench/eval-ir.ts with --expand: each scorer without and with RM3 pseudo-relevance feedback. */
function expansionSection(evalIr: Json | null): string[] {
  const results = (evalIr?.results as Json[] | undefined) ?? [];
  if (!results.some((r) => r.expansion)) return [];
  const label = (r: Json) =>
    `${String(r.scorer)}${r.scorer === "bm25" ? ` (k1=${String(get(r, "options", "bm25", "k1"))}, b=${String(get(r, "options", "bm25", "b"))})` : ""}${r.expansion ? " + RM3" : ""}`;
  return [
    `### Query expansion (RM3) on ${path.basename(String(evalIr?.collection ?? "scifact"))}`,
    "",
    `\`${String(evalIr?.command)}\` — ${String(evalIr?.date)}. RM3 with Anserini's defaults (10 feedback ` +
      "documents, 10 terms, original query weight 0.5; feedback terms of 2–20 characters of [a-z0-9] in at most 10% " +
      'of the documents), as `"expand": true` on /rag/query runs it. Query time includes analysing the feedback ' +
      "documents' texts (in memory here; /rag/query reads them from the store).",
    "",
    markdownTable(
      ["scorer", "nDCG@10", "R@100", "query mean ms", "p95 ms"],
      results.map((r) => [
        label(r),
        num(r.ndcg10)?.toFixed(4) ?? "–",
        num(r.recall100)?.toFixed(4) ?? "–",
        fmt(num(r.meanQueryMs)),
        fmt(num(r.p95QueryMs)),
      ]),
    ),
    "",
  ];
}

/** The section of one bench/llama-server.ts result; `plot` is its SVG's name in docs/img. */
/** A command line without the binary's folder and the run's temporary folder. */
const shortCommand = (command: unknown) =>
  String(command)
    .replace(/^\S*\//, "")
    .replace(/\/tmp\/lectern-bench-cold-\w+/g, "$$DIR");

/** bench/models.ts: memory over load/unload cycles, and each cold start against llama-server's router. */
function modelsSection(result: Json): string[] {
  const memory = get(result, "memory");
  const cold = get(result, "coldStart") as Json | undefined;
  const out = [
    "## Many models",
    "",
    `\`${String(result.command)}\` — ${String(result.date)}. Two synthetic models loaded and unloaded ` +
      `${String(get(memory, "cycles"))} times each through POST /models/load and /models/unload: the app's RSS ` +
      `${fmt(num(get(memory, "firstMb")))} MB after the first cycle, ${fmt(num(get(memory, "lastMb")))} MB after the last.`,
    "",
  ];
  if (!cold) return out;
  const ours = (cold.oursMs as number[] | undefined) ?? [];
  const reference = (cold.referenceMs as number[] | undefined) ?? [];
  out.push(
    `Cold start: POST /models/load of ${String(cold.model)} (${fmt((num(cold.modelBytes) ?? 0) / 1024 ** 2)} MB, ` +
      "in MODELS_DIR / --models-dir, already in the page cache) then a streamed completion, to its first token; " +
      "the two servers alternate, each going first in every other round, and unload the model between rounds.",
    "",
    markdownTable(
      ["server", "started as", "ms per round", "median ms"],
      [
        [
          "ours (textgen app)",
          `${String(get(cold, "oursServer", "binary")).split(";")[0]}, ${String(get(cold, "oursServer", "device"))}, LLAMA_THREADS=${String(get(cold, "oursServer", "threads"))}, LLAMA_CONTEXT_SIZE=${String(get(cold, "oursServer", "context"))}`,
          ours.map((ms) => fmt(ms)).join(", "),
          fmt(num(cold.oursMedianMs)),
        ],
        [
          "llama-server router",
          `\`${shortCommand(get(cold, "referenceServer", "command"))}\`; the model's child: \`${shortCommand(get(cold, "referenceServer", "child"))}\``,
          reference.map((ms) => fmt(ms)).join(", "),
          fmt(num(cold.referenceMedianMs)),
        ],
      ],
    ),
    "",
  );
  return out;
}

function llamaServerSection(result: Json, plot: string): string[] {
  const conc = get(result, "concurrency") as Json | undefined;
  const levels = ((conc?.levels as number[]) ?? []).map(String);
  const subjects = Object.keys((get(conc, "tokens_per_second", levels[0] ?? "1") as Json) ?? {});
  const rows = subjects.map((subject) => [
    subject,
    ...levels.map((level) => {
      const tps = num(get(conc, "tokens_per_second", level, subject, "median"));
      const ratio = num(get(conc, "ratio_to_reference", level, subject, "median"));
      return ratio === undefined ? fmt(tps) : `${fmt(tps)} (${fmt(ratio)}×)`;
    }),
    `${fmt(num(get(conc, "latency_ms", subject, "p50")))} / ${fmt(num(get(conc, "latency_ms", subject, "p99")))}`,
    fmt(num(get(conc, "cpu_ms_per_token", "1", subject, "median"))),
  ]);
  const promptRows = Object.entries(
    (get(result, "prompt_processing", "prompt_tokens_per_second") as Json) ?? {},
  ).map(([subject, s]) => [
    subject,
    fmt(num(get(result, "prompt_processing", "prompt_tokens", subject))),
    fmt(num(get(s, "median"))),
    `${fmt(num(get(s, "p25")))}–${fmt(num(get(s, "p75")))}`,
    fmt(num(get(result, "prompt_processing", "ratio_to_reference", subject, "median")) ?? 1),
  ]);
  const firstRows = subjects.map((subject) => [
    subject,
    fmt(num(get(result, "first_token_ms", "1", subject, "median"))),
    fmt(num(get(result, "first_token_ms", "8", subject, "median"))),
  ]);
  const described = Object.entries((result.subjects as Record<string, string>) ?? {}).map(
    ([name, what]) => `- ${name}: ${what}`,
  );
  const size = modelSizeOf(result);
  const sampling = Object.entries((result.sampling as Record<string, unknown>) ?? {})
    .map(([key, value]) => `${key} ${String(value)}`)
    .join(", ");
  return [
    size === "0.5B"
      ? "## Against llama.cpp's own server"
      : `## Against llama.cpp's own server, ${size}-shaped model`,
    "",
    `\`${String(result.command)}\` — ${String(result.date)}, model ${String(result.model)} (random weights in ` +
      `Qwen2.5-${size}'s shape, quantised with llama-quantize: the speed of a real model that size), ` +
      `${String(result.threads)} threads, ${String(result.parallel_sequences)} parallel sequences, context ` +
      `${String(result.context_size)}, sampling ${sampling}, ${String(result.rounds)} interleaved rounds, ` +
      `load average ${String(get(result, "machine", "load_average_1m"))} at the start.`,
    "",
    ...described,
    "",
    `![Aggregate tokens/s against concurrency, vs llama-server, ${size}-shaped model](img/${plot})`,
    "",
    markdownTable(
      [
        "aggregate tokens/s (÷ llama-server)",
        ...levels.map((l) => `${l} concurrent`),
        `latency at ${String(conc?.latency_level ?? 8)}, p50 / p99 ms`,
        "CPU ms/token, 1 stream",
      ],
      rows,
    ),
    "",
    markdownTable(
      ["prompt processing", "prompt tokens", "tokens/s", "p25–p75", "÷ llama-server"],
      promptRows,
    ),
    "",
    markdownTable(["time to first token (ms)", "1 stream", "8 streams"], firstRows),
    "",
  ];
}

function detailSections(
  generation: Json | null,
  httpFloor: Json | null,
  retrieval: Json | null,
  scale: Json | null,
  synthetic: Json | null,
): string[] {
  const out: string[] = [];
  if (generation) {
    const ref = generationReference(generation);
    const rows: Array<Array<string | number>> = [];
    for (const t of ["0", "0.8"]) {
      const entry = get(generation, "decode", `temperature_${t}`) as Json | undefined;
      for (const [subject, s] of Object.entries((entry?.tokens_per_second as Record<string, Json>) ?? {})) {
        rows.push([
          `decode, temperature ${t}`,
          subject,
          fmt(num(s.median)),
          `${fmt(num(s.p25))}–${fmt(num(s.p75))}`,
          fmt(num(get(entry, ref.key, subject, "median")) ?? 1),
          fmt(num(get(entry, "cpu_us_per_token", subject, "median"))),
        ]);
      }
    }
    const prompt = get(generation, "prompt_processing") as Json | undefined;
    for (const [subject, s] of Object.entries(
      (prompt?.prompt_tokens_per_second as Record<string, Json>) ?? {},
    )) {
      rows.push([
        `prompt, ${String(prompt?.prompt_tokens)} tokens`,
        subject,
        fmt(num(s.median)),
        `${fmt(num(s.p25))}–${fmt(num(s.p75))}`,
        fmt(num(get(prompt, ref.key, subject, "median")) ?? 1),
        fmt(num(get(prompt, "cpu_us_per_prompt_token", subject, "median"))),
      ]);
    }
    const ttftRows = Object.entries(
      (get(generation, "time_to_first_token", "first_token_ms") as Record<string, Record<string, Json>>) ??
        {},
    ).map(([subject, byLevel]) => [subject, fmt(num(byLevel["1"]?.median)), fmt(num(byLevel["8"]?.median))]);
    out.push(
      "## Generation",
      "",
      `\`${String(generation.command)}\` — ${String(generation.date)}, model ${String(generation.model)}, ` +
        `${String(generation.threads)} llama.cpp thread, ${String(generation.context_size_per_sequence)} tokens per sequence × ${String(generation.max_concurrent)}, ` +
        `load average ${String(get(generation, "machine", "load_average_1m"))} at the start.`,
      "",
      "`http` is POST /predict to the app in a child process, which generates through our continuous batcher " +
        "(src/textgen/engine/batcher.ts: one llama.cpp decode per step carrying a token of every running request); " +
        "`http-stream` is the same with server-sent events. `direct` is node-llama-cpp's own API, LlamaCompletion, " +
        "called in the benchmark's process with the same model, threads, context size per sequence and sampling " +
        "(a context of 1 sequence; `direct-8seq`: 8 sequences, as the server's). Ratios are to `direct-8seq`, so " +
        "they show what the server adds or saves against node-llama-cpp used directly: HTTP, validation, " +
        "scheduling, and our batcher in place of node-llama-cpp's evaluation. Each trial sends the same prompt to every subject back to back " +
        "(order rotating); ratios are per trial, then the median; p25–p75 shows the noise. CPU µs/token is the CPU " +
        "time (all threads, from /proc) of the process doing the work, which other load on the machine moves less.",
      "",
      markdownTable(["measure", "subject", "tokens/s", "p25–p75", `÷ ${ref.name}`, "CPU µs/token"], rows),
      "",
      concurrencyTable(generation),
      "",
      markdownTable(["time to first token (ms)", "1 stream", "8 streams"], ttftRows),
      "",
    );
  }
  if (synthetic) {
    out.push(
      "### The same on a synthetic 26 M-parameter model",
      "",
      `\`${String(synthetic.command)}\` — ${String(synthetic.date)}, model ${String(synthetic.model)} (random weights, ` +
        "written by scripts/lib/synthetic-gguf.ts: it generates nonsense at the speed of a model that size). " +
        "It shows how aggregate throughput scales when the model's arithmetic (F32 weights), rather than " +
        "fixed per-token overhead, is what a token costs.",
      "",
      concurrencyTable(synthetic),
      "",
    );
  }
  if (httpFloor) {
    const results = (httpFloor.results as Record<string, Json>) ?? {};
    const rows = Object.entries(results).map(([name, r]) => [
      name,
      fmt(num(get(r, "requests_per_second", "median"))),
      `${fmt(num(get(r, "requests_per_second", "p25")))}–${fmt(num(get(r, "requests_per_second", "p75")))}`,
      name.startsWith("bare[") ? "1" : fmt(num(r.ratio_of_totals)),
      name.startsWith("bare[")
        ? "1"
        : `${fmt(num(get(r, "ratio_to_bare", "median")))} (${fmt(num(get(r, "ratio_to_bare", "p25")))}–${fmt(num(get(r, "ratio_to_bare", "p75")))})`,
      fmt(num(r.latency_p99_ms)),
      fmt(num(get(r, "cpu_us_per_request", "median"))),
    ]);
    out.push(
      "## HTTP floor",
      "",
      `\`${String(httpFloor.command)}\` — ${String(httpFloor.date)}, ${String(httpFloor.tool)}, ${String(httpFloor.rounds)} interleaved rounds, ` +
        `load average ${String(get(httpFloor, "machine", "load_average_1m"))} at the start.`,
      "",
      "Rounds are half a second per server and interleaved, each app next to its bare twin; `÷ bare` is all of an app's " +
        "requests over all of its twin's in the same rounds (the target figure), next to the median (p25–p75) of the " +
        "per-round ratios. " +
        "Each server runs in its own process; logs go to /dev/null. `bare[…]` is Fastify with one route answering the " +
        "same JSON; `core` is the HTTP base both apps are built on, with one route; `bare+…` adds pieces of that base, to " +
        "show what each costs (bench/lib/health-server.ts says how each is built). CPU µs/request is the server process's CPU time " +
        "(all threads) per answered request.",
      "",
      markdownTable(
        [
          "GET /health",
          "requests/s",
          "p25–p75",
          "÷ bare",
          "÷ bare per round: median (p25–p75)",
          "p99 ms",
          "CPU µs/request",
        ],
        rows,
      ),
      "",
    );
  }
  if (retrieval) out.push(...retrievalSection(retrieval), ...expansionSection(readDetails("eval-ir")));
  if (scale) {
    const rows = ((scale.scorers as Json[] | undefined) ?? []).flatMap((s) =>
      ["pruned", "exhaustive"].map((p) => [
        String(s.scorer),
        p,
        fmt(num(get(s, p, "mean"))),
        fmt(num(get(s, p, "p50"))),
        fmt(num(get(s, p, "p99"))),
      ]),
    );
    out.push(
      "## Scale",
      "",
      `\`node --import tsx bench/retrieval.ts${scale.quick ? " --quick" : ""}\` — ${String(scale.date)}: ` +
        `${fmt(num(scale.chunks))} chunks grown from ${String(scale.base)}, built in ${fmt((num(scale.buildMs) ?? Number.NaN) / 1000)} s, ` +
        `peak RSS ${fmt(num(scale.peakRssMB))} MB.`,
      "",
      markdownTable(["scorer", "path", "mean ms", "p50 ms", "p99 ms"], rows),
      "",
    );
  }
  return out;
}

function machineLine(result: Json | null): string {
  const m = result?.machine as Json | undefined;
  if (!m) return "";
  const cpu = m.cpu ?? "";
  const cores = m.cores ?? m.cpus ?? "?";
  const memory = m.memory_gib ?? m.memoryGB ?? "?";
  return `${String(cpu)}, ${String(cores)} cores, ${String(memory)} GiB, Node ${String(m.node ?? process.version)}`;
}

/** `--only a,b` / `--skip a,b` as given, or "" for the whole suite. */
/** How this run chose its benchmarks, as typed ("" for the whole suite). */
function selectionOf(): string {
  const names = [...positionals, ...(args.only?.split(",") ?? [])];
  return [names.join(" "), args.skip ? `--skip ${args.skip}` : ""].filter(Boolean).join(" ");
}

async function writeReport(runs: RunRecord[], suiteSeconds: number | null, selection: string): Promise<void> {
  const generation = readDetails("generation");
  const httpFloor = readDetails("http-floor");
  const retrieval = readDetails("retrieval");
  const scale = readDetails("scale");
  const concurrency = readDetails("concurrency");
  const synthetic = readDetails("generation-synthetic");
  const segments = readDetails("segments");
  const vectors = readDetails("vectors");
  const hybrid = readDetails("hybrid");
  const llamaServer = readDetails("llama-server");
  const llamaServerLarger = readDetails("llama-server-1.5b");
  const models = readDetails("models");

  // The summary: every row of these results, in this order, as each result has them.
  const summarised = SUMMARY.map((name) => readResult(name, readDir)).filter((r) => r !== null);
  const rows = summarised.flatMap((r) => r.rows.map((row) => ({ benchmark: r.benchmark, ...row })));
  const header = ["benchmark", "figure", "ours", "reference", "ratio", "target", "held"];
  const summaryCells = (held: (row: ResultRow) => string) =>
    rows.map((r) => [r.benchmark, r.metric, r.value, r.reference, r.ratio, r.target, held(r)]);
  console.log(
    `\n${textTable(
      header,
      summaryCells((r) => yesNo(r.held).replace(/\*/g, "")),
    )}`,
  );

  const known = new Set([
    "generation",
    "generation-synthetic",
    "llama-server",
    "llama-server-1.5b",
    "http-floor",
    "retrieval",
    "scale",
    "concurrency",
    "segments",
    "models",
    "vectors",
    "hybrid",
    "run-all",
  ]);
  const others = existsSync(resultsDir)
    ? readdirSync(resultsDir)
        .filter((f) => f.endsWith(".json") && !known.has(f.replace(/\.json$/, "")))
        .map((f) => `\`bench/results/${f}\``)
    : [];

  mkdirSync(imgDir, { recursive: true });
  writeFileSync(path.join(imgDir, "tokens-per-second-vs-concurrency.svg"), tokensPerSecondPlot(generation));
  writeFileSync(path.join(imgDir, "latency-vs-index-size.svg"), latencyPlot(retrieval, scale));
  if (segments)
    writeFileSync(path.join(imgDir, "write-latency-vs-index-size.svg"), writeLatencyPlot(segments));

  if (llamaServer)
    writeFileSync(path.join(imgDir, "tokens-per-second-vs-llama-server.svg"), llamaServerPlot(llamaServer));
  if (llamaServerLarger)
    writeFileSync(
      path.join(imgDir, "tokens-per-second-vs-llama-server-1.5b.svg"),
      llamaServerPlot(llamaServerLarger),
    );

  const dates = [
    generation,
    httpFloor,
    retrieval,
    concurrency,
    segments,
    llamaServer,
    llamaServerLarger,
    models,
    hybrid,
  ]
    .map((r) => (typeof r?.date === "string" ? r.date : null))
    .filter((d): d is string => d !== null)
    .sort();
  const commands = [...new Set(summarised.filter((r) => r.rows.length > 0).map((r) => r.command))];
  const md = [
    "# Benchmarks",
    "",
    "<!-- Written by bench/run-all.ts (npm run bench); edits here are overwritten. -->",
    "",
    `Latest run: ${dates.length > 0 ? `${dates[0]!.slice(0, 16).replace("T", " ")}–${dates.at(-1)!.slice(0, 16).replace("T", " ")} UTC` : "none yet"}` +
      `${suiteSeconds === null ? "" : selection ? `, the last \`run-all ${selection}\` in ${Math.round(suiteSeconds / 60)} min (other results from earlier runs)` : `, the whole suite in ${Math.round(suiteSeconds / 60)} min`}. ` +
      `Machine: ${machineLine(generation ?? httpFloor ?? retrieval) || machineLine({ machine: machineInfo() })}.`,
    "",
    "Everything is measured on one machine in one run: ours and the reference side by side, interleaved, " +
      "and compared as ratios. The machine is shared (2 cores, other jobs running), so single figures move " +
      "by tens of percent from run to run; ratios taken within a run move less, and each detail table gives " +
      "the spread (p25–p75) over trials.",
    "",
    "## Summary",
    "",
    markdownTable(
      header,
      summaryCells((r) => yesNo(r.held)),
    ),
    "",
    "Commands that measured these figures (each writes `bench/results/<name>.json`):",
    "",
    ...commands.map((c) => `- \`${c}\``),
    "",
    "## Plots",
    "",
    "![Mean query latency against index size](img/latency-vs-index-size.svg)",
    "",
    "![Aggregate tokens/s against concurrency](img/tokens-per-second-vs-concurrency.svg)",
    "",
    ...(segments
      ? ["![One-document write latency against index size](img/write-latency-vs-index-size.svg)", ""]
      : []),
    ...(llamaServer ? llamaServerSection(llamaServer, "tokens-per-second-vs-llama-server.svg") : []),
    ...(llamaServerLarger
      ? llamaServerSection(llamaServerLarger, "tokens-per-second-vs-llama-server-1.5b.svg")
      : []),
    ...detailSections(generation, httpFloor, retrieval, scale, synthetic),
    ...(segments ? segmentsSection(segments) : []),
    ...(models ? modelsSection(models) : []),
    ...(vectors ? vectorsSection(vectors) : []),
    ...(hybrid ? hybridSection(hybrid) : []),
    ...(others.length > 0 ? ["## Other results", "", `Also in this run: ${others.join(", ")}.`, ""] : []),
    ...(runs.length > 0
      ? [
          "## Run",
          "",
          markdownTable(
            ["script", "arguments", "status", "seconds"],
            runs.map((r) => [
              r.script,
              r.args.join(" "),
              r.status + (r.note ? ` (${r.note})` : ""),
              r.seconds,
            ]),
          ),
          "",
        ]
      : []),
  ].join("\n");
  mkdirSync(docsDir, { recursive: true });
  const file = path.join(docsDir, "BENCHMARKS.md");
  // Written the way `prettier --check` (npm run lint) wants it; the hand-written notes are kept.
  const whole = `${md}${handWrittenNotes(file)}`;
  writeFileSync(file, await format(whole, { ...((await resolveConfig(file)) ?? {}), filepath: file }));
  console.log(`\nwrote docs/BENCHMARKS.md and docs/img/*.svg`);
}

/** The hand-written part of BENCHMARKS.md (from its marker line on), kept across rewrites. */
const NOTES_MARKER = "<!-- Notes: hand-written below this line;";
function handWrittenNotes(file: string): string {
  if (!existsSync(file)) return "";
  const text = readFileSync(file, "utf8");
  const at = text.indexOf(NOTES_MARKER);
  return at < 0 ? "" : `\n${text.slice(at)}`;
}

// ---------------------------------------------------------------------------------------------------

if (args.list) {
  listBenchmarks();
  process.exit(0);
}

const suiteStarted = performance.now();
const runs: RunRecord[] = [];
if (!args["report-only"]) {
  const chosen = selected();
  if (chosen.some((b) => b.debianCorpus)) {
    // Builds bench/data/debian the first time (skips what is already there).
    spawnSync("bash", [path.join(benchDir, "prepare-debian-corpus.sh")], { cwd: repoRoot, stdio: "inherit" });
  }
  for (const benchmark of chosen) {
    const scriptArgs = benchmark.args(args.quick);
    const left = BUDGET_S - (performance.now() - suiteStarted) / 1000 - 20; // 20 s for the report
    const skipped = (note: string): RunRecord => ({
      script: benchmark.script,
      args: scriptArgs ?? [],
      status: "skipped",
      exit_code: null,
      seconds: 0,
      note,
    });
    if (scriptArgs === null) runs.push(skipped("its input is missing"));
    else if (left < 30) runs.push(skipped("no time left"));
    else runs.push(await runScript(benchmark, scriptArgs, Math.min(benchmark.budget, left)));
  }
  const selection = selectionOf();
  writeResult("run-all", `node --import tsx bench/run-all.ts${selection ? ` ${selection}` : ""}`, {
    quick: args.quick,
    selection,
    seconds: Math.round((performance.now() - suiteStarted) / 1000),
    runs,
  });
  console.log(
    `\n${textTable(
      ["script", "status", "seconds"],
      runs.map((r) => [r.script, r.status, r.seconds]),
    )}`,
  );
}
const lastRun = args["report-only"]
  ? (readDetails("run-all") as { runs?: RunRecord[]; seconds?: number; selection?: string } | null)
  : null;
await writeReport(
  args["report-only"] ? (lastRun?.runs ?? []) : runs,
  args["report-only"] ? (lastRun?.seconds ?? null) : (performance.now() - suiteStarted) / 1000,
  args["report-only"] ? (lastRun?.selection ?? "") : selectionOf(),
);
if (runs.some((r) => r.status === "failed" || r.status === "timed out")) process.exitCode = 1;
