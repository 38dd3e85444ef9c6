/** Picks the generation backend from the configuration. */
import type { Config } from "../core/config.js";
import type { Generator } from "./generator.js";
import { LlamaGenerator } from "./llama-generator.js";
import { OpenAIUpstreamGenerator } from "./openai-upstream.js";

export function createGenerator(config: Config): Generator {
  if (config.generationUpstreamUrl) {
    return new OpenAIUpstreamGenerator({
      baseUrl: config.generationUpstreamUrl,
      model: config.generationModel,
      apiKey: config.generationApiKey,
      timeoutMs: config.requestTimeoutMs,
    }).start();
  }
  return new LlamaGenerator({
    model: { reference: config.modelPath, modelsDir: config.modelsDir, progress: true },
    threads: config.llamaThreads,
    contextSize: config.llamaContextSize,
    sequences: config.maxConcurrent,
    contexts: config.llamaContexts,
    gpu: config.llamaGpu,
    binary: config.llamaBinary,
    flashAttention: config.llamaFlashAttention,
    log: (line) => process.stderr.write(`lectern: ${line}\n`),
    grammarBudget: {
      maxBytes: config.grammarMaxBytes,
      maxRules: config.grammarMaxRules,
      maxExpansion: config.grammarMaxExpansion,
      maxAlternatives: 1024,
      maxNesting: config.grammarMaxNesting,
      maxRepetition: 1000,
      maxStacks: config.grammarMaxStacks,
    },
    schemaBudget: {
      maxDepth: config.schemaMaxDepth,
      maxProperties: config.schemaMaxProperties,
      maxEnum: config.schemaMaxEnum,
      maxEnumBytes: config.schemaMaxEnumBytes,
      maxAlternatives: config.schemaMaxAlternatives,
    },
  });
}
