/**
 * Turns a stream of generated tokens into text pieces, and stops at a stop string or stop token
 * sequence. Pure: it is given the detokenizer, so it is tested alone.
 *
 * - A token that ends inside a multi-byte UTF-8 character detokenizes to U+FFFD; it is held until
 *   the character is complete (at most 4 tokens), so no piece ever carries a broken character.
 * - Text that could be the start of a stop string is held until it is known not to be one, so a
 *   stream never shows part of a stop string; the stop string and anything after it are dropped.
 */
import type { Token } from "node-llama-cpp";

export type Detokenize = (tokens: readonly Token[], lastTokens: readonly Token[]) => string;

export interface ResponseTextOptions {
  detokenize: Detokenize;
  /** Tokens before the response (the prompt's tail), so the first token's leading space is right. */
  context: readonly Token[];
  stopStrings: readonly string[];
  /** Token sequences that end the response (a chat template's special end markers). */
  stopTokenSequences?: readonly (readonly Token[])[];
}

const REPLACEMENT_CHARACTER = "\uFFFD";
/** A UTF-8 character spans at most 4 bytes, so at most 4 byte tokens. */
const MAX_HELD_TOKENS = 4;
/** Enough tokens before a piece for the detokenizer to place leading spaces correctly. */
const CONTEXT_TOKENS = 4;

export class ResponseText {
  /** Text released so far: never holds a stop string or part of one. */
  text = "";
  stopped = false;
  private readonly tokens: Token[] = [];
  private undecodedFrom = 0;
  /** Decoded text not yet released because it may begin a stop string. */
  private held = "";
  private readonly longestStop: number;

  constructor(private readonly options: ResponseTextOptions) {
    this.longestStop = Math.max(0, ...options.stopStrings.map((stop) => stop.length));
  }

  /** Adds one generated token; returns the text it releases ("" when held back or stopped). */
  push(token: Token): string {
    if (this.stopped) return "";
    this.tokens.push(token);
    const stopTokens = this.endingStopTokens();
    if (stopTokens > 0) {
      // The text before the stop tokens is final: release it (up to a stop string, if one is in it).
      const before = this.decode(this.tokens.length - stopTokens);
      this.stopped = true;
      const buffer = this.held + before;
      const stopAt = this.firstStopString(buffer);
      return this.release(stopAt === -1 ? buffer : buffer.slice(0, stopAt), 0);
    }
    // Tokens that may begin a stop token sequence wait until the sequence is decided.
    const decodeUntil = this.tokens.length - this.stopTokenPrefixLength();
    const undecoded = decodeUntil - this.undecodedFrom;
    if (undecoded <= 0) return "";
    const decoded = this.options.detokenize(
      this.tokens.slice(this.undecodedFrom, decodeUntil),
      this.lastTokensBefore(this.undecodedFrom),
    );
    if (decoded.endsWith(REPLACEMENT_CHARACTER) && undecoded < MAX_HELD_TOKENS) return "";
    this.undecodedFrom = decodeUntil;
    return this.addText(decoded);
  }

  /** Ends the response (length, end of generation or abort): releases whatever is held. */
  finish(): string {
    if (this.stopped) return "";
    const rest = this.held + this.decode(this.tokens.length);
    this.stopped = true;
    return this.release(rest, 0);
  }

  /** Detokenizes the undecoded tokens before `end`, whatever their state. */
  private decode(end: number): string {
    if (end <= this.undecodedFrom) return "";
    const text = this.options.detokenize(
      this.tokens.slice(this.undecodedFrom, end),
      this.lastTokensBefore(this.undecodedFrom),
    );
    this.undecodedFrom = end;
    return text;
  }

  private addText(decoded: string): string {
    const buffer = this.held + decoded;
    if (this.longestStop === 0) return this.release(buffer, 0);
    const stopAt = this.firstStopString(buffer);
    if (stopAt !== -1) {
      this.stopped = true;
      return this.release(buffer.slice(0, stopAt), 0);
    }
    return this.release(buffer, this.stopPrefixLength(buffer));
  }

  private firstStopString(buffer: string): number {
    let stopAt = -1;
    for (const stop of this.options.stopStrings) {
      if (stop === "") continue;
      const index = buffer.indexOf(stop);
      if (index !== -1 && (stopAt === -1 || index < stopAt)) stopAt = index;
    }
    return stopAt;
  }

  /** Releases all of `buffer` but its last `keep` characters, which stay held. */
  private release(buffer: string, keep: number): string {
    const piece = buffer.slice(0, buffer.length - keep);
    this.held = buffer.slice(buffer.length - keep);
    this.text += piece;
    return piece;
  }

  /** Length of the longest suffix of `buffer` that is a proper prefix of some stop string. */
  private stopPrefixLength(buffer: string): number {
    for (let length = Math.min(buffer.length, this.longestStop - 1); length > 0; length--) {
      const suffix = buffer.slice(buffer.length - length);
      if (this.options.stopStrings.some((stop) => stop.length > length && stop.startsWith(suffix)))
        return length;
    }
    return 0;
  }

  /** Length of the stop token sequence the tokens end with, or 0. */
  private endingStopTokens(): number {
    for (const sequence of this.options.stopTokenSequences ?? [])
      if (sequence.length > 0 && this.tokensEndWith(sequence, sequence.length)) return sequence.length;
    return 0;
  }

  /** Length of the longest token suffix that is a proper prefix of a stop token sequence. */
  private stopTokenPrefixLength(): number {
    let longest = 0;
    for (const sequence of this.options.stopTokenSequences ?? [])
      for (let length = Math.min(sequence.length - 1, this.tokens.length); length > longest; length--)
        if (this.tokensEndWith(sequence, length)) {
          longest = length;
          break;
        }
    return longest;
  }

  /** Whether the tokens end with the first `length` tokens of `sequence`. */
  private tokensEndWith(sequence: readonly Token[], length: number): boolean {
    const offset = this.tokens.length - length;
    if (offset < 0) return false;
    for (let i = 0; i < length; i++) if (this.tokens[offset + i] !== sequence[i]) return false;
    return true;
  }

  private lastTokensBefore(index: number): readonly Token[] {
    if (index >= CONTEXT_TOKENS) return this.tokens.slice(index - CONTEXT_TOKENS, index);
    const fromContext = this.options.context.slice(
      Math.max(0, this.options.context.length - (CONTEXT_TOKENS - index)),
    );
    return [...fromContext, ...this.tokens.slice(0, index)];
  }
}
