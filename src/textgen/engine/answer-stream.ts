/**
 * Turns the text a local model generates into the parts of its answer, as they come: reasoning split
 * off (reasoning.ts), a forced tool call followed as it is written (tool-calls.ts ForcedCallStream),
 * an `auto` answer's text streamed until it may be a call and read for calls once complete. Every part
 * goes out through one EventWriter, so the result is what was streamed: the only place where text held
 * back is reconciled with the finished answer is `finish` here.
 */
import type { ChatWrapper } from "node-llama-cpp";
import type { EventWriter } from "./events.js";
import type { CompletionResult, FinishReason, TokenLogprob, ToolDefinition } from "./generator.js";
import { ReasoningSplitter, type ReasoningMarkers } from "./reasoning.js";
import { AutoCallHoldback, ForcedCallStream, parseAutoCalls } from "./tool-calls.js";

export interface AnswerShape {
  /** "forced": the answer is one call under a grammar; "auto": calls are looked for in the text. */
  tools: "none" | "auto" | "forced";
  /** The tools offered (auto: which names a call may have). */
  toolDefinitions: readonly ToolDefinition[];
  /** A forced call's tool when there is only one (a call cut before its name still has one). */
  forcedName?: string;
  /** Split reasoning off with these markers (undefined: everything is answer). */
  reasoning?: ReasoningMarkers & { startsInside: boolean };
  /** Reasoning tokens at most before the thought block is closed (see `budgetSpent`). */
  thinkingBudget?: number;
  /** The grammar's trailing whitespace is not part of the answer: held until more text follows. */
  trimTrailingWhitespace: boolean;
  wrapper: ChatWrapper;
}

export interface GeneratedTotals {
  finish: "length" | "stop" | "abort";
  promptTokens: number;
  tokensGenerated: number;
  cachedTokens: number;
  truncatedTokens: number;
  draftTokens?: { proposed: number; accepted: number };
  logprobs?: TokenLogprob[];
}

export class AnswerStream {
  private readonly writer: EventWriter;
  private readonly splitter?: ReasoningSplitter;
  private readonly forced?: ForcedCallStream;
  private readonly auto?: AutoCallHoldback;
  /** The answer's text (reasoning split off) as generated: what an auto answer is read from. */
  private answer = "";
  /** Trailing whitespace not yet passed on (trimTrailingWhitespace). */
  private heldSpace = "";
  private reasoningTokens = 0;

  constructor(
    private readonly shape: AnswerShape,
    writer: EventWriter,
  ) {
    this.writer = writer;
    if (shape.tools === "forced")
      this.forced = new ForcedCallStream((delta) => {
        if (delta.id !== undefined) writer.toolCallStart(delta.id, delta.name ?? "");
        writer.toolCallDelta(delta.arguments);
      });
    if (shape.tools === "auto")
      this.auto = new AutoCallHoldback(shape.wrapper, (piece) => writer.text(piece));
    if (shape.reasoning && shape.tools !== "forced")
      this.splitter = new ReasoningSplitter(
        shape.reasoning,
        shape.reasoning.startsInside,
        (piece) => writer.reasoningText(piece),
        (piece) => this.answerPiece(piece),
      );
  }

  /** A piece of generated text, in order. */
  push(piece: string): void {
    if (this.splitter) this.splitter.push(piece);
    else this.answerPiece(piece);
  }

  logprob(entry: TokenLogprob): void {
    this.writer.logprob(entry);
  }

  /** Counts generated tokens; true once the thinking budget is spent while still reasoning. */
  countTokens(count: number): boolean {
    if (!this.splitter?.inReasoning || this.shape.thinkingBudget === undefined) return false;
    this.reasoningTokens += count;
    return this.reasoningTokens >= this.shape.thinkingBudget;
  }

  /** Closes the thought block (budget spent); returns the text that closes it in the prompt. */
  closeReasoning(): string {
    return this.splitter?.closeReasoning() ?? "";
  }

  private answerPiece(piece: string): void {
    this.answer += piece;
    if (this.forced) this.forced.push(piece);
    else if (this.auto) this.auto.push(piece);
    else if (this.shape.trimTrailingWhitespace) {
      const text = this.heldSpace + piece;
      const kept = text.trimEnd();
      this.heldSpace = text.slice(kept.length);
      this.writer.text(kept);
    } else this.writer.text(piece);
  }

  /** The end: what was held back goes out (or becomes calls), then `finish`. */
  finish(totals: GeneratedTotals): CompletionResult {
    this.splitter?.finish();
    let finishReason: FinishReason = totals.finish === "stop" ? "stop" : "length";
    if (this.forced) finishReason = this.finishForced(finishReason);
    else if (this.auto) {
      const parsed = parseAutoCalls(this.answer, this.shape.wrapper, this.shape.toolDefinitions);
      const released = this.auto.released;
      const content = parsed ? parsed.content : this.answer;
      // What was streamed stays; the rest of the text follows it (a call's surroundings, trimmed).
      if (content.startsWith(released)) this.writer.text(content.slice(released.length));
      for (const call of parsed?.calls ?? []) this.writer.toolCall(call);
      if (parsed) finishReason = "tool_calls";
    }
    return this.writer.finish({
      finishReason,
      promptTokens: totals.promptTokens,
      tokensGenerated: totals.tokensGenerated,
      cachedTokens: totals.cachedTokens,
      truncatedTokens: totals.truncatedTokens,
      draftTokens: totals.draftTokens,
      logprobs: totals.logprobs,
    });
  }

  /** A forced answer is a call, even one cut by max_tokens (its arguments as far as written). */
  private finishForced(finishReason: FinishReason): FinishReason {
    const forced = this.forced!;
    const call = forced.call();
    if (call) {
      this.writer.toolCallEnd(call.arguments);
      return "tool_calls";
    }
    const partial = forced.partialCall(this.shape.forcedName);
    if (!partial) {
      // Not even a name: the text as it stands (a model that could not start the call).
      this.writer.text(this.answer);
      return finishReason;
    }
    if (forced.started) this.writer.toolCallEnd(partial.arguments);
    else this.writer.toolCall(partial);
    return "length";
  }
}
