/**
 * The generation port implemented by the text generation service of the same process (`npm start`
 * runs both apps): RAG answers with the loaded model without an HTTP hop, admitted by the same
 * scheduler as every other generation, so they share its concurrency and queue limits.
 */
import type { TextgenService } from "../../textgen/engine/service.js";
import type { GenerationPort } from "./generative.js";

export function localGeneration(service: TextgenService): GenerationPort {
  return {
    get modelName() {
      return service.resolveModel(undefined, "generate").name;
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
    async chat(request) {
      const result = await service.run(
        {
          messages: request.messages,
          maxTokens: request.maxTokens,
          temperature: 0,
          stop: [],
          onText: request.onText,
          ...(request.grammar !== undefined && {
            constraint: { type: "grammar" as const, grammar: request.grammar },
          }),
        },
        request.signal ?? new AbortController().signal,
      );
      return { text: result.text, tokens: result.tokensGenerated };
    },
    // The model belongs to the text generation app, which closes it.
    close: async () => undefined,
  };
}
