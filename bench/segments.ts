/**
 * The segmented index (issue #14), measured in one run next to Lucene:
 *
 *   node --import tsx bench/segments.ts [--quick] [--chunks N] [--no-engine] [--no-http] [--no-lucene]
 *
 * The corpus is the scale corpus (bench/lib/corpus-scale.ts: 1,000,000 chunks grown from the Debian
 * documentation corpus, else SciFact; `--quick`: 100,000), the queries the collection's (the same for
 * every subject). Three parts, one after another so that none shares the CPU with another:
 * 1. our engine in-process (bench/lib/segments-engine.ts, a child process): one-shot build against
 *    batched ingestion (1,000 documents per write, the merge policy running as the service runs it);
 *    query p50/p99 right after the batched ingestion (many segments) and after merging to one segment;
 *    the cost of a one-document add and delete;
 * 2. the RAG app over HTTP (`src/cli/serve.ts rag` in a child process, SQLite store in a temporary
 *    DATA_DIR, every write committed): the corpus ingested in batches of 1,000 documents (one chunk
 *    each) through POST /rag/indices/{name}/documents; at 10k, 100k and 1M chunks the latency of
 *    one-document appends and deletes (commit included); query latency through POST /rag/query right
 *    after the ingestion; then the server restarted on the same DATA_DIR, the index loaded from disk,
 *    queries served, and the process's resident memory read from /proc/<pid>/status;
 * 3. Lucene 8 (Debian's liblucene8-java, bench/lucene/LuceneBench.java, compiled and run by
 *    bench/lib/lucene.ts): the same corpus and queries, BM25, query p50/p99, near-real-time add and
 *    delete (+ reopen), add + commit.
 * Every part has a time budget so the run stays bounded on code where writes rebuild the whole index:
 * past it, ingestion goes on in large batches (and says so) and fewer write samples are taken.
 * Writes bench/results/segments.json, whose `targets` are the issue's, computed here; bench/run-all.ts
 * renders them in docs/BENCHMARKS.md.
 */
import { spawn, type ChildProcess } from "node:child_process";
import {
  closeSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { freePort } from "../scripts/lib/free-port.js";
import { repoRoot } from "./lib/bench-env.js";
import { loadBaseChunks, scaledChunk } from "./lib/corpus-scale.js";
import { seededRandom } from "../scripts/lib/seeded-random.js";
import { prepareLucene, runLucene, type LuceneResult } from "./lib/lucene.js";
import { fmt } from "./lib/report.js";
import { writeResult } from "./lib/result.js";
import {
  TOP_K,
  baseCorpus,
  extraChunkIndex,
  latency,
  loadQueries,
  type EngineParameters,
  type EngineResult,
  type Latency,
} from "./lib/segments-common.js";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    chunks: { type: "string" },
    "no-engine": { type: "boolean", default: false },
    "no-http": { type: "boolean", default: false },
    "no-lucene": { type: "boolean", default: false },
  },
});

const QUICK = args.quick;
const CHUNKS = Number(args.chunks ?? (QUICK ? 100_000 : 1_000_000));
/** Index sizes at which one-document writes are timed through HTTP (the last is the whole corpus). */
const STAGES = [10_000, 100_000, 1_000_000].filter((n) => n < CHUNKS).concat(CHUNKS);
const BATCH = 1000;
/** Past the ingestion budget the rest goes in batches this large (code whose writes rebuild everything). */
const CATCH_UP_BATCH = 50_000;
const QUERY_COUNT = QUICK ? 200 : 500;
const HTTP_QUERY_COUNT = QUICK ? 100 : 200;
const WRITE_SAMPLES = QUICK ? 50 : 100;
const MIN_WRITE_SAMPLES = 3;
const NRT_SAMPLES = 200;
/** Seconds. */
// Measured on the shared 2-core machine (load 8–20 from other jobs): --quick takes 2–3 minutes; the
// full run 18–25, most of it the 1M-chunk builds (engine one-shot and batched, Lucene) and the 1,000
// HTTP writes of 1,000 documents.
const BUDGET = {
  engine: QUICK ? 240 : 900,
  httpIngest: QUICK ? 150 : 600,
  httpWritesPerStage: QUICK ? 30 : 40,
  lucene: QUICK ? 180 : 600,
};
const MB = 1024 * 1024;
const INDEX = "bench";
const command = `node --import tsx bench/segments.ts${QUICK ? " --quick" : ""}${args.chunks ? ` --chunks ${CHUNKS}` : ""}`;

function log(message: string): void {
  process.stderr.write(`[segments ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

const corpus = baseCorpus();
if (!corpus) {
  log("no base corpus: run `bash bench/prepare-debian-corpus.sh` (or set LECTERN_IR_DIR to SciFact)");
  process.exit(2);
}
log(`loading the base corpus (${corpus.name})`);
const base = loadBaseChunks(corpus.dir);
const queries = loadQueries(corpus.dir, QUERY_COUNT);
const chunkText = (i: number): string => scaledChunk(base, i);
const workDir = mkdtempSync(path.join(os.tmpdir(), "lectern-bench-segments-"));

// --- 1. the engine in-process ------------------------------------------------------------------------

/**
 * Runs a worker; resolves with the JSON of its last stdout line, or rejects (exit code, no JSON). A
 * worker stopped by its budget resolves with its last line and `incomplete` saying why.
 */
function runJsonChild<T>(file: string, argv: string[], budgetSeconds: number, flags: string[] = []) {
  return new Promise<T>((resolve, reject) => {
    const child = spawn(process.execPath, [...flags, "--import", "tsx", file, ...argv], {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), budgetSeconds * 1000);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const stopped = signal === "SIGKILL" ? `over its budget of ${budgetSeconds} s` : null;
      if (!stopped && code !== 0) return reject(new Error(`exited ${code}`));
      try {
        const last = JSON.parse(out.trim().split("\n").pop() ?? "") as T;
        resolve(stopped ? { ...last, incomplete: stopped } : last);
      } catch {
        reject(new Error(stopped ?? `printed no JSON: ${out.slice(-300)}`));
      }
    });
  });
}

async function enginePart(): Promise<EngineResult | { error: string }> {
  const parameters: EngineParameters = {
    dir: corpus!.dir,
    name: corpus!.name,
    chunks: CHUNKS,
    queries: QUERY_COUNT,
    batchSize: BATCH,
    writeSamples: WRITE_SAMPLES,
  };
  try {
    return await runJsonChild<EngineResult>(
      path.join(repoRoot, "bench/lib/segments-engine.ts"),
      [JSON.stringify(parameters)],
      BUDGET.engine,
      ["--expose-gc", "--max-old-space-size=6144"],
    );
  } catch (error) {
    return { error: `engine worker: ${(error as Error).message}` };
  }
}

// --- 2. the app over HTTP ----------------------------------------------------------------------------

interface Server {
  child: ChildProcess;
  pid: number;
  url: string;
}

/** The RAG app as the CLI runs it, on a free port, its store in `dataDir`; resolves once healthy. */
async function startServer(dataDir: string): Promise<Server> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", path.join(repoRoot, "src/cli/serve.ts"), "rag"], {
    cwd: repoRoot,
    env: {
      ...process.env,
      HOST: "127.0.0.1",
      RAG_PORT: String(port),
      DATA_DIR: dataDir,
      LOG_LEVEL: "silent",
      MAX_BODY_BYTES: String(256 * MB),
      HTTP_REQUEST_TIMEOUT_MS: "3600000",
      DATABASE_URL: "",
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const url = `http://127.0.0.1:${port}`;
  let exited = false;
  child.once("exit", () => (exited = true));
  for (const started = performance.now(); ;) {
    if (exited) throw new Error("the RAG server ended before it was healthy");
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch {
      // Not listening yet.
    }
    if (performance.now() - started > 120_000) throw new Error("the RAG server was not healthy in 120 s");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { child, pid: child.pid!, url };
}

async function stopServer(server: Server): Promise<void> {
  if (server.child.exitCode !== null) return;
  const ended = new Promise((resolve) => server.child.once("exit", resolve));
  server.child.kill("SIGTERM");
  await ended;
}

async function call(
  server: Server,
  method: string,
  route: string,
  body?: unknown,
): Promise<Record<string, unknown>> {
  const response = await fetch(`${server.url}${route}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await response.json()) as Record<string, unknown>;
  if (!response.ok)
    throw new Error(`${method} ${route}: ${response.status} ${JSON.stringify(json).slice(0, 300)}`);
  return json;
}

/** VmRSS and VmHWM (peak) of a process, in MB. */
function processMemory(pid: number): { rssMB: number; peakRssMB: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? NaN);
  return { rssMB: kb("VmRSS") / 1024, peakRssMB: kb("VmHWM") / 1024 };
}

function directoryBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    total += entry.isDirectory() ? directoryBytes(full) : statSync(full).size;
  }
  return total;
}

async function timeHttpQueries(server: Server, count: number): Promise<Latency> {
  const list = queries.slice(0, count);
  const body = (query: string) => ({ index_name: INDEX, query, top_k: TOP_K, answer: "none" });
  for (const q of list.slice(0, 20)) await call(server, "POST", "/rag/query", body(q));
  const times: number[] = [];
  for (const q of list) {
    const start = performance.now();
    await call(server, "POST", "/rag/query", body(q));
    times.push(performance.now() - start);
  }
  return latency(times);
}

interface StageResult {
  chunks: number;
  append: Latency;
  delete: Latency;
  /** Samples were cut short by the stage's time budget. */
  cutShort: boolean;
}

interface HttpResult {
  batchSize: number;
  ingestion: {
    documents: number;
    /** Documents that went in batches of `batchSize` (all of them unless the budget ran out). */
    batchedDocuments: number;
    batchedMs: number;
    /** Documents per second in batches of `batchSize`. */
    documentsPerSecond: number;
    batchLatency: Latency;
    /** The rest, sent in batches of CATCH_UP_BATCH after the budget ran out. */
    catchUpDocuments: number;
    catchUpMs: number;
    complete: boolean;
  };
  stages: StageResult[];
  chunksAtEnd: number;
  diskBytes: number;
  queryAfterIngestion: Latency;
  memoryAfterIngestion: { rssMB: number; peakRssMB: number };
  restart: { firstQueryMs: number; query: Latency; memory: { rssMB: number; peakRssMB: number } };
  /** GET /rag/stats/{name} (segments, merges, loads where the service reports them). */
  statsAfterIngestion: Record<string, unknown>;
  statsAfterRestart: Record<string, unknown>;
}

async function httpPart(): Promise<HttpResult | { error: string }> {
  const dataDir = path.join(workDir, "data");
  let server: Server | null = null;
  try {
    server = await startServer(dataDir);
    const doc = (i: number) => ({ id: `c${i}`, text: chunkText(i) });
    // chunk_size 2000: every document (a chunk of ≤ 1,000 characters and its title) stays one chunk.
    let ingested = 0;
    const batchTimes: number[] = [];
    let batchedMs = 0;
    let catchUpDocuments = 0;
    let catchUpMs = 0;
    let catchingUp = false;
    const stages: StageResult[] = [];
    const random = seededRandom(14);
    const deleted = new Set<number>();
    let extra = 0;

    for (const stage of STAGES) {
      while (ingested < stage) {
        if (!catchingUp && batchedMs / 1000 > BUDGET.httpIngest) {
          catchingUp = true;
          log(
            `HTTP ingestion over its ${BUDGET.httpIngest} s budget at ${ingested} documents: the rest in batches of ${CATCH_UP_BATCH}`,
          );
        }
        const size = Math.min(catchingUp ? CATCH_UP_BATCH : BATCH, stage - ingested);
        const documents = Array.from({ length: size }, (_, j) => doc(ingested + j));
        const start = performance.now();
        if (ingested === 0) {
          await call(server, "POST", "/rag/build", {
            index_name: INDEX,
            scorer: "bm25",
            chunk_size: 2000,
            mode: "create",
            documents,
          });
        } else {
          await call(server, "POST", `/rag/indices/${INDEX}/documents`, { documents });
        }
        const ms = performance.now() - start;
        if (catchingUp) {
          catchUpDocuments += size;
          catchUpMs += ms;
        } else {
          batchTimes.push(ms);
          batchedMs += ms;
        }
        ingested += size;
        if (ingested % 50_000 === 0) log(`HTTP: ${ingested.toLocaleString("en")} documents ingested`);
      }
      // One-document writes, appends and deletes interleaved, each timed with its commit.
      log(`HTTP: one-document writes at ${stage.toLocaleString("en")} chunks`);
      const appendTimes: number[] = [];
      const deleteTimes: number[] = [];
      const stageStart = performance.now();
      let cutShort = false;
      for (let i = 0; i < WRITE_SAMPLES; i++) {
        if (i >= MIN_WRITE_SAMPLES && (performance.now() - stageStart) / 1000 > BUDGET.httpWritesPerStage) {
          cutShort = true;
          break;
        }
        const text = chunkText(extraChunkIndex(CHUNKS, extra));
        let start = performance.now();
        await call(server, "POST", `/rag/indices/${INDEX}/documents`, {
          documents: [{ id: `x${extra++}`, text }],
        });
        appendTimes.push(performance.now() - start);
        let victim: number;
        do victim = Math.floor(random() * ingested);
        while (deleted.has(victim));
        deleted.add(victim);
        start = performance.now();
        await call(server, "DELETE", `/rag/indices/${INDEX}/documents/c${victim}`);
        deleteTimes.push(performance.now() - start);
      }
      stages.push({ chunks: stage, append: latency(appendTimes), delete: latency(deleteTimes), cutShort });
      log(
        `HTTP at ${stage.toLocaleString("en")}: append p50 ${fmt(latency(appendTimes).p50)} ms, ` +
          `delete p50 ${fmt(latency(deleteTimes).p50)} ms (${appendTimes.length} each)`,
      );
    }
    const stats = await call(server, "GET", `/rag/stats/${INDEX}`);
    log("HTTP: queries right after ingestion");
    const queryAfterIngestion = await timeHttpQueries(server, HTTP_QUERY_COUNT);
    const memoryAfterIngestion = processMemory(server.pid);

    log("HTTP: restarting the server on the same store");
    await stopServer(server);
    server = await startServer(dataDir);
    const firstStart = performance.now();
    await call(server, "POST", "/rag/query", {
      index_name: INDEX,
      query: queries[0],
      top_k: TOP_K,
      answer: "none",
    });
    const firstQueryMs = performance.now() - firstStart;
    const query = await timeHttpQueries(server, HTTP_QUERY_COUNT);
    const memory = processMemory(server.pid);
    const statsAfterRestart = await call(server, "GET", `/rag/stats/${INDEX}`);
    return {
      batchSize: BATCH,
      ingestion: {
        documents: ingested,
        batchedDocuments: ingested - catchUpDocuments,
        batchedMs,
        documentsPerSecond: (ingested - catchUpDocuments) / (batchedMs / 1000),
        batchLatency: latency(batchTimes),
        catchUpDocuments,
        catchUpMs,
        complete: !catchingUp,
      },
      stages,
      chunksAtEnd: Number(stats.chunks_count ?? NaN),
      diskBytes: directoryBytes(dataDir),
      queryAfterIngestion,
      memoryAfterIngestion,
      restart: { firstQueryMs, query, memory },
      statsAfterIngestion: stats,
      statsAfterRestart,
    };
  } catch (error) {
    return { error: `HTTP: ${(error as Error).message}` };
  } finally {
    if (server) await stopServer(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// --- 3. Lucene -------------------------------------------------------------------------------------------

/** One text per line: newlines inside a text become spaces (the analyzers split on both alike). */
function writeLines(file: string, count: number, text: (i: number) => string): void {
  const fd = openSync(file, "w");
  try {
    let pending: string[] = [];
    let pendingChars = 0;
    for (let i = 0; i < count; i++) {
      const line = text(i).replace(/[\r\n]+/g, " ");
      pending.push(line);
      pendingChars += line.length;
      if (pendingChars > 4 * MB) {
        writeSync(fd, pending.join("\n") + "\n");
        pending = [];
        pendingChars = 0;
      }
    }
    if (pending.length > 0) writeSync(fd, pending.join("\n") + "\n");
  } finally {
    closeSync(fd);
  }
}

async function lucenePart(): Promise<LuceneResult | { error: string }> {
  const prepared = prepareLucene(log);
  if ("error" in prepared) return prepared;
  const dir = path.join(workDir, "lucene");
  try {
    rmSync(dir, { recursive: true, force: true });
    const files = {
      corpusFile: path.join(workDir, "corpus.txt"),
      queriesFile: path.join(workDir, "queries.txt"),
      addsFile: path.join(workDir, "adds.txt"),
    };
    log(`Lucene: writing the corpus (${CHUNKS.toLocaleString("en")} lines)`);
    writeLines(files.corpusFile, CHUNKS, chunkText);
    writeLines(files.queriesFile, queries.length, (i) => queries[i] ?? "");
    writeLines(files.addsFile, NRT_SAMPLES + 50, (i) => chunkText(extraChunkIndex(CHUNKS, i)));
    log("Lucene: indexing, queries, near-real-time writes");
    const heapMB = QUICK ? 1024 : 2048;
    const run = runLucene(prepared.classpath, { ...files, indexDir: dir, heapMB, nrtSamples: NRT_SAMPLES });
    const timeout = new Promise<never>((_, reject) =>
      setTimeout(
        () => reject(new Error(`over its budget of ${BUDGET.lucene} s`)),
        BUDGET.lucene * 1000,
      ).unref(),
    );
    return await Promise.race([run, timeout]);
  } catch (error) {
    return { error: `Lucene: ${(error as Error).message}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// --- targets ------------------------------------------------------------------------------------------

interface Target {
  figure: string;
  ours: number | null;
  reference: number | null;
  /** ours ÷ reference, or ours itself where the target is an absolute limit. */
  value: number | null;
  target: string;
  limit: number;
  holds: boolean | null;
  /** Which parts of the run measured it (the command is the result's). */
  parts: string;
}

function isError<T extends object>(value: T | { error: string } | null): value is { error: string } {
  return value !== null && "error" in value;
}

function targets(
  engine: EngineResult | { error: string } | null,
  http: HttpResult | { error: string } | null,
  lucene: LuceneResult | { error: string } | null,
): Target[] {
  const out: Target[] = [];
  const add = (
    figure: string,
    ours: number | undefined,
    reference: number | undefined | null,
    limit: number,
    target: string,
    parts: string,
  ) => {
    const o = ours !== undefined && Number.isFinite(ours) ? ours : null;
    const r =
      reference === null
        ? null
        : reference !== undefined && Number.isFinite(reference)
          ? reference
          : undefined;
    const value = o === null ? null : r === null ? o : r === undefined || r === 0 ? null : o / r;
    out.push({
      figure,
      ours: o,
      reference: r ?? null,
      value,
      target,
      limit,
      holds: value === null ? null : value <= limit,
      parts,
    });
  };
  const size = (n: number) => (n >= 1_000_000 ? `${n / 1_000_000}M` : `${n / 1000}k`);
  const httpOk = http && !isError(http) ? http : null;
  const first = httpOk?.stages[0];
  const last = httpOk?.stages.at(-1);
  const httpBy = "HTTP";
  for (const kind of ["append", "delete"] as const) {
    if (first && last && last !== first) {
      add(
        `HTTP one-document ${kind} p50 (commit included): ${size(last.chunks)} ÷ ${size(first.chunks)} chunks`,
        last[kind].p50,
        first[kind].p50,
        2,
        "≤ 2×",
        httpBy,
      );
    }
    if (last) {
      add(
        `HTTP one-document ${kind} p50 at ${size(last.chunks)} chunks (ms)`,
        last[kind].p50,
        null,
        50,
        "< 50 ms",
        httpBy,
      );
    }
  }
  const engineOk = engine && !isError(engine) ? engine : null;
  const engineBy = "engine";
  if (engineOk) {
    // Until the merges the ingestion started have ended: all of its work, not just what it made visible.
    add(
      `engine: ${size(CHUNKS)} chunks in batches of ${BATCH}, merges included ÷ one-shot build`,
      engineOk.batchedSettledMs,
      engineOk.oneShotMs,
      1.5,
      "≤ 1.5×",
      engineBy,
    );
  }
  if (engineOk) {
    for (const q of ["p50", "p99"] as const) {
      add(
        `engine: query ${q} after batched ingestion (${engineOk.segmentsAfterBatched ?? "?"} segments) ÷ merged`,
        engineOk.queryManySegments?.[q],
        engineOk.queryMerged?.[q],
        1.3,
        "≤ 1.3×",
        engineBy,
      );
    }
  }
  if (httpOk) {
    add(
      `RSS of the RAG server serving ${size(httpOk.chunksAtEnd)} chunks after a restart (MB)`,
      httpOk.restart.memory.rssMB,
      null,
      700,
      "≤ 700 MB",
      httpBy,
    );
  }
  const luceneOk = lucene && !isError(lucene) ? lucene : null;
  const luceneBy = "engine, Lucene";
  if (luceneOk && engineOk) {
    // Each index as its own writer left it: ours after batched ingestion, Lucene's after bulk indexing.
    for (const q of ["p50", "p99"] as const) {
      add(
        `query ${q}, engine after batched ingestion ÷ Lucene`,
        engineOk.queryManySegments?.[q],
        luceneOk.query[q],
        1.5,
        "≤ 1.5×",
        luceneBy,
      );
    }
  }
  if (luceneOk && last) {
    add(
      `HTTP one-document append p50 (commit included) ÷ Lucene add + reopen (NRT), ${size(last.chunks)} chunks`,
      last.append.p50,
      luceneOk.nrtAddReopen.p50,
      2,
      "≤ 2×",
      "HTTP, Lucene",
    );
    // The issue names one reference for every one-document write: Lucene's NRT add + reopen.
    add(
      `HTTP one-document delete p50 (commit included) ÷ Lucene add + reopen (NRT), ${size(last.chunks)} chunks`,
      last.delete.p50,
      luceneOk.nrtAddReopen.p50,
      2,
      "≤ 2×",
      "HTTP, Lucene",
    );
  }
  return out;
}

// --- main -----------------------------------------------------------------------------------------------

const started = performance.now();
const phaseSeconds: Record<string, number> = {};
async function phase<T>(name: string, skip: boolean, work: () => Promise<T>): Promise<T | null> {
  if (skip) return null;
  const start = performance.now();
  log(`${name}…`);
  const result = await work();
  phaseSeconds[name] = Math.round((performance.now() - start) / 100) / 10;
  if (result && typeof result === "object" && "error" in result) log(String(result.error));
  return result;
}

let engine: EngineResult | { error: string } | null = null;
let http: HttpResult | { error: string } | null = null;
let lucene: LuceneResult | { error: string } | null = null;
try {
  engine = await phase("engine", args["no-engine"], enginePart);
  http = await phase("http", args["no-http"], httpPart);
  lucene = await phase("lucene", args["no-lucene"], lucenePart);
} finally {
  rmSync(workDir, { recursive: true, force: true });
}
const list = targets(engine, http, lucene);
const seconds = Math.round((performance.now() - started) / 1000);
const file = writeResult("segments", command, {
  quick: QUICK,
  chunks: CHUNKS,
  batchSize: BATCH,
  base: corpus.name,
  baseChunks: base.length,
  queries: queries.length,
  httpQueries: Math.min(HTTP_QUERY_COUNT, queries.length),
  topK: TOP_K,
  stages: STAGES,
  budgets: BUDGET,
  seconds,
  phaseSeconds,
  engine,
  http,
  lucene,
  targets: list,
});
process.stdout.write(
  `\nsegmented index, ${CHUNKS.toLocaleString("en")} chunks from ${corpus.name}, ${seconds} s\n`,
);
for (const t of list) {
  const state = t.holds === null ? "  ?  " : t.holds ? "HOLDS" : "FAILS";
  const shown =
    t.reference === null ? `${fmt(t.ours)}` : `${fmt(t.ours)} ÷ ${fmt(t.reference)} = ${fmt(t.value)}`;
  process.stdout.write(`  ${state}  ${t.figure}: ${shown} (target ${t.target})\n`);
}
process.stdout.write(`wrote ${path.relative(repoRoot, file)}\n`);
if (isError(engine) || isError(http) || isError(lucene)) process.exitCode = 1;
