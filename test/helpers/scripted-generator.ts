/**
 * A real Generator that plays a script instead of running a model: reasoning, text and tool calls in
 * pieces, a length stop, a failure. It writes through the same EventWriter as the llama.cpp backend,
 * so the dialects' encoders see exactly what a model's answer gives them, with every output known in
 * advance. The script is picked by the last user message (or the prompt): `script:<name>`.
 */
import { DomainError } from "../../src/core/errors.js";
import { EventWriter, type EventListener } from "../../src/textgen/engine/events.js";
import {
  isChatRequest,
  type CompletionResult,
  type GenerationRequest,
  type Generator,
  type GeneratorStatus,
} from "../../src/textgen/engine/generator.js";

export type ScriptStep =
  | { reasoning: string }
  | { text: string }
  | { toolCall: { name: string; arguments: string } }
  /** Fails here (after what came before was streamed). */
  | { fail: DomainError };

export interface Script {
  steps: ScriptStep[];
}

/** Pieces a text is streamed in: a few characters each, so every part has several deltas. */
function pieces(text: string): string[] {
  return text.match(/.{1,4}/gsu) ?? [];
}

export class ScriptedGenerator implements Generator {
  readonly modelName = "scripted";
  /** The requests generate() was given, for assertions on what validation made of them. */
  readonly requests: GenerationRequest[] = [];

  constructor(private readonly scripts: Record<string, Script>) {}

  status(): GeneratorStatus {
    return { state: "ready" };
  }

  private scriptOf(request: GenerationRequest): Script {
    const text = isChatRequest(request)
      ? (request.messages.filter((message) => message.role === "user").at(-1)?.content ?? "")
      : request.prompt;
    const name = /script:(\w+)/.exec(text)?.[1] ?? "text";
    const script = this.scripts[name];
    if (!script) throw new DomainError("invalid", `no script "${name}"`);
    return script;
  }

  /** A prompt's "tokens": one per 4 characters of what the model would read, at least 1. */
  async validate(request: GenerationRequest): Promise<number> {
    this.scriptOf(request);
    const text = isChatRequest(request)
      ? request.messages.map((message) => message.content).join("\n")
      : request.prompt;
    return Math.max(1, Math.ceil(text.length / 4));
  }

  async generate(request: GenerationRequest, listener?: EventListener): Promise<CompletionResult> {
    this.requests.push(request);
    const script = this.scriptOf(request);
    const promptTokens = await this.validate(request);
    const writer = new EventWriter(listener);
    let tokens = 0;
    const spend = () => {
      tokens++;
      request.onTokens?.(1);
      return tokens >= request.maxTokens;
    };
    const finish = (finishReason: CompletionResult["finishReason"]) =>
      writer.finish({ finishReason, promptTokens, tokensGenerated: tokens, cachedTokens: 0 });
    let calls = 0;
    for (const step of script.steps) {
      // A step boundary is a moment another request's step could run: yield as a batcher would.
      await new Promise((resolve) => setImmediate(resolve));
      if (request.signal?.aborted) return finish("length");
      if ("fail" in step) throw step.fail;
      if ("toolCall" in step) {
        writer.toolCallStart(`call_${calls++}`, step.toolCall.name);
        for (const piece of pieces(step.toolCall.arguments)) {
          writer.toolCallDelta(piece);
          if (spend()) return finish("length");
        }
        writer.toolCallEnd();
        continue;
      }
      const reasoning = "reasoning" in step;
      for (const piece of pieces(reasoning ? step.reasoning : step.text)) {
        if (reasoning) writer.reasoningText(piece);
        else writer.text(piece);
        if (spend()) return finish("length");
      }
    }
    return finish(calls > 0 ? "tool_calls" : "stop");
  }

  async close(): Promise<void> {}
}
