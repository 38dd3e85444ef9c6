/**
 * The one place that reaches below node-llama-cpp's public API, to the native llama.cpp context and
 * sampler it wraps (`LlamaContext._ctx`, `LlamaModel._model`, `Llama._bindings.AddonSampler`), the
 * sequence checkpoints it keeps for its own context shifts (`AddonContextSequenceCheckpoint`: a copy of
 * a sequence's KV cells in memory, our RAM prefix cache) and its LoRA adapters (`_getOrLoadLora`,
 * `AddonContext.setLoras`).
 *
 * Why: our continuous batcher (batcher.ts) drives llama_decode and sampling itself, one decode call
 * per step for every running sequence. node-llama-cpp's public per-sequence `evaluate()` path goes
 * through its own batch dispatcher, locks and promise chains for every token; with small models that
 * machinery costs more CPU per token than the model does (bench/generation.ts measures both), and it
 * only batches the sequences whose sampling happened to finish in the same tick.
 *
 * The package is pinned to an exact version in package.json; `nativeContextOf` checks the shape it
 * relies on and fails with a clear message if an upgrade changed it.
 */
import type { Llama, LlamaContext, LlamaGrammarEvaluationState, LlamaModel, Token } from "node-llama-cpp";

/** llama.cpp's context, as node-llama-cpp's addon exposes it. */
export interface NativeContext {
  /** Allocates an empty batch of up to `size` tokens (replacing the previous one). */
  initBatch(size: number): void;
  /**
   * Adds `tokens` of sequence `sequenceId` at positions `firstPosition…`; `logitIndexes` are the
   * indexes (within `tokens`) that need logits. Returns their indexes in the batch.
   */
  addToBatch(
    sequenceId: number,
    firstPosition: number,
    tokens: Uint32Array,
    logitIndexes: Uint32Array,
  ): Uint32Array;
  /** llama_decode on a worker thread. */
  decodeBatch(): Promise<void>;
  /** Samples from the logits at `batchLogitIndex` on a worker thread; -1 when sampling failed. */
  sampleToken(batchLogitIndex: number, sampler: NativeSampler, probabilities?: false): Promise<Token | -1>;
  /**
   * The same, also returning the distribution the token was drawn from (after the grammar and the
   * sampler chain) as `[token, probability, token, probability, …]`, most probable first.
   */
  sampleToken(
    batchLogitIndex: number,
    sampler: NativeSampler,
    probabilities: true,
  ): Promise<[Token | -1, (Token | number)[] | undefined, number | undefined]>;
  /** Drops every KV cell of the sequence. */
  disposeSequence(sequenceId: number): void;
  /**
   * The same, also returning the probability of the drawn token under the distribution it was drawn
   * from (a speculative draft stops when its model is unsure).
   */
  sampleToken(
    batchLogitIndex: number,
    sampler: NativeSampler,
    probabilities: false,
    confidence: true,
  ): Promise<[Token | -1, undefined, number | undefined]>;
  /** Drops every KV cell of the sequence. */
  disposeSequence(sequenceId: number): void;
  /** Drops the sequence's cells at positions `startPosition…endPosition-1` (-1: to the end). */
  removeTokenCellsFromSequence(sequenceId: number, startPosition: number, endPosition: number): boolean;
  /**
   * Writes a checkpoint's cells back into the sequence it was taken from (in this context or another
   * of the same shape), keeping positions 0…`maxPosition`; false when that failed (the sequence is then
   * empty or partial: dispose it).
   */
  restoreCheckpoint(checkpoint: NativeCheckpoint, maxPosition: number): Promise<boolean>;
  /** The LoRA adapters every following decode applies, with their scales (llama_set_adapters_lora). */
  setLoras(adapters: NativeLora[], scales: number[]): void;
  /** The threads every following decode computes on (llama_set_n_threads). */
  setThreads(threads: number): void;
}

/** A copy of one sequence's KV cells, in memory (llama_state_seq_get_data). */
export interface NativeCheckpoint {
  /** Copies the cells of `sequenceId` in `context` (on a worker thread). */
  init(context: NativeContext, sequenceId: number): Promise<void>;
  dispose(): void;
  /** Bytes held. */
  readonly size: number;
  readonly maxPos: number;
}

/** A loaded LoRA adapter (llama_adapter_lora), opaque here. */
export type NativeLora = { readonly __nativeLora: never };

/** Settings for llama.cpp's sampler chain (the addon rebuilds only the parts that changed). */
export interface NativeSamplerConfig {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  seed: number;
  repeatPenalty?: number;
  repeatPenaltyMaxTokens?: number;
  repeatPenaltyTokens?: Uint32Array;
  repeatPenaltyPresencePenalty?: number;
  repeatPenaltyFrequencyPenalty?: number;
  /** Added to these tokens' logits before sampling (-Infinity: never drawn); same length as the keys. */
  tokenBiasKeys?: Uint32Array;
  tokenBiasValues?: Float32Array;
  /** The addon's grammar state (see `grammarStateOf`): only tokens the grammar allows are sampled. */
  grammarEvaluationState?: NativeGrammarState;
}

/** A compiled grammar's position within one response (llama.cpp's grammar sampler), opaque here. */
export type NativeGrammarState = { readonly __nativeGrammarState: never };

export interface NativeSampler {
  applyConfig(config: NativeSamplerConfig): void;
  dispose(): void;
}

interface AddonSamplerConstructor {
  new (model: unknown): NativeSampler;
}

const requiredContextMethods = [
  "initBatch",
  "addToBatch",
  "decodeBatch",
  "sampleToken",
  "disposeSequence",
  "removeTokenCellsFromSequence",
  "restoreCheckpoint",
  "setLoras",
  "setThreads",
];

function incompatible(what: string): Error {
  return new Error(
    `node-llama-cpp's internals changed (${what}); Lectern drives the native context directly and ` +
      `needs the version pinned in package.json. Run \`npm ci\`.`,
  );
}

/** The native context inside a LlamaContext created with `model.createContext()`. */
export function nativeContextOf(context: LlamaContext): NativeContext {
  const native = (context as unknown as { _ctx?: Record<string, unknown> })._ctx;
  if (!native) throw incompatible("LlamaContext._ctx is missing");
  for (const method of requiredContextMethods)
    if (typeof native[method] !== "function") throw incompatible(`AddonContext.${method} is missing`);
  return native as unknown as NativeContext;
}

/** A new native sampler for `model`: one per request, so a seed restarts its random sequence. */
export function createNativeSampler(llama: Llama, model: LlamaModel): NativeSampler {
  const bindings = (llama as unknown as { _bindings?: { AddonSampler?: AddonSamplerConstructor } })._bindings;
  const nativeModel = (model as unknown as { _model?: unknown })._model;
  if (typeof bindings?.AddonSampler !== "function" || nativeModel === undefined)
    throw incompatible("AddonSampler or LlamaModel._model is missing");
  return new bindings.AddonSampler(nativeModel);
}

/** The addon state inside a LlamaGrammarEvaluationState, for NativeSamplerConfig. */
export function grammarStateOf(state: LlamaGrammarEvaluationState): NativeGrammarState {
  const native = (state as unknown as { _state?: NativeGrammarState })._state;
  if (native === undefined) throw incompatible("LlamaGrammarEvaluationState._state is missing");
  return native;
}

interface CheckpointConstructor {
  new (): NativeCheckpoint;
}

/** An empty checkpoint; `init` fills it from a sequence. */
export function createNativeCheckpoint(llama: Llama): NativeCheckpoint {
  const bindings = (
    llama as unknown as { _bindings?: { AddonContextSequenceCheckpoint?: CheckpointConstructor } }
  )._bindings;
  if (typeof bindings?.AddonContextSequenceCheckpoint !== "function")
    throw incompatible("AddonContextSequenceCheckpoint is missing");
  return new bindings.AddonContextSequenceCheckpoint();
}

/**
 * The adapter in `file`, loaded once per model (node-llama-cpp keeps it with the model and frees it
 * with the model).
 */
export async function loadNativeLora(model: LlamaModel, file: string): Promise<NativeLora> {
  const load = (model as unknown as { _getOrLoadLora?: (file: string) => Promise<NativeLora> })
    ._getOrLoadLora;
  if (typeof load !== "function") throw incompatible("LlamaModel._getOrLoadLora is missing");
  return load.call(model, file);
}
