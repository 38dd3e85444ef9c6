/**
 * Embeddings for /v1/embeddings: a llama.cpp embedding context over EMBEDDING_MODEL_PATH's model, or
 * over the generation model when that is unset. Created on first use, so a server that never embeds
 * pays nothing for it.
 *
 * One request's inputs are embedded together, one after another on the one embedding context, while
 * other requests wait their turn (node-llama-cpp reads a pooled embedding of one sequence per decode).
 * Vectors are L2-normalised, as OpenAI's and llama.cpp's servers return them.
 */
import type { LlamaEmbeddingContext, LlamaModel } from "node-llama-cpp";
import path from "node:path";
import { badRequest, notReady } from "../../core/errors.js";
import { sharedLlama } from "./llama-binary.js";
import { resolveModel, type ModelSource } from "./model-source.js";

export interface EmbeddingResult {
  vectors: Float32Array[];
  /** Tokens of all inputs together. */
  promptTokens: number;
}

export interface Embedder {
  /** The embedding model's name (the served model's name when it is the same model). */
  modelName(): string;
  embed(inputs: readonly string[], signal?: AbortSignal): Promise<EmbeddingResult>;
  close(): Promise<void>;
}

export interface LlamaEmbedderOptions {
  /** A separate embedding model; without it, `sharedModel` is used. */
  model: ModelSource | null;
  /** The generation model, once it is loaded (undefined when generation is remote or failed). */
  sharedModel: () => Promise<{ model: LlamaModel; name: string } | undefined>;
  threads: number;
  contextSize: number;
  gpu: "auto" | false;
}

interface Loaded {
  context: LlamaEmbeddingContext;
  ownModel?: LlamaModel;
  name: string;
}

export class LlamaEmbedder implements Embedder {
  private loading?: Promise<Loaded>;
  /** Requests take the context in turn. */
  private queue: Promise<unknown> = Promise.resolve();
  private name: string;

  constructor(private readonly options: LlamaEmbedderOptions) {
    this.name = options.model ? path.basename(options.model.reference).replace(/\.gguf$/i, "") : "";
  }

  modelName(): string {
    return this.name;
  }

  /** Loads the model and its embedding context now rather than on the first request. */
  async ready(): Promise<void> {
    await this.load();
  }

  private load(): Promise<Loaded> {
    this.loading ??= (async (): Promise<Loaded> => {
      let model: LlamaModel;
      let ownModel: LlamaModel | undefined;
      if (this.options.model) {
        const modelPath = await resolveModel(this.options.model);
        const llama = await sharedLlama({ gpu: this.options.gpu });
        model = ownModel = await llama.loadModel({ modelPath });
        const metadataName = model.fileInfo.metadata?.general?.name;
        if (typeof metadataName === "string" && metadataName.trim() !== "") this.name = metadataName.trim();
      } else {
        const shared = await this.options.sharedModel();
        if (!shared)
          throw notReady(
            "No embedding model: the generation model is not loaded here; set EMBEDDING_MODEL_PATH",
            "model_not_ready",
          );
        model = shared.model;
        this.name = shared.name;
      }
      const context = await model.createEmbeddingContext({
        contextSize: Math.min(this.options.contextSize, model.trainContextSize),
        threads: this.options.threads,
      });
      return { context, ownModel, name: this.name };
    })();
    // A failed load is retried by the next request rather than remembered.
    this.loading.catch(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  async embed(inputs: readonly string[], signal?: AbortSignal): Promise<EmbeddingResult> {
    const { context } = await this.load();
    const limit = Math.min(this.options.contextSize, context.model.trainContextSize);
    const lengths = inputs.map((input) => context.calculateInputLength(input));
    lengths.forEach((length, i) => {
      if (length === 0) throw badRequest(`input ${i} is empty after tokenization`, [{ path: `/input/${i}` }]);
      if (length > limit)
        throw badRequest(
          `input ${i} is ${length} tokens, but an embedding input may hold ${limit} (EMBEDDING_CONTEXT_SIZE). Split it.`,
          [{ path: `/input/${i}` }],
        );
    });
    const run = this.queue.then(async () => {
      const vectors: Float32Array[] = [];
      for (const input of inputs) {
        signal?.throwIfAborted();
        const embedding = await context.getEmbeddingFor(input);
        vectors.push(toUnitLength(embedding.vector));
      }
      return vectors;
    });
    this.queue = run.catch(() => undefined);
    const vectors = await run;
    return { vectors, promptTokens: lengths.reduce((sum, length) => sum + length, 0) };
  }

  async close(): Promise<void> {
    const loading = this.loading;
    if (!loading) return;
    await this.queue;
    const loaded = await loading.catch(() => undefined);
    if (!loaded) return;
    await loaded.context.dispose();
    await loaded.ownModel?.dispose();
  }
}

function toUnitLength(vector: readonly number[]): Float32Array {
  let sum = 0;
  for (const value of vector) sum += value * value;
  const norm = Math.sqrt(sum);
  const result = new Float32Array(vector.length);
  for (let i = 0; i < vector.length; i++) result[i] = norm > 0 ? vector[i]! / norm : 0;
  return result;
}
