/**
 * The text generation app in a process of its own, for benchmarks that measure it through a real
 * socket without the client sharing its event loop. Configured from the environment like the real
 * server (loadConfig) and served by src/textgen/engine/llama-generator.ts (our continuous batcher over
 * llama.cpp); prints one JSON line {"port", "sequence_context_size", "binary", "device", "thread_pool"} on stdout once the model is
 * loaded, and closes when its standard input ends or on SIGTERM.
 */
import type { AddressInfo } from "node:net";
import { loadConfig } from "../../src/core/config.js";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { createGenerator } from "../../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../../src/textgen/engine/llama-generator.js";

const config = loadConfig(process.env);
const generator = createGenerator(config) as LlamaGenerator;
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
    binary: generator.loadedFrom?.binary,
    device: generator.loadedFrom?.device,
    thread_pool: process.env.UV_THREADPOOL_SIZE ?? "4 (default)",
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
