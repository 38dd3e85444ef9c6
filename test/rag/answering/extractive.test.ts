/** Extractive answers: the sentences that best match the question, never a markdown heading. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { extractiveAnswer } from "../../../src/rag/answering/extractive.js";
import { createAnalyzer } from "../../../src/rag/search/analyzer.js";

const analyze = createAnalyzer();

describe("extractiveAnswer", () => {
  it("skips markdown headings, rules and list markers", () => {
    const answer = extractiveAnswer(
      "how do I rotate the keys?",
      [
        {
          text:
            "# Rotating API keys\n\nTo rotate the API keys, create a new key in the console. " +
            "Deploy it everywhere.\n\n---\n\n## Keys and rotation\n\n- Revoke the old key after the rotation.",
        },
      ],
      analyze,
    );
    assert.ok(answer);
    assert.doesNotMatch(answer, /#|Rotating API keys|---/);
    assert.match(answer, /rotat.*\[1\]$/);
    assert.doesNotMatch(answer, /(^|\] )- /);
  });

  it("prefers the sentence holding the question's distinctive term", () => {
    const answer = extractiveAnswer(
      "how long does a key rotation take?",
      [
        {
          text:
            "Keys are listed in the console. Every key has an owner. A rotation takes about ten minutes. " +
            "Keys expire after a year.",
        },
      ],
      analyze,
      { maxSentences: 1 },
    );
    assert.equal(answer, "A rotation takes about ten minutes. [1]");
  });

  it("returns null when no sentence matches (a source that is only a heading included)", () => {
    assert.equal(extractiveAnswer("rotate keys", [{ text: "# Rotating keys" }], analyze), null);
  });
});
