/**
 * How much context each request gets, and how many run at once. Given LLAMA_CONTEXT_SIZE (or a
 * preset's `ctx-size`), the total is shared by the parallel sequences as llama-server's `-c` is.
 * Without it, the context is sized to the work: each sequence gets DEFAULT_CONTEXT_PER_SEQUENCE
 * tokens (or the model's trained context when that is smaller), as Ollama gives each request 4k-8k;
 * a RAG answer's sources and question need a few thousand tokens, which a 4096-token context shared
 * by four sequences (1,024 each) never held. When memory would not hold that many sequences at that
 * size, fewer run at once; only when not even one would fit is the context itself made smaller.
 */
import type { Config } from "../../core/config.js";
import type { GgufSummary } from "./gguf-check.js";
import type { ModelEntry } from "./presets.js";

/** Tokens each sequence gets by default (capped by the model's trained context). */
export const DEFAULT_CONTEXT_PER_SEQUENCE = 8192;
/** The smallest context llama.cpp is given (its KV cache is padded to 256 cells). */
export const MIN_CONTEXT_PER_SEQUENCE = 256;
/**
 * Share of the free memory the contexts may take. The rest stays for the compute buffers llama.cpp
 * sizes per decode, the other models of the registry, and the process itself.
 */
export const MEMORY_SHARE = 0.75;

export interface ContextRequest {
  /** The model's trained context (GGUF `<arch>.context_length`); 0 when the file does not say. */
  trainContextSize: number;
  /** LLAMA_CONTEXT_SIZE or the preset's `ctx-size`: total tokens over every sequence; null: sized here. */
  configuredTotal: number | null;
  /** MAX_CONCURRENT or the preset's `parallel`. */
  sequences: number;
}

export interface ContextPlan {
  /** Tokens one request (prompt plus answer) may hold. */
  perSequence: number;
  /** Requests that run at once (at most the requested MAX_CONCURRENT). */
  sequences: number;
  /** "configured": from LLAMA_CONTEXT_SIZE / ctx-size; "auto": sized from the model and memory. */
  source: "configured" | "auto";
  /** Why `sequences` or `perSequence` is less than asked for; absent when nothing was cut. */
  limitedBy?: string;
}

/**
 * Bytes the contexts of `sequences` sequences of `perSequence` tokens take (node-llama-cpp's
 * estimate, from the model's layers, KV heads and head size, plus llama.cpp's compute buffers).
 */
export type ContextMemoryEstimate = (perSequence: number, sequences: number) => Promise<number>;

export async function planContext(
  request: ContextRequest,
  estimate: ContextMemoryEstimate,
  /** Bytes free for the contexts (RAM on a CPU, VRAM on a GPU); null: unknown, no check. */
  freeBytes: number | null,
): Promise<ContextPlan> {
  const trained = request.trainContextSize > 0 ? request.trainContextSize : Number.POSITIVE_INFINITY;
  if (request.configuredTotal !== null) {
    const share = Math.floor(request.configuredTotal / request.sequences);
    return {
      perSequence: Math.min(Math.max(MIN_CONTEXT_PER_SEQUENCE, share), trained),
      sequences: request.sequences,
      source: "configured",
    };
  }
  const wanted = Math.max(MIN_CONTEXT_PER_SEQUENCE, Math.min(DEFAULT_CONTEXT_PER_SEQUENCE, trained));
  if (freeBytes === null) return { perSequence: wanted, sequences: request.sequences, source: "auto" };
  const budget = freeBytes * MEMORY_SHARE;
  const fits = async (perSequence: number, sequences: number) =>
    (await estimate(perSequence, sequences)) <= budget;
  const mib = (bytes: number) => `${Math.round(bytes / 1024 ** 2)} MiB`;
  if (await fits(wanted, request.sequences))
    return { perSequence: wanted, sequences: request.sequences, source: "auto" };
  // Fewer sequences first: each request keeps its context. The estimate grows with the count, so
  // the largest count that fits is found by halving the interval.
  let low = 1;
  let high = request.sequences - 1;
  let best = 0;
  while (low <= high) {
    const middle = Math.floor((low + high) / 2);
    if (await fits(wanted, middle)) {
      best = middle;
      low = middle + 1;
    } else high = middle - 1;
  }
  if (best > 0)
    return {
      perSequence: wanted,
      sequences: best,
      source: "auto",
      limitedBy: `memory: ${request.sequences} sequences of ${wanted} tokens need more than the ${mib(budget)} allowed (${Math.round(MEMORY_SHARE * 100)}% of ${mib(freeBytes)} free)`,
    };
  // Not even one: the largest context (a multiple of 256) one sequence can have.
  let perSequence = wanted;
  while (perSequence > MIN_CONTEXT_PER_SEQUENCE && !(await fits(perSequence, 1)))
    perSequence = Math.max(MIN_CONTEXT_PER_SEQUENCE, Math.floor(perSequence / 2 / 256) * 256);
  return {
    perSequence,
    sequences: 1,
    source: "auto",
    limitedBy: `memory: one sequence of ${wanted} tokens needs more than the ${mib(budget)} allowed (${Math.round(MEMORY_SHARE * 100)}% of ${mib(freeBytes)} free)`,
  };
}

/**
 * Tokens of KV cache the plan would hold over every sequence, before memory is looked at: what the
 * registry counts a model's memory by before it loads.
 */
export function plannedTokens(request: ContextRequest): number {
  const trained = request.trainContextSize > 0 ? request.trainContextSize : Number.POSITIVE_INFINITY;
  const perSequence =
    request.configuredTotal === null
      ? Math.max(MIN_CONTEXT_PER_SEQUENCE, Math.min(DEFAULT_CONTEXT_PER_SEQUENCE, trained))
      : Math.min(
          Math.max(MIN_CONTEXT_PER_SEQUENCE, Math.floor(request.configuredTotal / request.sequences)),
          trained,
        );
  return perSequence * request.sequences;
}

/** The start-up words for a plan: "8192 tokens per request × 4 at once (…)". */
export function describePlan(plan: ContextPlan, requestedSequences: number): string {
  const how =
    plan.source === "configured"
      ? "LLAMA_CONTEXT_SIZE shared by MAX_CONCURRENT"
      : "sized from the model; LLAMA_CONTEXT_SIZE overrides";
  const cut =
    plan.sequences < requestedSequences
      ? `; MAX_CONCURRENT lowered from ${requestedSequences} (${plan.limitedBy})`
      : plan.limitedBy
        ? `; ${plan.limitedBy}`
        : "";
  return `context ${plan.perSequence} tokens per request × ${plan.sequences} at once (${how}${cut})`;
}

/**
 * Tokens of KV cache a model holds once loaded, for the registry's memory estimate: a generation
 * model's planned context over all its sequences (before free memory may lower it), an embedding
 * model's or reranker's one context.
 */
export function contextTokensOf(config: Config, entry: ModelEntry, summary: GgufSummary): number {
  if ((entry.roles ?? summary.roles).includes("generate"))
    return plannedTokens({
      trainContextSize: summary.trainContextSize,
      configuredTotal: entry.settings.contextSize ?? config.textgen.llamaContextSize,
      sequences: entry.settings.parallel ?? config.textgen.maxConcurrent,
    });
  const size = entry.settings.contextSize ?? config.models.embeddingContextSize;
  return summary.trainContextSize > 0 ? Math.min(size, summary.trainContextSize) : size;
}
