/**
 * What llama-generator.ts adds to a model for #36, kept apart from its loading and prompting: the KV
 * cache's type, the draft model and the speculator of each context, the LoRA adapters and a request's
 * choice among them, and the prompt positions a request's cache hints ask to keep.
 */
import type { Llama, LlamaContext, LlamaModel, Token } from "node-llama-cpp";
import { badRequest } from "../../core/errors.js";
import type { AdapterSet } from "./batcher.js";
import { createNativeSampler, loadNativeLora, nativeContextOf, type NativeLora } from "./llama-native.js";
import type { KvCacheType, LoraAdapterSpec, LoraSelection, SpeculativeMode } from "./presets.js";
import { commonPrefixLength } from "./prefix-cache.js";
import { DraftModelSpeculator, NgramSpeculator, type Speculator } from "./speculation.js";

/** node-llama-cpp's context options for a KV cache of `type` (keys and values alike). */
export function kvCacheOptions(type: KvCacheType | undefined): {
  experimentalKvCacheKeyType?: "F16" | "Q8_0" | "Q4_0";
  experimentalKvCacheValueType?: "F16" | "Q8_0" | "Q4_0";
} {
  if (type === undefined || type === "f16") return {};
  const ggml = type === "q8_0" ? "Q8_0" : "Q4_0";
  return { experimentalKvCacheKeyType: ggml, experimentalKvCacheValueType: ggml };
}

export interface SpeculationSettings {
  mode: SpeculativeMode;
  /** The draft model's file (resolved), when there is one. */
  draftModelPath?: string;
  maxTokens: number;
  /** llama.cpp's --draft-p-min. */
  minConfidence?: number;
}

/** llama-server's default --draft-p-min: a guess the draft model is less sure of is not made. */
const DEFAULT_MIN_CONFIDENCE = 0.75;

/** Which speculator a model gets: "auto" means a draft model when one is named, else none. */
export function resolveSpeculation(settings: SpeculationSettings | undefined): "draft" | "ngram" | "off" {
  if (!settings) return "off";
  if (settings.mode === "auto") return settings.draftModelPath ? "draft" : "off";
  if (settings.mode === "draft" && !settings.draftModelPath)
    throw new Error("SPECULATIVE=draft needs a draft model: set DRAFT_MODEL_PATH or a preset's draft");
  return settings.mode;
}

/** A loaded draft model; `speculatorFor` gives each target context its own draft context. */
export interface DraftModel {
  model: LlamaModel;
  contexts: LlamaContext[];
  speculatorFor(target: LlamaContext, sequences: number, threads: number): Promise<Speculator>;
  dispose(): Promise<void>;
}

export async function loadDraftModel(
  llama: Llama,
  target: LlamaModel,
  settings: SpeculationSettings,
  flashAttention: boolean,
  kvCacheType: KvCacheType | undefined,
): Promise<DraftModel> {
  const model = await llama.loadModel({ modelPath: settings.draftModelPath! });
  const contexts: LlamaContext[] = [];
  const draft: DraftModel = {
    model,
    contexts,
    async speculatorFor(targetContext, sequences, threads) {
      const context = await model.createContext({
        contextSize: targetContext.contextSize,
        sequences,
        threads,
        flashAttention,
        ...kvCacheOptions(kvCacheType),
      });
      contexts.push(context);
      // Same vocabulary and special tokens, or the guesses would be other tokens than they look.
      const check = (
        nativeContextOf(targetContext) as unknown as {
          ensureDraftContextIsCompatibleForSpeculative?: (draft: unknown) => void;
        }
      ).ensureDraftContextIsCompatibleForSpeculative;
      check?.call(nativeContextOf(targetContext), nativeContextOf(context));
      return new DraftModelSpeculator({
        native: nativeContextOf(context),
        createSampler: () => createNativeSampler(llama, model),
        isEogToken: (token: Token) => target.isEogToken(token),
        sequences,
        batchSize: context.batchSize,
        minConfidence: settings.minConfidence ?? DEFAULT_MIN_CONFIDENCE,
      });
    },
    async dispose() {
      for (const context of contexts) await context.dispose();
      await model.dispose();
    },
  };
  return draft;
}

/** A speculator without a model (prompt lookup), or none. */
export function modelFreeSpeculator(mode: "draft" | "ngram" | "off"): Speculator | undefined {
  return mode === "ngram" ? new NgramSpeculator() : undefined;
}

export interface LoadedAdapters {
  specs: LoraAdapterSpec[];
  natives: NativeLora[];
}

export async function loadAdapters(
  model: LlamaModel,
  specs: LoraAdapterSpec[] | undefined,
): Promise<LoadedAdapters> {
  const list = specs ?? [];
  const natives: NativeLora[] = [];
  for (const spec of list) natives.push(await loadNativeLora(model, spec.path));
  return { specs: list, natives };
}

/**
 * The adapters a request runs with: the scales it names (others 0, as llama.cpp's server does), else
 * each adapter's default. Undefined when every scale is 0. An id the model does not have is a 400.
 */
export function adapterSetFor(
  loaded: LoadedAdapters,
  selection: LoraSelection | undefined,
): AdapterSet | undefined {
  const scales = loaded.specs.map((spec) => (selection ? 0 : spec.scale));
  for (const [index, { id, scale }] of (selection ?? []).entries()) {
    if (!Number.isInteger(id) || id < 0 || id >= loaded.specs.length)
      throw badRequest(
        loaded.specs.length === 0
          ? "lora: this model has no LoRA adapters (a preset's lora names them)"
          : `lora: no adapter ${id}; this model's adapter ids are 0…${loaded.specs.length - 1} (GET /lora-adapters)`,
        [{ path: `/lora/${index}/id` }],
      );
    if (!Number.isFinite(scale))
      throw badRequest("lora: scale must be a number", [{ path: `/lora/${index}/scale` }]);
    scales[id] = scale;
  }
  const used = scales.flatMap((scale, id) => (scale !== 0 ? [id] : []));
  if (used.length === 0) return undefined;
  return {
    key: used.map((id) => `${id}:${scales[id]}`).join(","),
    adapters: used.map((id) => loaded.natives[id]!),
    scales: used.map((id) => scales[id]!),
  };
}

/** Cache hints used per request at most (Anthropic allows 4 breakpoints). */
export const MAX_CACHE_PREFIXES = 4;

/**
 * Prompt lengths to save to the RAM prefix cache: where each hinted prefix, tokenized on its own, stops
 * agreeing with the whole prompt (a template may tokenize the boundary differently, so the shared part
 * is what is kept).
 */
export function savePrefixesOf(prompt: readonly Token[], prefixes: readonly Token[][]): number[] {
  return prefixes
    .slice(0, MAX_CACHE_PREFIXES)
    .map((tokens) => commonPrefixLength(tokens, prompt))
    .filter((length) => length > 0 && length < prompt.length);
}
