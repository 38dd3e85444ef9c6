/** The reasoning splitter and the closing of cut tool arguments, piece by piece. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { parseArgumentsObject } from "../../../src/textgen/http/dialects/json-partial.js";
import { ReasoningSplitter, splitReasoning } from "../../../src/textgen/engine/reasoning.js";

const markers = { open: "<think>", close: "</think>" };

describe("ReasoningSplitter", () => {
  it("splits a block the model opens, and one the prompt opened", () => {
    assert.deepEqual(splitReasoning("<think>\nwhy\n</think>\n\nbecause", markers, false), {
      reasoning: "why",
      answer: "because",
    });
    assert.deepEqual(splitReasoning("why</think>because", markers, true), {
      reasoning: "why",
      answer: "because",
    });
    assert.deepEqual(splitReasoning("just text", markers, false), { reasoning: "", answer: "just text" });
    assert.deepEqual(splitReasoning("cut inside", markers, true), { reasoning: "cut inside", answer: "" });
  });

  it("gives the same parts whatever the pieces, streamed pieces adding up to them", () => {
    const text = fc.stringMatching(/^[a-z <>/]{0,20}$/);
    fc.assert(
      fc.property(
        fc.boolean(),
        text,
        text,
        fc.array(fc.nat(40), { maxLength: 6 }),
        (inside, thought, answer, cuts) => {
          const whole = `${inside ? "" : "<think>"}${thought}</think>${answer}`;
          const expected = splitReasoning(whole, markers, inside);
          const streamed = { reasoning: "", answer: "" };
          const splitter = new ReasoningSplitter(
            markers,
            inside,
            (piece) => (streamed.reasoning += piece),
            (piece) => (streamed.answer += piece),
          );
          let at = 0;
          for (const cut of [...cuts].sort((a, b) => a - b)) {
            splitter.push(whole.slice(at, Math.max(at, cut)));
            at = Math.max(at, cut);
          }
          splitter.push(whole.slice(at));
          splitter.finish();
          assert.deepEqual({ reasoning: splitter.reasoning, answer: splitter.answer }, expected);
          assert.deepEqual(streamed, expected);
        },
      ),
    );
  });
});

describe("parseArgumentsObject", () => {
  it("closes arguments cut by max_tokens", () => {
    assert.deepEqual(parseArgumentsObject('{"city": "Os'), { city: "Os" });
    assert.deepEqual(parseArgumentsObject('{"city": "Oslo", "days": [1, 2'), { city: "Oslo", days: [1, 2] });
    assert.deepEqual(parseArgumentsObject('{"city": "Oslo", "un'), { city: "Oslo" });
    assert.deepEqual(parseArgumentsObject(""), {});
    assert.deepEqual(parseArgumentsObject('{"a": {"b": "c\\'), { a: { b: "c" } });
  });
});
