/**
 * RAG's ports over the text generation service of the same process (`npm start` runs both apps):
 * answers, conversation rewrites, embeddings and reranking with the loaded models, no HTTP hop, each
 * request admitted by the same scheduler as every other, so they share its concurrency and queue
 * limits. The only module of src/rag/ that reads the text generation app; src/server.ts connects it.
 */
import type { Config } from "../core/config.js";
import { onTextDeltas } from "../textgen/engine/events.js";
import type { TextgenService } from "../textgen/engine/service.js";
import { estimatedWindow, portResultOf, type GenerationPort } from "./answering/generation-port.js";
import type { EmbeddingPort, LocalModelPorts, RerankPort } from "./retrieval/ports.js";

export interface LocalModels extends LocalModelPorts {
  generation: GenerationPort;
  embedding: EmbeddingPort;
  rerank: RerankPort;
}

/**
 * The generation port over the default generation model. Its context and counts are the model's own;
 * where the service forwards to GENERATION_UPSTREAM_URL (no tokenizer here), GENERATION_CONTEXT_SIZE
 * and the estimate stand in, as for GENERATION_URL.
 */
export function localGeneration(
  service: TextgenService,
  config: Pick<Config["generation"], "generationContextSize">,
): GenerationPort {
  const served = () => service.resolveModel(undefined, "generate");
  return {
    get modelName() {
      return served().name;
    },
    // What is true now: generative only while the model is loaded or loading.
    get description() {
      const { status, modelName } = service.health();
      const name = modelName ?? service.models.defaultId;
      if (status.state === "unhealthy")
        return `RAG: extractive answers: the local model "${name}" did not load (${status.reason}); set GENERATION_URL to use another server`;
      return `RAG: generative answers with the local model "${name}" of this process (${status.state === "loading" ? "loading" : "ready"}), no HTTP hop; set GENERATION_URL to use another server`;
    },
    grammar: true,
    async contextWindow() {
      const model = served();
      const tokens = await model.contextPerSequence();
      if (tokens === undefined) return estimatedWindow(config.generationContextSize);
      const tokenizer = await model.tokenizer();
      return {
        tokens,
        counting: "tokenizer",
        // The model's chat template renders them, as for the answer itself (a prompt that cannot fit
        // with one new token is refused: the caller reads that as too long).
        countMessages: (messages) =>
          model.countTokens({ messages: [...messages], maxTokens: 1, temperature: 0, stop: [] }),
        countText: (text) => tokenizer.tokenize(text, false).length,
      };
    },
    async chat(request) {
      const result = await served().run(
        {
          messages: request.messages,
          maxTokens: request.maxTokens,
          temperature: 0,
          stop: [],
          ...(request.grammar !== undefined && {
            constraint: { type: "grammar" as const, grammar: request.grammar },
          }),
        },
        request.signal ?? new AbortController().signal,
        onTextDeltas(request.onText),
      );
      return portResultOf(result);
    },
    // The model belongs to the text generation app, which closes it.
    close: async () => undefined,
  };
}

/** Embeddings by the model a request names (EMBEDDING_MODEL_PATH's by default). */
export function localEmbedding(service: TextgenService): EmbeddingPort {
  return { resolve: (model) => service.resolveModel(model ?? undefined, "embed") };
}

/** Rerank scores by the model a request names (the first reranker served by default). */
export function localRerank(service: TextgenService): RerankPort {
  return { resolve: (model) => service.resolveModel(model ?? undefined, "rerank") };
}

export function localModels(
  service: TextgenService,
  config: Pick<Config["generation"], "generationContextSize">,
): LocalModels {
  return {
    generation: localGeneration(service, config),
    embedding: localEmbedding(service),
    rerank: localRerank(service),
  };
}
