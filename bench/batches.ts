/**
 * The Batch API (issue #36): throughput of a batch of `--lines` requests against the same requests
 * sent to the endpoint all at once, and an interactive request's latency (p50, p99) with a batch
 * running against an idle server, all on one server in one run.
 *
 * The model is synthetic and small (bench/lib/llama-cpp-tools.ts SMALL_SHAPE, F32, the test model's
 * vocabulary), the answers short (`--tokens`, exact with ignore_eos), so that a thousand lines run in
 * a few minutes on 2 cores: the figures are the batch machinery's (the runner, its store, the
 * scheduler's priorities), not a real model's speed. Our app runs with its defaults (MAX_CONCURRENT 4,
 * BATCH_CONCURRENCY 2; `--batch-concurrency` changes it) and a data folder of its own (the SQLite
 * store), MAX_QUEUE raised to hold every request sent at once (the default 64 would refuse most) and
 * REQUEST_TIMEOUT_MS to let the last of them wait for the others.
 *
 * Phases, on one server: (1) the lines as /v1/completions requests sent at once, wall time; (2) the
 * same lines (numbered apart, so neither phase is served from the other's prompt cache) as a batch:
 * from POST /v1/batches to its status "completed" (polled every 100 ms), and the upload's time
 * apart; `--rounds` repeats both in alternating order and takes medians. Then (3) `--probes`
 * interactive requests one after the other (a short prompt, `--tokens` tokens, streamed: time to the
 * first token and in all) on the idle server, and (4) the same while a batch of `--lines` lines runs
 * (the batch is cancelled after the probes; whether it ran throughout is recorded).
 *
 *   node --import tsx bench/batches.ts [--lines 1000] [--tokens 16] [--probes 100] [--rounds 1]
 *        [--batch-concurrency N] [--out NAME]
 *
 * Writes bench/results/batches.json (--out NAME: NAME.json).
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../src/core/config.js";
import { benchModelPath, repoRoot } from "./lib/bench-env.js";
import { benchSyntheticModel, SMALL_SHAPE } from "./lib/llama-cpp-tools.js";
import {
  fetchPatiently,
  startOurApp,
  type CompletionSample,
  type Server,
} from "./lib/llama-server-process.js";
import { fmt, median, quantile, textTable } from "./lib/report.js";
import { writeResult, type ResultRow } from "./lib/result.js";

const { values: args } = parseArgs({
  options: {
    lines: { type: "string", default: "1000" },
    tokens: { type: "string", default: "16" },
    probes: { type: "string", default: "100" },
    rounds: { type: "string", default: "1" },
    "batch-concurrency": { type: "string" },
    out: { type: "string" },
  },
});
const LINES = Number(args.lines);
const TOKENS = Number(args.tokens);
const PROBES = Number(args.probes);
const ROUNDS = Number(args.rounds);
const THREADS = Number(process.env.LLAMA_THREADS ?? loadConfig({}).textgen.llamaThreads);
const defaults = loadConfig({});
const MAX_CONCURRENT = defaults.textgen.maxConcurrent;
const BATCH_CONCURRENCY = Number(args["batch-concurrency"] ?? defaults.batches.concurrency);
const command = `node --import tsx bench/batches.ts${process.argv.length > 2 ? ` ${process.argv.slice(2).join(" ")}` : ""}`;

const STORY = "Once upon a time, there was a little girl named Lily. She loved to play in the park.";
/** The body of line `i` of phase `tag`: a numbered prompt, so no two share more than a few tokens. */
const body = (tag: string, i: number) => ({
  prompt: `${tag}${i}. ${STORY}`,
  max_tokens: TOKENS,
  temperature: 0,
  ignore_eos: true,
});

async function call<T>(server: Server, method: string, route: string, payload?: unknown): Promise<T> {
  const response = await fetch(`${server.url}${route}`, {
    method,
    ...(payload !== undefined && {
      headers: { "content-type": "application/json" },
      body: JSON.stringify(payload),
    }),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${method} ${route} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

interface BatchObject {
  id: string;
  status: string;
  output_file_id?: string | null;
  request_counts: { total: number; completed: number; failed: number };
}

/** Uploads the lines of phase `tag` and creates their batch; the upload's time apart. */
async function createBatch(server: Server, tag: string): Promise<{ batch: BatchObject; uploadMs: number }> {
  const jsonl = Array.from({ length: LINES }, (_, i) =>
    JSON.stringify({ custom_id: `${tag}${i}`, method: "POST", url: "/v1/completions", body: body(tag, i) }),
  ).join("\n");
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([`${jsonl}\n`]), "input.jsonl");
  const begin = performance.now();
  const response = await fetch(`${server.url}/v1/files`, { method: "POST", body: form });
  if (response.status !== 200)
    throw new Error(`upload answered ${response.status}: ${await response.text()}`);
  const file = (await response.json()) as { id: string };
  const uploadMs = performance.now() - begin;
  const batch = await call<BatchObject>(server, "POST", "/v1/batches", {
    input_file_id: file.id,
    endpoint: "/v1/completions",
    completion_window: "24h",
  });
  return { batch, uploadMs };
}

const FINAL = new Set(["completed", "failed", "expired", "cancelled"]);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls the batch every 100 ms until `done` holds. */
async function until(
  server: Server,
  id: string,
  done: (batch: BatchObject) => boolean,
): Promise<BatchObject> {
  for (;;) {
    const batch = await call<BatchObject>(server, "GET", `/v1/batches/${id}`);
    if (done(batch)) return batch;
    await sleep(100);
  }
}

interface Throughput {
  ms: number;
  lines: number;
  tokens: number;
  failed: number;
}

/** Phase 1: every line sent at once to /v1/completions. */
async function atOnce(server: Server, tag: string): Promise<Throughput> {
  const begin = performance.now();
  let tokens = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: LINES }, async (_, i) => {
      const response = await fetchPatiently(`${server.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body(tag, i)),
      });
      const answer = (await response.json()) as { usage?: { completion_tokens: number } };
      if (response.status === 200) tokens += answer.usage!.completion_tokens;
      else failed++;
    }),
  );
  return { ms: performance.now() - begin, lines: LINES - failed, tokens, failed };
}

/** Phase 2: the lines as a batch, from its creation to "completed"; tokens read from its output file. */
async function asBatch(server: Server, tag: string): Promise<Throughput & { uploadMs: number }> {
  const { batch, uploadMs } = await createBatch(server, tag);
  const begin = performance.now();
  const done = await until(server, batch.id, (b) => FINAL.has(b.status));
  const ms = performance.now() - begin;
  if (done.status !== "completed") throw new Error(`the batch ended ${done.status}`);
  const output = await fetch(`${server.url}/v1/files/${done.output_file_id}/content`).then((r) => r.text());
  let tokens = 0;
  for (const line of output.split("\n")) {
    if (line === "") continue;
    const parsed = JSON.parse(line) as { response: { body: { usage?: { completion_tokens: number } } } };
    tokens += parsed.response.body.usage?.completion_tokens ?? 0;
  }
  return { ms, lines: done.request_counts.completed, tokens, failed: done.request_counts.failed, uploadMs };
}

/** `PROBES` interactive requests one after the other. */
async function probe(server: Server, tag: string): Promise<CompletionSample[]> {
  const samples: CompletionSample[] = [];
  for (let i = 0; i < PROBES; i++)
    samples.push(
      await server.complete({
        prompt: `${tag}${i}. ${STORY}`,
        maxTokens: TOKENS,
        temperature: 0,
        ignoreEos: true,
      }),
    );
  return samples;
}

const started = performance.now();
const modelPath = await benchSyntheticModel(undefined, path.resolve(benchModelPath()), SMALL_SHAPE, 2048);
const dataDir = mkdtempSync(path.join(os.tmpdir(), "lectern-bench-batches-"));
const env = {
  DATA_DIR: dataDir,
  MAX_CONCURRENT: String(MAX_CONCURRENT),
  BATCH_CONCURRENCY: String(BATCH_CONCURRENCY),
  MAX_QUEUE: String(LINES + PROBES),
  // The last of the lines sent at once waits for all the others: past the default 120 s bound.
  REQUEST_TIMEOUT_MS: "1800000",
  BATCH_MAX_LINES: String(Math.max(LINES, 1)),
};
const server = await startOurApp(modelPath, THREADS, env);
console.log(`${server.described}`);

const atOnceRuns: Throughput[] = [];
const batchRuns: (Throughput & { uploadMs: number })[] = [];
let idle: CompletionSample[] = [];
let busy: CompletionSample[] = [];
let busyBatch: { before: BatchObject; after: BatchObject; final: BatchObject } | undefined;
try {
  // Warm-up: first-call costs stay out of the figures.
  await server.complete({ prompt: "Warm up.", maxTokens: 4, temperature: 0 });
  for (let round = 0; round < ROUNDS; round++) {
    const phases = [
      async () => {
        const run = await atOnce(server, `r${round}a`);
        atOnceRuns.push(run);
        console.log(`  at once: ${run.lines} lines in ${fmt(run.ms / 1000)} s (${run.failed} failed)`);
      },
      async () => {
        const run = await asBatch(server, `r${round}b`);
        batchRuns.push(run);
        console.log(
          `  batch: ${run.lines} lines in ${fmt(run.ms / 1000)} s (${run.failed} failed; upload ${fmt(run.uploadMs)} ms)`,
        );
      },
    ];
    for (const phase of round % 2 === 0 ? phases : [...phases].reverse()) await phase();
  }
  idle = await probe(server, "idle");
  console.log(
    `  interactive, idle: p99 ${fmt(
      quantile(
        idle.map((s) => s.ms),
        0.99,
      ),
    )} ms`,
  );
  const { batch } = await createBatch(server, "busy");
  // Its lines hold the sequences once the first results are in.
  const before = await until(server, batch.id, (b) => b.request_counts.completed > 0 || FINAL.has(b.status));
  busy = await probe(server, "busy");
  const after = await call<BatchObject>(server, "GET", `/v1/batches/${batch.id}`);
  await call(server, "POST", `/v1/batches/${batch.id}/cancel`);
  const final = await until(server, batch.id, (b) => FINAL.has(b.status));
  busyBatch = { before, after, final };
  console.log(
    `  interactive, batch running: p99 ${fmt(
      quantile(
        busy.map((s) => s.ms),
        0.99,
      ),
    )} ms ` +
      `(batch lines done ${before.request_counts.completed} → ${after.request_counts.completed} of ${LINES}, then ${final.status})`,
  );
} finally {
  await server.close();
  rmSync(dataDir, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------------------------------

const linesPerSecond = (runs: Throughput[]) => median(runs.map((run) => (run.lines / run.ms) * 1000));
const tokensPerSecond = (runs: Throughput[]) => median(runs.map((run) => (run.tokens / run.ms) * 1000));
const latency = (samples: CompletionSample[], key: "ms" | "firstTokenMs") => ({
  p50: quantile(
    samples.map((s) => s[key]),
    0.5,
  ),
  p99: quantile(
    samples.map((s) => s[key]),
    0.99,
  ),
  max: Math.max(...samples.map((s) => s[key])),
});
const throughput = {
  at_once: { lines_per_s: linesPerSecond(atOnceRuns), tokens_per_s: tokensPerSecond(atOnceRuns) },
  batch: { lines_per_s: linesPerSecond(batchRuns), tokens_per_s: tokensPerSecond(batchRuns) },
};
const batchRatio = throughput.batch.lines_per_s / throughput.at_once.lines_per_s;
const interactive = {
  idle: { total_ms: latency(idle, "ms"), first_token_ms: latency(idle, "firstTokenMs") },
  batch_running: { total_ms: latency(busy, "ms"), first_token_ms: latency(busy, "firstTokenMs") },
};
const ranThroughout = busyBatch !== undefined && busyBatch.after.request_counts.completed < LINES;
const rows: ResultRow[] = [
  {
    metric: `batch of ${LINES} /v1/completions lines (${TOKENS} tokens each): lines/s; reference the same lines sent at once`,
    value: fmt(throughput.batch.lines_per_s),
    reference: fmt(throughput.at_once.lines_per_s),
    ratio: fmt(batchRatio),
    target: "",
  },
  {
    metric: `interactive request (${TOKENS} tokens) p99 latency with a batch running; reference the idle server`,
    value: `${fmt(interactive.batch_running.total_ms.p99)} ms`,
    reference: `${fmt(interactive.idle.total_ms.p99)} ms`,
    ratio: fmt(interactive.batch_running.total_ms.p99 / interactive.idle.total_ms.p99),
    target: "",
  },
  {
    metric: `interactive request p99 time to first token with a batch running; reference the idle server`,
    value: `${fmt(interactive.batch_running.first_token_ms.p99)} ms`,
    reference: `${fmt(interactive.idle.first_token_ms.p99)} ms`,
    ratio: fmt(interactive.batch_running.first_token_ms.p99 / interactive.idle.first_token_ms.p99),
    target: "",
  },
];
const file = writeResult(args.out ?? "batches", command, {
  model: path.basename(modelPath),
  shape: SMALL_SHAPE,
  threads: THREADS,
  env,
  lines: LINES,
  tokens_per_line: TOKENS,
  probes: PROBES,
  rounds: ROUNDS,
  seconds: Math.round((performance.now() - started) / 1000),
  throughput,
  batch_to_at_once_ratio: batchRatio,
  runs: { at_once: atOnceRuns, batch: batchRuns },
  interactive,
  busy_batch: busyBatch && {
    completed_before_probes: busyBatch.before.request_counts.completed,
    completed_after_probes: busyBatch.after.request_counts.completed,
    final_status: busyBatch.final.status,
    ran_throughout: ranThroughout,
  },
  samples: {
    idle: idle.map((s) => ({ first_token_ms: s.firstTokenMs, ms: s.ms })),
    batch_running: busy.map((s) => ({ first_token_ms: s.firstTokenMs, ms: s.ms })),
  },
  summary_rows: rows,
});
console.log(
  `\n${textTable(
    ["metric", "ours", "reference", "ratio"],
    rows.map((r) => [r.metric, r.value, r.reference, r.ratio]),
  )}`,
);
if (!ranThroughout) console.log("note: the batch finished before the probes did");
console.log(`${((performance.now() - started) / 1000).toFixed(0)} s — ${path.relative(repoRoot, file)}`);
