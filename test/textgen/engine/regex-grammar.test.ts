/** `pattern` as GBNF: what llama.cpp's grammar then accepts, checked by llama.cpp itself. */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { getLlama, LlamaLogLevel, type Llama } from "node-llama-cpp";
import { patternGrammar, RegexGrammarError } from "../../../src/textgen/engine/regex-grammar.js";
import { readTolerantly } from "../../../src/core/tolerant.js";
import { Type } from "typebox";

describe("regular expressions as GBNF for JSON strings", () => {
  let llama: Llama;
  before(async () => {
    llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
  });
  after(async () => llama.dispose());

  /** Whether the JSON text of each value is accepted by `pattern`'s grammar. */
  async function accepts(pattern: string, values: string[]): Promise<boolean[]> {
    const grammar = await llama.createGrammar({ grammar: `root ::= ${patternGrammar(pattern)}` });
    const check = (grammar as unknown as { _grammar: { isTextCompatible(text: string): boolean } })._grammar;
    return values.map((value) => check.isTextCompatible(JSON.stringify(value)));
  }

  it("anchored patterns: classes, quantifiers, groups, alternation", async () => {
    assert.deepEqual(await accepts("^[A-Z]{2}-\\d{2,3}$", ["AB-12", "AB-123", "Ab-12", "AB-1234"]), [
      true,
      true,
      false,
      false,
    ]);
    assert.deepEqual(await accepts("^(cat|dog)s?$", ["cat", "dogs", "cow"]), [true, true, false]);
  });

  it("unanchored sides are free, as JSON Schema reads a pattern", async () => {
    assert.deepEqual(await accepts("ab", ["xxabyy", "ab", "ba"]), [true, true, false]);
  });

  it("quotes and backslashes are written JSON-escaped; . never writes a raw control character", async () => {
    assert.deepEqual(await accepts('^a"b\\\\c.$', ['a"b\\cz', 'a"b\\c"', 'a"b\\c\n']), [true, true, false]);
  });

  it("what a grammar cannot express is an error naming it", () => {
    assert.throws(() => patternGrammar("^(a)\\1$"), RegexGrammarError);
    assert.throws(() => patternGrammar("^(?=a)a$"), /look-arounds/);
    assert.throws(() => patternGrammar("^a{1,5000}$"), /repetition count/);
  });
});

describe("tolerant reading", () => {
  const schema = Type.Object({
    a: Type.Optional(Type.Number()),
    nested: Type.Optional(Type.Object({ b: Type.Optional(Type.String()) })),
    list: Type.Optional(
      Type.Array(
        Type.Union([
          Type.Object({ type: Type.Literal("x"), x: Type.Optional(Type.Number()) }),
          Type.Object({ type: Type.Literal("y"), y: Type.Optional(Type.Number()) }),
        ]),
      ),
    ),
    map: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  });

  it("removes and names undeclared fields at every level, reads unions by their type, leaves maps alone", () => {
    const body = {
      a: 1,
      z: 2,
      nested: { b: "k", c: 3 },
      list: [
        { type: "x", x: 1, y: 2 },
        { type: "y", y: 2, x: 1 },
      ],
      map: { anything: 1 },
    };
    assert.deepEqual(readTolerantly(schema, body), ["z", "nested.c", "list.0.y", "list.1.x"]);
    assert.deepEqual(body, {
      a: 1,
      nested: { b: "k" },
      list: [
        { type: "x", x: 1 },
        { type: "y", y: 2 },
      ],
      map: { anything: 1 },
    });
  });

  it("a declared field sent as null is not set; a wrong type is left for validation", () => {
    const body: Record<string, unknown> = { a: null, nested: "oops" };
    assert.deepEqual(readTolerantly(schema, body), []);
    assert.deepEqual(body, { nested: "oops" });
  });
});
