/**
 * The llama.cpp backend (node-llama-cpp). One model, one context with `sequences` parallel
 * sequences; node-llama-cpp batches the sequences' decode steps together, which is what makes
 * concurrent requests cheaper than serial ones. The scheduler guarantees no more than `sequences`
 * requests are inside `complete` at once.
 */
import path from "node:path";
import {
  getLlama,
  LlamaCompletion,
  LlamaLogLevel,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
} from "node-llama-cpp";
import { ApiError, badRequest } from "../core/errors.js";
import type {
  CompletionRequest,
  CompletionResult,
  FinishReason,
  Generator,
  GeneratorStatus,
} from "./generator.js";
import { resolveModel, type ModelSource } from "./model-source.js";

export interface LlamaGeneratorOptions {
  model: ModelSource;
  threads: number;
  /** Total context tokens; each sequence gets an equal share. */
  contextSize: number;
  sequences: number;
  gpu: "auto" | false;
}

interface Slot {
  sequence: LlamaContextSequence;
  completion: LlamaCompletion;
}

export class LlamaGenerator implements Generator {
  modelName: string;
  private state: GeneratorStatus = { state: "loading" };
  private llama?: Llama;
  private model?: LlamaModel;
  private context?: LlamaContext;
  private readonly freeSlots: Slot[] = [];
  private readonly loading: Promise<void>;

  /** Starts loading at once; `status()` says when it can serve. */
  constructor(private readonly options: LlamaGeneratorOptions) {
    this.modelName = path.basename(options.model.reference).replace(/\.gguf$/i, "");
    this.loading = this.load().catch((error: unknown) => {
      this.state = { state: "unhealthy", reason: describeLoadError(error, options.model.reference) };
    });
  }

  /** Resolves when loading has finished, well or not. */
  ready(): Promise<void> {
    return this.loading;
  }

  status(): GeneratorStatus {
    return this.state;
  }

  /** Tokens each sequence can hold: prompt plus new tokens must fit. */
  get sequenceContextSize(): number {
    return this.context?.contextSize ?? 0;
  }

  private async load(): Promise<void> {
    const modelPath = await resolveModel(this.options.model);
    // build: "never": the llama.cpp binary ships prebuilt in the npm package; never compile or
    // download one at run time.
    this.llama = await getLlama({ build: "never", gpu: this.options.gpu, logLevel: LlamaLogLevel.error });
    this.model = await this.llama.loadModel({ modelPath });
    const name = this.model.fileInfo.metadata?.general?.name;
    if (typeof name === "string" && name.trim() !== "") this.modelName = name.trim();
    const perSequence = Math.min(
      Math.max(256, Math.floor(this.options.contextSize / this.options.sequences)),
      this.model.trainContextSize,
    );
    this.context = await this.model.createContext({
      contextSize: perSequence,
      sequences: this.options.sequences,
      threads: this.options.threads,
    });
    for (let i = 0; i < this.options.sequences; i++) {
      const sequence = this.context.getSequence();
      this.freeSlots.push({ sequence, completion: new LlamaCompletion({ contextSequence: sequence }) });
    }
    this.state = { state: "ready" };
  }

  private requireReady(): LlamaModel {
    if (this.state.state !== "ready" || !this.model) {
      const detail = this.state.state === "unhealthy" ? this.state.reason : "the model is still loading";
      throw new ApiError(503, "model_not_ready", `Model not ready: ${detail}`);
    }
    return this.model;
  }

  async validate(request: CompletionRequest): Promise<number> {
    const model = this.requireReady();
    const promptTokens = model.tokenize(request.prompt).length + (model.tokens.bos === null ? 0 : 1);
    const limit = this.sequenceContextSize;
    if (promptTokens + request.maxTokens > limit) {
      throw badRequest(
        `The prompt is ${promptTokens} tokens; with max_length ${request.maxTokens} it needs ${promptTokens + request.maxTokens} ` +
          `tokens, but the context holds ${limit} per request. Shorten the text or lower max_length.`,
        [{ prompt_tokens: promptTokens, max_length: request.maxTokens, context_size: limit }],
      );
    }
    return promptTokens;
  }

  async complete(request: CompletionRequest): Promise<CompletionResult> {
    const promptTokens = await this.validate(request);
    const slot = this.freeSlots.pop();
    if (!slot)
      throw new ApiError(503, "not_ready", "No free sequence; the scheduler should have queued this request");
    let tokensGenerated = 0;
    try {
      const { response, metadata } = await slot.completion.generateCompletionWithMeta(request.prompt, {
        maxTokens: request.maxTokens,
        temperature: request.temperature,
        topP: request.topP,
        topK: request.topK,
        minP: request.minP,
        seed: request.seed,
        repeatPenalty: request.repeatPenalty === undefined ? false : { penalty: request.repeatPenalty },
        customStopTriggers: request.stop.length > 0 ? request.stop : undefined,
        signal: request.signal,
        stopOnAbortSignal: true,
        disableContextShift: true,
        onToken: (tokens) => {
          tokensGenerated += tokens.length;
        },
        onTextChunk: request.onText,
      });
      const finishReason: FinishReason =
        metadata.stopReason === "maxTokens" || metadata.stopReason === "abort" ? "length" : "stop";
      return { text: response, tokensGenerated, promptTokens, finishReason };
    } finally {
      this.freeSlots.push(slot);
    }
  }

  async close(): Promise<void> {
    await this.loading;
    await this.context?.dispose();
    await this.model?.dispose();
    await this.llama?.dispose();
  }
}

function describeLoadError(error: unknown, reference: string): string {
  const message = error instanceof Error ? error.message : String(error);
  return `could not load model "${reference}": ${message}. Set MODEL_PATH to a local .gguf file (or a Hugging Face reference hf:<owner>/<repo>/<file>.gguf reachable from this machine).`;
}
