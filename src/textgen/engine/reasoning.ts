/**
 * Reasoning ("thinking") separated from the answer, as the llama.cpp server's `reasoning_format`
 * does it: a model whose chat template reasons writes `<think>…</think>` before its answer (or starts
 * inside it, when the template opens the block in the prompt). The markers come from node-llama-cpp's
 * chat wrapper (its thought segment) or, failing that, from the template text.
 */
export interface ReasoningMarkers {
  open: string;
  close: string;
}

/** Splits streamed text into reasoning and answer pieces; `finish()` flushes what was held back. */
export class ReasoningSplitter {
  reasoning = "";
  answer = "";
  private state: "start" | "reasoning" | "answer";
  private pending = "";
  /** Whitespace right after the closing marker is not part of the answer. */
  private trimAnswerStart = false;

  constructor(
    private readonly markers: ReasoningMarkers,
    startsInside: boolean,
    private readonly onReasoning?: (piece: string) => void,
    private readonly onAnswer?: (piece: string) => void,
  ) {
    this.state = startsInside ? "reasoning" : "start";
  }

  push(piece: string): void {
    this.pending += piece;
    if (this.state === "start") {
      const trimmed = this.pending.trimStart();
      if (trimmed === "" || (this.markers.open.startsWith(trimmed) && trimmed !== this.markers.open)) return;
      if (trimmed.startsWith(this.markers.open)) {
        this.state = "reasoning";
        this.pending = trimmed.slice(this.markers.open.length);
      } else this.state = "answer";
    }
    if (this.state === "reasoning") {
      // Whitespace around the reasoning is the template's, not the model's thought.
      if (this.reasoning === "") this.pending = this.pending.replace(/^\s+/, "");
      const at = this.pending.indexOf(this.markers.close);
      if (at === -1) {
        // The closing marker, or whitespace before it, may be starting at the end: hold that back.
        let end = this.pending.length;
        for (let length = Math.min(this.markers.close.length - 1, end); length > 0; length--)
          if (this.pending.endsWith(this.markers.close.slice(0, length))) {
            end -= length;
            break;
          }
        while (end > 0 && /\s/.test(this.pending[end - 1]!)) end--;
        this.emitReasoning(this.pending.slice(0, end));
        this.pending = this.pending.slice(end);
        return;
      }
      this.emitReasoning(this.pending.slice(0, at).replace(/\s+$/, ""));
      this.pending = this.pending.slice(at + this.markers.close.length);
      this.state = "answer";
      this.trimAnswerStart = true;
    }
    this.emitAnswer();
  }

  /** Whether what comes next is (or may be) reasoning. */
  get inReasoning(): boolean {
    return this.state === "reasoning";
  }

  /**
   * Ends the reasoning here (a thinking budget spent): what is held is reasoning, and whatever is
   * pushed after this is answer. Returns the marker text that closes the block in the prompt.
   */
  closeReasoning(): string {
    if (this.state === "reasoning") this.emitReasoning(this.pending.replace(/\s+$/, ""));
    this.pending = "";
    this.state = "answer";
    this.trimAnswerStart = true;
    return `\n${this.markers.close}\n\n`;
  }

  finish(): void {
    if (this.state === "reasoning") this.emitReasoning(this.pending.replace(/\s+$/, ""));
    else {
      this.state = "answer";
      this.emitAnswer();
    }
    this.pending = "";
  }

  private emitAnswer(): void {
    if (this.trimAnswerStart) {
      this.pending = this.pending.replace(/^\s+/, "");
      if (this.pending === "") return;
      this.trimAnswerStart = false;
    }
    if (this.pending === "") return;
    this.answer += this.pending;
    this.onAnswer?.(this.pending);
    this.pending = "";
  }

  private emitReasoning(piece: string): void {
    if (piece === "") return;
    this.reasoning += piece;
    this.onReasoning?.(piece);
  }
}

/** Splits a whole text at once. */
export function splitReasoning(
  text: string,
  markers: ReasoningMarkers,
  startsInside: boolean,
): { reasoning: string; answer: string } {
  const splitter = new ReasoningSplitter(markers, startsInside);
  splitter.push(text);
  splitter.finish();
  return { reasoning: splitter.reasoning, answer: splitter.answer };
}
