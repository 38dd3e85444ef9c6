/**
 * What one loaded model serves with: a generator (own llama.cpp contexts and batcher), an embedder,
 * or a ranker, each behind the model's own scheduler (MAX_CONCURRENT / MAX_QUEUE per model).
 */
import type { Config } from "../../core/config.js";
import { LlamaEmbedder, type Embedder } from "./embedder.js";
import type { Generator } from "./generator.js";
import type { GgufSummary } from "./gguf-check.js";
import { llamaGeneratorFor } from "./create-generator.js";
import type { LlamaGenerator } from "./llama-generator.js";
import type { ModelBackend } from "./model-registry.js";
import type { ModelEntry } from "./presets.js";
import { LlamaRanker, type Ranker } from "./rerank.js";
import { Scheduler } from "./scheduler.js";

export interface ServingBackend extends ModelBackend {
  scheduler: Scheduler;
  generator?: Generator;
  embedder?: Embedder;
  ranker?: Ranker;
}

/**
 * The model's scheduler. A generator's own count of parallel sequences comes first: with the context
 * sized from memory it may run fewer than MAX_CONCURRENT (context-plan.ts), and the scheduler must
 * not admit more requests than the batcher has sequences.
 */
export function schedulerFor(config: Config, entry?: ModelEntry, generator?: Generator): Scheduler {
  const sequences = (generator as Partial<LlamaGenerator> | undefined)?.parallelSequences;
  return new Scheduler({
    maxConcurrent: sequences ?? entry?.settings.parallel ?? config.textgen.maxConcurrent,
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
    scheduler: schedulerFor(config, entry, generator),
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
    llamaGeneratorFor(config, entry, {
      reference: file,
      modelsDir: config.models.modelsDir,
      checked: true,
    });
  await (generator as Partial<LlamaGenerator>).ready?.();
  const status = generator.status();
  if (status.state === "unhealthy") {
    await generator.close();
    throw new Error(status.reason);
  }
  return generatorBackend(config, generator, entry);
}
