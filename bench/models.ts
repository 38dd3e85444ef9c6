/**
 * Many models in one server (#24), measured (a benchmark, not a test):
 *
 * 1. Memory over load/unload cycles: two synthetic models in MODELS_DIR are loaded and unloaded
 *    through POST /models/load and /models/unload, 100 times each; the app's RSS (from /proc) after
 *    the last cycle against after the first. Target: within 50 MB.
 * 2. Cold start: time from POST /models/load of the 0.5B-shaped synthetic model (Q4_K_M) to the
 *    first streamed token of a completion, against llama-server's router mode (the same release of
 *    llama.cpp, `--models-dir` and no `-m`, POST /models/load then a completion) in the same run,
 *    alternating, each going first in every other round. The result keeps both command lines (and
 *    the one the router started the model's child with) to show what ran.
 *
 *   node --import tsx bench/models.ts [--cycles N] [--rounds N] [--cycles-only]
 *
 * Writes bench/results/models.json as {benchmark, command, date, machine, rows: [{metric, value,
 * reference, ratio, target}]}.
 */
import { spawn } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { benchModelPath } from "./lib/bench-env.js";
import { freePort } from "../scripts/lib/free-port.js";
import { ensureLlamaTools, QWEN_0_5B_SHAPE, quantizedSyntheticModel } from "./lib/llama-cpp-tools.js";
import { median } from "./lib/report.js";
import { writeResult } from "./lib/result.js";
import { startTextgenProcess } from "./lib/textgen-process.js";
import { syntheticModel } from "../scripts/lib/synthetic-gguf.js";

const { values } = parseArgs({
  options: {
    cycles: { type: "string", default: "100" },
    rounds: { type: "string", default: "9" },
    // Only the cycles (no llama-server build): the result has the memory row alone.
    "cycles-only": { type: "boolean", default: false },
  },
});
const CYCLES = Number(values.cycles);
const ROUNDS = Number(values.rounds);
const THREADS = Math.max(1, Math.floor(os.availableParallelism() / 2)) || 1;
const CONTEXT = 2048;
const MB = 1024 ** 2;
const command = `node --import tsx bench/models.ts${process.argv.length > 2 ? ` ${process.argv.slice(2).join(" ")}` : ""}`;

function rss(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;
}

async function post(url: string, body: object): Promise<Response> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${url} answered ${response.status}: ${await response.text()}`);
  return response;
}

/** Milliseconds from sending a streamed completion to its first token. */
async function firstToken(url: string, model: string): Promise<void> {
  const response = await post(`${url}/v1/completions`, {
    model,
    prompt: "Once upon a time",
    max_tokens: 8,
    temperature: 0,
    stream: true,
  });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the stream ended before a token");
    text += decoder.decode(value, { stream: true });
    if (/"text":"[^"]/.test(text)) break;
  }
  await reader.cancel();
}

async function waitStatus(url: string, model: string, wanted: string): Promise<void> {
  for (;;) {
    const list = (await (await fetch(`${url}/models`)).json()) as {
      data: { id: string; status: { value: string } }[];
    };
    if (list.data.find((entry) => entry.id === model)?.status.value === wanted) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function cycles(): Promise<{ first: number; last: number }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-bench-models-"));
  const shape = { embedding: 256, feedForward: 768, layers: 4, heads: 4, kvHeads: 4 };
  for (const tag of ["a", "b"])
    copyFileSync(await syntheticModel(benchModelPath(), shape, { tag }), path.join(dir, `${tag}.gguf`));
  const app = await startTextgenProcess({
    env: { MODEL_PATH: benchModelPath(), MODELS_DIR: dir, LLAMA_THREADS: "1", LOG_LEVEL: "silent" },
  });
  let first = 0;
  try {
    for (let cycle = 1; cycle <= CYCLES; cycle++) {
      for (const model of ["a", "b"]) {
        await post(`${app.url}/models/load`, { model });
        await post(`${app.url}/models/unload`, { model });
        await waitStatus(app.url, model, "unloaded");
      }
      if (cycle === 1) first = rss(app.pid);
      if (cycle % 20 === 0) console.log(`cycle ${cycle}: RSS ${(rss(app.pid) / MB).toFixed(1)} MB`);
    }
    return { first, last: rss(app.pid) };
  } finally {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

interface ColdStarter {
  url: string;
  /** How the server was started (the command line, or the app's binary and device). */
  describe: Record<string, unknown>;
  close(): Promise<void>;
}

async function ours(dir: string): Promise<ColdStarter> {
  const app = await startTextgenProcess({
    env: {
      MODEL_PATH: benchModelPath(),
      MODELS_DIR: dir,
      LLAMA_THREADS: String(THREADS),
      LLAMA_CONTEXT_SIZE: String(CONTEXT),
      MAX_CONCURRENT: "1",
      LOG_LEVEL: "silent",
    },
  });
  return {
    url: app.url,
    describe: { binary: app.binary, device: app.device, threads: THREADS, context: CONTEXT },
    close: () => app.close(),
  };
}

async function llamaServerRouter(binary: string, dir: string): Promise<ColdStarter> {
  const port = await freePort();
  // Router mode: no -m; the models are MODELS_DIR's files, each loaded into a child llama-server
  // that inherits -t, -c and -np.
  const args = ["--models-dir", dir, "--host", "127.0.0.1", "--port", String(port), "-t", String(THREADS)];
  args.push("-c", String(CONTEXT), "-np", "1", "--no-webui", "--models-max", "1");
  const child = spawn(binary, args, { stdio: ["ignore", "ignore", "ignore"] });
  process.once("exit", () => child.kill("SIGKILL"));
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited with ${child.exitCode}`);
    if (
      await fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    url,
    describe: { command: [binary, ...args].join(" ") },
    close: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** The command line llama-server's router started a model's child with (GET /models' status.args). */
async function childArgs(url: string, model: string): Promise<string | undefined> {
  const list = (await (await fetch(`${url}/models`)).json()) as {
    data: { id: string; status: { args?: string[] } }[];
  };
  return list.data.find((entry) => entry.id === model)?.status.args?.join(" ");
}

/**
 * Cold start on each server: load, first token, unload; `rounds` times, the two servers alternating
 * and taking turns at going first (so neither always follows the other's unload).
 */
async function coldStarts() {
  const tools = await ensureLlamaTools();
  const file = await quantizedSyntheticModel(tools, benchModelPath(), QWEN_0_5B_SHAPE);
  const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-bench-cold-"));
  const model = "qwen05-shape";
  copyFileSync(file, path.join(dir, `${model}.gguf`));
  const results = { ours: [] as number[], reference: [] as number[] };
  const servers = { ours: await ours(dir), reference: await llamaServerRouter(tools.server, dir) };
  let referenceChild: string | undefined;
  try {
    for (let round = 0; round < ROUNDS; round++)
      for (const which of round % 2 === 0
        ? (["ours", "reference"] as const)
        : (["reference", "ours"] as const)) {
        const server = servers[which];
        const started = performance.now();
        await post(`${server.url}/models/load`, { model });
        await firstToken(server.url, model);
        results[which].push(performance.now() - started);
        if (which === "reference") referenceChild ??= await childArgs(server.url, model);
        await post(`${server.url}/models/unload`, { model });
        await waitStatus(server.url, model, "unloaded");
        console.log(`${which}: cold start to first token ${results[which].at(-1)!.toFixed(0)} ms`);
      }
  } finally {
    await servers.ours.close();
    await servers.reference.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return {
    ...results,
    model: path.basename(file),
    modelBytes: statSync(file).size,
    oursServer: servers.ours.describe,
    referenceServer: { ...servers.reference.describe, child: referenceChild },
  };
}

const memory = await cycles();
const growth = (memory.last - memory.first) / MB;
console.log(
  `RSS after cycle 1: ${(memory.first / MB).toFixed(1)} MB; after ${CYCLES}: ${(memory.last / MB).toFixed(1)} MB`,
);
const memoryFigures = {
  cycles: CYCLES,
  firstMb: memory.first / MB,
  lastMb: memory.last / MB,
  growthMb: growth,
};
if (values["cycles-only"]) {
  console.log(`wrote ${writeResult("models", command, { memory: memoryFigures })}`);
  process.exit(0);
}
const cold = await coldStarts();
const file = writeResult("models", command, {
  memory: memoryFigures,
  coldStart: {
    rounds: ROUNDS,
    model: cold.model,
    modelBytes: cold.modelBytes,
    oursServer: cold.oursServer,
    referenceServer: cold.referenceServer,
    oursMs: cold.ours,
    referenceMs: cold.reference,
    oursMedianMs: median(cold.ours),
    referenceMedianMs: median(cold.reference),
  },
});
console.log(`wrote ${file}`);
