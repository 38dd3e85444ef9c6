import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Token } from "node-llama-cpp";
import { ResponseText, type Detokenize } from "../../../src/textgen/engine/response-text.js";

/**
 * A byte-level vocabulary: token n is byte n, so a multi-byte character spans several tokens,
 * the case that real byte-fallback vocabularies (the test model's included) produce.
 */
const bytes: Detokenize = (tokens) => Buffer.from(tokens.map(Number)).toString("utf8");
const toTokens = (text: string): Token[] => [...Buffer.from(text, "utf8")].map((byte) => byte as Token);

function run(text: string, stopStrings: string[] = [], stopTokenSequences: Token[][] = []) {
  const response = new ResponseText({ detokenize: bytes, context: [], stopStrings, stopTokenSequences });
  const pieces: string[] = [];
  for (const token of toTokens(text)) {
    pieces.push(response.push(token));
    if (response.stopped) break;
  }
  pieces.push(response.finish());
  return { response, pieces: pieces.filter((piece) => piece !== "") };
}

describe("ResponseText", () => {
  it("releases text as it comes when there are no stop strings", () => {
    const { response, pieces } = run("abc");
    assert.deepEqual(pieces, ["a", "b", "c"]);
    assert.equal(response.text, "abc");
  });

  it("never splits a multi-byte character across pieces", () => {
    const { response, pieces } = run("añ日😀");
    assert.deepEqual(pieces, ["a", "ñ", "日", "😀"]);
    assert.ok(pieces.every((piece) => !piece.includes("\uFFFD")));
    assert.equal(response.text, "añ日😀");
  });

  it("stops at a stop string, dropping it and what follows", () => {
    const { response, pieces } = run("one. two", ["."]);
    assert.equal(response.text, "one");
    assert.equal(pieces.join(""), "one");
    assert.ok(response.stopped);
  });

  it("holds back a possible stop-string start and releases it when it is not one", () => {
    const { response, pieces } = run("a<x<e", ["<end>"]);
    assert.equal(response.text, "a<x<e");
    // "<" waits until the next character shows it does not begin "<end>".
    assert.deepEqual(pieces, ["a", "<x", "<e"]);
  });

  it("never shows part of a stop string in the stream", () => {
    const { response, pieces } = run("hello <en", ["<end>"]);
    assert.equal(pieces.join(""), "hello <en", "an unfinished prefix is released when the response ends");
    const stopped = run("hello <end> more", ["<end>"]);
    assert.deepEqual(stopped.pieces.join(""), "hello ");
    assert.ok(stopped.pieces.every((piece) => !piece.includes("<")));
    assert.equal(response.text, "hello <en");
  });

  it("takes the earliest of several stop strings", () => {
    assert.equal(run("abcdef", ["de", "bc"]).response.text, "a");
    assert.equal(run("abcdef", ["cdx", "ef"]).response.text, "abcd");
  });

  it("finds a stop string that spans tokens and a multi-byte character", () => {
    assert.equal(run("x日本y", ["日本"]).response.text, "x");
  });

  it("stops at a stop token sequence", () => {
    const { response } = run("abXYc", [], [toTokens("XY")]);
    assert.equal(response.text, "ab");
    assert.ok(response.stopped);
  });

  it("gives the first piece its leading space from the context tokens", () => {
    // A detokenizer that, like SentencePiece, drops the leading space of a response's first word
    // unless tokens came before it.
    const spaces: Detokenize = (tokens, lastTokens) => {
      const text = tokens.map((token) => (token === (1 as Token) ? " word" : "?")).join("");
      return lastTokens.length === 0 ? text.trimStart() : text;
    };
    const bare = new ResponseText({ detokenize: spaces, context: [], stopStrings: [] });
    assert.equal(bare.push(1 as Token), "word");
    const continued = new ResponseText({ detokenize: spaces, context: [7 as Token], stopStrings: [] });
    assert.equal(continued.push(1 as Token), " word");
  });

  it("releases nothing after stopping", () => {
    const response = new ResponseText({ detokenize: bytes, context: [], stopStrings: ["b"] });
    response.push(toTokens("a")[0]!);
    response.push(toTokens("b")[0]!);
    assert.equal(response.push(toTokens("c")[0]!), "");
    assert.equal(response.finish(), "");
    assert.equal(response.text, "a");
  });
});
