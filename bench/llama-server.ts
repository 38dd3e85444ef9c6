/**
 * Our text generation app against llama.cpp's own server, side by side on a model of real size.
 *
 * The reference is `llama-server` of the very llama.cpp release node-llama-cpp ships, built from its
 * bundled source into a cache outside the repository (bench/lib/llama-cpp-tools.ts; about 10 minutes
 * the first time, reused after). The model is synthetic, of Qwen2.5-0.5B's shape (24 layers, 896
 * wide, 14 heads, 2 KV heads, feed-forward 4864: random weights, quantised to Q4_K_M, 248 MB): the
 * speed of a real model of that size, without downloading one. Both servers get the same model,
 * threads, total context, parallel sequences and sampling (temperature 0.8, top-k 40, top-p 0.95, no
 * min-p, ignore_eos: every request generates all its tokens); each runs as a user would start it
 * otherwise (llama-server's defaults; our app's defaults, with the libuv pool size `npm start` would
 * give it: src/cli/thread-pool.ts).
 *
 * Measured, every subject in turn within a round (the order rotates from round to round), so the
 * machine's other load hits both alike and ratios are taken within a round:
 *  - aggregate generated tokens/s at 1, 4, 8 and 16 concurrent streams (64 tokens per request, 2×c
 *    requests per level, at least 4; --quick: c requests, at least 2); per-request latency at 8 concurrent (p50, p99 over the rounds);
 *  - prompt processing: prompt tokens/s of a 1,000-token prompt with one new token;
 *  - time to first token of a streamed request at 1 and 8 concurrent.
 *
 *   node --import tsx bench/llama-server.ts [--quick] [--rounds N] [--shape 0.5b|1.5b] [--parts cpt]
 *        [--levels 1,4,8,16] [--variant NAME:KEY=VALUE,KEY=VALUE]… [--no-reference] [--out NAME]
 *
 * --parts picks concurrency (c), prompt (p), first token (t). --variant adds our app again with extra
 * environment (an A/B of a setting in the same run). LLAMA_THREADS sets both servers' threads
 * (default: the app's default, physical cores). Writes bench/results/llama-server.json (--out NAME:
 * NAME.json).
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../src/core/config.js";
import { freePort } from "../scripts/lib/free-port.js";
import { benchModelPath, repoRoot } from "./lib/bench-env.js";
import {
  ensureLlamaTools,
  QWEN_0_5B_SHAPE,
  QWEN_1_5B_SHAPE,
  quantizedSyntheticModel,
} from "./lib/llama-cpp-tools.js";
import { processCpu } from "./lib/proc-cpu.js";
import { fmt, iqr, median, quantile, spread, textTable, type Spread } from "./lib/report.js";
import { writeResult } from "./lib/result.js";
import { predict, predictStream, startTextgenProcess, type TextgenProcess } from "./lib/textgen-process.js";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    rounds: { type: "string" },
    shape: { type: "string", default: "0.5b" },
    parts: { type: "string", default: "cpt" },
    variant: { type: "string", multiple: true, default: [] },
    "no-reference": { type: "boolean", default: false },
    /** Concurrency levels to measure (comma-separated; default 1,4,8,16). */
    levels: { type: "string" },
    out: { type: "string" },
  },
});
const parts = new Set(args.parts);
const ROUNDS = Number(args.rounds ?? (args.quick ? 2 : 4));
const THREADS = Number(process.env.LLAMA_THREADS ?? loadConfig({}).textgen.llamaThreads);
const PARALLEL = 8;
/** 1,024 tokens per sequence: room for the 1,000-token prompt. */
const CONTEXT_SIZE = 8192;
const LEVELS = args.levels ? args.levels.split(",").map(Number) : [1, 4, 8, 16];
const TOKENS_PER_REQUEST = 64;
const LATENCY_LEVEL = 8;
const PROMPT_TOKENS = 1000;
const PROMPT_TRIALS_PER_ROUND = 2;
const FIRST_TOKEN_TOKENS = 16;
/**
 * ignore_eos: random weights draw the end-of-generation token often (requests stopped after 1 to 32 of
 * their 64 tokens), and the two servers' samplers draw different tokens from the same seed, so
 * without it tokens/s at concurrency measured where each server's requests happened to stop.
 */
const SAMPLING = { temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0, ignore_eos: true };
const requestsAt = (concurrency: number) => Math.max(args.quick ? 2 : 4, (args.quick ? 1 : 2) * concurrency);
const command =
  (process.env.LLAMA_THREADS ? `LLAMA_THREADS=${process.env.LLAMA_THREADS} ` : "") +
  `node --import tsx bench/llama-server.ts${process.argv.length > 2 ? ` ${process.argv.slice(2).join(" ")}` : ""}`;

// ---------------------------------------------------------------------------------------------------
// Subjects: each answers one completion request and says what it took.

interface Request {
  prompt: string;
  maxTokens: number;
  seed: number;
  stream: boolean;
}
interface Sample {
  tokens: number;
  promptTokens: number;
  ms: number;
  /** Streaming only: from sending the request to the first token. */
  firstMs: number | null;
}
interface Subject {
  name: string;
  pid: number;
  /** Our app: the llama.cpp binary and device it says it loaded the model with. */
  loadedWith?: string;
  run(request: Request): Promise<Sample>;
  /** Our app: its decode loop's account of its time so far (/metrics, batcher.ts StepTimings). */
  steps?(): Promise<StepSnapshot>;
  close(): Promise<void>;
}
/** lectern_decode_steps_total and lectern_decode_step_seconds_total by phase, summed over models. */
interface StepSnapshot {
  steps: number;
  seconds: Record<string, number>;
}

async function readStepMetrics(url: string): Promise<StepSnapshot> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const snapshot: StepSnapshot = { steps: 0, seconds: {} };
  for (const line of text.split("\n")) {
    const steps = /^lectern_decode_steps_total\{[^}]*\} (\S+)$/.exec(line);
    if (steps) snapshot.steps += Number(steps[1]);
    const phase = /^lectern_decode_step_seconds_total\{[^}]*phase="(\w+)"[^}]*\} (\S+)$/.exec(line);
    if (phase) snapshot.seconds[phase[1]!] = (snapshot.seconds[phase[1]!] ?? 0) + Number(phase[2]);
  }
  return snapshot;
}

/** llama-server with its defaults but for what both servers must share. */
async function startLlamaServer(binary: string, modelPath: string): Promise<Subject> {
  const port = await freePort();
  const child = spawn(
    binary,
    [
      ["-m", modelPath],
      ["--host", "127.0.0.1", "--port", String(port)],
      ["-t", String(THREADS), "-tb", String(THREADS)],
      ["-c", String(CONTEXT_SIZE), "-np", String(PARALLEL)],
      ["--no-webui"],
    ].flat(),
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  // Never left running behind a benchmark that failed.
  process.once("exit", () => child.kill("SIGKILL"));
  let log = "";
  child.stderr.on("data", (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited with ${child.exitCode}:\n${log}`);
    const ok = await fetch(`${url}/health`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (ok) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    name: "llama-server",
    pid: child.pid!,
    async run(request) {
      const started = performance.now();
      const response = await fetch(`${url}/completion`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          prompt: request.prompt,
          n_predict: request.maxTokens,
          seed: request.seed,
          stream: request.stream,
          ...SAMPLING,
        }),
      });
      if (response.status !== 200)
        throw new Error(`llama-server answered ${response.status}: ${await response.text()}`);
      interface Final {
        tokens_predicted: number;
        tokens_evaluated: number;
      }
      if (!request.stream) {
        const json = (await response.json()) as Final;
        return {
          tokens: json.tokens_predicted,
          promptTokens: json.tokens_evaluated,
          ms: performance.now() - started,
          firstMs: null,
        };
      }
      let firstMs: number | null = null;
      let final: Final | undefined;
      const decoder = new TextDecoder();
      let buffer = "";
      for await (const chunk of response.body!) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let boundary: number;
        while ((boundary = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, boundary);
          buffer = buffer.slice(boundary + 2);
          if (!block.startsWith("data: ")) continue;
          const event = JSON.parse(block.slice(6)) as Partial<Final> & { stop?: boolean };
          if (event.stop) final = event as Final;
          else firstMs ??= performance.now() - started;
        }
      }
      if (!final) throw new Error("llama-server's stream ended without its final event");
      return {
        tokens: final.tokens_predicted,
        promptTokens: final.tokens_evaluated,
        ms: performance.now() - started,
        firstMs,
      };
    },
    async close() {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Our app (bench/lib/textgen-server.ts: the real app in a child process) with `env` on top. */
async function startApp(name: string, modelPath: string, env: Record<string, string>): Promise<Subject> {
  const server: TextgenProcess = await startTextgenProcess({
    env: {
      MODEL_PATH: modelPath,
      LLAMA_THREADS: String(THREADS),
      LLAMA_CONTEXT_SIZE: String(CONTEXT_SIZE),
      MAX_CONCURRENT: String(PARALLEL),
      LLAMA_GPU: "false",
      LOG_LEVEL: "warn",
      ...env,
    },
  });
  return {
    name,
    pid: server.pid,
    loadedWith: `${server.binary}; device ${server.device}; libuv thread pool ${server.threadPool}`,
    steps: () => readStepMetrics(server.url),
    async run(request) {
      const body = {
        text: request.prompt,
        max_length: request.maxTokens,
        seed: request.seed,
        ...SAMPLING,
      };
      const result = await (request.stream ? predictStream : predict)(server.url, body);
      return {
        tokens: result.tokens,
        promptTokens: result.promptTokens,
        ms: result.ms,
        firstMs: result.firstTokenMs,
      };
    },
    close: () => server.close(),
  };
}

function parseVariant(spec: string): { name: string; env: Record<string, string> } {
  const colon = spec.indexOf(":");
  const name = colon < 0 ? spec : spec.slice(0, colon);
  const env: Record<string, string> = {};
  for (const pair of colon < 0 ? [] : spec.slice(colon + 1).split(",")) {
    const eq = pair.indexOf("=");
    if (eq > 0) env[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return { name, env };
}

// ---------------------------------------------------------------------------------------------------
// Setup.

const started = performance.now();
const tools = await ensureLlamaTools();
const shape = args.shape === "1.5b" ? QWEN_1_5B_SHAPE : QWEN_0_5B_SHAPE;
const modelPath = await quantizedSyntheticModel(tools, path.resolve(benchModelPath()), shape);

const subjects: Subject[] = [];
if (!args["no-reference"]) subjects.push(await startLlamaServer(tools.server, modelPath));
subjects.push(await startApp("lectern", modelPath, {}));
for (const spec of args.variant) {
  const { name, env } = parseVariant(spec);
  subjects.push(await startApp(name, modelPath, env));
}
const reference = subjects[0]!;

let promptCounter = 0;
const names = ["Lily", "Tom", "Sue", "Ben", "Mia", "Max", "Anna", "Sam"];
/** A fresh short prompt: its number comes first, so no server can reuse a cached prefix. */
function shortPrompt(): string {
  const n = promptCounter++;
  return `${n}. Once upon a time, ${names[n % names.length]} found a ball in the park.`;
}
const story =
  "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her " +
  "friends. One day, she saw a big red ball under a tree. She ran to the ball and picked it up. It was " +
  "shiny and round. Her friend Tom came and said, can I play too? Lily smiled and said yes. ";
/** About PROMPT_TOKENS tokens (each subject reports the exact count), fresh from its first token. */
function longPrompt(): string {
  const prefix = `${promptCounter++}. `;
  // ~2.66 characters a token with this vocabulary (1,334 tokens for 3,550); the count each server
  // reports is what is used.
  return prefix + story.repeat(20).slice(0, Math.round(PROMPT_TOKENS * 2.6));
}

// Warm-up: every subject once, so first-call costs stay out of the figures.
for (const subject of subjects)
  await subject.run({ prompt: shortPrompt(), maxTokens: 16, seed: 1, stream: false });
console.log(
  `llama-server bench: ${path.basename(modelPath)}, ${THREADS} thread(s), ${PARALLEL} parallel sequences, ` +
    `context ${CONTEXT_SIZE}, ${ROUNDS} round(s); subjects: ${subjects.map((s) => s.name).join(", ")}`,
);
for (const subject of subjects)
  if (subject.loadedWith) console.log(`  ${subject.name}: ${subject.loadedWith}`);

/** Every subject once per round, in an order that rotates from round to round. */
function rotated<T>(items: T[], round: number): T[] {
  const shift = round % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}
type PerRound = Record<string, number[]>;
const mapValues = <T, U>(record: Record<string, T>, f: (value: T, key: string) => U) =>
  Object.fromEntries(Object.entries(record).map(([k, v]) => [k, f(v, k)]));
const push = (table: PerRound, key: string, value: number) => (table[key] ??= []).push(value);

/** `requestsAt(c)` requests kept `concurrency` at a time. */
async function load(
  subject: Subject,
  concurrency: number,
  count: number,
  makeRequest: (index: number) => Request,
): Promise<{ samples: Sample[]; ms: number; cpuMs: number; steps?: StepSnapshot }> {
  let next = 0;
  const samples: Sample[] = [];
  const stepsBefore = await subject.steps?.();
  const cpuBefore = processCpu(subject.pid);
  const begin = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) samples.push(await subject.run(makeRequest(next++)));
    }),
  );
  const ms = performance.now() - begin;
  const cpuAfter = processCpu(subject.pid);
  const cpuMs = cpuBefore && cpuAfter ? (cpuAfter.runNs - cpuBefore.runNs) / 1e6 : Number.NaN;
  const stepsAfter = await subject.steps?.();
  const steps = stepsBefore &&
    stepsAfter && {
      steps: stepsAfter.steps - stepsBefore.steps,
      seconds: mapValues(stepsAfter.seconds, (value, phase) => value - (stepsBefore.seconds[phase] ?? 0)),
    };
  return { samples, ms, cpuMs, steps };
}

// ---------------------------------------------------------------------------------------------------
// Rounds.

/** level → subject → aggregate tokens/s, one value per round. */
const throughput: Record<number, PerRound> = {};
/** level → subject → CPU ms per generated token. */
const cpuPerToken: Record<number, PerRound> = {};
/** level → subject → phase → mean ms of a decode step in it (our app's own account). */
const stepMs: Record<number, Record<string, Record<string, number[]>>> = {};
/** subject → every request's latency at LATENCY_LEVEL, ms. */
const latency: PerRound = {};
const promptTps: PerRound = {};
const promptTokenCounts: PerRound = {};
const firstToken: Record<number, PerRound> = {};

for (let round = 0; round < ROUNDS; round++) {
  if (parts.has("c")) {
    for (const level of round % 2 === 0 ? LEVELS : [...LEVELS].reverse()) {
      for (const subject of rotated(subjects, round)) {
        const count = requestsAt(level);
        const { samples, ms, cpuMs, steps } = await load(subject, level, count, (index) => ({
          prompt: shortPrompt(),
          maxTokens: TOKENS_PER_REQUEST,
          // Seeds differ per request so the sequences do not all write the same text.
          seed: 1000 * round + index,
          stream: false,
        }));
        const tokens = samples.reduce((sum, s) => sum + s.tokens, 0);
        push((throughput[level] ??= {}), subject.name, (tokens / ms) * 1000);
        push((cpuPerToken[level] ??= {}), subject.name, cpuMs / tokens);
        if (steps && steps.steps > 0)
          for (const [phase, seconds] of Object.entries(steps.seconds))
            push(((stepMs[level] ??= {})[subject.name] ??= {}), phase, (seconds * 1000) / steps.steps);
        if (level === LATENCY_LEVEL) for (const s of samples) push(latency, subject.name, s.ms);
        console.log(`  c=${level} ${subject.name}: ${fmt((tokens / ms) * 1000)} tokens/s`);
      }
    }
  }
  if (parts.has("p")) {
    for (let trial = 0; trial < PROMPT_TRIALS_PER_ROUND; trial++) {
      const prompt = longPrompt();
      for (const subject of rotated(subjects, round + trial)) {
        const sample = await subject.run({ prompt, maxTokens: 1, seed: 1, stream: false });
        push(promptTps, subject.name, (sample.promptTokens / sample.ms) * 1000);
        push(promptTokenCounts, subject.name, sample.promptTokens);
      }
    }
  }
  if (parts.has("t")) {
    for (const level of [1, 8]) {
      for (const subject of rotated(subjects, round)) {
        const { samples } = await load(subject, level, 8, (index) => ({
          prompt: shortPrompt(),
          maxTokens: FIRST_TOKEN_TOKENS,
          seed: index,
          stream: true,
        }));
        for (const s of samples)
          if (s.firstMs !== null) push((firstToken[level] ??= {}), subject.name, s.firstMs);
      }
    }
  }
  console.log(`round ${round + 1}/${ROUNDS} done (${((performance.now() - started) / 1000).toFixed(0)} s)`);
}
for (const subject of subjects) await subject.close();
const elapsed = (performance.now() - started) / 1000;

// ---------------------------------------------------------------------------------------------------
// Summary: figures are medians over rounds; ratios are per round, subject ÷ llama-server.

function ratios(table: PerRound, subject: string): Spread | undefined {
  const base = table[reference.name];
  const values = table[subject];
  if (!base || !values || subject === reference.name) return undefined;
  return spread(values.map((value, i) => value / base[i]!));
}
const others = subjects.filter((s) => s !== reference).map((s) => s.name);
const latencySummary = mapValues(latency, (values) => ({
  p50: quantile(values, 0.5),
  p99: quantile(values, 0.99),
  requests: values.length,
}));
const latencyRatio = (subject: string, key: "p50" | "p99") =>
  latencySummary[subject]![key] / latencySummary[reference.name]![key];

const result = {
  model: path.basename(modelPath),
  shape,
  threads: THREADS,
  parallel_sequences: PARALLEL,
  context_size: CONTEXT_SIZE,
  sampling: SAMPLING,
  rounds: ROUNDS,
  seconds: Math.round(elapsed),
  reference: reference.name,
  /** Our app's own words on the binary and device each of its subjects ran. */
  loaded_with: Object.fromEntries(subjects.flatMap((s) => (s.loadedWith ? [[s.name, s.loadedWith]] : []))),
  subjects: Object.fromEntries(
    subjects.map((s) => [
      s.name,
      s.name === "llama-server"
        ? `llama-server of the bundled llama.cpp release: -t ${THREADS} -tb ${THREADS} -c ${CONTEXT_SIZE} -np ${PARALLEL}, defaults otherwise`
        : s.name === "lectern"
          ? `our app (POST /predict) with MAX_CONCURRENT=${PARALLEL} LLAMA_CONTEXT_SIZE=${CONTEXT_SIZE} LLAMA_THREADS=${THREADS} LLAMA_GPU=false, defaults otherwise`
          : `our app with ${args.variant.find((v) => v.startsWith(`${s.name}:`)) ?? s.name}`,
    ]),
  ),
  concurrency: parts.has("c")
    ? {
        levels: LEVELS,
        tokens_per_request: TOKENS_PER_REQUEST,
        requests_per_level: Object.fromEntries(LEVELS.map((c) => [c, requestsAt(c)])),
        /** level → subject → aggregate tokens/s over the rounds. */
        tokens_per_second: mapValues(throughput, (bySubject) => mapValues(bySubject, spread)),
        /** level → subject → CPU ms per generated token (all threads of the server process). */
        cpu_ms_per_token: mapValues(cpuPerToken, (bySubject) => mapValues(bySubject, spread)),
        /**
         * level → our subject → phase → mean ms of a decode step (lectern_decode_step_seconds_total ÷
         * lectern_decode_steps_total over each level's run, median over rounds): "decode" is
         * llama_decode, the rest is what our batcher adds around it.
         */
        step_ms: mapValues(stepMs, (bySubject) =>
          mapValues(bySubject, (byPhase) => mapValues(byPhase, median)),
        ),
        /** level → subject → tokens/s ÷ the reference's, per round. */
        ratio_to_reference: mapValues(throughput, (bySubject) =>
          Object.fromEntries(others.map((name) => [name, ratios(bySubject, name)])),
        ),
        latency_level: LATENCY_LEVEL,
        /** subject → request latency at LATENCY_LEVEL concurrent (ms). */
        latency_ms: latencySummary,
      }
    : undefined,
  prompt_processing: parts.has("p")
    ? {
        prompt_tokens: mapValues(promptTokenCounts, median),
        prompt_tokens_per_second: mapValues(promptTps, spread),
        ratio_to_reference: Object.fromEntries(others.map((name) => [name, ratios(promptTps, name)])),
      }
    : undefined,
  first_token_ms: parts.has("t")
    ? mapValues(firstToken, (bySubject) => mapValues(bySubject, spread))
    : undefined,
};
const targets =
  parts.has("c") && reference.name === "llama-server" && LEVELS.join() === "1,4,8,16"
    ? {
        one_stream: { target: 1, value: ratios(throughput[1]!, "lectern")!.median },
        concurrent_8: { target: 1, value: ratios(throughput[8]!, "lectern")!.median },
        concurrent_16: { target: 1, value: ratios(throughput[16]!, "lectern")!.median },
        p99_latency_8: { target: 1.1, value: latencyRatio("lectern", "p99"), lower_is_better: true },
      }
    : undefined;
const file = writeResult(args.out ?? "llama-server", command, {
  ...result,
  targets:
    targets &&
    mapValues(targets, (t) => ({
      ...t,
      held: "lower_is_better" in t ? t.value <= t.target : t.value >= t.target,
    })),
});

// Print.
if (parts.has("c")) {
  const rows = subjects.map((s) => [
    s.name,
    ...LEVELS.map((level) => {
      const tps = median(throughput[level]![s.name]!);
      const ratio = ratios(throughput[level]!, s.name);
      return ratio ? `${fmt(tps)} (${fmt(ratio.median)}×)` : fmt(tps);
    }),
    latencySummary[s.name]
      ? `${fmt(latencySummary[s.name]!.p50)} / ${fmt(latencySummary[s.name]!.p99)}`
      : "–",
    fmt(median(cpuPerToken[LEVELS[0]!]![s.name]!)),
  ]);
  console.log(
    `\n${textTable(
      [
        "aggregate tokens/s",
        ...LEVELS.map((l) => `c=${l}`),
        `latency c=${LATENCY_LEVEL} p50 / p99 ms`,
        `CPU ms/tok c=${LEVELS[0]}`,
      ],
      rows,
    )}`,
  );
}
if (parts.has("c") && Object.keys(stepMs).length > 0) {
  // Our app's own account of a step: llama_decode against what the batcher adds around it.
  const phases = ["decode", "sample", "plan", "accept"];
  const rows = subjects.flatMap((s) =>
    LEVELS.flatMap((level) => {
      const byPhase = stepMs[level]?.[s.name];
      if (!byPhase) return [];
      const means = phases.map((phase) => median(byPhase[phase] ?? [0]));
      const total = means.reduce((a, b) => a + b, 0);
      return [[`${s.name} c=${level}`, fmt(total), ...means.map(fmt), `${fmt((100 * means[0]!) / total)} %`]];
    }),
  );
  console.log(`\n${textTable(["ms a step", "all", ...phases, "decode share"], rows)}`);
}
if (parts.has("p")) {
  const rows = subjects.map((s) => {
    const tps = spread(promptTps[s.name]!);
    const ratio = ratios(promptTps, s.name);
    return [
      s.name,
      median(promptTokenCounts[s.name]!),
      fmt(tps.median),
      iqr(tps),
      ratio ? fmt(ratio.median) : "1",
    ];
  });
  console.log(
    `\n${textTable(["prompt processing", "tokens", "tokens/s", "p25–p75", "÷ llama-server"], rows)}`,
  );
}
if (parts.has("t")) {
  const rows = subjects.map((s) => [
    s.name,
    fmt(median(firstToken[1]![s.name]!)),
    fmt(median(firstToken[8]![s.name]!)),
  ]);
  console.log(`\n${textTable(["first token (ms)", "c=1", "c=8"], rows)}`);
}
if (targets)
  console.log(
    `\ntargets (÷ llama-server): 1 stream ${fmt(targets.one_stream.value)} (≥ 1), 8 concurrent ` +
      `${fmt(targets.concurrent_8.value)} (≥ 1), 16 concurrent ${fmt(targets.concurrent_16.value)} (≥ 1), ` +
      `p99 latency at 8 ${fmt(targets.p99_latency_8.value)} (≤ 1.1)`,
  );
console.log(`${elapsed.toFixed(0)} s — ${path.relative(repoRoot, file)}`);
