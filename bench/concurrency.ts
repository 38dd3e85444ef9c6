/**
 * Aggregate generation throughput: the same eight /predict requests of 64 tokens sent one after
 * another, then all at once, through a real text generation app on a real socket. The ratio shows
 * what batching the concurrent requests as parallel sequences of one llama.cpp context buys.
 *
 *   npm run bench:concurrency            (MODEL_PATH / LECTERN_TEST_MODEL pick the model)
 *
 * Writes bench/results/concurrency.json.
 */
import path from "node:path";
import type { AddressInfo } from "node:net";
import { loadConfig } from "../src/core/config.js";
import { buildTextgenApp } from "../src/textgen/app.js";
import { createGenerator } from "../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../src/textgen/engine/llama-generator.js";
import { benchModelPath } from "./lib/bench-env.js";
import { writeResult } from "./lib/result.js";

const REQUESTS = 8;
const TOKENS = 64;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const config = loadConfig({
  ...process.env,
  MODEL_PATH: benchModelPath(),
  LLAMA_THREADS: process.env.LLAMA_THREADS ?? "1",
  LLAMA_GPU: process.env.LLAMA_GPU ?? "false",
  MAX_CONCURRENT: String(REQUESTS),
  LLAMA_CONTEXT_SIZE: String(REQUESTS * 512),
  LOG_LEVEL: "warn",
});
const generator = createGenerator(config) as LlamaGenerator;
const app = await buildTextgenApp({ config, generator });
await app.listen({ host: "127.0.0.1", port: 0 });
await generator.ready();
const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/predict`;

const prompts = Array.from({ length: REQUESTS }, (_, i) => `Once upon a time, in story number ${i + 1},`);
async function predict(text: string): Promise<number> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    // A fixed seed keeps every run comparable; temperature > 0 keeps sequences from coinciding.
    body: JSON.stringify({ text, max_length: TOKENS, temperature: 0.8, seed: 1 }),
  });
  const body = (await response.json()) as { tokens_generated: number };
  if (response.status !== 200) throw new Error(`predict failed: ${JSON.stringify(body)}`);
  return body.tokens_generated;
}

async function timed(
  run: () => Promise<number[]>,
): Promise<{ tokens: number; seconds: number; tokensPerSecond: number }> {
  const started = performance.now();
  const counts = await run();
  const seconds = (performance.now() - started) / 1000;
  const tokens = counts.reduce((a, b) => a + b, 0);
  return { tokens, seconds, tokensPerSecond: tokens / seconds };
}

await predict("warm-up");
const rounds = [];
for (let round = 0; round < ROUNDS; round++) {
  const serial = await timed(async () => {
    const counts = [];
    for (const prompt of prompts) counts.push(await predict(prompt));
    return counts;
  });
  const concurrent = await timed(() => Promise.all(prompts.map(predict)));
  rounds.push({ serial, concurrent, ratio: concurrent.tokensPerSecond / serial.tokensPerSecond });
}
await app.close();

const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const summary = {
  model: path.basename(config.textgen.modelPath),
  threads: config.textgen.llamaThreads,
  requests: REQUESTS,
  tokens_per_request: TOKENS,
  serial_tokens_per_second: median(rounds.map((r) => r.serial.tokensPerSecond)),
  concurrent_tokens_per_second: median(rounds.map((r) => r.concurrent.tokensPerSecond)),
  ratio: median(rounds.map((r) => r.ratio)),
  rounds,
};
console.log(
  `\n${REQUESTS} × /predict of ${TOKENS} tokens, ${summary.model}, ${summary.threads} thread(s), median of ${ROUNDS} rounds`,
);
console.log(`  one after another : ${summary.serial_tokens_per_second.toFixed(1)} tokens/s`);
console.log(`  all at once       : ${summary.concurrent_tokens_per_second.toFixed(1)} tokens/s`);
console.log(`  ratio             : ${summary.ratio.toFixed(2)}×  (target ≥ 2×)`);
writeResult("concurrency", "node --import tsx bench/concurrency.ts", summary);
