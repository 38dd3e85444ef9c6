/**
 * The text generation app in a process of its own, for benchmarks that measure it through a real
 * socket without the client sharing its event loop. Configured from the environment like the real
 * server (loadConfig); prints one JSON line {"port": n} on stdout once the model is loaded, and
 * closes when its standard input ends or on SIGTERM.
 *
 * BENCH_GENERATOR=variant serves through bench/lib/llama-generator-variant.ts instead of
 * src/textgen/llama-generator.ts (to measure a proposed change); BENCH_VARIANT_* tune it.
 */
import type { AddressInfo } from "node:net";
import { loadConfig } from "../../src/core/config.js";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { LlamaGenerator } from "../../src/textgen/llama-generator.js";
import { VariantLlamaGenerator, variantOptionsFromEnv } from "./llama-generator-variant.js";

const config = loadConfig(process.env);
const generatorOptions = {
  model: { reference: config.modelPath, modelsDir: config.modelsDir, progress: false },
  threads: config.llamaThreads,
  contextSize: config.llamaContextSize,
  sequences: config.maxConcurrent,
  gpu: config.llamaGpu,
};
const generator =
  process.env.BENCH_GENERATOR === "variant"
    ? new VariantLlamaGenerator(generatorOptions, variantOptionsFromEnv(process.env))
    : new LlamaGenerator(generatorOptions);
await generator.ready();
if (generator.status().state !== "ready") {
  process.stderr.write(`model did not load: ${JSON.stringify(generator.status())}\n`);
  process.exit(1);
}
const app = await buildTextgenApp({ config, generator });
await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(
  JSON.stringify({
    port: (app.server.address() as AddressInfo).port,
    sequence_context_size: generator.sequenceContextSize,
    generator: process.env.BENCH_GENERATOR ?? "src",
  }) + "\n",
);

let closing = false;
async function shutdown(): Promise<void> {
  if (closing) return;
  closing = true;
  await app.close();
  process.exit(0);
}
process.stdin.on("end", () => void shutdown());
process.stdin.resume();
process.on("SIGTERM", () => void shutdown());
