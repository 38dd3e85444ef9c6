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
  LlamaGrammarEvaluationState,
  LlamaText,
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatModelFunctions,
  type ChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaGrammar,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { badRequest, DomainError, notReady } from "../../core/errors.js";
import {
  ContinuousBatcher,
  emptyStepTimings,
  type BatchJob,
  type StepTimings,
  type TokenLogprob as BatchLogprob,
} from "./batcher.js";
import { checkGbnf } from "./gbnf-check.js";
import { GrammarBudgetError, type CompiledGrammar, type GrammarBudget } from "./grammar-budget.js";
import { GrammarChecker, type CheckResult } from "./grammar-check.js";
import { GrammarGuard } from "./grammar-guard.js";
import {
  isChatRequest,
  type ChatRequest,
  type CompletionResult,
  type GenerationRequest,
  type GrammarSchema,
  type Generator,
  type GeneratorStatus,
  type OutputConstraint,
  type TextTokenizer,
  type TokenLogprob,
} from "./generator.js";
import {
  DEFAULT_SCHEMA_BUDGET,
  SchemaError,
  substitutePatterns,
  translateSchema,
  type SchemaBudget,
} from "./json-schema.js";
import { AnswerStream } from "./answer-stream.js";
import { EventWriter, type EventListener } from "./events.js";
import { cmakeOptionsFor, describeBinary, sharedLlama, type LlamaBinaryChoice } from "./llama-binary.js";
import {
  createNativeCheckpoint,
  createNativeSampler,
  grammarStateOf,
  nativeContextOf,
} from "./llama-native.js";
import {
  adapterSetFor,
  kvCacheOptions,
  loadAdapters,
  loadDraftModel,
  MAX_CACHE_PREFIXES,
  modelFreeSpeculator,
  resolveSpeculation,
  savePrefixesOf,
  type DraftModel,
  type LoadedAdapters,
  type SpeculationSettings,
} from "./llama-features.js";
import { PrefixCache } from "./prefix-cache.js";
import type { KvCacheType, LoraAdapterSpec } from "./presets.js";
import {
  availableFunctions,
  resultPrefix,
  toChatHistory,
  toolCallSchema,
  toolsForChoice,
} from "./tool-calls.js";
import { resolveModel, type ModelSource } from "./model-source.js";
import { planContext, type ContextPlan } from "./context-plan.js";
import { ResponseText } from "./response-text.js";
import type { ReasoningMarkers } from "./reasoning.js";

export interface LlamaGeneratorOptions {
  model: ModelSource;
  /** The name the model is served under (its registry id); default: the file name without `.gguf`. */
  name?: string;
  threads: number;
  /**
   * Total context tokens, each sequence getting an equal share (LLAMA_CONTEXT_SIZE, a preset's
   * `ctx-size`); null: sized from the model and free memory (context-plan.ts).
   */
  contextSize: number | null;
  /** Parallel sequences asked for (MAX_CONCURRENT); fewer when memory would not hold them. */
  sequences: number;
  /**
   * llama.cpp contexts to spread the sequences over (at most `sequences`). Each context decodes its
   * batch on a thread of its own, so where `threads` leaves cores idle, concurrent requests use them.
   */
  contexts: number | "auto";
  gpu: "auto" | false;
  /** "auto": the build for this CPU when `npm run build:native` made one, else the prebuilt binary. */
  binary?: LlamaBinaryChoice;
  /** llama.cpp's fused attention kernel (default on: see Config.textgen.llamaFlashAttention). */
  flashAttention?: boolean;
  /** Start-up lines (which binary runs). */
  log?: (line: string) => void;
  /** GRAMMAR_MAX_* and SCHEMA_MAX_* (defaults: DEFAULT_GRAMMAR_BUDGET, DEFAULT_SCHEMA_BUDGET). */
  grammarBudget?: GrammarBudget;
  schemaBudget?: SchemaBudget;
  /** GRAMMAR_MAX_TOKEN_MS: one token's grammar-constrained sampling may take this long (default 1000). */
  grammarMaxTokenMs?: number;
  /** LLAMA_KV_CACHE_TYPE or the preset's (default f16). */
  kvCacheType?: KvCacheType;
  /** PROMPT_CACHE_RAM_MB in bytes: the RAM prefix cache (0 or absent: off). */
  promptCacheRamBytes?: number;
  /** SPECULATIVE, DRAFT_MODEL_PATH or the preset's draft (absent: off). */
  speculation?: SpeculationSettings;
  /** The preset's LoRA adapters. */
  lora?: LoraAdapterSpec[];
}

/** The defaults of GRAMMAR_MAX_* (src/core/config.ts), for callers without a configuration. */
export const DEFAULT_GRAMMAR_BUDGET: GrammarBudget = {
  maxBytes: 128 * 1024,
  maxRules: 4096,
  maxExpansion: 200_000,
  maxAlternatives: 1024,
  maxNesting: 64,
  maxRepetition: 1000,
  maxStacks: 512,
};

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
  grammar?: LlamaGrammar;
  /** "forced": the answer is one call under a grammar; "auto": calls are looked for in the text. */
  tools: "none" | "auto" | "forced";
  /** Prompt tokens dropped from the start to fit (only when the request allows it). */
  truncated: number;
  /** New tokens at most: the request's, or the room the context has left (`clampMaxTokens`). */
  maxTokens?: number;
  /** Where the chat template reasons: its markers, and whether the prompt already opened the block. */
  reasoning?: ReasoningMarkers & { startsInside: boolean };
  /** The grammar as the budget check parsed it, followed while sampling (grammar-guard.ts). */
  compiledGrammar?: CompiledGrammar;
  /** Prompt lengths the request's cache hints ask to keep (saved to the RAM prefix cache). */
  savePrefixes?: number[];
}

interface Loaded {
  llama: Llama;
  model: LlamaModel;
  contexts: LlamaContext[];
  batchers: ContinuousBatcher[];
  /** The contexts share threads: requests fill one before the next (see pickBatcher). */
  fillFirst: boolean;
  chatWrapper: ChatWrapper;
  prefixCache?: PrefixCache;
  draft?: DraftModel;
  adapters: LoadedAdapters;
}

export class LlamaGenerator implements Generator {
  modelName: string;
  private state: GeneratorStatus = { state: "loading" };
  private loaded?: Loaded;
  private readonly loading: Promise<void>;
  private readonly grammarChecker = new GrammarChecker();

  /** Starts loading at once; `status()` says when it can serve. */
  constructor(private readonly options: LlamaGeneratorOptions) {
    this.modelName = options.name ?? path.basename(options.model.reference).replace(/\.gguf$/i, "");
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

  /** Which file, llama.cpp binary and device the model loads with; null until known. */
  loadedFrom: { modelPath: string; binary: string; device: string } | null = null;

  tokenizer(): TextTokenizer {
    const { model } = this.requireReady();
    const vocabularySize = vocabularySizeOf(model);
    const check = (tokens: readonly number[]) => {
      const bad = tokens.findIndex(
        (token) =>
          !Number.isInteger(token) || token < 0 || (vocabularySize !== undefined && token >= vocabularySize),
      );
      if (bad !== -1)
        throw badRequest(
          `tokens[${bad}] = ${tokens[bad]} is not a token of this model` +
            (vocabularySize !== undefined ? ` (ids 0…${vocabularySize - 1})` : ""),
          [{ path: `/tokens/${bad}` }],
        );
      return tokens as Token[];
    };
    return {
      tokenize: (text, addSpecial) => {
        const tokens = model.tokenize(text, true);
        const bos = model.tokens.bos;
        if (addSpecial && model.tokens.shouldPrependBosToken && bos !== null && tokens[0] !== bos)
          tokens.unshift(bos);
        return tokens;
      },
      detokenize: (tokens) => model.detokenize(check(tokens), true),
      // After a newline, a SentencePiece token keeps its word-initial space (" upon"), as llama.cpp's
      // token_to_piece writes it; at the start of a text the detokenizer would drop it.
      piece: (token) => {
        const newline = model.tokens.nl;
        return model.detokenize(check([token]), true, newline === null ? undefined : [newline]);
      },
    };
  }

  async sharedModel(): Promise<{ model: LlamaModel; name: string } | undefined> {
    await this.loading;
    return this.loaded ? { model: this.loaded.model, name: this.modelName } : undefined;
  }

  /** llama.cpp contexts the sequences are spread over (0 until loaded). */
  get contextCount(): number {
    return this.loaded?.contexts.length ?? 0;
  }

  /** Tokens each sequence can hold: prompt plus new tokens must fit (0 until loaded). */
  get sequenceContextSize(): number {
    return this.loaded?.contexts[0]?.contextSize ?? 0;
  }

  contextPerSequence(): number | undefined {
    return this.loaded ? this.sequenceContextSize : undefined;
  }

  /** The context and parallelism the model was loaded with (null until loaded). */
  contextPlan: ContextPlan | null = null;

  /** Sequences asked for (MAX_CONCURRENT, or the preset's `parallel`). */
  get requestedSequences(): number {
    return this.options.sequences;
  }

  /** Sequences that run at once: MAX_CONCURRENT, or fewer when memory would not hold them. */
  get parallelSequences(): number {
    return this.contextPlan?.sequences ?? this.options.sequences;
  }

  private async load(): Promise<void> {
    const modelPath = await resolveModel(this.options.model);
    const llama = await sharedLlama({
      gpu: this.options.gpu,
      cmakeOptions: cmakeOptionsFor(this.options.binary ?? "auto"),
    });
    const devices = llama.gpu === false ? [] : await llama.getGpuDeviceNames().catch(() => []);
    // The start-up line (one, with the model and the store) reads this.
    this.loadedFrom = {
      modelPath,
      binary: describeBinary(llama),
      device: llama.gpu === false ? "CPU" : `${llama.gpu}${devices.length ? ` (${devices.join(", ")})` : ""}`,
    };
    const model = await llama.loadModel({ modelPath });
    const flashAttention = this.options.flashAttention ?? true;
    const plan = await planContext(
      {
        trainContextSize: model.trainContextSize,
        configuredTotal: this.options.contextSize,
        sequences: this.options.sequences,
      },
      async (contextSize, sequences) => {
        const need = await model.fileInsights.estimateContextResourceRequirementsV2({
          contextSize,
          sequences,
          modelGpuLayers: model.gpuLayers,
          flashAttention,
        });
        return llama.gpu === false ? need.cpuRam : Math.max(need.gpuVram, need.cpuRam);
      },
      await freeMemory(llama),
    );
    this.contextPlan = plan;
    const perSequence = plan.perSequence;
    const totalSequences = plan.sequences;
    const contextCount = Math.max(
      1,
      Math.min(this.resolveContexts(llama, model, totalSequences), totalSequences),
    );
    const contexts: LlamaContext[] = [];
    const batchers: ContinuousBatcher[] = [];
    const sharing = threadSharing(this.options.threads, contextCount, os.availableParallelism(), batchers);
    const batcherModel = {
      isEogToken: (token: Token) => model.isEogToken(token),
      createSampler: () => createNativeSampler(llama, model),
      newlineToken: model.tokens.nl ?? null,
    };
    const extras = await this.loadExtras(llama, model);
    for (let i = 0; i < contextCount; i++) {
      const sequences =
        Math.floor(totalSequences / contextCount) + (i < totalSequences % contextCount ? 1 : 0);
      const context = await model.createContext({
        contextSize: perSequence,
        sequences,
        threads: this.options.threads,
        flashAttention,
        ...kvCacheOptions(this.options.kvCacheType),
      });
      contexts.push(context);
      const native = nativeContextOf(context);
      const speculator = extras.draft
        ? await extras.draft.speculatorFor(context, sequences, this.options.threads)
        : modelFreeSpeculator(extras.speculation);
      batchers.push(
        new ContinuousBatcher(native, batcherModel, sequences, context.batchSize, {
          prefixCache: extras.prefixCache && {
            cache: extras.prefixCache,
            addonContext: native,
            // Checkpoints restore into contexts of the same layout only.
            shape: `${sequences}:${this.options.kvCacheType ?? "f16"}`,
          },
          speculator,
          maxDraftTokens: this.options.speculation?.maxTokens,
          threads: sharing?.threads,
        }),
      );
    }
    // The model's own chat template (from the GGUF), or node-llama-cpp's best match for the model.
    const chatWrapper = resolveChatWrapper(model);
    this.loaded = {
      llama,
      model,
      contexts,
      batchers,
      chatWrapper,
      fillFirst: sharing !== undefined,
      ...extras,
    };
    this.state = { state: "ready" };
  }

  /** The RAM prefix cache, the draft model and the LoRA adapters (#36), before the contexts. */
  private async loadExtras(
    llama: Llama,
    model: LlamaModel,
  ): Promise<{
    prefixCache?: PrefixCache;
    draft?: DraftModel;
    speculation: "draft" | "ngram" | "off";
    adapters: LoadedAdapters;
  }> {
    const flashAttention = this.options.flashAttention ?? true;
    // llama.cpp quantizes the V cache only with flash attention; it would refuse the context.
    if ((this.options.kvCacheType ?? "f16") !== "f16" && !flashAttention)
      throw new Error(
        `LLAMA_KV_CACHE_TYPE=${this.options.kvCacheType} needs flash attention (llama.cpp quantizes the V cache only with it): unset LLAMA_FLASH_ATTENTION=off`,
      );
    const kvType = this.options.kvCacheType ?? "f16";
    const head = headSizeOf(model);
    // llama.cpp quantizes the cache in blocks of 32 values along each head (q8_0, q4_0).
    if (kvType !== "f16" && head !== undefined && head % 32 !== 0)
      throw new Error(
        `LLAMA_KV_CACHE_TYPE=${kvType} needs attention heads of a multiple of 32 values; this model's have ${head}: use f16`,
      );
    const speculation = resolveSpeculation(this.options.speculation);
    const bytes = this.options.promptCacheRamBytes ?? 0;
    return {
      prefixCache: bytes > 0 ? new PrefixCache(bytes, () => createNativeCheckpoint(llama)) : undefined,
      draft:
        speculation === "draft"
          ? await loadDraftModel(
              llama,
              model,
              {
                ...this.options.speculation!,
                // Checked like any model file (gguf-check.ts), downloaded first when remote.
                draftModelPath: await resolveModel({
                  reference: this.options.speculation!.draftModelPath!,
                  modelsDir: this.options.model.modelsDir,
                }),
              },
              flashAttention,
              this.options.kvCacheType,
            )
          : undefined,
      speculation,
      adapters: await loadAdapters(model, this.options.lora),
    };
  }

  /** Where the decode loops' time went, summed over this model's contexts (undefined until loaded). */
  stepTimings(): StepTimings | undefined {
    if (!this.loaded) return undefined;
    const sum = emptyStepTimings();
    for (const batcher of this.loaded.batchers) {
      const spent = batcher.timings();
      for (const key of Object.keys(sum) as (keyof StepTimings)[]) sum[key] += spent[key];
    }
    return sum;
  }

  /** The RAM prefix cache's figures (undefined when it is off). */
  prefixCacheStats() {
    return this.loaded?.prefixCache?.stats();
  }

  /** The model's LoRA adapters, ids being their indexes. */
  get loraAdapters(): readonly LoraAdapterSpec[] {
    return this.loaded?.adapters.specs ?? this.options.lora ?? [];
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
  private resolveContexts(llama: Llama, model: LlamaModel, sequences: number): number {
    if (this.options.contexts !== "auto") return this.options.contexts;
    if (llama.gpu !== false) return 1;
    const cores = os.availableParallelism();
    if (model.size <= CACHE_RESIDENT_MODEL_BYTES && this.options.threads === 1 && cores > 1) return sequences;
    return cpuContextCount(cores, this.options.threads);
  }

  private requireReady(): Loaded {
    if (this.state.state !== "ready" || !this.loaded) {
      const detail = this.state.state === "unhealthy" ? this.state.reason : "the model is still loading";
      throw notReady(`Model not ready: ${detail}`, "model_not_ready");
    }
    return this.loaded;
  }

  /** The tokens the model reads before generating: the prompt, or the chat rendered by its template. */
  private async prepare(request: GenerationRequest): Promise<PreparedPrompt> {
    const { llama, model, chatWrapper } = this.requireReady();
    this.checkLogitBias(request);
    const grammarBudget = this.options.grammarBudget ?? DEFAULT_GRAMMAR_BUDGET;
    const budgets: Budgets = {
      schema: this.options.schemaBudget ?? DEFAULT_SCHEMA_BUDGET,
      maxGrammarBytes: grammarBudget.maxBytes,
      checkGrammar: (text) => this.grammarChecker.check(text, grammarBudget),
    };
    const constrained = request.constraint
      ? await compileConstraint(llama, request.constraint, budgets)
      : undefined;
    let grammar = constrained?.grammar;
    let compiledGrammar = constrained?.compiled;
    if (!isChatRequest(request)) {
      // As llama.cpp's own server does: BOS when the model wants one, then the text tokenized as it
      // stands (SentencePiece vocabularies see the word-initial "▁Once", not "O n ce").
      const bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
      const tokens = model.tokenize(request.prompt);
      if (bos !== null) tokens.unshift(bos);
      const hinted = (request.cacheHint?.prefixes ?? []).slice(0, MAX_CACHE_PREFIXES).map((offset) => {
        const prefix = model.tokenize(request.prompt.slice(0, Math.max(0, offset)));
        if (bos !== null) prefix.unshift(bos);
        return prefix;
      });
      return this.fit(request, {
        tokens,
        context: tokens,
        stopStrings: [...request.stop, ...grammarStopStrings(grammar)],
        stopTokenSequences: [],
        grammar,
        compiledGrammar,
        tools: "none",
        truncated: 0,
        savePrefixes: savePrefixesOf(tokens, hinted),
      });
    }
    const choice = request.toolChoice ?? "auto";
    const tools = request.tools ?? [];
    let toolMode: PreparedPrompt["tools"] = "none";
    let functions: ChatModelFunctions | undefined;
    if (tools.length > 0 && choice !== "none") {
      functions = availableFunctions(tools);
      toolMode = choice === "auto" ? "auto" : "forced";
      if (toolMode === "forced") {
        if (grammar) throw badRequest("response_format cannot be combined with a required tool call");
        ({ grammar, compiled: compiledGrammar } = await compileSchema(
          llama,
          toolCallSchema(toolsForChoice(tools, choice)),
          "/tools",
          budgets,
        ));
      }
    } else if (typeof choice === "object") toolsForChoice(tools, choice);
    const history: ChatHistoryItem[] = [...toChatHistory(request.messages), { type: "model", response: [] }];
    const state = chatWrapper.generateContextState({
      chatHistory: history,
      availableFunctions: functions,
      documentFunctionParams: functions ? true : undefined,
    });
    const { stopGenerationTriggers } = state;
    let contextText = state.contextText;
    const markers = reasoningMarkersOf(chatWrapper, model);
    let reasoning: PreparedPrompt["reasoning"];
    if (markers) {
      const startsInside = contextText.toString().trimEnd().endsWith(markers.open);
      reasoning = { ...markers, startsInside };
      // Thinking off, as Qwen3's template does it for enable_thinking=false: an empty thought block.
      if (request.thinking === false) {
        const empty = startsInside ? `\n${markers.close}\n\n` : `${markers.open}\n\n${markers.close}\n\n`;
        contextText = LlamaText([contextText, empty]);
        reasoning = { ...markers, startsInside: false };
      }
    }
    const stopStrings = [...request.stop, ...grammarStopStrings(grammar)];
    if (toolMode === "auto") {
      const invented = resultPrefix(chatWrapper);
      if (invented) stopStrings.push(invented);
    }
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
    const tokens = contextText.tokenize(model.tokenizer);
    // Cache hints of a chat: the prompt as the template renders its first N messages.
    const hinted = (request.cacheHint?.prefixes ?? []).slice(0, MAX_CACHE_PREFIXES).map((count) =>
      chatWrapper
        .generateContextState({
          chatHistory: toChatHistory(request.messages.slice(0, Math.max(0, count))),
          availableFunctions: functions,
          documentFunctionParams: functions ? true : undefined,
        })
        .contextText.tokenize(model.tokenizer),
    );
    return this.fit(request, {
      tokens,
      context: [],
      stopStrings,
      stopTokenSequences,
      grammar,
      compiledGrammar,
      tools: toolMode,
      truncated: 0,
      reasoning,
      savePrefixes: savePrefixesOf(tokens, hinted),
    });
  }

  private eogTokens?: number[];

  /**
   * The request's `logit_bias`, with every end-of-generation token banned under `ignore_eos` (as
   * llama-server does it: a bias of -infinity, so the rest of the distribution is drawn from).
   */
  private tokenBias(request: GenerationRequest): {
    tokenBiasKeys?: Uint32Array;
    tokenBiasValues?: Float32Array;
  } {
    const bias = new Map(request.logitBias);
    if (request.ignoreEos) {
      if (!this.eogTokens) {
        const { model } = this.requireReady();
        const size = vocabularySizeOf(model) ?? 0;
        this.eogTokens = [];
        for (let token = 0; token < size; token++)
          if (model.isEogToken(token as Token)) this.eogTokens.push(token);
      }
      for (const token of this.eogTokens) bias.set(token, -Infinity);
    }
    if (bias.size === 0) return {};
    return {
      tokenBiasKeys: Uint32Array.from(bias.keys()),
      tokenBiasValues: Float32Array.from(bias.values()),
    };
  }

  /** A logit_bias naming a token the vocabulary does not have is a 400. */
  private checkLogitBias(request: GenerationRequest): void {
    if (!request.logitBias) return;
    const size = vocabularySizeOf(this.requireReady().model);
    if (size === undefined) return;
    for (const token of request.logitBias.keys())
      if (token >= size)
        throw badRequest(`logit_bias names token ${token}, but this model's token ids are 0…${size - 1}`, [
          { path: `/logit_bias/${token}` },
        ]);
  }

  async validate(request: GenerationRequest): Promise<number> {
    const prepared = await this.prepare(request);
    adapterSetFor(this.requireReady().adapters, request.lora);
    return prepared.tokens.length;
  }

  /** Counts a grammar's cost while its response is sampled (GRAMMAR_MAX_STACKS, GRAMMAR_MAX_TOKEN_MS). */
  private grammarGuard(compiled: CompiledGrammar | undefined): GrammarGuard {
    const { model } = this.requireReady();
    const newline = model.tokens.nl;
    const pieces = new Map<number, Uint8Array>();
    return new GrammarGuard({
      compiled,
      maxStacks: (this.options.grammarBudget ?? DEFAULT_GRAMMAR_BUDGET).maxStacks,
      maxTokenMs: this.options.grammarMaxTokenMs ?? 1000,
      // The token's piece as llama.cpp's grammar reads it (a word-initial space kept).
      pieceBytes: (token) => {
        let bytes = pieces.get(token);
        if (!bytes) {
          const text = model.detokenize([token as Token], true, newline === null ? undefined : [newline]);
          bytes = Buffer.from(text, "utf8");
          pieces.set(token, bytes);
        }
        return bytes;
      },
    });
  }

  /**
   * Refuses a prompt that leaves no room for `maxTokens`, or, when the request allows it, drops
   * tokens from its start (after BOS) until it fits, or lowers `maxTokens` to the room left
   * (`clampMaxTokens`: the answer then ends with "length" where the context is full).
   */
  private fit(request: GenerationRequest, prepared: PreparedPrompt): PreparedPrompt {
    const { model } = this.requireReady();
    const promptTokens = prepared.tokens.length;
    const limit = this.sequenceContextSize;
    const field = request.maxTokensField ?? "max_length";
    if (promptTokens === 0) throw badRequest("The prompt is empty after tokenization.");
    if (promptTokens + request.maxTokens <= limit) return prepared;
    if (request.clampMaxTokens && !request.truncate && promptTokens < limit)
      return { ...prepared, maxTokens: limit - promptTokens };
    const room = limit - request.maxTokens;
    const keep = prepared.tokens[0] === model.tokens.bos ? 1 : 0;
    if (request.truncate && room > keep) {
      const dropped = promptTokens - room;
      const tokens = [...prepared.tokens.slice(0, keep), ...prepared.tokens.slice(keep + dropped)];
      return { ...prepared, tokens, context: isChatRequest(request) ? [] : tokens, truncated: dropped };
    }
    const what = isChatRequest(request) ? "The messages are" : "The prompt is";
    throw badRequest(
      `${what} ${promptTokens} tokens; with ${field} ${request.maxTokens} it needs ${promptTokens + request.maxTokens} ` +
        `tokens, but the context holds ${limit} per request. Shorten the text, lower ${field}` +
        (request.truncate === undefined ? ", or set truncate: true to drop the start of the prompt." : "."),
      [{ prompt_tokens: promptTokens, [field]: request.maxTokens, context_size: limit }],
    );
  }

  async generate(request: GenerationRequest, listener?: EventListener): Promise<CompletionResult> {
    const { model, batchers, chatWrapper, adapters, fillFirst } = this.requireReady();
    const prepared = await this.prepare(request);
    const adapterSet = adapterSetFor(adapters, request.lora);
    const promptTokens = prepared.tokens.length;
    const chat = isChatRequest(request);
    const answer = new AnswerStream(
      {
        tools: prepared.tools,
        toolDefinitions: chat ? (request.tools ?? []) : [],
        forcedName: chat ? forcedToolName(request) : undefined,
        reasoning: chat && request.reasoningFormat !== "none" ? prepared.reasoning : undefined,
        thinkingBudget: chat ? request.thinkingBudget : undefined,
        trimTrailingWhitespace: prepared.grammar?.trimWhitespaceSuffix === true,
        wrapper: chatWrapper,
      },
      new EventWriter(listener),
    );
    const logprobText = (entry: BatchLogprob, previous: readonly Token[]): TokenLogprob => {
      const textOf = (token: Token) => model.detokenize([token], false, previous.slice(-4));
      const text = textOf(entry.token);
      return {
        text,
        bytes: [...Buffer.from(text, "utf8")],
        logprob: entry.logprob,
        top: entry.top.map((alternative) => {
          const alternativeText = textOf(alternative.token);
          return {
            text: alternativeText,
            bytes: [...Buffer.from(alternativeText, "utf8")],
            logprob: alternative.logprob,
          };
        }),
      };
    };
    const generatedTokens: Token[] = [];
    // A thinking budget spent stops the job; the answer then continues after a closed thought block.
    const maxTokens = prepared.maxTokens ?? request.maxTokens;
    const budget = new AbortController();
    const job = (tokens: readonly Token[], maxTokens: number, signal?: AbortSignal): BatchJob => ({
      promptTokens: tokens,
      maxTokens,
      sampling: {
        temperature: request.temperature,
        topK: request.topK ?? DEFAULT_TOP_K,
        topP: request.topP ?? DEFAULT_TOP_P,
        minP: request.minP ?? DEFAULT_MIN_P,
        // Without a seed every request draws its own; with one, the same request repeats exactly.
        seed: request.seed ?? randomInt(0, 2 ** 32),
        repeatPenalty: request.repeatPenalty,
        presencePenalty: request.presencePenalty,
        frequencyPenalty: request.frequencyPenalty,
        ...this.tokenBias(request),
      },
      text: new ResponseText({
        detokenize: (tokens, lastTokens) => model.detokenize(tokens, false, lastTokens),
        context: prepared.context,
        stopStrings: prepared.stopStrings,
        stopTokenSequences: prepared.stopTokenSequences,
      }),
      signal,
      onText: (piece) => answer.push(piece),
      onTokens: (count) => {
        request.onTokens?.(count);
        if (answer.countTokens(count)) budget.abort();
      },
      grammar: prepared.grammar
        ? grammarStateOf(new LlamaGrammarEvaluationState({ model, grammar: prepared.grammar }))
        : undefined,
      grammarGuard: prepared.grammar ? this.grammarGuard(prepared.compiledGrammar) : undefined,
      logprobs: request.logprobs,
      reusePrefix: request.cachePrompt,
      adapters: adapterSet,
      savePrefixes: prepared.savePrefixes,
      cacheKey: request.cacheHint?.key,
      speculate: request.speculative,
      priority: request.priority,
      onLogprob: (entry) => {
        const previous = generatedTokens.length > 0 ? generatedTokens : prepared.context;
        answer.logprob(logprobText(entry, previous));
        generatedTokens.push(entry.token);
      },
    });
    const adapterKey = adapterSet?.key ?? "";
    const batcher = batchers[pickBatcher(batchers, prepared.tokens, adapterKey, fillFirst)]!;
    const first = request.signal ? AbortSignal.any([request.signal, budget.signal]) : budget.signal;
    let result = await batcher.run(job(prepared.tokens, maxTokens, first));
    const { cachedTokens } = result;
    let { tokensGenerated } = result;
    const draft = { ...result.draft };
    const logprobEntries = [...(result.logprobs ?? [])];
    const budgetSpent = result.finish === "abort" && budget.signal.aborted && !request.signal?.aborted;
    if (budgetSpent && tokensGenerated < maxTokens) {
      // The prompt and the thought so far are in the sequence's cells: only the close is evaluated.
      const continued = [...prepared.tokens, ...model.tokenize(result.text + answer.closeReasoning(), true)];
      result = await batchers[pickBatcher(batchers, continued, adapterKey, fillFirst)]!.run(
        job(continued, maxTokens - tokensGenerated, request.signal),
      );
      tokensGenerated += result.tokensGenerated;
      draft.proposed += result.draft.proposed;
      draft.accepted += result.draft.accepted;
      logprobEntries.push(...(result.logprobs ?? []));
    }
    let logprobs: TokenLogprob[] | undefined;
    if (request.logprobs !== undefined) {
      const previous: Token[] = [...prepared.context];
      logprobs = logprobEntries.map((entry) => {
        const converted = logprobText(entry, previous);
        previous.push(entry.token);
        return converted;
      });
    }
    return answer.finish({
      finish: result.finish,
      promptTokens,
      tokensGenerated,
      cachedTokens,
      truncatedTokens: prepared.truncated,
      ...(draft.proposed > 0 && { draftTokens: draft }),
      logprobs,
    });
  }

  async close(): Promise<void> {
    await this.loading;
    await this.grammarChecker.close();
    const loaded = this.loaded;
    if (!loaded) return;
    for (const batcher of loaded.batchers) await batcher.close();
    loaded.prefixCache?.clear();
    for (const context of loaded.contexts) await context.dispose();
    await loaded.draft?.dispose();
    // The Llama is shared with the other models (sharedLlama): not disposed here.
    await loaded.model.dispose();
  }
}

/** The tool a forced call names when it can only be one (a call cut before its name still has it). */
function forcedToolName(request: ChatRequest): string | undefined {
  const choice = request.toolChoice;
  if (typeof choice === "object") return choice.name;
  return request.tools?.length === 1 ? request.tools[0]!.name : undefined;
}

/** The chat template's reasoning markers: node-llama-cpp's thought segment, else `<think>` in the template. */
function reasoningMarkersOf(wrapper: ChatWrapper, model: LlamaModel): ReasoningMarkers | undefined {
  const thought = (wrapper.settings as { segments?: { thought?: { prefix?: unknown; suffix?: unknown } } })
    .segments?.thought;
  const text = (value: unknown) =>
    value === undefined
      ? ""
      : LlamaText(value as never)
          .toString()
          .trim();
  if (thought && text(thought.prefix) !== "" && text(thought.suffix) !== "")
    return { open: text(thought.prefix), close: text(thought.suffix) };
  const template = (model.fileInfo.metadata as { tokenizer?: { chat_template?: unknown } }).tokenizer
    ?.chat_template;
  if (typeof template === "string" && template.includes("<think>") && template.includes("</think>"))
    return { open: "<think>", close: "</think>" };
  return undefined;
}

/** Values per attention head (keys), from the GGUF metadata. */
function headSizeOf(model: LlamaModel): number | undefined {
  const metadata = model.fileInfo.metadata as Record<string, unknown> & {
    general?: { architecture?: string };
  };
  const fields = metadata[metadata.general?.architecture ?? ""] as
    { embedding_length?: number; attention?: { head_count?: number; key_length?: number } } | undefined;
  const heads = Number(fields?.attention?.head_count ?? 0);
  const size =
    fields?.attention?.key_length ?? (heads > 0 ? Number(fields?.embedding_length ?? 0) / heads : 0);
  return size > 0 ? size : undefined;
}

/** Tokens in the model's vocabulary, from its GGUF metadata (node-llama-cpp has no accessor). */
function vocabularySizeOf(model: LlamaModel): number | undefined {
  return (model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: readonly unknown[] } } }).tokenizer
    ?.ggml?.tokens?.length;
}

function describeLoadError(error: unknown, reference: string): string {
  const message = error instanceof Error ? error.message : String(error);
  return `could not load model "${reference}": ${message}. Set MODEL_PATH to a local .gguf file (or a Hugging Face reference hf:<owner>/<repo>/<file>.gguf reachable from this machine).`;
}

/**
 * The context whose free sequence already holds the longest prefix of the prompt (prompt cache);
 * without one, the least loaded, ties to the first, so a lone request always runs on the same one.
 * With `fillFirst` (contexts sharing threads), the most loaded that has a free sequence instead: a
 * context decoding alone gets every thread, so requests batch in one until it is full.
 */
export function pickBatcher(
  batchers: readonly Pick<ContinuousBatcher, "cachedPrefixLength" | "load" | "capacity">[],
  tokens: readonly Token[],
  adapterKey: string,
  fillFirst = false,
): number {
  const rank = (candidate: (typeof batchers)[number]) =>
    fillFirst && candidate.load < candidate.capacity ? candidate.capacity + candidate.load : -candidate.load;
  let best = 0;
  let bestPrefix = -1;
  batchers.forEach((candidate, index) => {
    // A prefix worth reusing wins; otherwise load decides.
    const prefix = candidate.cachedPrefixLength(tokens, adapterKey);
    if (prefix > bestPrefix || (prefix === bestPrefix && rank(candidate) > rank(batchers[best]!))) {
      best = index;
      bestPrefix = prefix;
    }
  });
  return best;
}

/**
 * How contexts share the cores when there are more of them than `threads` each would fill: each
 * decode takes an equal share of the threads among the contexts that have work (at least 1, at most
 * `threads`), so one request alone decodes on all of them, and two contexts at work split them rather
 * than run twice the threads the cores have. Separate contexts need no barrier between their threads
 * at every step of the graph (a thread waiting for a descheduled peer on a shared CPU), and one
 * context samples while the other decodes. Undefined when every context can have `threads` of its own.
 */
export function threadSharing(
  threads: number,
  contexts: number,
  cores: number,
  batchers: readonly Pick<ContinuousBatcher, "busy">[],
): { threads: () => number } | undefined {
  const budget = Math.max(threads, cores);
  if (contexts <= 1 || threads * contexts <= budget) return undefined;
  return {
    threads: () => {
      const active = batchers.reduce((count, batcher) => count + (batcher.busy ? 1 : 0), 0);
      return Math.min(threads, Math.max(1, Math.floor(budget / Math.max(1, active))));
    },
  };
}

function grammarStopStrings(grammar: LlamaGrammar | undefined): string[] {
  if (!grammar) return [];
  return grammar.stopGenerationTriggers.map((trigger) => LlamaText(trigger).toString());
}

interface Budgets {
  schema: SchemaBudget;
  /** GRAMMAR_MAX_BYTES, checked first: even the syntax check is linear in the grammar's size. */
  maxGrammarBytes: number;
  /** The grammar budget check (off this thread); throws GrammarBudgetError, or Error for bad syntax. */
  checkGrammar: (grammar: string) => Promise<CheckResult>;
}

/** A compiled constraint: llama.cpp's grammar, and ours for following its stacks while sampling. */
interface Constraint {
  grammar: LlamaGrammar;
  compiled?: CompiledGrammar;
}

/**
 * Compiles a request's output constraint; a schema or grammar that does not compile, or is over its
 * budget (grammar-budget.ts, json-schema.ts), is a 400 before llama.cpp builds anything from it.
 */
async function compileConstraint(
  llama: Llama,
  constraint: OutputConstraint,
  budgets: Budgets,
): Promise<Constraint> {
  if (constraint.type === "json_object")
    return compileSchema(
      llama,
      { schema: { type: "object", additionalProperties: true }, patterns: new Map() },
      "",
      budgets,
    );
  if (constraint.type === "json_schema") {
    // Validated requests carry the translation (validation.ts); others (the RAG app) are read leniently.
    let translated = constraint.grammar;
    if (!translated) {
      try {
        translated = translateSchema(constraint.schema, { budget: budgets.schema }).grammar;
      } catch (error) {
        if (error instanceof SchemaError)
          throw badRequest(`Invalid JSON schema: ${error.message}`, [{ path: "/schema" }]);
        throw error;
      }
    }
    return compileSchema(llama, translated, "/schema", budgets);
  }
  const bytes = Buffer.byteLength(constraint.grammar, "utf8");
  if (bytes > budgets.maxGrammarBytes)
    throw badRequest(
      `Grammar over budget: the grammar is ${bytes} bytes; GRAMMAR_MAX_BYTES allows ${budgets.maxGrammarBytes}`,
      [{ path: "/grammar", limit: "maxBytes" }],
    );
  const problem = checkGbnf(constraint.grammar);
  if (problem) throw badRequest(`Invalid grammar: ${problem}`, [{ path: "/grammar" }]);
  let checked: CheckResult;
  try {
    checked = await budgets.checkGrammar(constraint.grammar);
  } catch (error) {
    if (error instanceof DomainError) throw error;
    if (error instanceof GrammarBudgetError)
      throw badRequest(`Grammar over budget: ${error.message}`, [{ path: "/grammar", limit: error.limit }]);
    throw badRequest(`Invalid grammar: ${(error as Error).message}`, [{ path: "/grammar" }]);
  }
  // The grammar is parsed again here, by llama.cpp, and that cannot be shared: the budget check's
  // parse (on the worker) only measures the grammar, while llama.cpp takes the text and compiles it
  // natively (once to validate here, again for each generation's sampler). Repeated grammars skip the
  // budget parse through the checker's cache.
  try {
    return {
      grammar: await llama.createGrammar({ grammar: constraint.grammar }),
      compiled: checked.compiled,
    };
  } catch (error) {
    throw badRequest(`Invalid grammar: llama.cpp could not parse it (${(error as Error).message})`, [
      { path: "/grammar" },
    ]);
  }
}

/**
 * node-llama-cpp writes the schema's grammar and parses it; the grammar's budget is checked before
 * anything samples with it (its parse is linear in the schema, which SCHEMA_MAX_* bound).
 */
async function compileSchema(
  llama: Llama,
  { schema, patterns }: GrammarSchema,
  path: string,
  budgets: Budgets,
): Promise<Constraint> {
  let grammar: LlamaGrammar;
  try {
    // `as never`: the method's generic parameters want a literal schema type, not any schema.
    grammar = await llama.createGrammarForJsonSchema(schema as never);
    // Patterns are GBNF of ours in place of their placeholder literals (json-schema.ts).
    if (patterns.size > 0)
      grammar = await llama.createGrammar({
        grammar: substitutePatterns(grammar.grammar, patterns),
        stopGenerationTriggers: grammar.stopGenerationTriggers,
        trimWhitespaceSuffix: grammar.trimWhitespaceSuffix,
      });
  } catch (error) {
    throw badRequest(`The JSON schema could not be compiled to a grammar: ${(error as Error).message}`, [
      { path },
    ]);
  }
  try {
    return { grammar, compiled: (await budgets.checkGrammar(grammar.grammar)).compiled };
  } catch (error) {
    if (error instanceof DomainError) throw error;
    // Only the budget refuses: node-llama-cpp's own grammar is well formed by construction.
    if (error instanceof GrammarBudgetError)
      throw badRequest(`The JSON schema's grammar is over budget: ${error.message}`, [
        { path, limit: error.limit },
      ]);
    return { grammar };
  }
}

/** Bytes free where the contexts go: VRAM on a GPU, RAM on a CPU; null when it cannot be read. */
async function freeMemory(llama: Llama): Promise<number | null> {
  try {
    return llama.gpu === false ? (await llama.getRamState()).free : (await llama.getVramState()).free;
  } catch {
    return null;
  }
}

/** Contexts "auto" gives on a CPU for a model that is not cache-sized: one per `threads` cores. */
export function cpuContextCount(cores: number, threads: number): number {
  return Math.max(1, Math.floor(cores / threads));
}
