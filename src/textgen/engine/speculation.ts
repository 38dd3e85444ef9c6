/**
 * Draft tokens for speculative decoding inside the continuous batcher (batcher.ts). Each step a
 * generating sequence decodes its next token followed by a few guessed ones; the target model's
 * logits at every position then say which guesses it would have produced itself (batcher.ts samples
 * position after position with the request's own sampler and stops at the first token that differs
 * from the guess). Every token of the answer is thus drawn from the target model exactly as plain
 * decoding draws it: greedy answers are identical, sampled ones come from the same distribution (and
 * with the same seed, the same tokens), whatever the guesses were. Good guesses save steps: llama.cpp
 * decodes k+1 tokens of a sequence in about the time of one when the weights, not the arithmetic, are
 * the bound.
 *
 * Two sources of guesses, as llama.cpp's server has them:
 *  - prompt lookup (`SPECULATIVE=ngram`): the tokens that followed the last occurrence of the
 *    sequence's last 2–4 tokens earlier in its prompt or answer; strong when an answer copies its
 *    context (RAG answers, code edits), free otherwise;
 *  - a draft model (`DRAFT_MODEL_PATH`, a preset's `draft`): a small model with the same vocabulary
 *    writes the guesses greedily in a context of its own (one sequence per target sequence, batched
 *    together), until it is less sure than `minConfidence` of its next token (llama.cpp's
 *    `--draft-p-min`).
 */
import type { Token } from "node-llama-cpp";
import type { NativeContext, NativeSampler } from "./llama-native.js";

export interface DraftRequest {
  sequenceId: number;
  /** The request: while it is the same, its history only grows (a draft model compares the tail only). */
  owner: object;
  /** What the target's cells hold; `next` is the token this step decodes: the guesses continue it. */
  cells: readonly Token[];
  next: Token;
  /** Guesses wanted at most. */
  max: number;
  /** The request's own n-gram index (prompt lookup keeps one per request). */
  ngram: NgramIndex;
}

export interface Speculator {
  /** Guesses for each request, in order (an empty list: none this step). */
  propose(requests: readonly DraftRequest[]): Promise<Token[][]>;
  close(): Promise<void>;
}

const NGRAM_MAX = 4;
const NGRAM_MIN = 2;

/**
 * Where each n-gram (n = 2…4) of a sequence last ended, filled as the sequence grows: a lookup is a
 * map access, not a scan of the prompt.
 */
export class NgramIndex {
  private indexed = 0;
  private readonly ends = Array.from({ length: NGRAM_MAX + 1 }, () => new Map<string, number>());

  /**
   * The tokens that followed the latest earlier occurrence of the longest matching suffix of the
   * history (`cells`, then `next`).
   */
  propose(cells: readonly Token[], next: Token, max: number): Token[] {
    const history = new History(cells, next);
    const end = history.length - 1;
    if (end < NGRAM_MIN || max <= 0) return [];
    // Every end before the last one is indexed; the last one is what is looked up.
    for (; this.indexed < end; this.indexed++)
      for (let n = NGRAM_MIN; n <= NGRAM_MAX; n++)
        if (this.indexed >= n - 1) this.ends[n]!.set(key(history, this.indexed, n), this.indexed);
    for (let n = Math.min(NGRAM_MAX, end + 1); n >= NGRAM_MIN; n--) {
      const at = this.ends[n]!.get(key(history, end, n));
      if (at !== undefined) return history.slice(at + 1, Math.min(at + 1 + max, end + 1));
    }
    return [];
  }
}

/** A sequence's tokens then the one decoded next, read without copying the sequence. */
class History {
  readonly length: number;
  constructor(
    private readonly cells: readonly Token[],
    private readonly next: Token,
  ) {
    this.length = cells.length + 1;
  }
  at(i: number): Token {
    return i === this.cells.length ? this.next : this.cells[i]!;
  }
  slice(start: number, end: number): Token[] {
    const out: Token[] = [];
    for (let i = start; i < end; i++) out.push(this.at(i));
    return out;
  }
}

function key(tokens: History, end: number, n: number): string {
  let text = String(tokens.at(end - n + 1));
  for (let i = end - n + 2; i <= end; i++) text += `,${tokens.at(i)}`;
  return text;
}

/** Prompt lookup: no model, no state beyond each request's index. */
export class NgramSpeculator implements Speculator {
  propose(requests: readonly DraftRequest[]): Promise<Token[][]> {
    return Promise.resolve(
      requests.map((request) => request.ngram.propose(request.cells, request.next, request.max)),
    );
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

export interface DraftModelOptions {
  /** The draft model's context, with as many sequences as the target context. */
  native: NativeContext;
  /** A sampler of the draft model (greedy: its config is set here). */
  createSampler: () => NativeSampler;
  isEogToken: (token: Token) => boolean;
  sequences: number;
  batchSize: number;
  /** A guess is kept only when the draft model gave it at least this probability. */
  minConfidence: number;
}

/**
 * A draft model's guesses. Its cells per sequence follow the target's history: what differs from it
 * (rejected guesses, another request) is dropped, what is missing (the prompt, accepted tokens) is
 * evaluated first, then up to `max` tokens are drawn greedily, all sequences in one batch per token.
 */
export class DraftModelSpeculator implements Speculator {
  private readonly cells: Token[][];
  private readonly samplers: NativeSampler[];
  /** Per sequence: the request its cells were last synced with, and how many matched its history. */
  private readonly owners: (object | undefined)[];
  private readonly matched: number[];

  constructor(private readonly options: DraftModelOptions) {
    this.cells = Array.from({ length: options.sequences }, () => []);
    this.owners = Array.from({ length: options.sequences }, () => undefined);
    this.matched = Array.from({ length: options.sequences }, () => 0);
    this.samplers = Array.from({ length: options.sequences }, () => {
      const sampler = options.createSampler();
      sampler.applyConfig({ temperature: 0, topK: 1, topP: 1, minP: 0, seed: 0 });
      return sampler;
    });
  }

  async propose(requests: readonly DraftRequest[]): Promise<Token[][]> {
    try {
      return await this.draft(requests);
    } catch {
      // A failed draft decode leaves the draft cells unknown: they are dropped, and this step goes
      // on without guesses (the answer never depends on them).
      this.cells.forEach((cells, sequenceId) => {
        this.options.native.disposeSequence(sequenceId);
        cells.length = 0;
        this.owners[sequenceId] = undefined;
      });
      return requests.map(() => []);
    }
  }

  private async draft(requests: readonly DraftRequest[]): Promise<Token[][]> {
    const drafts = requests.map((): Token[] => []);
    const pending = requests.map((request) => this.sync(request));
    await this.catchUp(requests, pending);
    for (const request of requests) this.matched[request.sequenceId] = request.cells.length;
    // The last pending token of each gives the first guess's logits; each guess then the next one's.
    let active = requests.map((_, i) => i).filter((i) => requests[i]!.max > 0);
    let inputs = active.map((i) => pending[i]!.at(-1)!);
    while (active.length > 0) {
      const { native } = this.options;
      native.initBatch(active.length);
      const logitIndexes = active.map((i, k) => {
        const request = requests[i]!;
        const cells = this.cells[request.sequenceId]!;
        const [index] = native.addToBatch(
          request.sequenceId,
          cells.length,
          Uint32Array.of(inputs[k]!),
          Uint32Array.of(0),
        );
        cells.push(inputs[k]!);
        return index!;
      });
      await native.decodeBatch();
      const sampled = await Promise.all(
        active.map((i, k) =>
          native.sampleToken(logitIndexes[k]!, this.samplers[requests[i]!.sequenceId]!, false, true),
        ),
      );
      const next: number[] = [];
      const nextInputs: Token[] = [];
      active.forEach((i, k) => {
        const [token, , confidence] = sampled[k]!;
        if (token === -1 || (confidence ?? 1) < this.options.minConfidence) return;
        drafts[i]!.push(token);
        // A guess past the end of the answer is never needed.
        if (drafts[i]!.length < requests[i]!.max && !this.options.isEogToken(token)) {
          next.push(i);
          nextInputs.push(token);
        }
      });
      active = next;
      inputs = nextInputs;
    }
    return drafts;
  }

  async close(): Promise<void> {
    for (const sampler of this.samplers) sampler.dispose();
    return Promise.resolve();
  }

  /**
   * Drops the cells that differ from the request's history; returns the history's tokens still to
   * evaluate (at least its last one, whose logits the first guess needs). For the same request only
   * the tail past what matched last time is compared: the history only grows.
   */
  private sync(request: DraftRequest): Token[] {
    const { sequenceId } = request;
    const cells = this.cells[sequenceId]!;
    const historyLength = request.cells.length + 1;
    const at = (i: number) => (i === request.cells.length ? request.next : request.cells[i]!);
    let keep =
      this.owners[sequenceId] === request.owner ? Math.min(this.matched[sequenceId]!, cells.length) : 0;
    const limit = Math.min(cells.length, historyLength);
    while (keep < limit && cells[keep] === at(keep)) keep++;
    if (keep === historyLength) keep--;
    if (keep < cells.length) {
      if (keep <= 0 || !this.options.native.removeTokenCellsFromSequence(sequenceId, keep, -1)) {
        this.options.native.disposeSequence(sequenceId);
        keep = 0;
      }
      cells.length = keep;
    }
    this.owners[sequenceId] = request.owner;
    // Cells written from here on are the history's or guesses; only the history's are known to match.
    this.matched[sequenceId] = keep;
    const pending: Token[] = [];
    for (let i = keep; i < historyLength; i++) pending.push(at(i));
    return pending;
  }

  /** Evaluates every pending token but the last, in batches, without logits. */
  private async catchUp(requests: readonly DraftRequest[], pending: Token[][]): Promise<void> {
    const { native, batchSize } = this.options;
    const offsets = pending.map(() => 0);
    for (;;) {
      let room = batchSize;
      const planned: [number, Token[]][] = [];
      pending.forEach((tokens, i) => {
        const left = tokens.length - 1 - offsets[i]!;
        if (left <= 0 || room === 0) return;
        const count = Math.min(left, room);
        planned.push([i, tokens.slice(offsets[i], offsets[i]! + count)]);
        offsets[i]! += count;
        room -= count;
      });
      if (planned.length === 0) return;
      native.initBatch(batchSize - room);
      for (const [i, tokens] of planned) {
        const request = requests[i]!;
        const cells = this.cells[request.sequenceId]!;
        native.addToBatch(request.sequenceId, cells.length, Uint32Array.from(tokens), new Uint32Array(0));
        for (const token of tokens) cells.push(token);
      }
      await native.decodeBatch();
    }
  }
}
