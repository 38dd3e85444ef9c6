/**
 * What one loaded model serves with: a generator (own llama.cpp contexts and batcher), an embedder,
 * or a ranker, each behind the model's own scheduler (MAX_CONCURRENT / MAX_QUEUE per model).
 */
import type { Config } from "../../core/config.js";
import { LlamaEmbedder, type Embedder } from "./embedder.js";
import type { Generator } from "./generator.js";
import type { GgufSummary } from "./gguf-check.js";
import { LlamaGenerator } from "./llama-generator.js";
import type { ModelBackend } from "./model-registry.js";
import { modelIdOf, type ModelEntry } from "./presets.js";
import { LlamaRanker, type Ranker } from "./rerank.js";
import { Scheduler } from "./scheduler.js";
import type { LlamaGeneratorOptions } from "./llama-generator.js";

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
    schemaBudget: {
      maxDepth: limits.schemaMaxDepth,
      maxProperties: limits.schemaMaxProperties,
      maxEnum: limits.schemaMaxEnum,
      maxEnumBytes: limits.schemaMaxEnumBytes,
      maxAlternatives: limits.schemaMaxAlternatives,
    },
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

export interface ServingBackend extends ModelBackend {
  scheduler: Scheduler;
  generator?: Generator;
  embedder?: Embedder;
  ranker?: Ranker;
}

export function schedulerFor(config: Config, entry?: ModelEntry): Scheduler {
  return new Scheduler({
    maxConcurrent: entry?.settings.parallel ?? config.textgen.maxConcurrent,
    maxQueue: config.textgen.maxQueue,
    timeoutMs: config.textgen.requestTimeoutMs,
  });
}

/** A backend around a generator: embeddings from the same model, as without a registry. */
export function generatorBackend(config: Config, generator: Generator, entry?: ModelEntry): ServingBackend {
  const embedder = new LlamaEmbedder({
    model: null,
    sharedModel: async () => generator.sharedModel?.(),
    threads: entry?.settings.threads ?? config.textgen.llamaThreads,
    contextSize: config.models.embeddingContextSize,
    gpu: entry?.settings.gpu ?? config.textgen.llamaGpu,
  });
  return {
    scheduler: schedulerFor(config, entry),
    generator,
    embedder,
    close: async () => {
      await embedder.close();
      await generator.close();
    },
  };
}

/**
 * Loads `file` for what the model is: a reranker, an embedding model, or a generation model. The
 * registry has checked the file (`summary`), so the loaders do not read its header again.
 * `initial` is a generator already loading this model (the default model at start-up).
 */
export async function loadBackend(
  config: Config,
  entry: ModelEntry,
  file: string,
  summary: GgufSummary,
  initial?: Generator,
): Promise<ServingBackend> {
  const roles = entry.roles ?? summary.roles;
  const threads = entry.settings.threads ?? config.textgen.llamaThreads;
  const gpu = entry.settings.gpu ?? config.textgen.llamaGpu;
  if (roles.includes("rerank")) {
    const ranker = await LlamaRanker.load({
      file,
      threads,
      gpu,
      contextSize: entry.settings.contextSize ?? config.models.embeddingContextSize,
    });
    return { scheduler: schedulerFor(config, entry), ranker, close: () => ranker.close() };
  }
  if (!roles.includes("generate")) {
    const embedder = new LlamaEmbedder({
      model: { reference: file, modelsDir: config.models.modelsDir, checked: true },
      sharedModel: async () => undefined,
      threads,
      contextSize: entry.settings.contextSize ?? config.models.embeddingContextSize,
      gpu,
    });
    try {
      await embedder.ready();
    } catch (error) {
      await embedder.close();
      throw error;
    }
    return { scheduler: schedulerFor(config, entry), embedder, close: () => embedder.close() };
  }
  const generator =
    initial ??
    new LlamaGenerator({
      model: { reference: file, modelsDir: config.models.modelsDir, checked: true },
      threads,
      contextSize: entry.settings.contextSize ?? config.textgen.llamaContextSize,
      sequences: entry.settings.parallel ?? config.textgen.maxConcurrent,
      contexts: config.textgen.llamaContexts,
      gpu,
      binary: config.textgen.llamaBinary,
      flashAttention: config.textgen.llamaFlashAttention,
      ...engineOptions(config, entry),
    });
  await (generator as Partial<LlamaGenerator>).ready?.();
  const status = generator.status();
  if (status.state === "unhealthy") {
    await generator.close();
    throw new Error(status.reason);
  }
  return generatorBackend(config, generator, entry);
}
