/**
 * The HTTP floor: GET /health requests/s of our two apps (built by buildTextgenApp with the test model
 * and buildRagApp, each in a process of its own on a loopback port) against a bare Fastify app
 * answering the same JSON, with autocannon (10 connections). Also measured, to show where the
 * difference goes: our apps at LOG_LEVEL=warn, the HTTP base both are built on ("core": createHttpApp
 * and registerMetrics with one route), bare Fastify plus pieces of that base (logging and the request
 * lifecycle, then metrics), and bare Fastify plus one empty onRequest hook;
 * bench/lib/health-server.ts describes each. Target: ours ≥ 0.8 × bare at the default configuration
 * (LOG_LEVEL=info, metrics on, CORS off).
 *
 * Rounds are short and many (half a second per server, 30 rounds), and interleaved: every server once
 * per round, each app right next to its bare twin, in turns first and second, the other servers after
 * them in an order that rotates. This machine's speed swings by ±20 % within seconds, more than the
 * difference measured; a few long rounds gave ratios anywhere from 0.6 to 1.0 for the same code, many
 * short ones settle within a few per cent. The target figure is the ratio of the totals (all of an
 * app's requests over all of its bare twin's, in the same rounds); the median and spread of the
 * per-round ratios are reported next to it. CPU time per request of the server process (all threads,
 * from /proc) is reported too.
 *
 *   node --import tsx bench/http-floor.ts [--quick] [--rounds N] [--seconds S] [--only a,b]
 *
 * Writes bench/results/http-floor.json. Needs the dev dependency autocannon.
 */
import { fork, type ChildProcess } from "node:child_process";
import type Autocannon from "autocannon";
import path from "node:path";
import { parseArgs } from "node:util";
import { benchModelPath, repoRoot } from "./lib/bench-env.js";
import { withCpu } from "./lib/proc-cpu.js";
import { fmt, iqr, median, spread, textTable, type Spread } from "./lib/report.js";
import { writeResult } from "./lib/result.js";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    rounds: { type: "string" },
    seconds: { type: "string" },
    /** Comma-separated server names to measure besides textgen, rag and the bare apps (see ladder). */
    only: { type: "string" },
  },
});
const ROUNDS = Number(args.rounds ?? (args.quick ? 12 : 30));
const SECONDS = Number(args.seconds ?? 0.5);
const CONNECTIONS = 10;
const command = `node --import tsx bench/http-floor.ts${args.quick ? " --quick" : ""}`;

let autocannon: typeof Autocannon;
try {
  autocannon = (await import("autocannon")).default;
} catch {
  console.error("bench/http-floor.ts needs autocannon: npm install --save-dev autocannon @types/autocannon");
  process.exit(2);
}

interface Server {
  name: string;
  url: string;
  pid: number;
  child: ChildProcess;
}

const baseEnv = {
  MODEL_PATH: path.resolve(benchModelPath()),
  LLAMA_THREADS: "1",
  LLAMA_GPU: "false",
  MAX_CONCURRENT: "4",
  LLAMA_CONTEXT_SIZE: "2048",
};

async function start(name: string, env: Record<string, string>): Promise<Server> {
  const child = fork(path.join(repoRoot, "bench/lib/health-server.ts"), [], {
    cwd: repoRoot,
    env: { ...process.env, ...baseEnv, ...env },
    execArgv: ["--import", "tsx"],
    // Logs go nowhere: their formatting is measured, a terminal's speed is not.
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once("message", (message) => resolve((message as { port: number }).port));
    child.once("exit", (code) => reject(new Error(`${name} exited with ${code} before listening`)));
  });
  return { name, url: `http://127.0.0.1:${port}/health`, pid: child.pid!, child };
}

async function stop(server: Server): Promise<void> {
  const exited = new Promise((resolve) => server.child.once("exit", resolve));
  server.child.disconnect();
  const timer = setTimeout(() => server.child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

interface Load {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  cpuUsPerRequest: number;
}

async function load(server: Server, seconds: number): Promise<Load> {
  const { result, cpu } = await withCpu(server.pid, () =>
    autocannon({ url: server.url, connections: CONNECTIONS, duration: seconds }),
  );
  const answered = result["2xx"];
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${server.name}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  }
  return {
    requestsPerSecond: answered / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    cpuUsPerRequest: cpu ? cpu.runNs / 1000 / answered : Number.NaN,
  };
}

// Our apps first: the bare servers answer the JSON ours answer.
const [textgen, rag] = await Promise.all([
  start("textgen", { BENCH_SERVER: "textgen", LOG_LEVEL: "info" }),
  start("rag", { BENCH_SERVER: "rag", LOG_LEVEL: "info" }),
]);
const textgenJson = await (await fetch(textgen.url)).text();
const ragJson = await (await fetch(rag.url)).text();
/** Measured unless --only names others: our apps at warn, the rebuilt stacks, the costly pieces. */
const DEFAULT_LADDER = ["core@info", "bare+lifecycle@info", "bare+onrequest-hook"];
const ladder = (
  [
    ["bare[textgen]", { BENCH_SERVER: "bare" }],
    ["bare[rag]", { BENCH_SERVER: "bare", BENCH_HEALTH_JSON: ragJson }],
    ["textgen@warn", { BENCH_SERVER: "textgen", LOG_LEVEL: "warn" }],
    ["rag@warn", { BENCH_SERVER: "rag", LOG_LEVEL: "warn" }],
    ["core@info", { BENCH_SERVER: "core", LOG_LEVEL: "info" }],
    ["core@warn", { BENCH_SERVER: "core", LOG_LEVEL: "warn" }],
    ["bare+fastify-logger@info", { BENCH_SERVER: "bare+fastify-logger", LOG_LEVEL: "info" }],
    ["bare+lifecycle@info", { BENCH_SERVER: "bare+lifecycle", LOG_LEVEL: "info" }],
    ["bare+lifecycle@debug", { BENCH_SERVER: "bare+lifecycle", LOG_LEVEL: "debug" }],
    ["bare+lifecycle+metrics@info", { BENCH_SERVER: "bare+lifecycle+metrics", LOG_LEVEL: "info" }],
    ["bare+onrequest-hook", { BENCH_SERVER: "bare+onrequest-hook" }],
    ["bare+empty-hook", { BENCH_SERVER: "bare+empty-hook" }],
    ["bare+default-metrics", { BENCH_SERVER: "bare+default-metrics" }],
  ] as Array<[string, Record<string, string>]>
).filter(
  ([name]) =>
    name.startsWith("bare[") ||
    (args.only === undefined ? DEFAULT_LADDER.includes(name) : args.only.split(",").includes(name)),
) as Array<[string, Record<string, string>]>;
const servers: Server[] = [
  textgen,
  rag,
  ...(await Promise.all(
    ladder.map(([name, env]) => start(name, { BENCH_HEALTH_JSON: textgenJson, ...env })),
  )),
];

const started = performance.now();
for (const server of servers) await load(server, 1); // warm-up: JIT, connection setup
const perRound: Record<string, Load[]> = {};
// Each app is measured right next to its bare twin, first or second by turns: this machine's speed
// drifts within seconds, and a ratio of two figures taken far apart would mostly measure that drift.
const pairs = ["bare[textgen]", "textgen", "rag", "bare[rag]"].map((name) =>
  servers.find((s) => s.name === name)!,
);
const others = servers.filter((server) => !pairs.includes(server));
for (let round = 0; round < ROUNDS; round++) {
  const head = round % 2 === 0 ? pairs : [...pairs].reverse();
  const shift = others.length === 0 ? 0 : round % others.length;
  for (const server of [...head, ...others.slice(shift), ...others.slice(0, shift)]) {
    (perRound[server.name] ??= []).push(await load(server, SECONDS));
  }
  console.log(`round ${round + 1}/${ROUNDS} (${((performance.now() - started) / 1000).toFixed(0)} s)`);
}
for (const server of servers) await stop(server);
const elapsed = (performance.now() - started) / 1000;

const field = (name: string, key: keyof Load) => perRound[name]!.map((l) => l[key]);
const ratio = (a: string, b: string, key: keyof Load): Spread =>
  spread(field(a, key).map((value, i) => value / field(b, key)[i]!));
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
const baseline = (name: string) => (name.startsWith("rag") ? "bare[rag]" : "bare[textgen]");

const summary = Object.fromEntries(
  servers.map(({ name }) => [
    name,
    {
      requests_per_second: spread(field(name, "requestsPerSecond")),
      latency_p50_ms: median(field(name, "p50Ms")),
      latency_p99_ms: median(field(name, "p99Ms")),
      cpu_us_per_request: spread(field(name, "cpuUsPerRequest")),
      /** requests/s ÷ the bare app's, per round. */
      ratio_to_bare: ratio(name, baseline(name), "requestsPerSecond"),
      /** All requests answered over all of the bare app's, in the same rounds: the target figure. */
      ratio_of_totals:
        sum(field(name, "requestsPerSecond")) / sum(field(baseline(name), "requestsPerSecond")),
      /** The bare app's CPU per request ÷ this one's, per round: 1 = costs no more CPU than bare. */
      cpu_efficiency_vs_bare: spread(
        field(baseline(name), "cpuUsPerRequest").map(
          (value, i) => value / field(name, "cpuUsPerRequest")[i]!,
        ),
      ),
    },
  ]),
);
const targets = {
  textgen_vs_bare: { target: 0.8, value: summary.textgen!.ratio_of_totals },
  rag_vs_bare: { target: 0.8, value: summary.rag!.ratio_of_totals },
};
const file = writeResult("http-floor", command, {
  tool: `autocannon, ${CONNECTIONS} connections, ${SECONDS} s per server and round, loopback`,
  rounds: ROUNDS,
  seconds: Math.round(elapsed),
  servers: {
    textgen: "buildTextgenApp with the test model, default LOG_LEVEL (info)",
    rag: "buildRagApp on a temporary DATA_DIR, default LOG_LEVEL (info)",
    "bare[…]": "Fastify() with one route answering the same JSON",
    "@warn": "the same app with LOG_LEVEL=warn (nothing logged per request)",
    core: "createHttpApp and registerMetrics with one /health route: the base both apps are built on",
    "bare+…": "bare Fastify plus pieces of src/core (bench/lib/health-server.ts says which)",
  },
  targets: Object.fromEntries(
    Object.entries(targets).map(([k, t]) => [k, { ...t, held: t.value >= t.target }]),
  ),
  results: summary,
});

const rows = servers.map(({ name }) => {
  const s = summary[name]!;
  return [
    name,
    fmt(s.requests_per_second.median),
    iqr(s.requests_per_second),
    name.startsWith("bare[") ? "1" : fmt(s.ratio_of_totals),
    name.startsWith("bare[") ? "1" : fmt(s.ratio_to_bare.median),
    name.startsWith("bare[") ? "" : iqr(s.ratio_to_bare),
    fmt(s.latency_p99_ms),
    fmt(s.cpu_us_per_request.median),
    name.startsWith("bare[") ? "1" : fmt(s.cpu_efficiency_vs_bare.median),
  ];
});
console.log(
  `\n${textTable(
    [
      "GET /health",
      "req/s",
      "p25–p75",
      "÷ bare (totals)",
      "÷ bare (median round)",
      "p25–p75",
      "p99 ms",
      "CPU µs/req",
      "CPU eff.",
    ],
    rows,
  )}`,
);
console.log(
  `\ntargets (≥ 0.8 × bare): textgen ${fmt(targets.textgen_vs_bare.value)}, rag ${fmt(targets.rag_vs_bare.value)}` +
    ` — ${elapsed.toFixed(0)} s — ${path.relative(process.cwd(), file)}`,
);
