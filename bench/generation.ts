/**
 * Generation speed of /predict against node-llama-cpp called directly, in one run. The server is the
 * real app: src/textgen/engine/llama-generator.ts, which drives llama.cpp through our continuous batcher
 * (src/textgen/engine/batcher.ts: one llama_decode per step carrying a token of every running request). The
 * reference is node-llama-cpp's own API, LlamaCompletion, in this process (bench/lib/direct-llama.ts)
 * with the same model, threads, context size per sequence and sampling (top-k/top-p defaults, no
 * repeat penalty, the same seed). A ratio to it is what HTTP, validation, scheduling and our batching
 * cost or save against node-llama-cpp's evaluation path.
 *
 *  (a) decode tokens/s of /predict (JSON and streaming) vs LlamaCompletion, 128 tokens at temperature
 *      0 and at 0.8 with a seed, same prompts; the texts must match (proof the comparison is fair).
 *      Target ≥ 0.95.
 *  (b) prompt processing: prompt tokens/s of a ~400-token prompt with max_length 1.
 *  (c) aggregate tokens/s at 1, 2, 4, 8 concurrent requests of 64 tokens (MAX_CONCURRENT 8): the
 *      server batches them into shared decode steps; the reference runs LlamaCompletions on 8
 *      sequences of one context. Target: 8 concurrent ≥ 2 × 1.
 *  (d) time to first token: first SSE event of streaming /predict, at 1 and 8 concurrent, vs the
 *      first text piece of a direct call.
 *  (e) prompt cache (#15): a shared prefix of 1,100 tokens and a short question, then the same prefix
 *      with another question, streamed from /v1/completions on a server whose sequences hold 2,048
 *      tokens. Target: time to first token of the second ≤ 1/5 of the first.
 *
 * The server runs in a child process (bench/lib/textgen-server.ts) so the HTTP client does not share
 * its event loop; the direct reference runs in this process. Every measurement is interleaved: a
 * trial sends the same request(s) to every subject back to back, in an order that rotates from trial
 * to trial; ratios are taken within a trial, and figures are medians over trials with their
 * interquartile range (machine noise hits all subjects alike).
 *
 *   node --import tsx bench/generation.ts [--quick] [--trials SCALE] [--parts abcd] [--synthetic]
 *        [--profile] [--out NAME]
 *
 * --parts picks the parts above. --synthetic runs on a 26 M-parameter model with random weights
 * (scripts/lib/synthetic-gguf.ts writes it to the temp folder) instead of the tiny test model, and
 * writes generation-synthetic.json. --profile writes a V8 CPU profile of the server to
 * bench/results/profiles/ and prints where its time went (bench/lib/cpuprofile-summary.ts). MODEL_PATH / LECTERN_TEST_MODEL pick the model, LLAMA_THREADS the threads
 * (default 1). Writes bench/results/generation.json (--out NAME: NAME.json).
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { benchModelPath, resultsDir } from "./lib/bench-env.js";
import { printProfileSummary } from "./lib/cpuprofile-summary.js";
import { DirectLlama } from "./lib/direct-llama.js";
import { syntheticModel } from "../scripts/lib/synthetic-gguf.js";
import { processCpu, withCpu } from "./lib/proc-cpu.js";
import { fmt, iqr, median, spread, textTable, type Spread } from "./lib/report.js";
import { writeResult } from "./lib/result.js";
import {
  completionStream,
  predict,
  predictStream,
  startTextgenProcess,
  type PredictBody,
  type TextgenProcess,
} from "./lib/textgen-process.js";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    trials: { type: "string" },
    profile: { type: "boolean", default: false },
    /** Which parts to run: a decode, b prompt, c concurrency, d first token, e prompt cache. */
    parts: { type: "string", default: "abcde" },
    /** Run on a synthetic 26 M-parameter model (random weights, scripts/lib/synthetic-gguf.ts). */
    synthetic: { type: "boolean", default: false },
    /** Name of the results file (bench/results/NAME.json) instead of the default. */
    out: { type: "string" },
  },
});
const parts = new Set(args.parts);

/** Trials scale with --trials (default 1, --quick 0.5): the run takes about 75 s at 1 here. */
const SCALE = Number(args.trials ?? process.env.BENCH_TRIALS ?? (args.quick ? 0.5 : 1));
const trials = (n: number) => Math.max(2, Math.round(n * SCALE));
const THREADS = Number(process.env.LLAMA_THREADS ?? 1);
const MAX_CONCURRENT = 8;
const CONTEXT_SIZE = 4096;
const DECODE_TOKENS = 128;
const DECODE_TRIALS = parts.has("a") ? trials(12) : 0;
const TEMPERATURES = [0, 0.8];
const SEED = 42;
const LONG_PROMPT_TOKENS = 400;
const PROMPT_TRIALS = parts.has("b") ? trials(12) : 0;
const CONCURRENCY_LEVELS = [1, 2, 4, 8];
const CONCURRENCY_TOKENS = 64;
const CONCURRENCY_TRIALS = parts.has("c") ? trials(6) : 0;
const TTFT_TOKENS = 16;
const TTFT_TRIALS = parts.has("d") ? trials(6) : 0;
const CACHE_PREFIX_TOKENS = 1100;
const CACHE_TRIALS = parts.has("e") ? trials(8) : 0;

const modelPath = args.synthetic
  ? await syntheticModel(path.resolve(benchModelPath()))
  : path.resolve(benchModelPath());
/** Experiments (a synthetic model, --out) keep the suite's generation.json as it was. */
const resultName = args.out ?? (args.synthetic ? "generation-synthetic" : "generation");
const command = `node --import tsx bench/generation.ts${process.argv.slice(2).length > 0 ? ` ${process.argv.slice(2).join(" ")}` : ""}`;

// ---------------------------------------------------------------------------------------------------
// Subjects: what is measured. Each answers one request and says how long it took.

interface Sample {
  text: string;
  tokens: number;
  promptTokens: number;
  ms: number;
  firstMs: number | null;
}
interface Subject {
  name: string;
  /** The process doing the work: this one for direct calls, the server's for HTTP. */
  pid: number;
  run(body: PredictBody): Promise<Sample>;
}

/** Runs `work` and returns it with the CPU time (ns, all threads) `subject`'s process spent meanwhile. */
async function measured<T>(
  subject: Subject,
  work: () => Promise<T>,
): Promise<T & { cpuNs: number; waitNs: number }> {
  const { result, cpu } = await withCpu(subject.pid, work);
  return { ...result, cpuNs: cpu?.runNs ?? Number.NaN, waitNs: cpu?.waitNs ?? Number.NaN };
}

function directSubject(name: string, direct: DirectLlama): Subject {
  return {
    name,
    pid: process.pid,
    async run(body) {
      const result = await direct.complete({
        prompt: body.text,
        maxTokens: body.max_length,
        temperature: body.temperature,
        seed: body.seed,
      });
      return { ...result, firstMs: result.firstTextMs };
    },
  };
}

function httpSubject(name: string, server: TextgenProcess, stream: boolean): Subject {
  return {
    name,
    pid: server.pid,
    async run(body) {
      const result = await (stream ? predictStream : predict)(server.url, body);
      return { ...result, firstMs: result.firstTokenMs };
    },
  };
}

/** Every subject once per trial, in an order that rotates from trial to trial. */
function rotated<T>(items: T[], trial: number): T[] {
  const shift = trial % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

let promptCounter = 0;
const names = ["Lily", "Tom", "Sue", "Ben", "Mia", "Max", "Anna", "Sam"];
const things = ["ball", "cat", "tree", "boat", "cake", "kite", "dog", "box"];
/** A fresh short prompt: its number comes first, so no sequence can reuse a cached prefix. */
function shortPrompt(): string {
  const n = promptCounter++;
  return `${n}. Once upon a time, ${names[n % names.length]} found a ${things[(n >> 3) % things.length]}.`;
}

// ---------------------------------------------------------------------------------------------------
// Setup.

const serverEnv = {
  MODEL_PATH: modelPath,
  LLAMA_THREADS: String(THREADS),
  LLAMA_GPU: "false",
  MAX_CONCURRENT: String(MAX_CONCURRENT),
  LLAMA_CONTEXT_SIZE: String(CONTEXT_SIZE),
  LOG_LEVEL: "warn",
};
const profileDir = path.join(resultsDir, "profiles");
const profileFlags = (name: string) =>
  args.profile ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${name}.cpuprofile`] : [];

const started = performance.now();
const server = await startTextgenProcess({ env: serverEnv, nodeFlags: profileFlags("server-src") });
const direct1 = await DirectLlama.create({
  modelPath,
  threads: THREADS,
  contextSizePerSequence: server.sequenceContextSize,
  sequences: 1,
});
const direct8 = await DirectLlama.create({
  modelPath,
  threads: THREADS,
  contextSizePerSequence: server.sequenceContextSize,
  sequences: MAX_CONCURRENT,
});

const subjects = {
  direct: directSubject("direct", direct1),
  direct8: directSubject("direct-8seq", direct8),
  http: httpSubject("http", server, false),
  stream: httpSubject("http-stream", server, true),
};

// Warm-up: every subject once, so first-call costs (lazy allocation, JIT) stay out of the figures.
for (const subject of Object.values(subjects)) {
  await subject.run({ text: shortPrompt(), max_length: 32, temperature: 0 });
}
console.log(
  `generation bench: ${path.basename(modelPath)}, ${THREADS} thread(s), trials ×${SCALE}, ` +
    `context ${server.sequenceContextSize}/sequence × ${MAX_CONCURRENT}`,
);

// ---------------------------------------------------------------------------------------------------
// (a) Decode speed, one request at a time. A trial is one prompt sent to every subject back to back
// (order rotating); the ratio of two subjects is taken within a trial, then the median over trials.

type PerTrial = Record<string, number[]>;
const push = (table: PerTrial, key: string, value: number) => (table[key] ??= []).push(value);

const decodeSubjects = [subjects.direct, subjects.direct8, subjects.http, subjects.stream];
const decode: Record<
  string,
  { tps: PerTrial; cpuUsPerToken: PerTrial; waitUsPerToken: PerTrial; sameText: boolean[] }
> = {};
for (let trial = 0; trial < DECODE_TRIALS; trial++) {
  for (const temperature of TEMPERATURES) {
    const entry = (decode[`temperature_${temperature}`] ??= {
      tps: {},
      cpuUsPerToken: {},
      waitUsPerToken: {},
      sameText: [],
    });
    const text = shortPrompt();
    const texts: Record<string, string> = {};
    for (const subject of rotated(decodeSubjects, trial)) {
      const sample = await measured(subject, () =>
        subject.run({ text, max_length: DECODE_TOKENS, temperature, seed: SEED }),
      );
      push(entry.tps, subject.name, (sample.tokens / sample.ms) * 1000);
      push(entry.cpuUsPerToken, subject.name, sample.cpuNs / 1000 / sample.tokens);
      push(entry.waitUsPerToken, subject.name, sample.waitNs / 1000 / sample.tokens);
      texts[subject.name] = sample.text;
    }
    // Same model, prompt, seed and sampling must give the same text: proof the comparison is fair.
    entry.sameText.push(decodeSubjects.every((s) => texts[s.name] === texts.direct));
  }
}
console.log(`(a) decode done (${((performance.now() - started) / 1000).toFixed(0)} s)`);

// ---------------------------------------------------------------------------------------------------
// (b) Prompt processing: a long prompt, one new token.

const story =
  "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her " +
  "friends. One day, she saw a big red ball under a tree. She ran to the ball and picked it up. It was " +
  "shiny and round. Her friend Tom came and said, can I play too? Lily smiled and said yes. They threw " +
  "the ball high in the sky and laughed. Then the sun went down and it was time to go home. ";
const storyTokens = direct1.model.tokenize(story.repeat(12));
function longPrompt(): string {
  const prefix = `${promptCounter++}. `;
  const budget = LONG_PROMPT_TOKENS - 1 - direct1.model.tokenize(prefix).length;
  return prefix + direct1.model.detokenize(storyTokens.slice(0, budget));
}
const promptSubjects = [subjects.direct, subjects.direct8, subjects.http];
const promptTps: PerTrial = {};
const promptCpuUsPerToken: PerTrial = {};
let promptTokenCount = 0;
for (let trial = 0; trial < PROMPT_TRIALS; trial++) {
  const text = longPrompt();
  for (const subject of rotated(promptSubjects, trial)) {
    const sample = await measured(subject, () => subject.run({ text, max_length: 1, temperature: 0 }));
    promptTokenCount = sample.promptTokens;
    push(promptTps, subject.name, (sample.promptTokens / sample.ms) * 1000);
    push(promptCpuUsPerToken, subject.name, sample.cpuNs / 1000 / sample.promptTokens);
  }
}
console.log(`(b) prompt processing done (${((performance.now() - started) / 1000).toFixed(0)} s)`);

// ---------------------------------------------------------------------------------------------------
// (c) Aggregate tokens/s at 1, 2, 4, 8 requests in flight: `requestsAt(c)` requests of 64 tokens kept
// c at a time. Within a trial, the levels of one subject run back to back (1 and 8 adjacent), so the
// 8 ÷ 1 ratio of a trial compares moments close in time.

const requestsAt = (concurrency: number) => Math.max(8, 2 * concurrency);
async function aggregate(
  subject: Subject,
  concurrency: number,
): Promise<{ tps: number; cpuUsPerToken: number }> {
  const prompts = Array.from({ length: requestsAt(concurrency) }, shortPrompt);
  let next = 0;
  let tokens = 0;
  const begin = performance.now();
  const cpuBefore = processCpu(subject.pid);
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < prompts.length) {
        const index = next++;
        // Seeds differ per request so the sequences do not all write the same story.
        const sample = await subject.run({
          text: prompts[index]!,
          max_length: CONCURRENCY_TOKENS,
          temperature: 0.8,
          seed: SEED + index,
        });
        tokens += sample.tokens;
      }
    }),
  );
  const ms = performance.now() - begin;
  const cpuAfter = processCpu(subject.pid);
  const cpuNs = cpuBefore && cpuAfter ? cpuAfter.runNs - cpuBefore.runNs : Number.NaN;
  return { tps: (tokens / ms) * 1000, cpuUsPerToken: cpuNs / 1000 / tokens };
}
const concurrencySubjects = [subjects.direct8, subjects.http];
const concurrencyTps: Record<string, PerTrial> = {};
const concurrencyCpu: Record<string, PerTrial> = {};
const concurrencyRatio: PerTrial = {};
for (let trial = 0; trial < CONCURRENCY_TRIALS; trial++) {
  for (const subject of rotated(concurrencySubjects, trial)) {
    const byLevel: Record<number, number> = {};
    for (const level of trial % 2 === 0 ? [1, 8, 2, 4] : [8, 1, 4, 2]) {
      const result = await aggregate(subject, level);
      byLevel[level] = result.tps;
      push((concurrencyTps[subject.name] ??= {}), String(level), result.tps);
      push((concurrencyCpu[subject.name] ??= {}), String(level), result.cpuUsPerToken);
    }
    push(concurrencyRatio, subject.name, byLevel[8]! / byLevel[1]!);
  }
}
console.log(`(c) concurrency done (${((performance.now() - started) / 1000).toFixed(0)} s)`);

// ---------------------------------------------------------------------------------------------------
// (d) Time to first token at 1 and 8 concurrent streams (8 requests either way).

const ttftSubjects = [subjects.direct8, subjects.stream];
const ttft: Record<string, PerTrial> = {};
for (let trial = 0; trial < TTFT_TRIALS; trial++) {
  for (const subject of rotated(ttftSubjects, trial)) {
    for (const level of [1, 8]) {
      const prompts = Array.from({ length: 8 }, shortPrompt);
      let next = 0;
      await Promise.all(
        Array.from({ length: level }, async () => {
          while (next < prompts.length) {
            const sample = await subject.run({
              text: prompts[next++]!,
              max_length: TTFT_TOKENS,
              temperature: 0,
            });
            if (sample.firstMs !== null) push((ttft[subject.name] ??= {}), String(level), sample.firstMs);
          }
        }),
      );
    }
  }
}
console.log(`(d) time to first token done (${((performance.now() - started) / 1000).toFixed(0)} s)`);

// ---------------------------------------------------------------------------------------------------
// (e) Prompt cache: the same 1,100-token prefix asked two questions in a row. A server of its own:
// two sequences of 2,048 tokens (the test model's training context), so the prefix fits.

const cacheFirstMs: number[] = [];
const cacheSecondMs: number[] = [];
const cacheRatio: number[] = [];
const cachedShare: number[] = [];
let cachePromptTokens = 0;
if (CACHE_TRIALS > 0) {
  const cacheServer = await startTextgenProcess({
    env: { ...serverEnv, MAX_CONCURRENT: "2", LLAMA_CONTEXT_SIZE: "4096" },
  });
  const prefixTokens = direct1.model.tokenize(story.repeat(20)).slice(0, CACHE_PREFIX_TOKENS);
  const ask = (prompt: string) =>
    completionStream(cacheServer.url, { prompt, max_tokens: 4, temperature: 0 });
  await ask(`${promptCounter++}. ${story}`);
  for (let trial = 0; trial < CACHE_TRIALS; trial++) {
    // A fresh number first: nothing of an earlier trial can be reused.
    const prefix = `${promptCounter++}. ${direct1.model.detokenize(prefixTokens)}`;
    const first = await ask(`${prefix}\nQuestion: What did Lily find?\nAnswer:`);
    const second = await ask(`${prefix}\nQuestion: Who came to play?\nAnswer:`);
    if (first.firstTokenMs === null || second.firstTokenMs === null) throw new Error("no text streamed");
    cachePromptTokens = second.promptTokens;
    cacheFirstMs.push(first.firstTokenMs);
    cacheSecondMs.push(second.firstTokenMs);
    cacheRatio.push(second.firstTokenMs / first.firstTokenMs);
    cachedShare.push(second.cachedTokens / second.promptTokens);
  }
  await cacheServer.close();
  console.log(`(e) prompt cache done (${((performance.now() - started) / 1000).toFixed(0)} s)`);
}
const elapsed = (performance.now() - started) / 1000;

await server.close();
await direct1.dispose();
await direct8.dispose();

// ---------------------------------------------------------------------------------------------------
// Summary.

/** Per-trial ratios a/b (both measured in the same trial, one right after the other). */
function ratios(table: PerTrial, a: string, b: string): Spread {
  return spread(table[a]!.map((value, i) => value / table[b]![i]!));
}
const mapValues = <T, U>(record: Record<string, T>, f: (value: T) => U) =>
  Object.fromEntries(Object.entries(record).map(([k, v]) => [k, f(v)]));

/**
 * The reference of the targets: node-llama-cpp's LlamaCompletion with the server's own context
 * configuration (same model, threads, context size per sequence and number of sequences), so the
 * ratio isolates what the server adds or saves: HTTP, validation, scheduling, and our batcher in place
 * of node-llama-cpp's evaluation. `direct` (one sequence) is reported too.
 */
const reference = subjects.direct8;
/** The reference's CPU per token ÷ the subject's, per trial: 1 = no CPU overhead. */
function cpuEfficiency(table: PerTrial, subject: string): Spread {
  return spread(table[reference.name]!.map((value, i) => value / table[subject]![i]!));
}
const versus = (list: Subject[], table: PerTrial, against: Subject) =>
  Object.fromEntries(
    list.filter((s) => s !== against).map((s) => [s.name, ratios(table, s.name, against.name)]),
  );
const decodeSummary = mapValues(decode, (entry) => ({
  tokens_per_second: mapValues(entry.tps, spread),
  /** CPU time of the process doing the work (all threads), µs per generated token. */
  cpu_us_per_token: mapValues(entry.cpuUsPerToken, spread),
  /** Time the process's threads were runnable but waited for a CPU (other load), µs per token. */
  cpu_wait_us_per_token: mapValues(entry.waitUsPerToken, spread),
  /** tokens/s ÷ the reference's (direct-8seq), per trial. */
  ratio_to_reference: versus(decodeSubjects, entry.tps, reference),
  /** tokens/s ÷ direct with a one-sequence context, per trial. */
  ratio_to_direct_1seq: versus(decodeSubjects, entry.tps, subjects.direct),
  cpu_efficiency_vs_reference: Object.fromEntries(
    decodeSubjects
      .filter((s) => s !== reference)
      .map((s) => [s.name, cpuEfficiency(entry.cpuUsPerToken, s.name)]),
  ),
  same_text_as_direct: entry.sameText.every(Boolean),
}));
const promptSummary =
  PROMPT_TRIALS === 0
    ? {}
    : {
        prompt_tokens: promptTokenCount,
        prompt_tokens_per_second: mapValues(promptTps, spread),
        cpu_us_per_prompt_token: mapValues(promptCpuUsPerToken, spread),
        ratio_to_reference: versus(promptSubjects, promptTps, reference),
        ratio_to_direct_1seq: versus(promptSubjects, promptTps, subjects.direct),
      };
const concurrencySummary =
  CONCURRENCY_TRIALS === 0
    ? undefined
    : {
        levels: CONCURRENCY_LEVELS,
        tokens_per_request: CONCURRENCY_TOKENS,
        requests_per_level: Object.fromEntries(CONCURRENCY_LEVELS.map((c) => [c, requestsAt(c)])),
        /** subject → concurrency → aggregate tokens/s over the trials. */
        tokens_per_second: mapValues(concurrencyTps, (byLevel) => mapValues(byLevel, spread)),
        /** subject → concurrency → CPU µs per generated token of the process doing the work. */
        cpu_us_per_token: mapValues(concurrencyCpu, (byLevel) => mapValues(byLevel, spread)),
        /** subject → aggregate at 8 ÷ aggregate at 1, per trial. */
        ratio_8_to_1: mapValues(concurrencyRatio, spread),
      };
const ttftSummary =
  TTFT_TRIALS === 0
    ? undefined
    : {
        tokens_per_request: TTFT_TOKENS,
        /** subject → concurrency → first-token time of every request, ms. */
        first_token_ms: mapValues(ttft, (byLevel) => mapValues(byLevel, spread)),
      };

const decodeRatio = (subject: string) =>
  DECODE_TRIALS === 0
    ? Number.NaN
    : median(TEMPERATURES.map((t) => decodeSummary[`temperature_${t}`]!.ratio_to_reference[subject]!.median));
const jsonRatio = decodeRatio(subjects.http.name);
const streamRatio = decodeRatio(subjects.stream.name);
const concurrencyGain = concurrencySummary?.ratio_8_to_1[subjects.http.name]!.median ?? Number.NaN;
const cacheSummary =
  CACHE_TRIALS === 0
    ? undefined
    : {
        prompt_tokens: cachePromptTokens,
        /** Time to the first streamed text of the first question (cold prefix), ms. */
        first_question_first_token_ms: spread(cacheFirstMs),
        /** The same for the second question, whose prefix is cached, ms. */
        second_question_first_token_ms: spread(cacheSecondMs),
        /** second ÷ first, per trial. */
        ratio_second_to_first: spread(cacheRatio),
        /** cached_tokens ÷ prompt_tokens of the second question. */
        cached_share: spread(cachedShare),
      };
const cacheRatioMedian = cacheSummary?.ratio_second_to_first.median ?? Number.NaN;
const targets = {
  predict_vs_direct: { target: 0.95, value: jsonRatio, held: jsonRatio >= 0.95 },
  predict_stream_vs_direct: { target: 0.95, value: streamRatio, held: streamRatio >= 0.95 },
  concurrent_8_vs_1: { target: 2, value: concurrencyGain, held: concurrencyGain >= 2 },
  prompt_cache_first_token_ratio: { target: 0.2, value: cacheRatioMedian, held: cacheRatioMedian <= 0.2 },
};

const file = writeResult(resultName, command, {
  model: path.basename(modelPath),
  threads: THREADS,
  max_concurrent: MAX_CONCURRENT,
  context_size_per_sequence: server.sequenceContextSize,
  trial_scale: SCALE,
  seconds: Math.round(elapsed),
  reference: reference.name,
  subjects: {
    direct: "LlamaCompletion in this process, context of 1 sequence",
    "direct-8seq": "LlamaCompletion in this process, context of 8 sequences (as the server's)",
    http: "POST /predict (JSON) to the app in a child process (src/textgen/engine/llama-generator.ts: our continuous batcher)",
    "http-stream": "POST /predict with stream: true (server-sent events)",
  },
  targets,
  decode: { max_tokens: DECODE_TOKENS, trials_per_temperature: DECODE_TRIALS, seed: SEED, ...decodeSummary },
  prompt_processing: PROMPT_TRIALS === 0 ? undefined : { trials: PROMPT_TRIALS, ...promptSummary },
  concurrency: concurrencySummary && { trials: CONCURRENCY_TRIALS, ...concurrencySummary },
  time_to_first_token: ttftSummary && { trials: TTFT_TRIALS, ...ttftSummary },
  prompt_cache: cacheSummary && { trials: CACHE_TRIALS, ...cacheSummary },
});
const serverProfile = path.join(profileDir, "server-src.cpuprofile");
if (args.profile && existsSync(serverProfile)) printProfileSummary(serverProfile);

// Print.
const rows: Array<Array<string | number>> = [];
for (const t of DECODE_TRIALS === 0 ? [] : TEMPERATURES) {
  const entry = decodeSummary[`temperature_${t}`]!;
  for (const [name, s] of Object.entries(entry.tokens_per_second)) {
    const ratio = entry.ratio_to_reference[name];
    const cpu = entry.cpu_us_per_token[name]!;
    const efficiency = entry.cpu_efficiency_vs_reference[name];
    rows.push([
      `decode t=${t}`,
      name,
      fmt(s.median),
      iqr(s),
      ratio ? fmt(ratio.median) : "1",
      ratio ? iqr(ratio) : "",
      fmt(cpu.median),
      efficiency ? fmt(efficiency.median) : "1",
      fmt(entry.cpu_wait_us_per_token[name]!.median),
    ]);
  }
}
for (const [name, s] of Object.entries(promptSummary.prompt_tokens_per_second ?? {})) {
  const ratio = promptSummary.ratio_to_reference![name];
  const cpu = promptSummary.cpu_us_per_prompt_token![name]!;
  const directCpu = promptSummary.cpu_us_per_prompt_token![reference.name]!;
  rows.push([
    `prompt ${promptTokenCount} tok`,
    name,
    fmt(s.median),
    iqr(s),
    ratio ? fmt(ratio.median) : "1",
    ratio ? iqr(ratio) : "",
    fmt(cpu.median),
    fmt(directCpu.median / cpu.median),
    "",
  ]);
}
if (rows.length > 0) {
  console.log(
    `\n${textTable(
      [
        "measure",
        "subject",
        "tokens/s",
        "p25–p75",
        "÷ direct-8seq",
        "p25–p75",
        "CPU µs/tok",
        "CPU eff.",
        "wait µs/tok",
      ],
      rows,
    )}`,
  );
}

const levelRows = Object.entries(concurrencySummary?.tokens_per_second ?? {}).map(([name, byLevel]) => {
  if (!concurrencySummary) return [];
  const cpu = concurrencySummary.cpu_us_per_token[name]!;
  return [
    name,
    ...CONCURRENCY_LEVELS.map((level) => fmt(byLevel[String(level)]!.median)),
    fmt(concurrencySummary.ratio_8_to_1[name]!.median),
    iqr(concurrencySummary.ratio_8_to_1[name]!),
    `${fmt(cpu["1"]!.median)} → ${fmt(cpu["8"]!.median)}`,
  ];
});
if (levelRows.length > 0)
  console.log(
    `\n${textTable(
      [
        "aggregate tokens/s",
        ...CONCURRENCY_LEVELS.map((l) => `c=${l}`),
        "8÷1",
        "p25–p75",
        "CPU µs/tok c=1 → 8",
      ],
      levelRows,
    )}`,
  );
const ttftRows = Object.entries(ttftSummary?.first_token_ms ?? {}).map(([name, byLevel]) => [
  name,
  fmt(byLevel["1"]!.median),
  iqr(byLevel["1"]!),
  fmt(byLevel["8"]!.median),
  iqr(byLevel["8"]!),
]);
if (ttftRows.length > 0)
  console.log(`\n${textTable(["first token (ms)", "c=1", "p25–p75", "c=8", "p25–p75"], ttftRows)}`);
if (cacheSummary)
  console.log(
    `\nprompt cache (${cacheSummary.prompt_tokens}-token prompts): first token ` +
      `${fmt(cacheSummary.first_question_first_token_ms.median)} ms cold → ` +
      `${fmt(cacheSummary.second_question_first_token_ms.median)} ms with the prefix cached ` +
      `(ratio ${fmt(cacheRatioMedian)}, ${iqr(cacheSummary.ratio_second_to_first)}; target ≤ 0.2; ` +
      `cached ${fmt(cacheSummary.cached_share.median * 100)} % of the prompt)`,
  );
console.log(
  `\ntargets: /predict ÷ direct-8seq ${fmt(jsonRatio)} (stream ${fmt(streamRatio)}; ≥ 0.95), ` +
    `8 ÷ 1 concurrent ${fmt(concurrencyGain)} (≥ 2)  — ${elapsed.toFixed(0)} s — ${path.relative(process.cwd(), file)}`,
);
