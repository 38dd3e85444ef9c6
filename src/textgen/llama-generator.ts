/**
 * The llama.cpp backend (node-llama-cpp). One model, one context with `sequences` parallel
 * sequences, driven by our continuous batcher (batcher.ts): every decode step carries one token of
 * each running request, which is what makes concurrent requests cheaper than serial ones. The
 * scheduler guarantees no more than `sequences` requests are inside `generate` at once.
 */
import { randomInt } from "node:crypto";
import os from "node:os";
import path from "node:path";
import {
  getLlama,
  LlamaLogLevel,
  LlamaText,
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { ApiError, badRequest } from "../core/errors.js";
import { ContinuousBatcher, type BatchJob } from "./batcher.js";
import {
  isChatRequest,
  type ChatMessage,
  type CompletionResult,
  type GenerationRequest,
  type Generator,
  type GeneratorStatus,
} from "./generator.js";
import { createNativeSampler, nativeContextOf } from "./llama-native.js";
import { resolveModel, type ModelSource } from "./model-source.js";
import { ResponseText } from "./response-text.js";

export interface LlamaGeneratorOptions {
  model: ModelSource;
  threads: number;
  /** Total context tokens; each sequence gets an equal share. */
  contextSize: number;
  sequences: number;
  /**
   * llama.cpp contexts to spread the sequences over (at most `sequences`). Each context decodes its
   * batch on a thread of its own, so where `threads` leaves cores idle, concurrent requests use them.
   */
  contexts: number | "auto";
  gpu: "auto" | false;
}

/** Models up to this size fit in a server CPU's caches (see resolveContexts). */
const CACHE_RESIDENT_MODEL_BYTES = 64 * 1024 ** 2;

/** node-llama-cpp's sampling defaults, kept so results match its own API. */
const DEFAULT_TOP_K = 40;
const DEFAULT_TOP_P = 0.95;
const DEFAULT_MIN_P = 0;

/** A request turned into tokens, with what ends it. */
interface PreparedPrompt {
  tokens: Token[];
  /** Tokens before the response, for detokenizing its first piece (none for chat: no leading space). */
  context: readonly Token[];
  stopStrings: string[];
  stopTokenSequences: Token[][];
}

interface Loaded {
  llama: Llama;
  model: LlamaModel;
  contexts: LlamaContext[];
  batchers: ContinuousBatcher[];
  chatWrapper: ChatWrapper;
}

export class LlamaGenerator implements Generator {
  modelName: string;
  private state: GeneratorStatus = { state: "loading" };
  private loaded?: Loaded;
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

  /** llama.cpp contexts the sequences are spread over (0 until loaded). */
  get contextCount(): number {
    return this.loaded?.contexts.length ?? 0;
  }

  /** Tokens each sequence can hold: prompt plus new tokens must fit. */
  get sequenceContextSize(): number {
    return this.loaded?.contexts[0]?.contextSize ?? 0;
  }

  private async load(): Promise<void> {
    const modelPath = await resolveModel(this.options.model);
    // build: "never": the llama.cpp binary ships prebuilt in the npm package; never compile or
    // download one at run time.
    const llama = await getLlama({ build: "never", gpu: this.options.gpu, logLevel: LlamaLogLevel.error });
    const model = await llama.loadModel({ modelPath });
    const name = model.fileInfo.metadata?.general?.name;
    if (typeof name === "string" && name.trim() !== "") this.modelName = name.trim();
    const perSequence = Math.min(
      Math.max(256, Math.floor(this.options.contextSize / this.options.sequences)),
      model.trainContextSize,
    );
    const contextCount = Math.max(1, Math.min(this.resolveContexts(llama, model), this.options.sequences));
    const contexts: LlamaContext[] = [];
    const batchers: ContinuousBatcher[] = [];
    const batcherModel = {
      isEogToken: (token: Token) => model.isEogToken(token),
      createSampler: () => createNativeSampler(llama, model),
      newlineToken: model.tokens.nl ?? null,
    };
    for (let i = 0; i < contextCount; i++) {
      const sequences =
        Math.floor(this.options.sequences / contextCount) +
        (i < this.options.sequences % contextCount ? 1 : 0);
      const context = await model.createContext({
        contextSize: perSequence,
        sequences,
        threads: this.options.threads,
      });
      contexts.push(context);
      batchers.push(
        new ContinuousBatcher(nativeContextOf(context), batcherModel, sequences, context.batchSize),
      );
    }
    // The model's own chat template (from the GGUF), or node-llama-cpp's best match for the model.
    const chatWrapper = resolveChatWrapper(model);
    this.loaded = { llama, model, contexts, batchers, chatWrapper };
    this.state = { state: "ready" };
  }

  /**
   * How many contexts "auto" means. On a GPU, one: every sequence in one batch. On a CPU, one per
   * group of `threads` cores, so concurrent requests also use the cores one context leaves idle;
   * and for a model small enough to sit in the CPU caches, one per sequence. Batching saves re-reading
   * the weights from memory, which such a model never does: its cost per token is attention over the
   * sequence's own cells, which no batch shares, and independent decode loops keep the cores busy
   * while each one samples. On the 1 MB test model and 2 cores, bench/generation.ts measured 8
   * concurrent requests at 1.28× the rate of one with 8 sequences in one context (node-llama-cpp
   * direct), and 2.1× with a context per sequence.
   */
  private resolveContexts(llama: Llama, model: LlamaModel): number {
    if (this.options.contexts !== "auto") return this.options.contexts;
    if (llama.gpu !== false) return 1;
    const cores = os.availableParallelism();
    if (model.size <= CACHE_RESIDENT_MODEL_BYTES && this.options.threads === 1 && cores > 1)
      return this.options.sequences;
    return Math.max(1, Math.floor(cores / this.options.threads));
  }

  private requireReady(): Loaded {
    if (this.state.state !== "ready" || !this.loaded) {
      const detail = this.state.state === "unhealthy" ? this.state.reason : "the model is still loading";
      throw new ApiError(503, "model_not_ready", `Model not ready: ${detail}`);
    }
    return this.loaded;
  }

  /** The tokens the model reads before generating: the prompt, or the chat rendered by its template. */
  private prepare(request: GenerationRequest): PreparedPrompt {
    const { model, chatWrapper } = this.requireReady();
    if (!isChatRequest(request)) {
      // As llama.cpp's own server does: BOS when the model wants one, then the text tokenized as it
      // stands (SentencePiece vocabularies see the word-initial "▁Once", not "O n ce").
      const bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
      const tokens = model.tokenize(request.prompt);
      if (bos !== null) tokens.unshift(bos);
      return { tokens, context: tokens, stopStrings: request.stop, stopTokenSequences: [] };
    }
    const history: ChatHistoryItem[] = [...toChatHistory(request.messages), { type: "model", response: [] }];
    const { contextText, stopGenerationTriggers } = chatWrapper.generateContextState({
      chatHistory: history,
    });
    const stopStrings = [...request.stop];
    const stopTokenSequences: Token[][] = [];
    for (const trigger of stopGenerationTriggers) {
      const text = LlamaText(trigger);
      if (text.values.every((value) => typeof value === "string")) {
        stopStrings.push(text.values.join(""));
        continue;
      }
      const tokens = text.tokenize(model.tokenizer);
      // A lone end-of-generation token already ends every response.
      if (tokens.length === 1 && model.isEogToken(tokens[0]!)) continue;
      if (tokens.length > 0) stopTokenSequences.push(tokens);
    }
    return { tokens: contextText.tokenize(model.tokenizer), context: [], stopStrings, stopTokenSequences };
  }

  async validate(request: GenerationRequest): Promise<number> {
    return this.check(request, this.prepare(request));
  }

  private check(request: GenerationRequest, prepared: PreparedPrompt): number {
    const promptTokens = prepared.tokens.length;
    const limit = this.sequenceContextSize;
    if (promptTokens === 0) throw badRequest("The prompt is empty after tokenization.");
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
    const { model, batchers } = this.requireReady();
    const prepared = this.prepare(request);
    const promptTokens = this.check(request, prepared);
    const job: BatchJob = {
      promptTokens: prepared.tokens,
      maxTokens: request.maxTokens,
      sampling: {
        temperature: request.temperature,
        topK: request.topK ?? DEFAULT_TOP_K,
        topP: request.topP ?? DEFAULT_TOP_P,
        minP: request.minP ?? DEFAULT_MIN_P,
        // Without a seed every request draws its own; with one, the same request repeats exactly.
        seed: request.seed ?? randomInt(0, 2 ** 32),
        repeatPenalty: request.repeatPenalty,
      },
      text: new ResponseText({
        detokenize: (tokens, lastTokens) => model.detokenize(tokens, false, lastTokens),
        context: prepared.context,
        stopStrings: prepared.stopStrings,
        stopTokenSequences: prepared.stopTokenSequences,
      }),
      signal: request.signal,
      onText: request.onText,
      onTokens: request.onTokens,
    };
    // The least loaded context; ties go to the first, so a lone request always runs on the same one.
    const batcher = batchers.reduce((best, candidate) => (candidate.load < best.load ? candidate : best));
    const result = await batcher.run(job);
    return {
      text: result.text,
      tokensGenerated: result.tokensGenerated,
      promptTokens,
      finishReason: result.finish === "stop" ? "stop" : "length",
    };
  }

  async close(): Promise<void> {
    await this.loading;
    const loaded = this.loaded;
    if (!loaded) return;
    for (const batcher of loaded.batchers) await batcher.close();
    for (const context of loaded.contexts) await context.dispose();
    await loaded.model.dispose();
    await loaded.llama.dispose();
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
