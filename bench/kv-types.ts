/**
 * KV cache types (LLAMA_KV_CACHE_TYPE, issue #36): memory per sequence and generation speed of q8_0
 * (and q4_0) against f16, on our app, with llama-server given the same `-ctk`/`-ctv` for reference.
 *
 * Memory: our app's resident memory with a large context (8 sequences × `--context` tokens) minus
 * the same with a small one, per sequence, for each type (llama.cpp allocates and clears the whole
 * cache when the context is made, so it is resident); next to it the registry's estimate
 * (gguf-check.ts estimateModelBytes), which MODELS_MEMORY_BUDGET uses. Speed: aggregate tokens/s at
 * 1 and 8 concurrent streams (64 tokens a request, after a ~1,000-token prompt so attention reads a
 * cache of some size), median over rounds.
 *
 *   node --import tsx bench/kv-types.ts [--shape 0.5b|small] [--types f16,q8_0,q4_0] [--levels 1,8]
 *        [--context 16384] [--rounds 2] [--no-reference] [--out NAME]
 *
 * `--shape small` with a small `--context` only checks that the benchmark runs.
 * Writes bench/results/kv-types.json (--out NAME: NAME.json).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../src/core/config.js";
import { estimateModelBytes, inspectGguf } from "../src/textgen/engine/gguf-check.js";
import { benchModelPath, repoRoot } from "./lib/bench-env.js";
import {
  ensureLlamaTools,
  QWEN_0_5B_SHAPE,
  benchSyntheticModel,
  SMALL_SHAPE,
} from "./lib/llama-cpp-tools.js";
import { startLlamaServer, startOurApp, type Server } from "./lib/llama-server-process.js";
import { fmt, median, textTable } from "./lib/report.js";
import { writeResult, type ResultRow } from "./lib/result.js";

const { values: args } = parseArgs({
  options: {
    shape: { type: "string", default: "0.5b" },
    types: { type: "string", default: "f16,q8_0,q4_0" },
    levels: { type: "string", default: "1,8" },
    context: { type: "string", default: "16384" },
    rounds: { type: "string", default: "2" },
    "no-reference": { type: "boolean", default: false },
    out: { type: "string" },
  },
});
const TYPES = args.types.split(",") as ("f16" | "q8_0" | "q4_0")[];
const LEVELS = args.levels.split(",").map(Number);
const CONTEXT = Number(args.context);
const ROUNDS = Number(args.rounds);
const PARALLEL = 8;
const SMALL_CONTEXT = 512;
const TOKENS = 64;
const THREADS = Number(process.env.LLAMA_THREADS ?? loadConfig({}).textgen.llamaThreads);
const command = `node --import tsx bench/kv-types.ts${process.argv.length > 2 ? ` ${process.argv.slice(2).join(" ")}` : ""}`;

const rssOf = (pid: number) =>
  Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;

const started = performance.now();
const shape = args.shape === "small" ? SMALL_SHAPE : QWEN_0_5B_SHAPE;
// llama-server, and llama-quantize for the full-size model; a small run without reference needs neither.
const tools = args["no-reference"] && shape === SMALL_SHAPE ? undefined : await ensureLlamaTools();
const modelPath = await benchSyntheticModel(tools, path.resolve(benchModelPath()), shape, 32_768);
const summary = await inspectGguf(modelPath);
const story = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ";
/** ~1,000 tokens, numbered so that no prompt is served from another's cache. */
let counter = 0;
const prompt = () => `${counter++}. ${story.repeat(28)}`;

const ours = (type: string, context: number) =>
  startOurApp(modelPath, THREADS, {
    LLAMA_KV_CACHE_TYPE: type,
    MAX_CONCURRENT: String(PARALLEL),
    LLAMA_CONTEXT_SIZE: String(PARALLEL * context),
    // Memory of the cache itself: no RAM prefix cache copies on top.
    PROMPT_CACHE_RAM_MB: "0",
    // Eight ~1,000-token prompts at once take minutes on 2 cores: past the default 120 s bound.
    REQUEST_TIMEOUT_MS: "1800000",
  });
const theirs = (type: string) =>
  startLlamaServer(
    tools!.server,
    modelPath,
    THREADS,
    ["-c", String(PARALLEL * CONTEXT), "-np", String(PARALLEL), "-ctk", type, "-ctv", type, "-fa", "on"],
    `llama-server ${type}`,
  );

/** Aggregate tokens/s with `level` streams, 2 requests each. */
async function throughput(server: Server, level: number): Promise<number> {
  let tokens = 0;
  const begin = performance.now();
  await Promise.all(
    Array.from({ length: level }, async () => {
      for (let i = 0; i < 2; i++) {
        const sample = await server.complete({
          prompt: prompt(),
          maxTokens: TOKENS,
          temperature: 0,
          ignoreEos: true,
        });
        tokens += sample.tokens;
      }
    }),
  );
  return (tokens / (performance.now() - begin)) * 1000;
}

const memory: Record<string, { measured: number[]; estimated: number }> = {};
/** subject → level → tokens/s per round. */
const speed: Record<string, Record<number, number[]>> = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const type of round % 2 === 0 ? TYPES : [...TYPES].reverse()) {
    // Resident memory with a small and with the large context: the difference is the cache.
    const small = await ours(type, SMALL_CONTEXT);
    await small.complete({ prompt: "Hi", maxTokens: 2, temperature: 0 });
    const base = rssOf(small.pid);
    await small.close();
    const server = await ours(type, CONTEXT);
    try {
      await server.complete({ prompt: "Hi", maxTokens: 2, temperature: 0 });
      const perSequence = (rssOf(server.pid) - base) / PARALLEL;
      const estimate =
        (estimateModelBytes(summary, PARALLEL * CONTEXT, type) -
          estimateModelBytes(summary, PARALLEL * SMALL_CONTEXT, type)) /
        PARALLEL;
      (memory[type] ??= { measured: [], estimated: estimate }).measured.push(perSequence);
      for (const level of LEVELS) {
        const value = await throughput(server, level);
        ((speed[`lectern ${type}`] ??= {})[level] ??= []).push(value);
        console.log(
          `  lectern ${type}: c=${level} ${fmt(value)} tokens/s; ${fmt(perSequence / 2 ** 20)} MiB a sequence`,
        );
      }
    } finally {
      await server.close();
    }
    if (args["no-reference"]) continue;
    const reference = await theirs(type);
    try {
      await reference.complete({ prompt: "Hi", maxTokens: 2, temperature: 0 });
      for (const level of LEVELS) {
        const value = await throughput(reference, level);
        ((speed[`llama-server ${type}`] ??= {})[level] ??= []).push(value);
        console.log(`  llama-server ${type}: c=${level} ${fmt(value)} tokens/s`);
      }
    } finally {
      await reference.close();
    }
  }
}

const tps = (name: string, level: number) => (speed[name]?.[level] ? median(speed[name][level]) : undefined);
const mib = (bytes: number) => `${fmt(bytes / 2 ** 20)} MiB`;
const rows: ResultRow[] = [];
for (const type of TYPES) {
  const measured = median(memory[type]!.measured);
  rows.push({
    metric: `KV cache ${type}: memory per sequence of ${CONTEXT} tokens (resident; vs the registry's estimate)`,
    value: mib(measured),
    reference: mib(memory[type]!.estimated),
    ratio: fmt(measured / memory[type]!.estimated),
    target: "",
  });
  for (const level of LEVELS) {
    const value = tps(`lectern ${type}`, level)!;
    const f16 = tps("lectern f16", level);
    const reference = tps(`llama-server ${type}`, level);
    rows.push({
      metric: `KV cache ${type}: tokens/s at ${level} stream(s)${f16 !== undefined && type !== "f16" ? ` (${fmt(value / f16)}× f16's)` : ""}`,
      value: fmt(value),
      reference: reference === undefined ? "" : fmt(reference),
      ratio: reference === undefined ? "" : fmt(value / reference),
      target: "",
    });
  }
}
const file = writeResult(args.out ?? "kv-types", command, {
  model: path.basename(modelPath),
  shape,
  threads: THREADS,
  parallel_sequences: PARALLEL,
  context_per_sequence: CONTEXT,
  rounds: ROUNDS,
  seconds: Math.round((performance.now() - started) / 1000),
  memory_per_sequence: Object.fromEntries(
    TYPES.map((type) => [
      type,
      { measured: median(memory[type]!.measured), estimated: memory[type]!.estimated },
    ]),
  ),
  tokens_per_second: Object.fromEntries(
    Object.entries(speed).map(([name, levels]) => [
      name,
      Object.fromEntries(Object.entries(levels).map(([level, values]) => [level, median(values)])),
    ]),
  ),
  summary_rows: rows,
});
console.log(
  `\n${textTable(
    ["metric", "ours", "reference", "ratio"],
    rows.map((r) => [r.metric, r.value, r.reference, r.ratio]),
  )}`,
);
console.log(`${((performance.now() - started) / 1000).toFixed(0)} s — ${path.relative(repoRoot, file)}`);
