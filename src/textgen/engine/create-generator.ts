/** Picks the generation backend from the configuration. */
import type { Config } from "../../core/config.js";
import type { Generator } from "./generator.js";
import { LlamaGenerator } from "./llama-generator.js";
import { engineOptions } from "./model-backends.js";
import { OpenAIUpstreamGenerator } from "./openai-upstream.js";

export function createGenerator(config: Config): Generator {
  if (config.generation.generationUpstreamUrl) {
    return new OpenAIUpstreamGenerator({
      baseUrl: config.generation.generationUpstreamUrl,
      model: config.generation.generationModel,
      apiKey: config.generation.generationApiKey,
      timeoutMs: config.textgen.requestTimeoutMs,
    }).start();
  }
  return new LlamaGenerator({
    model: { reference: config.textgen.modelPath, modelsDir: config.models.modelsDir, progress: true },
    threads: config.textgen.llamaThreads,
    contextSize: config.textgen.llamaContextSize,
    sequences: config.textgen.maxConcurrent,
    contexts: config.textgen.llamaContexts,
    gpu: config.textgen.llamaGpu,
    binary: config.textgen.llamaBinary,
    flashAttention: config.textgen.llamaFlashAttention,
    log: (line) => process.stderr.write(`lectern: ${line}\n`),
    ...engineOptions(config),
  });
}
