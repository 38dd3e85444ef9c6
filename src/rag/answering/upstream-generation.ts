/**
 * The generation port over an OpenAI-compatible server (GENERATION_URL): this project's text
 * generation API, vLLM, TGI, the llama.cpp server, Ollama. Its context per request is
 * GENERATION_CONTEXT_SIZE and text is counted by estimate (generation-port.ts says why).
 */
import type { Config } from "../../core/config.js";
import { onTextDeltas } from "../../textgen/engine/events.js";
import { OpenAIUpstreamGenerator } from "../../textgen/engine/openai-upstream.js";
import { estimatedWindow, portResultOf, type GenerationPort } from "./generation-port.js";

export function upstreamGeneration(
  config: Pick<
    Config["generation"],
    "generationModel" | "generationApiKey" | "generationTimeoutMs" | "generationContextSize"
  >,
  baseUrl: string,
): GenerationPort {
  const generator = new OpenAIUpstreamGenerator({
    baseUrl,
    model: config.generationModel,
    apiKey: config.generationApiKey,
    timeoutMs: config.generationTimeoutMs,
  });
  const window = estimatedWindow(config.generationContextSize);
  return {
    get modelName() {
      return generator.modelName;
    },
    description: `RAG: generative answers through GENERATION_URL=${baseUrl} (GENERATION_CONTEXT_SIZE=${config.generationContextSize} per request)`,
    grammar: false,
    contextWindow: async () => window,
    async chat(request) {
      const result = await generator.generate(
        {
          messages: request.messages,
          maxTokens: request.maxTokens,
          temperature: 0,
          stop: [],
          signal: request.signal,
        },
        onTextDeltas(request.onText),
      );
      return portResultOf(result);
    },
    close: () => generator.close(),
  };
}

/** The port RAG writes with: GENERATION_URL when set, else the model of this process, else none. */
export function generationPortFor(
  config: Config["generation"],
  local: GenerationPort | undefined,
): GenerationPort | null {
  if (config.generationUrl) return upstreamGeneration(config, config.generationUrl);
  return local ?? null;
}
