import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { getLlama, LlamaLogLevel, type Llama } from "node-llama-cpp";
import { z } from "zod";
import { checkGbnf } from "../../../src/textgen/engine/gbnf-check.js";
import { SchemaError, toGrammarSchema } from "../../../src/textgen/engine/json-schema.js";

describe("JSON Schema to node-llama-cpp's grammar subset", () => {
  let llama: Llama;
  before(async () => {
    llama = await getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error });
  });
  after(async () => llama.dispose());

  /** Translates and compiles; returns whether each text is accepted by the grammar. */
  async function accepts(schema: unknown, texts: string[]): Promise<boolean[]> {
    const grammar = await llama.createGrammarForJsonSchema(toGrammarSchema(schema) as never);
    return texts.map((text) => grammar.grammar.length > 0 && isCompatible(grammar, `${text}\n\n\n\n`));
  }
  function isCompatible(grammar: unknown, text: string): boolean {
    return (grammar as { _grammar: { isTextCompatible(text: string): boolean } })._grammar.isTextCompatible(
      text,
    );
  }

  it("zod's optional, nullable, union and nested schemas (anyOf, $defs/$ref) compile and constrain", async () => {
    const Tag = z.object({ label: z.string().max(5) });
    const schema = z.toJSONSchema(
      z.object({
        title: z.string().nullable(),
        count: z.union([z.number().int(), z.literal("many")]),
        tag: Tag,
        tags: z.array(Tag).max(2),
      }),
    );
    const [good, nullTitle, badCount] = await accepts(schema, [
      '{"title": "a", "count": 3, "tag": {"label": "x"}, "tags": []}',
      '{"title": null, "count": "many", "tag": {"label": "x"}, "tags": [{"label": "y"}]}',
      '{"title": "a", "count": "few", "tag": {"label": "x"}, "tags": []}',
    ]);
    assert.deepEqual([good, nullTitle, badCount], [true, true, false]);
  });

  it("local references under $defs or definitions", async () => {
    const schema = {
      type: "object",
      properties: { node: { $ref: "#/definitions/Leaf" } },
      definitions: { Leaf: { type: "object", properties: { value: { type: "boolean" } } } },
    };
    assert.deepEqual(await accepts(schema, ['{"node": {"value": true}}', '{"node": {"value": 1}}']), [
      true,
      false,
    ]);
  });

  it("a narrow integer range becomes an enum; {type: object} alone means any object", async () => {
    assert.deepEqual(toGrammarSchema({ type: "integer", minimum: 1, exclusiveMaximum: 4 }), {
      enum: [1, 2, 3],
    });
    assert.deepEqual(await accepts({ type: "object" }, ['{"anything": [1, "two"]}', "[1]"]), [true, false]);
  });

  it("refuses what the grammar cannot enforce, naming the path", () => {
    // `pattern` is enforced since issue #34 (regex-grammar.ts); `not` cannot be.
    assert.throws(
      () =>
        toGrammarSchema({ type: "object", properties: { code: { type: "string", not: { const: "A" } } } }),
      (error: unknown) => error instanceof SchemaError && /schema\.properties\.code\.not/.test(error.message),
    );
    assert.throws(() => toGrammarSchema({ allOf: [{ type: "string" }, { type: "number" }] }), SchemaError);
    assert.throws(() => toGrammarSchema({ $ref: "https://example.com/schema" }), /\$ref/);
    assert.throws(() => toGrammarSchema([]), /JSON Schema object/);
  });
});

describe("GBNF pre-check", () => {
  it("accepts well-formed grammars, comments, repetitions and escapes", () => {
    assert.equal(checkGbnf('root ::= item{2,3} # two or three\nitem ::= [a-z\\]] | "\\"q\\""'), undefined);
  });
  it("names a missing root, an undefined rule and an unterminated string", () => {
    assert.match(checkGbnf('answer ::= "yes"')!, /root/);
    assert.match(checkGbnf("root ::= yes-or-no")!, /line 1: the rule "yes-or-no"/);
    assert.match(checkGbnf('root ::= "yes\nno ::= "no"')!, /line 1: unterminated string/);
    assert.match(checkGbnf("just words")!, /no rules/);
  });
});
