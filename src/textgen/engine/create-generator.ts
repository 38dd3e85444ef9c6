/** Picks the generation backend from the configuration, and the settings a local model loads with. */
import type { Config } from "../../core/config.js";
import type { Generator } from "./generator.js";
import { LlamaGenerator } from "./llama-generator.js";
import type { ModelSource } from "./model-source.js";
import { OpenAIUpstreamGenerator } from "./openai-upstream.js";
import { buildCatalogue, catalogueSources, type ModelEntry } from "./presets.js";

/** MODEL_PATH's entry, with what MODELS_PRESETS says of it (its section, and `[*]`). */
export function defaultModelEntry(config: Config): ModelEntry {
  const catalogue = buildCatalogue(catalogueSources(config));
  return catalogue.entries.find((entry) => entry.id === catalogue.defaultId)!;
}

/**
 * A llama.cpp generator for a catalogue entry: the preset's settings first, then the environment's.
 * The one place both the default model's first load and the registry's later loads take them from.
 */
export function llamaGeneratorFor(
  config: Config,
  entry: ModelEntry,
  model: ModelSource,
  log?: (line: string) => void,
): LlamaGenerator {
  return new LlamaGenerator({
    model,
    name: entry.id,
    threads: entry.settings.threads ?? config.textgen.llamaThreads,
    contextSize: entry.settings.contextSize ?? config.textgen.llamaContextSize,
    sequences: entry.settings.parallel ?? config.textgen.maxConcurrent,
    contexts: config.textgen.llamaContexts,
    gpu: entry.settings.gpu ?? config.textgen.llamaGpu,
    binary: config.textgen.llamaBinary,
    flashAttention: config.textgen.llamaFlashAttention,
    log,
    grammarBudget: {
      maxBytes: config.limits.grammarMaxBytes,
      maxRules: config.limits.grammarMaxRules,
      maxExpansion: config.limits.grammarMaxExpansion,
      maxAlternatives: 1024,
      maxNesting: config.limits.grammarMaxNesting,
      maxRepetition: 1000,
      maxStacks: config.limits.grammarMaxStacks,
    },
    schemaBudget: {
      maxDepth: config.limits.schemaMaxDepth,
      maxProperties: config.limits.schemaMaxProperties,
      maxEnum: config.limits.schemaMaxEnum,
      maxEnumBytes: config.limits.schemaMaxEnumBytes,
      maxAlternatives: config.limits.schemaMaxAlternatives,
    },
  });
}

export function createGenerator(config: Config): Generator {
  if (config.generation.generationUpstreamUrl) {
    return new OpenAIUpstreamGenerator({
      baseUrl: config.generation.generationUpstreamUrl,
      model: config.generation.generationModel,
      apiKey: config.generation.generationApiKey,
      timeoutMs: config.textgen.requestTimeoutMs,
    }).start();
  }
  const entry = defaultModelEntry(config);
  return llamaGeneratorFor(
    config,
    entry,
    { reference: entry.reference, modelsDir: config.models.modelsDir, progress: true },
    (line) => process.stderr.write(`lectern: ${line}\n`),
  );
}
