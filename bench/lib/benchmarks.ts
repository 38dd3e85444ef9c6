/**
 * The benchmarks, by name: what `npm run bench -- --list` prints and `npm run bench -- NAME` runs. One
 * self-contained script per benchmark (bench/<script>), as Tantivy's benches/ and llama.cpp's llama-bench:
 * each measures ours and its reference side by side in one run and writes its result(s) in the one format
 * of bench/lib/result.ts. Scripts not listed here are not run by the suite.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { repoRoot } from "./bench-env.js";

export interface Benchmark {
  name: string;
  script: string;
  /** What it measures against what. */
  compares: string;
  /** Its arguments in the suite (quick: a smoke run); null when its input is missing (then it is skipped). */
  args: (quick: boolean) => string[] | null;
  /** Seconds at most in the suite; the one marked `last` gets whatever is left of the suite's budget. */
  budget: number;
  /** The bench/results/<name>.json files it writes. */
  results: string[];
  /** The script prints its result as JSON on standard output; the suite writes it as results[0]. */
  stdoutJson?: boolean;
  /** Runs after the others (the longest one, given what is left). */
  last?: boolean;
  /** Needs bench/data/debian (bash bench/prepare-debian-corpus.sh, run first by the suite). */
  debianCorpus?: boolean;
  /** Not in the suite: a probe run by hand (`command` says how). */
  manual?: boolean;
  /** Its arguments as the list shows them, where they are not the suite's (a folder or files to give). */
  usage?: string;
}

const scifactDir = path.resolve(repoRoot, process.env.LECTERN_IR_DIR ?? "../shared/ir/scifact");
const quickFlag = (quick: boolean) => (quick ? ["--quick"] : []);

export const benchmarks: readonly Benchmark[] = [
  {
    name: "concurrency",
    script: "concurrency.ts",
    compares: "8 × /predict of 64 tokens all at once against the same eight one after another",
    args: () => [],
    budget: 90,
    results: ["concurrency"],
  },
  {
    name: "eval-ir",
    script: "eval-ir.ts",
    compares:
      "relevance (nDCG@10, Recall@100) and speed of each scorer on BEIR SciFact, without and with RM3 query expansion",
    args: () => (existsSync(scifactDir) ? [scifactDir, "--json", "--expand"] : null),
    budget: 180,
    results: ["eval-ir"],
    stdoutJson: true,
    usage: "$LECTERN_IR_DIR --json --expand",
  },
  {
    name: "pg-latency",
    script: "pg-latency.ts",
    compares: "query latency with the PostgreSQL store against the SQLite store on SciFact",
    args: (quick) => (quick ? ["--rounds", "2"] : []),
    budget: 180,
    results: ["pg-latency"],
  },
  {
    name: "generation",
    script: "generation.ts",
    compares:
      "/predict tokens/s, prompt processing, first token and concurrency against node-llama-cpp direct",
    args: quickFlag,
    budget: 300,
    results: ["generation"],
  },
  {
    name: "http-floor",
    script: "http-floor.ts",
    compares: "GET /health requests/s of each app against bare Fastify answering the same JSON",
    args: quickFlag,
    budget: 360,
    results: ["http-floor"],
  },
  {
    name: "segments",
    script: "segments.ts",
    compares: "the segmented index at 1M chunks (engine, the app over HTTP) against Lucene",
    args: quickFlag,
    budget: 2400,
    results: ["segments"],
  },
  {
    name: "llama-server",
    script: "llama-server.ts",
    // Builds llama-server into ~/.cache/lectern-llama the first time (about 10 minutes on 2 cores).
    compares:
      "aggregate tokens/s, latency and first token of the textgen app against llama.cpp's llama-server",
    args: quickFlag,
    budget: 1800,
    results: ["llama-server"],
  },
  {
    name: "models",
    script: "models.ts",
    // Cold start needs llama-server with its router (built like llama-server above).
    compares:
      "RSS over 100 load/unload cycles of two models; cold start to first token against llama-server's router",
    args: (quick: boolean) => (quick ? ["--cycles", "20"] : []),
    budget: 1800,
    results: ["models"],
  },
  {
    name: "retrieval",
    script: "retrieval.ts",
    compares:
      "build, query latency, memory and relevance against minisearch, wink-bm25, scikit-learn and numpy BM25; then 1M chunks (scale)",
    args: quickFlag,
    budget: Number.POSITIVE_INFINITY,
    results: ["retrieval", "scale"],
    last: true,
    debianCorpus: true,
  },
  {
    name: "vectors",
    script: "vectors.ts",
    compares:
      "HNSW recall@10 against exact search and ANN query latency against hnswlib-node, per storage type (f32/f16/i8), 100k and 1M 384-d vectors",
    // 1M vectors build for tens of minutes per storage type on 2 cores: measured by hand, merged into
    // the same result: `node --import tsx bench/vectors.ts --sizes 1000000 --storages i8 --no-reference --merge`.
    args: (quick) => (quick ? ["--quick"] : ["--sizes", "100000", "--merge"]),
    budget: 1500,
    results: ["vectors"],
  },
  {
    name: "hybrid",
    script: "hybrid.ts",
    compares:
      "hybrid (RRF) query p50/p99 against lexical-only, one-document append with its vector at N against 10k, RSS serving N chunks with 384-d i8 vectors, through RagService on SQLite",
    // 1M chunks (ten writes of 100k, each building its segment's HNSW graph) take 9 minutes on the
    // shared 2-core machine at load average ~4 (16 at 6-9): measured by hand,
    // `node --import tsx bench/hybrid.ts --sizes 10000,100000,1000000`.
    args: (quick) => (quick ? ["--quick"] : ["--sizes", "10000,100000"]),
    budget: 1200,
    results: ["hybrid"],
  },
  {
    name: "write-stall",
    script: "write-stall.ts",
    compares:
      "the event loop's longest stall during one write of 20k/100k chunks with 384-d vectors against building those vectors (graph included) on the loop; no result file",
    args: () => [],
    budget: 0,
    results: [],
    manual: true,
  },
  {
    name: "merge-blocking",
    script: "merge-blocking.ts",
    compares:
      "the event loop's longest delay during a background merge against one commit (#14); no result file",
    args: () => [],
    budget: 0,
    results: [],
    manual: true,
  },
  {
    name: "segmented-index",
    script: "segmented-index.ts",
    compares:
      "append/delete cost and query time over many segments against one merged segment; no result file",
    args: () => [],
    budget: 0,
    results: [],
    manual: true,
  },
  {
    name: "segmented-index-load",
    script: "segmented-index-load.ts",
    compares: "resident memory and query latency of a process serving stored segment files (SEGMENT_FILE...)",
    args: () => null,
    usage: "SEGMENT_FILE... [--scorer tfidf]",
    budget: 0,
    results: [],
    manual: true,
  },
];

/** The command that runs a benchmark on its own. */
export function commandOf(benchmark: Benchmark): string {
  const gc = benchmark.manual ? "--expose-gc " : "";
  return `node ${gc}--import tsx bench/${benchmark.script}${benchmark.usage ? ` ${benchmark.usage}` : ""}`;
}
