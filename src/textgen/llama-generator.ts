/**
 * The llama.cpp backend (node-llama-cpp). One model, one context with `sequences` parallel
 * sequences; node-llama-cpp batches the sequences' decode steps together, which is what makes
 * concurrent requests cheaper than serial ones. The scheduler guarantees no more than `sequences`
 * requests are inside `complete` at once.
 */
import path from "node:path";
import {
  getLlama,
  LlamaChat,
  LlamaCompletion,
  LlamaLogLevel,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
  type ChatHistoryItem,
  type Token,
} from "node-llama-cpp";
import { ApiError, badRequest } from "../core/errors.js";
import {
  isChatRequest,
  type ChatMessage,
  type CompletionResult,
  type FinishReason,
  type GenerationRequest,
  type Generator,
  type GeneratorStatus,
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
  /** Uses the chat template from the GGUF (or node-llama-cpp's best match for the model). */
  chat: LlamaChat;
}

export class LlamaGenerator implements Generator {
  modelName: string;
  private state: GeneratorStatus = { state: "loading" };
  private llama?: Llama;
  private model?: LlamaModel;
  private context?: LlamaContext;
  private readonly freeSlots: Slot[] = [];
  private firstSlot?: Slot;
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
      this.freeSlots.push({
        sequence,
        completion: new LlamaCompletion({ contextSequence: sequence, autoDisposeSequence: false }),
        chat: new LlamaChat({ contextSequence: sequence, autoDisposeSequence: false }),
      });
    }
    this.firstSlot = this.freeSlots[0];
    this.state = { state: "ready" };
  }

  private requireReady(): LlamaModel {
    if (this.state.state !== "ready" || !this.model) {
      const detail = this.state.state === "unhealthy" ? this.state.reason : "the model is still loading";
      throw new ApiError(503, "model_not_ready", `Model not ready: ${detail}`);
    }
    return this.model;
  }

  /** Tokens the model will read before generating: the prompt, or the chat rendered by its template. */
  private promptTokenCount(request: GenerationRequest): number {
    const model = this.requireReady();
    if (isChatRequest(request)) {
      const slot = this.freeSlots[0] ?? this.anySlot;
      const { contextText } = slot.chat.chatWrapper.generateContextState({
        chatHistory: toChatHistory(request.messages),
      });
      return contextText.tokenize(model.tokenizer).length;
    }
    return model.tokenize(request.prompt).length + (model.tokens.bos === null ? 0 : 1);
  }

  private get anySlot(): Slot {
    if (!this.firstSlot) throw new ApiError(503, "model_not_ready", "Model not ready");
    return this.firstSlot;
  }

  async validate(request: GenerationRequest): Promise<number> {
    const promptTokens = this.promptTokenCount(request);
    const limit = this.sequenceContextSize;
    if (promptTokens + request.maxTokens > limit) {
      const what = isChatRequest(request) ? "The messages are" : "The prompt is";
      throw badRequest(
        `${what} ${promptTokens} tokens; with max_length ${request.maxTokens} it needs ${promptTokens + request.maxTokens} ` +
          `tokens, but the context holds ${limit} per request. Shorten the text or lower max_length.`,
        [{ prompt_tokens: promptTokens, max_length: request.maxTokens, context_size: limit }],
      );
    }
    return promptTokens;
  }

  async generate(request: GenerationRequest): Promise<CompletionResult> {
    const promptTokens = await this.validate(request);
    const slot = this.freeSlots.pop();
    if (!slot)
      throw new ApiError(503, "not_ready", "No free sequence; the scheduler should have queued this request");
    let tokensGenerated = 0;
    const options = {
      maxTokens: request.maxTokens,
      temperature: request.temperature,
      topP: request.topP,
      topK: request.topK,
      minP: request.minP,
      seed: request.seed,
      repeatPenalty:
        request.repeatPenalty === undefined ? (false as const) : { penalty: request.repeatPenalty },
      customStopTriggers: request.stop.length > 0 ? request.stop : undefined,
      signal: request.signal,
      stopOnAbortSignal: true,
      onToken: (tokens: Token[]) => {
        tokensGenerated += tokens.length;
        request.onTokens?.(tokens.length);
      },
      onTextChunk: request.onText,
    };
    try {
      let text: string;
      let stopReason: string;
      if (isChatRequest(request)) {
        const history = [
          ...toChatHistory(request.messages),
          { type: "model", response: [] } satisfies ChatHistoryItem,
        ];
        const result = await slot.chat.generateResponse(history, options);
        text = result.response;
        stopReason = result.metadata.stopReason;
      } else {
        const result = await slot.completion.generateCompletionWithMeta(request.prompt, {
          ...options,
          disableContextShift: true,
        });
        text = result.response;
        stopReason = result.metadata.stopReason;
      }
      const finishReason: FinishReason =
        stopReason === "maxTokens" || stopReason === "abort" ? "length" : "stop";
      return { text, tokensGenerated, promptTokens, finishReason };
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

function toChatHistory(messages: ChatMessage[]): ChatHistoryItem[] {
  return messages.map((message): ChatHistoryItem => {
    if (message.role === "system") return { type: "system", text: message.content };
    if (message.role === "user") return { type: "user", text: message.content };
    return { type: "model", response: [message.content] };
  });
}
