/**
 * The hand-written word scanner must find exactly the words of the analyzer's regex (TOKEN_PATTERN),
 * and the builder's fast path (scanner + word table) must index exactly the terms the analyzer gives
 * queries.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { normalizeText, TOKEN_PATTERN, tokenize } from "../../../src/rag/search/analyzer.js";
import { createAnalyzer } from "../../../src/rag/search/index.js";
import { SegmentWriter } from "../../../src/rag/search/indexer/segment-writer.js";
import { hashWord, scanWords, WordScanner, WordTable } from "../../../src/rag/search/scanner.js";
import { seededRandom as random } from "../../../scripts/lib/seeded-random.js";

/** Letters, digits, marks, connectors, every mid character, separators, surrogate pairs, lone surrogates. */
const PIECES = [
  "a",
  "b",
  "Z",
  "é",
  "ß",
  "ж",
  "λ",
  "ا",
  "0",
  "7",
  "٣", // Arabic-Indic digit (\p{N})
  "Ⅻ", // letter number
  "\u0301", // combining acute (\p{M})
  "_",
  "‿", // \p{Pc}
  "'",
  "’",
  ".",
  ":",
  "·",
  ",",
  ";",
  "-",
  " ",
  "\n",
  "/",
  "!",
  "𝐀", // mathematical bold A (astral letter)
  "𝟙", // astral digit
  "😀", // astral symbol
  "\ud800", // lone high surrogate
  "\udc00", // lone low surrogate
  "’s",
  "don't",
  "e.g.",
  "3.14",
  "1,000",
];

function randomText(next: () => number, length: number): string {
  let text = "";
  for (let i = 0; i < length; i++) text += PIECES[Math.floor(next() * PIECES.length)];
  return text;
}

describe("word scanner", () => {
  it("finds the regex's words on random text with every kind of character", () => {
    const next = random(7);
    for (let round = 0; round < 3000; round++) {
      const { text } = normalizeText(randomText(next, 1 + Math.floor(next() * 40)));
      const expected = text.match(TOKEN_PATTERN) ?? [];
      assert.deepEqual(scanWords(text), expected, JSON.stringify(text));
    }
  });

  it("finds the regex's words on prose", () => {
    const text = normalizeText(
      "The U.S. economy grew 3.5% in Q1,000 (e.g. don't) — naïve café’s co-op: a·b x_y 𝐀𝐁 ＡＢＣ１ «quoted»",
    ).text;
    assert.deepEqual(scanWords(text), text.match(TOKEN_PATTERN));
  });

  it("segments a text with CJK line by line, like Intl.Segmenter on the whole text for those lines", () => {
    const text = "内核文档很长。\nplain English line, don't split\n混合 mixed 行";
    const segmenter = new Intl.Segmenter("en", { granularity: "word" });
    const whole = [...segmenter.segment(text.toLowerCase())]
      .filter((s) => s.isWordLike)
      .map((s) => s.segment);
    assert.deepEqual(tokenize(text), whole);
  });

  it("hashes words as hashWord does", () => {
    const scanner = new WordScanner();
    const text = normalizeText("Hello, wörld! 3.14 don't 𝐀x").text;
    scanner.reset(text);
    while (scanner.next()) {
      assert.equal(scanner.hash, hashWord(text.slice(scanner.start, scanner.end)));
    }
  });

  it("word table: lookups by text range, growth, bound and clear", () => {
    const table = new WordTable(5000);
    const text = Array.from({ length: 5000 }, (_, i) => `w${i}`).join(" ");
    const scanner = new WordScanner();
    scanner.reset(text);
    let i = 0;
    while (scanner.next()) {
      const word = text.slice(scanner.start, scanner.end);
      assert.equal(table.get(text, scanner.start, scanner.end, scanner.hash, -2), -2);
      assert.equal(table.set(word, scanner.hash, i++), true);
    }
    assert.equal(table.size, 5000);
    assert.equal(table.set("extra", hashWord("extra"), 1), false);
    scanner.reset(text);
    i = 0;
    while (scanner.next()) assert.equal(table.get(text, scanner.start, scanner.end, scanner.hash, -2), i++);
    table.clear();
    assert.equal(table.size, 0);
    assert.equal(table.get("w1", 0, 2, hashWord("w1"), -2), -2);
  });

  it("the segment writer indexes exactly the analyzer's terms (fast path and dictionary path)", () => {
    const next = random(11);
    const texts = [
      ...Array.from({ length: 400 }, () => randomText(next, 1 + Math.floor(next() * 30))),
      "Running runners ran; the RUNNER's shoes",
      "東京は日本の首都です。Tokyo is the capital",
      "ภาษาไทย and English",
      "第一行：内核文档\nThe kernel's docs, e.g. 3.5 and 1,000 items\n\n日本語とEnglishの混在\r\nlast line",
    ];
    for (const options of [{}, { stemming: false, stopWords: false }]) {
      const analyze = createAnalyzer(options);
      const analysed = new SegmentWriter(options);
      const verbatim = new SegmentWriter(options);
      for (const text of texts) {
        analysed.add(text);
        verbatim.addTerms(analyze(text));
      }
      const keys = Uint32Array.from(texts, (_, i) => i);
      assert.deepEqual(analysed.finish(keys, 1), verbatim.finish(keys, 1));
    }
  });

  it("keeps term frequencies ≥ 65,535 exact", () => {
    const builder = new SegmentWriter();
    builder.add("rare");
    builder.addTerms(Array.from({ length: 70_000 }, () => "many"));
    builder.addTerms(["many", "rare"]);
    builder.addTerms(Array.from({ length: 65_535 }, () => "many"));
    const data = builder.finish(Uint32Array.from([0, 1, 2, 3]), 1);
    const many = data.terms.indexOf("many");
    const start = data.termOffsets[many] ?? 0;
    assert.deepEqual([...data.termFreqs.subarray(start, start + 3)], [70_000, 1, 65_535]);
    assert.ok(data.termFreqs instanceof Uint32Array);
  });
});
