import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { createAnalyzer, ENGLISH_STOP_WORDS } from "../../../src/rag/search/index.js";
import { tokenize } from "../../../src/rag/search/analyzer.js";

const analyze = createAnalyzer();
const plain = createAnalyzer({ stemming: false, stopWords: false });

describe("analyzer", () => {
  it("folds case", () => {
    assert.deepEqual(plain("Hello WORLD hElLo"), ["hello", "world", "hello"]);
  });

  it("applies NFKC (ligatures, full-width forms)", () => {
    assert.deepEqual(plain("ﬁne ＡＢＣ１２"), ["fine", "abc12"]);
    assert.deepEqual(analyze("ﬁnding"), ["find"]);
  });

  it("stems English words with Porter", () => {
    assert.deepEqual(analyze("running runs ran runner"), ["run", "run", "ran", "runner"]);
    assert.deepEqual(analyze("connection connected connecting"), ["connect", "connect", "connect"]);
  });

  it("removes the short English stop-word list, before stemming", () => {
    assert.equal(ENGLISH_STOP_WORDS.length, 33);
    assert.deepEqual(analyze("The cat and the hat are on the mat"), ["cat", "hat", "mat"]);
    // Not in the list: these carry meaning.
    assert.deepEqual(analyze("we found systems"), ["we", "found", "system"]);
  });

  it("drops English possessives", () => {
    assert.deepEqual(analyze("John's book"), ["john", "book"]);
    assert.deepEqual(analyze("John’s book"), ["john", "book"]);
    assert.deepEqual(analyze("the dogs' bowls"), ["dog", "bowl"]);
    assert.deepEqual(plain("it's"), ["it"]);
    assert.deepEqual(plain("don't"), ["don't"]);
  });

  it("keeps numbers, decimals and alphanumerics", () => {
    assert.deepEqual(analyze("In 2024, 3.5% of 1,000 cells had p53"), [
      "2024",
      "3.5",
      "1,000",
      "cell",
      "had",
      "p53",
    ]);
    assert.deepEqual(plain("IL-6 and TNF-α"), ["il", "6", "and", "tnf", "α"]);
  });

  it("segments CJK and Thai text with Intl.Segmenter", () => {
    assert.deepEqual(analyze("我爱北京天安门"), ["我", "爱", "北京", "天安门"]);
    assert.deepEqual(analyze("ภาษาไทยง่ายนิดเดียว"), ["ภาษา", "ไทย", "ง่าย", "นิด", "เดียว"]);
    // Latin words in the same text are still analysed as usual.
    assert.deepEqual(analyze("Running in 東京"), ["run", "東京"]);
  });

  it("returns [] for empty, blank or punctuation-only text", () => {
    assert.deepEqual(analyze(""), []);
    assert.deepEqual(analyze("   \n\t "), []);
    assert.deepEqual(analyze("... -- !!! ???"), []);
    assert.deepEqual(analyze("the of and"), []);
  });

  it("has options to turn stemming and stop words off, or to use a custom stop-word list", () => {
    assert.deepEqual(createAnalyzer({ stemming: false })("The running dogs"), ["running", "dogs"]);
    assert.deepEqual(createAnalyzer({ stopWords: false })("The running dogs"), ["the", "run", "dog"]);
    assert.deepEqual(createAnalyzer({ stopWords: ["Dogs", "running"] })("The running dogs"), ["the"]);
    assert.throws(() => createAnalyzer({ stopWords: "the" as unknown as string[] }), TypeError);
  });

  it("does not stem non-Latin words", () => {
    assert.deepEqual(analyze("компании"), ["компании"]);
  });

  it("fast-path tokenizer agrees with Intl.Segmenter on space-separated scripts", () => {
    const segmenter = new Intl.Segmenter("en", { granularity: "word" });
    const samples = [
      "Don't stop: e.g. U.S.A. had 3.5% growth (1,000,000 jobs) in 2024; v1.2.3 of foo_bar was released.",
      "The patient's IL-6/TNF-α levels rose 2-fold vs. controls [p<0.05], see Fig. 3a.",
      "Ça coûte 12,50 € — naïve café résumé; Straße Grüße",
      "Москва — столица России. Αθήνα είναι η πρωτεύουσα. 한국어 텍스트입니다",
      "rock'n'roll o'clock ratio:value 10:30 a.m. x·y 1;2 3'4",
    ];
    for (const sample of samples) {
      const lower = sample.normalize("NFKC").toLowerCase();
      const expected = [...segmenter.segment(lower)].filter((s) => s.isWordLike).map((s) => s.segment);
      assert.deepEqual(tokenize(sample), expected, sample);
    }
  });
});
