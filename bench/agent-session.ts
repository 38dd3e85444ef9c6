/**
 * A coding agent's session against our app and llama.cpp's server, side by side (issue #36): every
 * turn re-sends a long prefix (system prompt and tools, 20,000 tokens) and the conversation so far,
 * grown by a user turn (+300 tokens) and the previous answer (64 tokens). Two such sessions are
 * interleaved (A1 B1 A2 B2 …), sharing the prefix but not their conversations, as two agents with
 * the same tools on one server. Measured per turn: time to the first token (what the agent waits
 * before its answer starts), the prompt tokens each server reused from its cache, and the wall time
 * of the whole interleaved pair.
 *
 * The model is synthetic, of Qwen2.5-0.5B's shape, Q4_K_M (bench/lib/llama-cpp-tools.ts), its context
 * raised to 32,768 tokens. The reference is llama-server of the same llama.cpp release with
 * `--cache-reuse 256` and its defaults otherwise (its RAM prompt cache, `--cache-ram`, included); both
 * get the same threads, parallel sequences and context per sequence. Ours runs with its defaults and
 * the settings an agent setup needs (README "Agent setup"): a context per sequence that holds the
 * session. Subjects run one after the other, each from a fresh start; `--rounds` repeats the pair
 * of runs (in alternating order) and takes medians.
 *
 *   node --import tsx bench/agent-session.ts [--prefix 20000] [--turn 300] [--answer 64] [--turns 5]
 *        [--sessions 2] [--shape 0.5b|small] [--rounds 1] [--no-reference] [--out NAME]
 *
 * `--shape small` (a 4-layer model) with a short prefix only checks that the benchmark runs.
 * Writes bench/results/agent-session.json (--out NAME: NAME.json).
 */
import path from "node:path";
import { parseArgs } from "node:util";
import { getLlama, LlamaLogLevel, type LlamaModel } from "node-llama-cpp";
import { loadConfig } from "../src/core/config.js";
import { benchModelPath, repoRoot } from "./lib/bench-env.js";
import {
  ensureLlamaTools,
  QWEN_0_5B_SHAPE,
  benchSyntheticModel,
  SMALL_SHAPE,
} from "./lib/llama-cpp-tools.js";
import {
  startLlamaServer,
  startOurApp,
  type CompletionSample,
  type Server,
} from "./lib/llama-server-process.js";
import { fmt, median, textTable } from "./lib/report.js";
import { writeResult, type ResultRow } from "./lib/result.js";

const { values: args } = parseArgs({
  options: {
    prefix: { type: "string", default: "20000" },
    turn: { type: "string", default: "300" },
    answer: { type: "string", default: "64" },
    turns: { type: "string", default: "5" },
    sessions: { type: "string", default: "2" },
    shape: { type: "string", default: "0.5b" },
    rounds: { type: "string", default: "1" },
    "no-reference": { type: "boolean", default: false },
    out: { type: "string" },
  },
});
const PREFIX = Number(args.prefix);
const TURN = Number(args.turn);
const ANSWER = Number(args.answer);
const TURNS = Number(args.turns);
const SESSIONS = Number(args.sessions);
const ROUNDS = Number(args.rounds);
const THREADS = Number(process.env.LLAMA_THREADS ?? loadConfig({}).textgen.llamaThreads);
/** Our default MAX_CONCURRENT, and the same for llama-server. */
const PARALLEL = 4;
/** Room for a session: prefix, every turn and answer, and slack for tokenization differences. */
const PER_SEQUENCE = Math.ceil((PREFIX + TURNS * (TURN + ANSWER) + 1024) / 1024) * 1024;
const command = `node --import tsx bench/agent-session.ts${process.argv.length > 2 ? ` ${process.argv.slice(2).join(" ")}` : ""}`;

// ---------------------------------------------------------------------------------------------------
// Texts of an exact token count in the model's vocabulary.

const WORDS = (
  "the function returns a value when called with its arguments file path read write tool schema " +
  "parameter string number boolean object array required description name type property edit " +
  "search replace line column error message test build run command output input user assistant"
).split(" ");

/** Deterministic text of `tokens` tokens (measured with the model's tokenizer), labelled by `seed`. */
function textOf(model: LlamaModel, tokens: number, seed: number): string {
  let state = seed * 2654435761 || 1;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) % WORDS.length;
  };
  let text = `[${seed}]`;
  // Grow by words past the count, then cut back to it.
  while (model.tokenize(text).length < tokens) {
    const words: string[] = [];
    for (let i = 0; i < 64; i++) words.push(WORDS[next()]!);
    text += ` ${words.join(" ")}.`;
  }
  // The longest cut of it with at most `tokens` tokens (binary search on its length).
  let low = 0;
  let high = text.length;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (model.tokenize(text.slice(0, mid)).length <= tokens) low = mid;
    else high = mid - 1;
  }
  return text.slice(0, low);
}

// ---------------------------------------------------------------------------------------------------

const started = performance.now();
const shape = args.shape === "small" ? SMALL_SHAPE : QWEN_0_5B_SHAPE;
// llama-server, and llama-quantize for the full-size model; a small run without reference needs neither.
const tools = args["no-reference"] && shape === SMALL_SHAPE ? undefined : await ensureLlamaTools();
const tokenizerModel = path.resolve(benchModelPath());
const modelPath = await benchSyntheticModel(tools, tokenizerModel, shape, 32_768);
const llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
const vocab = await llama.loadModel({ modelPath: tokenizerModel, vocabOnly: true });
const prefix = textOf(vocab, PREFIX, 1);
const userTurns = Array.from({ length: SESSIONS }, (_, s) =>
  Array.from({ length: TURNS }, (_, t) => `\nUser: ${textOf(vocab, TURN, 100 + 10 * s + t)}\nAssistant:`),
);
await vocab.dispose();
await llama.dispose();

const subjects: { name: string; start: () => Promise<Server> }[] = [
  {
    name: "lectern",
    start: () =>
      startOurApp(modelPath, THREADS, {
        MAX_CONCURRENT: String(PARALLEL),
        LLAMA_CONTEXT_SIZE: String(PARALLEL * PER_SEQUENCE),
        // A first turn of 20,000 tokens takes minutes on 2 cores: past the default 120 s bound.
        REQUEST_TIMEOUT_MS: "1800000",
      }),
  },
];
if (!args["no-reference"])
  subjects.push({
    name: "llama-server",
    start: () =>
      startLlamaServer(tools!.server, modelPath, THREADS, [
        ...["-c", String(PARALLEL * PER_SEQUENCE), "-np", String(PARALLEL)],
        ...["--cache-reuse", "256"],
      ]),
  });

interface Turn {
  session: number;
  turn: number;
  sample: CompletionSample;
}

/** The interleaved sessions on a fresh server: A1 B1 A2 B2 … */
async function runSessions(server: Server): Promise<{ turns: Turn[]; wallMs: number }> {
  const histories = Array.from({ length: SESSIONS }, () => "");
  const turns: Turn[] = [];
  const begin = performance.now();
  for (let t = 0; t < TURNS; t++)
    for (let s = 0; s < SESSIONS; s++) {
      histories[s] += userTurns[s]![t]!;
      const sample = await server.complete({
        prompt: prefix + histories[s]!,
        maxTokens: ANSWER,
        temperature: 0,
        ignoreEos: true,
      });
      histories[s] += sample.text;
      turns.push({ session: s, turn: t, sample });
      console.log(
        `  ${server.name} session ${String.fromCharCode(65 + s)} turn ${t + 1}: first token ${fmt(sample.firstTokenMs)} ms, ` +
          `${sample.promptTokens} prompt tokens (${sample.cachedTokens} cached), ${fmt(sample.ms)} ms`,
      );
    }
  return { turns, wallMs: performance.now() - begin };
}

/** subject → round → its run. */
const runs: Record<string, { turns: Turn[]; wallMs: number }[]> = {};
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? subjects : [...subjects].reverse();
  for (const subject of order) {
    const server = await subject.start();
    console.log(`${subject.name}: ${server.described} (round ${round + 1}/${ROUNDS})`);
    try {
      // Warm-up: first-call costs stay out of the figures (its short prompt shares nothing).
      await server.complete({ prompt: "Warm up.", maxTokens: 4, temperature: 0 });
      (runs[subject.name] ??= []).push(await runSessions(server));
    } finally {
      await server.close();
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Summary: medians over rounds; per turn, the median over sessions too.

const firstTokenOf = (name: string, turn: number) =>
  median(
    runs[name]!.flatMap((run) => run.turns.filter((t) => t.turn === turn).map((t) => t.sample.firstTokenMs)),
  );
const cachedOf = (name: string, turn: number) =>
  median(
    runs[name]!.flatMap((run) => run.turns.filter((t) => t.turn === turn).map((t) => t.sample.cachedTokens)),
  );
const wallOf = (name: string) => median(runs[name]!.map((run) => run.wallMs));
const reference = runs["llama-server"] ? "llama-server" : undefined;

const perTurn = Array.from({ length: TURNS }, (_, turn) => ({
  turn: turn + 1,
  first_token_ms: Object.fromEntries(subjects.map((s) => [s.name, firstTokenOf(s.name, turn)])),
  cached_tokens: Object.fromEntries(subjects.map((s) => [s.name, cachedOf(s.name, turn)])),
  ratio: reference ? firstTokenOf("lectern", turn) / firstTokenOf(reference, turn) : null,
}));
const wallRatio = reference ? wallOf("lectern") / wallOf(reference) : null;
const rows: ResultRow[] = perTurn.map((entry) => ({
  metric: `agent session turn ${entry.turn}: time to first token (${SESSIONS} sessions interleaved, ${PREFIX}-token prefix)`,
  value: `${fmt(entry.first_token_ms.lectern!)} ms`,
  reference: reference ? `${fmt(entry.first_token_ms[reference]!)} ms` : "",
  ratio: entry.ratio === null ? "" : fmt(entry.ratio),
  target: entry.turn > 1 ? "≤ 1.0" : "",
  ...(entry.turn > 1 && entry.ratio !== null && { held: entry.ratio <= 1 }),
}));
rows.push({
  metric: `agent session: wall time of ${SESSIONS} interleaved sessions of ${TURNS} turns`,
  value: `${fmt(wallOf("lectern") / 1000)} s`,
  reference: reference ? `${fmt(wallOf(reference) / 1000)} s` : "",
  ratio: wallRatio === null ? "" : fmt(wallRatio),
  target: "",
});
const file = writeResult(args.out ?? "agent-session", command, {
  model: path.basename(modelPath),
  shape,
  threads: THREADS,
  parallel_sequences: PARALLEL,
  context_per_sequence: PER_SEQUENCE,
  prefix_tokens: PREFIX,
  turn_tokens: TURN,
  answer_tokens: ANSWER,
  turns: TURNS,
  sessions: SESSIONS,
  rounds: ROUNDS,
  seconds: Math.round((performance.now() - started) / 1000),
  subjects: Object.fromEntries(subjects.map((s) => [s.name, s.name])),
  per_turn: perTurn,
  wall_ms: Object.fromEntries(subjects.map((s) => [s.name, wallOf(s.name)])),
  wall_ratio: wallRatio,
  runs,
  summary_rows: rows,
});
console.log(
  `\n${textTable(
    ["turn", ...subjects.map((s) => `${s.name} first token ms (cached)`), "ratio"],
    perTurn.map((entry) => [
      entry.turn,
      ...subjects.map((s) => `${fmt(entry.first_token_ms[s.name]!)} (${entry.cached_tokens[s.name]})`),
      entry.ratio === null ? "–" : fmt(entry.ratio),
    ]),
  )}`,
);
console.log(
  `wall time: ${subjects.map((s) => `${s.name} ${fmt(wallOf(s.name) / 1000)} s`).join(", ")}` +
    (wallRatio === null ? "" : ` (ratio ${fmt(wallRatio)})`),
);
console.log(`${((performance.now() - started) / 1000).toFixed(0)} s — ${path.relative(repoRoot, file)}`);
