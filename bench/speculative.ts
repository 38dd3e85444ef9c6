/**
 * Speculative decoding, ours and llama.cpp server's side by side (issue #36): tokens/s of one stream
 * without guesses, with a draft model that always guesses right, with one that always guesses wrong,
 * and with prompt lookup on an answer that copies its prompt.
 *
 * The target is a crafted "chain" model (scripts/lib/synthetic-gguf.ts) of Qwen2.5-0.5B's shape whose
 * greedy answer is a known text of up to 200 distinct tokens, quantised to Q4_K_M: the speed of a
 * real model of that size, with an answer every server must reproduce exactly. The drafts are small
 * chain models (4 layers, 256 wide): one of the same text (every guess accepted) and one of the same
 * tokens in another order (every guess refused). llama-server runs the same files with `-md` (and
 * `--spec-type ngram-simple` for prompt lookup), its defaults otherwise; both servers one sequence,
 * the same threads. Each subject starts fresh and answers the same requests; `--rounds` repeats and
 * takes medians; the ratio of ours to llama-server's is taken per draft.
 *
 *   node --import tsx bench/speculative.ts [--shape 0.5b|small] [--requests 4] [--rounds 2]
 *        [--no-reference] [--out NAME]
 *
 * `--shape small` (an F32 target of 4 layers) only checks that the benchmark runs.
 * Writes bench/results/speculative.json (--out NAME: NAME.json).
 */
import path from "node:path";
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel, type LlamaModel } from "node-llama-cpp";
import { loadConfig } from "../src/core/config.js";
import { syntheticModel, type SyntheticShape } from "../scripts/lib/synthetic-gguf.js";
import { benchModelPath, repoRoot } from "./lib/bench-env.js";
import {
  cachedModelsDir,
  ensureLlamaTools,
  QWEN_0_5B_SHAPE,
  quantizeFile,
  SMALL_SHAPE,
} from "./lib/llama-cpp-tools.js";
import { startLlamaServer, startOurApp, type Completion, type Server } from "./lib/llama-server-process.js";
import { fmt, median, textTable } from "./lib/report.js";
import { writeResult, type ResultRow } from "./lib/result.js";

const { values: args } = parseArgs({
  options: {
    shape: { type: "string", default: "0.5b" },
    requests: { type: "string", default: "4" },
    rounds: { type: "string", default: "2" },
    "no-reference": { type: "boolean", default: false },
    out: { type: "string" },
  },
});
const REQUESTS = Number(args.requests);
const ROUNDS = Number(args.rounds);
const THREADS = Number(process.env.LLAMA_THREADS ?? loadConfig({}).textgen.llamaThreads);
const DRAFT_SHAPE: SyntheticShape = SMALL_SHAPE;
const CHAIN_TOKENS = 200;
const command = `node --import tsx bench/speculative.ts${process.argv.length > 2 ? ` ${process.argv.slice(2).join(" ")}` : ""}`;

/**
 * Words of the vocabulary joined into a text whose tokens all differ (the chain model's rule), up to
 * `count` tokens; and an ending for prompts whose last token is not one of them (the chain model
 * starts its text after any token outside it).
 */
function chainText(model: LlamaModel, count: number): { text: string; outside: string; words: string[] } {
  const vocab = (model.fileInfo.metadata.tokenizer?.ggml as unknown as { tokens: string[] }).tokens;
  const words: string[] = [];
  let text = "";
  for (const piece of vocab) {
    if (!/^▁[a-z]{2,}$/.test(piece)) continue;
    const candidate = `${text} ${piece.slice(1)}`;
    const tokens = model.tokenize(candidate);
    if (new Set(tokens).size !== tokens.length || tokens.length > count) continue;
    text = candidate;
    words.push(piece.slice(1));
  }
  const used = new Set(model.tokenize(text));
  const outside = ["?", "!", ":", ";", "0", "1", "7", ")", "*", "#", "=", "+"].find(
    (ending) => !used.has(model.tokenize(`Yes ${ending}`).at(-1)!),
  );
  if (outside === undefined) throw new Error("no prompt ending outside the chain was found");
  return { text, outside, words };
}

const started = performance.now();
// llama-server, and llama-quantize for the full-size target; a small run without reference needs neither.
const tools = args["no-reference"] && args.shape === "small" ? undefined : await ensureLlamaTools();
const tokenizerModel = path.resolve(benchModelPath());
const llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
const vocab = await llama.loadModel({ modelPath: tokenizerModel, vocabOnly: true });
const chain = chainText(vocab, CHAIN_TOKENS);
const chainLength = vocab.tokenize(chain.text).length;
// The same tokens in another order: a draft that guesses wrong every time.
const shuffled = ` ${[...chain.words].reverse().join(" ")}`;
await vocab.dispose();
await llama.dispose();

const dir = cachedModelsDir;
const shape = args.shape === "small" ? SMALL_SHAPE : QWEN_0_5B_SHAPE;
const targetF32 = await syntheticModel(tokenizerModel, shape, { dir, chain: chain.text });
// Quantised like a real model of its size; a small target stays F32 (it only checks the script).
const target = args.shape === "small" || !tools ? targetF32 : await quantizeFile(tools, targetF32);
const sameDraft = await syntheticModel(tokenizerModel, DRAFT_SHAPE, { dir, chain: chain.text, tag: "draft" });
const otherDraft = await syntheticModel(tokenizerModel, DRAFT_SHAPE, { dir, chain: shuffled, tag: "draft" });

/** Greedy, the whole chain: ours and llama-server's answers must both be it. */
const plainRequest: Completion = {
  prompt: `Yes ${chain.outside}`,
  maxTokens: chainLength + 1,
  temperature: 0,
};
/** An answer that copies its prompt: prompt lookup's case. */
const copyRequest: Completion = {
  prompt: `Repeat:${chain.text}. ${chain.outside}`,
  maxTokens: chainLength + 1,
  temperature: 0,
};

interface Subject {
  name: string;
  kind: "none" | "same" | "other" | "ngram";
  request: Completion;
  start: () => Promise<Server>;
}
const ours = (env: Record<string, string>) => () =>
  startOurApp(target, THREADS, { MAX_CONCURRENT: "1", LLAMA_CONTEXT_SIZE: "4096", ...env });
const theirs = (flags: string[]) => () =>
  startLlamaServer(tools!.server, target, THREADS, ["-c", "4096", "-np", "1", ...flags]);
const subjects: Subject[] = [
  { name: "lectern", kind: "none", request: plainRequest, start: ours({ SPECULATIVE: "off" }) },
  {
    name: "lectern draft",
    kind: "same",
    request: plainRequest,
    start: ours({ DRAFT_MODEL_PATH: sameDraft }),
  },
  {
    name: "lectern mismatched draft",
    kind: "other",
    request: plainRequest,
    start: ours({ DRAFT_MODEL_PATH: otherDraft }),
  },
  { name: "lectern ngram", kind: "ngram", request: copyRequest, start: ours({ SPECULATIVE: "ngram" }) },
];
if (!args["no-reference"])
  subjects.push(
    { name: "llama-server", kind: "none", request: plainRequest, start: theirs([]) },
    { name: "llama-server -md", kind: "same", request: plainRequest, start: theirs(["-md", sameDraft]) },
    {
      name: "llama-server -md mismatched",
      kind: "other",
      request: plainRequest,
      start: theirs(["-md", otherDraft]),
    },
    {
      name: "llama-server ngram",
      kind: "ngram",
      request: copyRequest,
      start: theirs(["--spec-type", "ngram-simple"]),
    },
  );

/** subject → tokens/s per request (every round). */
const speed: Record<string, number[]> = {};
const exact: Record<string, boolean> = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const subject of round % 2 === 0 ? subjects : [...subjects].reverse()) {
    const server = await subject.start();
    try {
      // Warm-up: first-call costs stay out of the figures.
      await server.complete({ ...subject.request, maxTokens: 4 });
      for (let i = 0; i < REQUESTS; i++) {
        const sample = await server.complete(subject.request);
        // Decode speed: tokens after the first, over the time after it (the prompt is excluded).
        (speed[subject.name] ??= []).push(((sample.tokens - 1) / (sample.ms - sample.firstTokenMs)) * 1000);
        console.log(
          `    ${sample.tokens} tokens, first after ${fmt(sample.firstTokenMs)} ms, all after ${fmt(sample.ms)} ms`,
        );
        exact[subject.name] = (exact[subject.name] ?? true) && sample.text.trim() === chain.text.trim();
      }
      console.log(`  ${subject.name}: ${fmt(median(speed[subject.name]!))} tokens/s (round ${round + 1})`);
    } finally {
      await server.close();
    }
  }
}

const tps = (name: string) => (speed[name] ? median(speed[name]) : undefined);
const rows: ResultRow[] = [];
const kinds: [Subject["kind"], string][] = [
  ["none", "no guesses"],
  ["same", "draft model guessing right (100 % accepted)"],
  ["other", "draft model guessing wrong"],
  ["ngram", "prompt lookup, answer copying the prompt"],
];
for (const [kind, label] of kinds) {
  const mine = subjects.find((s) => s.kind === kind && s.name.startsWith("lectern"))!;
  const reference = subjects.find((s) => s.kind === kind && s.name.startsWith("llama-server"));
  const value = tps(mine.name)!;
  const other = reference && tps(reference.name);
  rows.push({
    metric: `speculative decoding, ${label}: tokens/s, 1 stream (${shape === SMALL_SHAPE ? "small" : "0.5B-shaped"} chain model)`,
    value: fmt(value),
    reference: other === undefined ? "" : fmt(other),
    ratio: other === undefined ? "" : fmt(value / other),
    target: kind === "none" ? "" : "≥ 1.0",
    ...(kind !== "none" && other !== undefined && { held: value / other >= 1 }),
  });
}
const file = writeResult(args.out ?? "speculative", command, {
  target: path.basename(target),
  drafts: { same: path.basename(sameDraft), mismatched: path.basename(otherDraft) },
  chain_tokens: chainLength,
  threads: THREADS,
  requests_per_round: REQUESTS,
  rounds: ROUNDS,
  seconds: Math.round((performance.now() - started) / 1000),
  tokens_per_second: Object.fromEntries(
    Object.entries(speed).map(([name, values]) => [name, median(values)]),
  ),
  speedup_over_no_guesses: Object.fromEntries(
    subjects.map((s) => {
      const base = subjects.find((b) => b.kind === "none" && b.name.split(" ")[0] === s.name.split(" ")[0]);
      return [s.name, base ? tps(s.name)! / tps(base.name)! : null];
    }),
  ),
  answers_exact: exact,
  samples: speed,
  summary_rows: rows,
});
console.log(
  `\n${textTable(
    ["subject", "tokens/s", "answer exact"],
    subjects.map((s) => [s.name, fmt(tps(s.name)!), String(exact[s.name])]),
  )}`,
);
console.log(`${((performance.now() - started) / 1000).toFixed(0)} s — ${path.relative(repoRoot, file)}`);
