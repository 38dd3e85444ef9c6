/**
 * Extractive answers: the sentences that best match the question, never a markdown heading, whole
 * sentences of hard-wrapped text, and none from a result scoring far below the best.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  composeExtractive,
  extractiveAnswer,
  RELATIVE_SCORE_CUT,
} from "../../../src/rag/answering/extractive.js";
import { createAnalyzer } from "../../../src/rag/search/analyzer.js";

const analyze = createAnalyzer();
const source = (text: string, score = 1) => ({ text, title: null, score });

describe("extractiveAnswer", () => {
  it("skips markdown headings, rules and list markers", () => {
    const answer = extractiveAnswer(
      "how do I rotate the keys?",
      [
        source(
          "# Rotating API keys\n\nTo rotate the API keys, create a new key in the console. " +
            "Deploy it everywhere.\n\n---\n\n## Keys and rotation\n\n- Revoke the old key after the rotation.",
        ),
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
        source(
          "Keys are listed in the console. Every key has an owner. A rotation takes about ten minutes. " +
            "Keys expire after a year.",
        ),
      ],
      analyze,
      { maxSentences: 1 },
    );
    assert.equal(answer, "A rotation takes about ten minutes. [1]");
  });

  it("returns null when no sentence matches (a source that is only a heading included)", () => {
    assert.equal(extractiveAnswer("rotate keys", [source("# Rotating keys")], analyze), null);
  });

  it("joins hard-wrapped lines: a sentence runs on across a line break to its full stop", () => {
    const wrapped =
      "The maintainer is the person or team responsible for a package which is\n" +
      "interested in every bug report about it. Reports go to the tracker.\n\n" +
      "- A list item is its own block,\n  continued on the next line.\n" +
      "- Another item.";
    const answer = extractiveAnswer(
      "which package is interested in bug reports",
      [source(wrapped)],
      analyze,
      {
        maxSentences: 1,
      },
    );
    assert.equal(
      answer,
      "The maintainer is the person or team responsible for a package which is interested in every bug report about it. [1]",
    );
    const item = extractiveAnswer("list item continued", [source(wrapped)], analyze, { maxSentences: 1 });
    assert.equal(item, "A list item is its own block, continued on the next line. [1]");
  });

  it(`leaves out results scoring under ${RELATIVE_SCORE_CUT} of the best, and says which results it quotes`, () => {
    const question = "backup retention schedule for laptops and servers";
    const sources = [
      source("Server backups follow the nightly schedule.", 0.91),
      source("Laptop backups are the owner's job.", 0.5),
      source("Retention is ninety days.", 0.197),
    ];
    const composed = composeExtractive(question, sources, analyze);
    assert.ok(composed);
    assert.doesNotMatch(composed.text, /\[3\]/, "0.197 is under half of 0.91");
    assert.deepEqual(composed.sources, [1, 2]);
    // The same third source at 0.46 (over half the best) lends its sentence.
    const close = composeExtractive(
      question,
      [sources[0]!, sources[1]!, { ...sources[2]!, score: 0.46 }],
      analyze,
    );
    assert.deepEqual(close?.sources, [1, 2, 3]);
  });

  it("scores that are not all ≥ 0 (a reranker's logits) are not cut by ratio", () => {
    const composed = composeExtractive(
      "backups at night on laptops",
      [source("Backups run every night.", 2.5), source("Laptop backups are the owner's job.", -1.2)],
      analyze,
    );
    assert.deepEqual(composed?.sources, [1, 2]);
  });
});
