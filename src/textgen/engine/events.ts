/**
 * One generation as a stream of delimited parts, the way the AI SDK's stream parts are: a part opens
 * (`text-start`), grows (`text-delta`), closes (`text-end`); reasoning and each tool call likewise; then
 * `finish` with the usage. Every dialect encodes these and nothing else, so what a client was streamed
 * and what a non-streamed client gets are the same answer by construction: the `CompletionResult` is
 * assembled here from the very events that were emitted (EventWriter), never reconciled afterwards.
 *
 * Generators write through an EventWriter; the service adds `start` (the prompt counted, a sequence
 * held) before the generator runs.
 */
import type {
  CompletionResult,
  EventListener,
  FinishReason,
  GenerationEvent,
  TokenLogprob,
  ToolCall,
} from "./generator.js";

export type { EventListener, GenerationEvent, Usage } from "./generator.js";

/** What a generator knows at its end, besides the parts it wrote. */
export interface FinishInfo {
  finishReason: FinishReason;
  promptTokens: number;
  tokensGenerated: number;
  cachedTokens?: number;
  truncatedTokens?: number;
  /** Speculative decoding's guesses and those the model agreed with. */
  draftTokens?: { proposed: number; accepted: number };
  /** Every generated token's logprobs (when asked for). */
  logprobs?: TokenLogprob[];
}

type Open = { kind: "text" } | { kind: "reasoning" } | { kind: "tool"; index: number } | undefined;

/**
 * Writes a generation's parts in order, opening and closing each part as the kind of output changes,
 * and assembles the result from exactly what it wrote. A listener that throws (a closed socket) never
 * stops the generation: its error is swallowed here, the caller notices its client is gone.
 */
export class EventWriter {
  private open: Open;
  private answerText = "";
  private reasoning = "";
  private readonly calls: ToolCall[] = [];
  private readonly callArgs: string[] = [];
  private pendingLogprobs: TokenLogprob[] = [];
  private finished = false;

  constructor(private readonly listener?: EventListener) {}

  private emit(event: GenerationEvent): void {
    try {
      this.listener?.(event);
    } catch {
      // See the class comment.
    }
  }

  private close(): void {
    const open = this.open;
    this.open = undefined;
    if (open?.kind === "text") this.emit({ type: "text-end" });
    else if (open?.kind === "reasoning") this.emit({ type: "reasoning-end" });
    else if (open?.kind === "tool") {
      const call = this.calls[open.index]!;
      call.arguments = this.callArgs[open.index]!;
      this.emit({ type: "tool-call-end", index: open.index, ...call });
    }
  }

  /** Logprobs of a token whose text comes later (they ride on the next text delta). */
  logprob(entry: TokenLogprob): void {
    this.pendingLogprobs.push(entry);
  }

  /** The logprobs held for the next text delta (or the finish), if any; none are held after. */
  private takeLogprobs(): TokenLogprob[] | undefined {
    const held = this.pendingLogprobs.length > 0 ? this.pendingLogprobs : undefined;
    this.pendingLogprobs = [];
    return held;
  }

  /** Opens a text or reasoning part (closing whatever other part was open), unless it is open. */
  private enter(kind: "text" | "reasoning"): void {
    if (this.open?.kind === kind) return;
    this.close();
    this.open = { kind };
    this.emit({ type: kind === "text" ? "text-start" : "reasoning-start" });
  }

  text(delta: string): void {
    if (delta === "" || this.finished) return;
    this.enter("text");
    this.answerText += delta;
    const logprobs = this.takeLogprobs();
    this.emit({ type: "text-delta", delta, ...(logprobs && { logprobs }) });
  }

  reasoningText(delta: string): void {
    if (delta === "" || this.finished) return;
    this.enter("reasoning");
    this.reasoning += delta;
    this.emit({ type: "reasoning-delta", delta });
  }

  /** Opens a tool call (closing whatever part was open); returns its index. */
  toolCallStart(id: string, name: string): number {
    this.close();
    const index = this.calls.length;
    this.calls.push({ id, name, arguments: "" });
    this.callArgs.push("");
    this.open = { kind: "tool", index };
    this.emit({ type: "tool-call-start", index, id, name });
    return index;
  }

  /** More of the open call's arguments text. */
  toolCallDelta(delta: string): void {
    if (delta === "" || this.open?.kind !== "tool") return;
    this.callArgs[this.open.index] += delta;
    this.emit({ type: "tool-call-delta", index: this.open.index, delta });
  }

  /**
   * Closes the open call. `finalArguments`, when given, is what the arguments are (a streamed call
   * whose text went on past them); the rest of it is sent as a last delta when it continues what was
   * sent, and it replaces it otherwise (the end event carries the whole text either way).
   */
  toolCallEnd(finalArguments?: string): void {
    if (this.open?.kind !== "tool") return;
    const index = this.open.index;
    const sent = this.callArgs[index]!;
    if (finalArguments !== undefined && finalArguments !== sent) {
      if (finalArguments.startsWith(sent)) this.toolCallDelta(finalArguments.slice(sent.length));
      else this.callArgs[index] = finalArguments;
    }
    this.close();
  }

  /** A whole call at once (found in an answer once it was complete). */
  toolCall(call: ToolCall): void {
    this.toolCallStart(call.id, call.name);
    this.toolCallDelta(call.arguments);
    this.toolCallEnd(call.arguments);
  }

  /** The text written so far (what a client has been streamed). */
  get writtenText(): string {
    return this.answerText;
  }

  /** Closes the open part, emits `finish`, and returns the result assembled from what was written. */
  finish(info: FinishInfo): CompletionResult {
    this.close();
    this.finished = true;
    const result: CompletionResult = {
      text: this.answerText,
      tokensGenerated: info.tokensGenerated,
      promptTokens: info.promptTokens,
      finishReason: info.finishReason,
      cachedTokens: info.cachedTokens ?? 0,
      truncatedTokens: info.truncatedTokens ?? 0,
      ...(this.calls.length > 0 && { toolCalls: this.calls.map((call) => ({ ...call })) }),
      ...(this.reasoning !== "" && { reasoning: this.reasoning }),
      ...(info.logprobs && { logprobs: info.logprobs }),
      ...(info.draftTokens && { draftTokens: info.draftTokens }),
    };
    const held = this.takeLogprobs();
    this.emit({
      type: "finish",
      finishReason: info.finishReason,
      usage: {
        promptTokens: info.promptTokens,
        completionTokens: info.tokensGenerated,
        cachedTokens: info.cachedTokens ?? 0,
      },
      result,
      ...(held && { logprobs: held }),
    });
    return result;
  }
}

/** A listener that only wants the answer's text as it comes (the RAG app, the CLI). */
export function onTextDeltas(onText: ((piece: string) => void) | undefined): EventListener | undefined {
  if (!onText) return undefined;
  return (event) => {
    if (event.type === "text-delta") onText(event.delta);
  };
}
