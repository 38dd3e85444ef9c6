/** EventWriter: delimited parts, and a result assembled from exactly what was emitted. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EventWriter, type GenerationEvent } from "../../../src/textgen/engine/events.js";

describe("EventWriter", () => {
  it("opens and closes each part as the kind of output changes, and the result is what was written", () => {
    const events: GenerationEvent[] = [];
    const writer = new EventWriter((event) => events.push(event));
    writer.reasoningText("think ");
    writer.reasoningText("more");
    writer.text("Hello");
    writer.text("");
    writer.text(" world");
    writer.toolCallStart("call_1", "f");
    writer.toolCallDelta('{"a":');
    writer.toolCallDelta("1}");
    writer.toolCallEnd('{"a":1}  ');
    const result = writer.finish({ finishReason: "tool_calls", promptTokens: 5, tokensGenerated: 9 });
    assert.deepEqual(
      events.map((event) => event.type),
      [
        "reasoning-start",
        "reasoning-delta",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "tool-call-start",
        "tool-call-delta",
        "tool-call-delta",
        "tool-call-delta",
        "tool-call-end",
        "finish",
      ],
    );
    assert.equal(result.text, "Hello world");
    assert.equal(result.reasoning, "think more");
    assert.deepEqual(result.toolCalls, [{ id: "call_1", name: "f", arguments: '{"a":1}  ' }]);
    const deltas = events.flatMap((event) => (event.type === "tool-call-delta" ? [event.delta] : []));
    assert.equal(deltas.join(""), '{"a":1}  ', "a call's deltas add up to its arguments");
    const finish = events.at(-1)!;
    assert.ok(finish.type === "finish");
    assert.deepEqual(finish.usage, { promptTokens: 5, completionTokens: 9, cachedTokens: 0 });
  });

  it("logprobs ride on the next text delta; those left over go with finish", () => {
    const events: GenerationEvent[] = [];
    const writer = new EventWriter((event) => events.push(event));
    const entry = (text: string) => ({ text, bytes: [], logprob: -1, top: [] });
    writer.logprob(entry("a"));
    writer.text("a");
    writer.logprob(entry("b"));
    writer.finish({ finishReason: "stop", promptTokens: 1, tokensGenerated: 2 });
    const delta = events.find((event) => event.type === "text-delta");
    assert.ok(delta?.type === "text-delta");
    assert.deepEqual(
      delta.logprobs?.map((e) => e.text),
      ["a"],
    );
    const finish = events.at(-1)!;
    assert.ok(finish.type === "finish");
    assert.deepEqual(
      finish.logprobs?.map((e) => e.text),
      ["b"],
    );
  });

  it("a listener that throws does not stop the writer", () => {
    const writer = new EventWriter(() => {
      throw new Error("socket closed");
    });
    writer.text("x");
    assert.equal(writer.finish({ finishReason: "stop", promptTokens: 1, tokensGenerated: 1 }).text, "x");
  });
});
