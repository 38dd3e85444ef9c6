/**
 * The RAM prefix cache (PROMPT_CACHE_RAM_MB), after llama.cpp's server `--cache-ram`: copies of
 * sequences' KV cells kept in memory, keyed by the tokens they hold, least recently used first out.
 * A sequence about to be given to a request that keeps little of it is copied here first; a request
 * whose prompt starts with an entry's tokens gets those cells back instead of evaluating them again
 * (a copy of a few hundred MB takes tens of milliseconds; evaluating 20,000 tokens takes seconds).
 *
 * The copies are node-llama-cpp's sequence checkpoints (llama_state_seq_get_data), which restore into
 * the sequence id they were taken from, in any context of the same shape (sequences per context, KV
 * type): an entry is only offered to a free sequence of that id. With one context per sequence (small
 * models on a CPU) that is every free context.
 *
 * Written here because the policy (what to keep, which sequence restores it) is the batcher's and no
 * package holds llama.cpp sequence states.
 */
import type { Token } from "node-llama-cpp";
import type { NativeCheckpoint, NativeContext } from "./llama-native.js";

export interface PrefixEntry {
  /** The tokens the saved cells hold, positions 0… */
  readonly tokens: readonly Token[];
  /** Adapters (LoRA) the cells were computed with; "" for none. */
  readonly adapterKey: string;
  /** Contexts it restores into: same sequences per context and KV type. */
  readonly shape: string;
  readonly sequenceId: number;
  readonly bytes: number;
  /** A client's cache hint (prompt_cache_key, a cache_control breakpoint): kept ahead of others. */
  readonly hinted: boolean;
  lastUsed: number;
  readonly checkpoint: NativeCheckpoint;
}

export interface SaveRequest {
  /** node-llama-cpp's native context object itself (not a wrapper): the checkpoint reads it. */
  addonContext: NativeContext;
  sequenceId: number;
  tokens: readonly Token[];
  adapterKey: string;
  shape: string;
  hinted?: boolean;
}

export interface PrefixMatch {
  entry: PrefixEntry;
  /** Tokens of the prompt the entry holds. */
  length: number;
}

export interface PrefixCacheStats {
  entries: number;
  bytes: number;
  saves: number;
  restores: number;
  evictions: number;
}

/** Entries at most: lookups compare each entry with the prompt. */
const MAX_ENTRIES = 128;

export class PrefixCache {
  private readonly entries: PrefixEntry[] = [];
  private clock = 0;
  private total = 0;
  private readonly counters = { saves: 0, restores: 0, evictions: 0 };

  constructor(
    private readonly capacityBytes: number,
    private readonly createCheckpoint: () => NativeCheckpoint,
  ) {}

  stats(): PrefixCacheStats {
    return { entries: this.entries.length, bytes: this.total, ...this.counters };
  }

  /** Whether an entry already holds `tokens` (or more after them) for the same sequence and adapters. */
  covers(request: Omit<SaveRequest, "addonContext">): boolean {
    return this.entries.some(
      (entry) =>
        compatible(entry, request.adapterKey, request.shape) &&
        entry.sequenceId === request.sequenceId &&
        entry.tokens.length >= request.tokens.length &&
        commonPrefixLength(entry.tokens, request.tokens) === request.tokens.length,
    );
  }

  /**
   * Copies the sequence's cells into the cache, evicting least recently used entries to make room.
   * Resolves false when the copy does not fit at all or failed (the sequence itself is untouched).
   * Must not run while the context decodes.
   */
  async save(request: SaveRequest): Promise<boolean> {
    if (this.capacityBytes <= 0 || request.tokens.length === 0 || this.covers(request)) return false;
    const checkpoint = this.createCheckpoint();
    try {
      await checkpoint.init(request.addonContext, request.sequenceId);
    } catch {
      checkpoint.dispose();
      return false;
    }
    const bytes = checkpoint.size;
    // A checkpoint of other cells than the tokens say (never expected) would restore wrong state.
    if (bytes === 0 || bytes > this.capacityBytes || checkpoint.maxPos !== request.tokens.length - 1) {
      checkpoint.dispose();
      return false;
    }
    // Entries this one extends are dropped: it restores any prefix of its tokens.
    for (const entry of [...this.entries])
      if (
        compatible(entry, request.adapterKey, request.shape) &&
        entry.sequenceId === request.sequenceId &&
        entry.tokens.length <= request.tokens.length &&
        commonPrefixLength(entry.tokens, request.tokens) === entry.tokens.length
      )
        this.drop(entry);
    while (
      this.entries.length > 0 &&
      (this.total + bytes > this.capacityBytes || this.entries.length >= MAX_ENTRIES)
    )
      this.evictOne();
    this.entries.push({
      tokens: [...request.tokens],
      adapterKey: request.adapterKey,
      shape: request.shape,
      sequenceId: request.sequenceId,
      bytes,
      hinted: request.hinted ?? false,
      lastUsed: ++this.clock,
      checkpoint,
    });
    this.total += bytes;
    this.counters.saves++;
    return true;
  }

  /**
   * The entry holding the longest prefix of `tokens` among those that restore into one of
   * `sequenceIds`, or undefined.
   */
  find(
    tokens: readonly Token[],
    adapterKey: string,
    shape: string,
    sequenceIds: ReadonlySet<number>,
  ): PrefixMatch | undefined {
    let best: PrefixMatch | undefined;
    for (const entry of this.entries) {
      if (!compatible(entry, adapterKey, shape) || !sequenceIds.has(entry.sequenceId)) continue;
      const length = commonPrefixLength(entry.tokens, tokens);
      if (length > (best?.length ?? 0)) best = { entry, length };
    }
    return best;
  }

  /**
   * Writes `length` tokens of the entry back into its sequence of `context` (the native object).
   * False when llama.cpp could not (the sequence must then be disposed).
   */
  async restore(match: PrefixMatch, context: NativeContext): Promise<boolean> {
    const { entry, length } = match;
    if (!this.entries.includes(entry)) return false;
    entry.lastUsed = ++this.clock;
    const restored = await context.restoreCheckpoint(entry.checkpoint, length - 1);
    if (restored) this.counters.restores++;
    return restored;
  }

  /** Frees every entry (the model is unloading). */
  clear(): void {
    for (const entry of [...this.entries]) this.drop(entry);
  }

  /** Unhinted entries first, least recently used first. */
  private evictOne(): void {
    let victim = this.entries[0]!;
    for (const entry of this.entries)
      if (
        Number(entry.hinted) < Number(victim.hinted) ||
        (entry.hinted === victim.hinted && entry.lastUsed < victim.lastUsed)
      )
        victim = entry;
    this.drop(victim);
    this.counters.evictions++;
  }

  private drop(entry: PrefixEntry): void {
    const at = this.entries.indexOf(entry);
    if (at === -1) return;
    this.entries.splice(at, 1);
    this.total -= entry.bytes;
    entry.checkpoint.dispose();
  }
}

function compatible(entry: PrefixEntry, adapterKey: string, shape: string): boolean {
  return entry.adapterKey === adapterKey && entry.shape === shape;
}

export function commonPrefixLength(a: readonly Token[], b: readonly Token[]): number {
  const limit = Math.min(a.length, b.length);
  let i = 0;
  while (i < limit && a[i] === b[i]) i++;
  return i;
}
