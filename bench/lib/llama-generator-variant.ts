/**
 * A copy of src/textgen/llama-generator.ts with knobs, so bench/generation.ts can measure proposed
 * changes against the real generator in one run without touching src/. Every knob off = the same
 * behaviour as src. Chosen with BENCH_GENERATOR=variant and BENCH_VARIANT_* (see variantOptionsFromEnv).
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
import { ApiError, badRequest } from "../../src/core/errors.js";
import {
  isChatRequest,
  type ChatMessage,
  type CompletionResult,
  type FinishReason,
  type GenerationRequest,
  type Generator,
  type GeneratorStatus,
} from "../../src/textgen/generator.js";
import { resolveModel, type ModelSource } from "../../src/textgen/model-source.js";

export interface LlamaGeneratorOptions {
  model: ModelSource;
  threads: number;
  /** Total context tokens; each sequence gets an equal share. */
  contextSize: number;
  sequences: number;
  gpu: "auto" | false;
}

/** The knobs; each one undefined = what src does. */
export interface VariantOptions {
  /** `sequence.clearHistory()` after each request, so a sequence keeps no KV cells between requests. */
  clearHistory?: boolean;
  /** llama.cpp batch size (node-llama-cpp's default: min(512, contextSize × sequences)). */
  batchSize?: number;
  flashAttention?: boolean;
  /** Set node-llama-cpp's batch dispatch: "nextCycle" (its default, setImmediate) or "microtask". */
  dispatch?: "nextCycle" | "microtask";
  /**
   * Hand text pieces to `onText` from a timer of this many ms instead of inside node-llama-cpp's token
   * loop: the stream's socket write then no longer sits between one token and the next decode, and
   * the pieces that arrive meanwhile go out as one event (one write instead of one per token). The
   * first piece is sent at once.
   */
  deferTextMs?: number;
  /**
   * Split the sequences over this many llama.cpp contexts (default 1). Each context decodes its
   * batch on its own thread, so on a machine with more cores than LLAMA_THREADS concurrent requests
   * can decode in parallel instead of in one batch; a request goes to the least busy context.
   */
  contexts?: number;
}

export function variantOptionsFromEnv(env: Record<string, string | undefined>): VariantOptions {
  const flag = (name: string) =>
    env[name] === undefined ? undefined : env[name] === "1" || env[name] === "true";
  const number = (name: string) => (env[name] === undefined ? undefined : Number(env[name]));
  const dispatch = env.BENCH_VARIANT_DISPATCH;
  return {
    clearHistory: flag("BENCH_VARIANT_CLEAR_HISTORY"),
    batchSize: number("BENCH_VARIANT_BATCH_SIZE"),
    flashAttention: flag("BENCH_VARIANT_FLASH_ATTENTION"),
    dispatch: dispatch === "microtask" || dispatch === "nextCycle" ? dispatch : undefined,
    deferTextMs: number("BENCH_VARIANT_DEFER_TEXT_MS"),
    contexts: number("BENCH_VARIANT_CONTEXTS"),
  };
}

interface Slot {
  /** Which context the sequence belongs to (see VariantOptions.contexts). */
  contextIndex: number;
  sequence: LlamaContextSequence;
  completion: LlamaCompletion;
  /** Uses the chat template from the GGUF (or node-llama-cpp's best match for the model). */
  chat: LlamaChat;
}

export class VariantLlamaGenerator implements Generator {
  modelName: string;
  private state: GeneratorStatus = { state: "loading" };
  private llama?: Llama;
  private model?: LlamaModel;
  private context?: LlamaContext;
  private readonly contexts: LlamaContext[] = [];
  /** Requests running per context. */
  private readonly busy: number[] = [];
  private readonly freeSlots: Slot[] = [];
  private firstSlot?: Slot;
  private readonly loading: Promise<void>;

  /** Starts loading at once; `status()` says when it can serve. */
  constructor(
    private readonly options: LlamaGeneratorOptions,
    private readonly variant: VariantOptions = {},
  ) {
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
    const contextCount = Math.max(1, Math.min(this.variant.contexts ?? 1, this.options.sequences));
    for (let c = 0; c < contextCount; c++) {
      const sequences =
        Math.floor(this.options.sequences / contextCount) +
        (c < this.options.sequences % contextCount ? 1 : 0);
      const context = await this.model.createContext({
        contextSize: perSequence,
        sequences,
        threads: this.options.threads,
        ...(this.variant.batchSize === undefined ? {} : { batchSize: this.variant.batchSize }),
        ...(this.variant.flashAttention === undefined ? {} : { flashAttention: this.variant.flashAttention }),
        ...(this.variant.dispatch === "microtask"
          ? { batching: { dispatchSchedule: (dispatch: () => void) => queueMicrotask(dispatch) } }
          : {}),
      });
      this.contexts.push(context);
      this.busy.push(0);
      for (let i = 0; i < sequences; i++) {
        const sequence = context.getSequence();
        this.freeSlots.push({
          contextIndex: c,
          sequence,
          completion: new LlamaCompletion({ contextSequence: sequence, autoDisposeSequence: false }),
          chat: new LlamaChat({ contextSequence: sequence, autoDisposeSequence: false }),
        });
      }
    }
    this.context = this.contexts[0];
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
    const slot = this.takeSlot();
    if (!slot)
      throw new ApiError(503, "not_ready", "No free sequence; the scheduler should have queued this request");
    let tokensGenerated = 0;
    let pendingText = "";
    let flushTimer: NodeJS.Timeout | undefined;
    const flushText = () => {
      clearTimeout(flushTimer);
      flushTimer = undefined;
      const text = pendingText;
      pendingText = "";
      if (text !== "") request.onText?.(text);
    };
    let sentText = false;
    const onText =
      this.variant.deferTextMs !== undefined && request.onText
        ? (piece: string) => {
            pendingText += piece;
            // The first piece goes out at once (time to first token unchanged); later ones are batched.
            if (!sentText) {
              sentText = true;
              flushText();
            } else flushTimer ??= setTimeout(flushText, this.variant.deferTextMs);
          }
        : request.onText;
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
      onTextChunk: onText,
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
      flushText();
      if (this.variant.clearHistory) await slot.sequence.clearHistory();
      this.busy[slot.contextIndex]!--;
      this.freeSlots.push(slot);
    }
  }

  /** The most recently freed sequence of the least busy context (LIFO keeps prompt caches warm). */
  private takeSlot(): Slot | undefined {
    let best = -1;
    for (let i = this.freeSlots.length - 1; i >= 0; i--) {
      const candidate = this.freeSlots[i]!;
      if (best < 0 || this.busy[candidate.contextIndex]! < this.busy[this.freeSlots[best]!.contextIndex]!)
        best = i;
    }
    if (best < 0) return undefined;
    const [slot] = this.freeSlots.splice(best, 1);
    this.busy[slot!.contextIndex]!++;
    return slot;
  }

  async close(): Promise<void> {
    await this.loading;
    for (const context of this.contexts) await context.dispose();
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
