/** Picks the generation backend from the configuration, and the settings a local model loads with. */
import type { Config } from "../../core/config.js";
import type { Generator } from "./generator.js";
import { LlamaGenerator, type LlamaGeneratorOptions } from "./llama-generator.js";
import { schemaBudgetOf } from "./json-schema.js";
import type { ModelSource } from "./model-source.js";
import { OpenAIUpstreamGenerator } from "./openai-upstream.js";
import { buildCatalogue, catalogueSources, modelIdOf, type ModelEntry } from "./presets.js";

/** MODEL_PATH's entry, with what MODELS_PRESETS says of it (its section, and `[*]`). */
export function defaultModelEntry(config: Config): ModelEntry {
  const catalogue = buildCatalogue(catalogueSources(config));
  return catalogue.entries.find((entry) => entry.id === catalogue.defaultId)!;
}

/**
 * The generator settings that come from the configuration and a model's preset alike: budgets,
 * KV cache type, RAM prefix cache, speculation (DRAFT_MODEL_PATH is the default model's), LoRA.
 * `entry` absent: the default model as MODEL_PATH names it.
 */
export function engineOptions(
  config: Config,
  entry?: ModelEntry,
): Pick<
  LlamaGeneratorOptions,
  | "grammarBudget"
  | "schemaBudget"
  | "grammarMaxTokenMs"
  | "kvCacheType"
  | "promptCacheRamBytes"
  | "speculation"
  | "lora"
> {
  const { textgen, limits } = config;
  const isDefault =
    !entry || entry.reference === textgen.modelPath || entry.id === modelIdOf(textgen.modelPath);
  const draft = entry?.settings.draft ?? (isDefault ? (textgen.draftModelPath ?? undefined) : undefined);
  return {
    grammarBudget: {
      maxBytes: limits.grammarMaxBytes,
      maxRules: limits.grammarMaxRules,
      maxExpansion: limits.grammarMaxExpansion,
      maxAlternatives: 1024,
      maxNesting: limits.grammarMaxNesting,
      maxRepetition: 1000,
      maxStacks: limits.grammarMaxStacks,
    },
    schemaBudget: schemaBudgetOf(limits),
    grammarMaxTokenMs: limits.grammarMaxTokenMs,
    kvCacheType: entry?.settings.kvCacheType ?? textgen.kvCacheType,
    promptCacheRamBytes: textgen.promptCacheRamBytes,
    speculation: {
      mode: entry?.settings.speculative ?? textgen.speculative,
      draftModelPath: draft,
      maxTokens: entry?.settings.speculativeMaxTokens ?? textgen.speculativeMaxTokens,
    },
    lora: entry?.settings.lora,
  };
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
    ...engineOptions(config, entry),
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
