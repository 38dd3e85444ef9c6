/**
 * The grammar and schema budgets as functions: the hostile inputs of issue #23 are refused naming
 * the limit they pass, and the grammars real clients send (node-llama-cpp's example grammars, the
 * grammars of realistic JSON schemas) are accepted.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import {
  checkAndCompileGrammar,
  checkGrammarBudget,
  GrammarBudgetError,
  GrammarStackMirror,
} from "../../../src/textgen/engine/grammar-budget.js";
import {
  checkSchemaBudget,
  DEFAULT_SCHEMA_BUDGET,
  SchemaError,
  toGrammarSchema,
} from "../../../src/textgen/engine/json-schema.js";
import { DEFAULT_GRAMMAR_BUDGET } from "../../../src/textgen/engine/llama-generator.js";
import { repoRoot } from "../../helpers/env.js";
import {
  decoyHiddenGrammar,
  deepSchema,
  horizonHiddenGrammar,
  nestedOptionalGrammar,
} from "../../helpers/grammar-fixtures.js";

function refusedFor(grammar: string, limit: GrammarBudgetError["limit"]): void {
  assert.throws(
    () => checkGrammarBudget(grammar, DEFAULT_GRAMMAR_BUDGET),
    (error: unknown) => error instanceof GrammarBudgetError && error.limit === limit,
  );
}

describe("grammar budget", () => {
  it("refuses issue #23's nested-optional grammars (40 levels, 765 bytes; 12 levels) on their parse stacks", () => {
    refusedFor(nestedOptionalGrammar(40, '"xxxxxxxxxxxxxxxxxx"'), "maxStacks");
    refusedFor(nestedOptionalGrammar(12), "maxStacks");
  });

  it("accepts the same shape while its stacks stay within the budget", () => {
    const stacks = checkGrammarBudget(nestedOptionalGrammar(6), DEFAULT_GRAMMAR_BUDGET);
    assert.ok(stacks > 1 && stacks <= DEFAULT_GRAMMAR_BUDGET.maxStacks, `${stacks} stacks`);
  });

  it("refuses wide alternations, deep parentheses, big repetitions and exponential left-recursion checks", () => {
    refusedFor(
      `root ::= ${Array.from({ length: 2000 }, (_, i) => `"v${i}"`).join(" | ")}`,
      "maxAlternatives",
    );
    refusedFor(`root ::= ${Array.from({ length: 600 }, (_, i) => `"v${i}"`).join(" | ")}`, "maxStacks");
    refusedFor(`root ::= ${"(".repeat(5000)}"x"${")".repeat(5000)}`, "maxNesting");
    refusedFor('root ::= ("a"{0,40}){0,40}', "maxRepetition");
    refusedFor(`root ::= "${"a".repeat(1000)}"{999}`, "maxExpansion");
    const nullableChain = ["root ::= a0"];
    for (let i = 0; i < 30; i++) nullableChain.push(`a${i} ::= a${i + 1}? a${i + 1}?`);
    nullableChain.push('a30 ::= "x"');
    refusedFor(nullableChain.join("\n"), "maxExpansion");
    refusedFor(`root ::= "${"a".repeat(200_000)}"`, "maxBytes");
    refusedFor(
      `root ::= r0\n${Array.from({ length: 5000 }, (_, i) => `r${i} ::= "k"`).join("\n")}`,
      "maxRules",
    );
  });

  it("refuses issue #35's blow-up hidden behind one character among 12 decoys (the old beam missed it)", () => {
    const grammar = decoyHiddenGrammar();
    assert.ok(grammar.length > 1500 && grammar.length < 2500, `${grammar.length} bytes`);
    // Every stack set is explored, not a beam of the largest: the hidden "z" path is followed too.
    refusedFor(grammar, "maxStacks");
  });

  it("accepts a blow-up past its horizon, which the stacks followed while sampling then catch", () => {
    // The pre-check explores 5,000 stack sets, all of the decoy's, before the hidden path's 14 "z".
    const { stacks, compiled } = checkAndCompileGrammar(horizonHiddenGrammar(), DEFAULT_GRAMMAR_BUDGET);
    assert.ok(stacks <= DEFAULT_GRAMMAR_BUDGET.maxStacks);
    const mirror = new GrammarStackMirror(compiled, DEFAULT_GRAMMAR_BUDGET.maxStacks);
    assert.equal(mirror.accept(Buffer.from("z".repeat(14))), 1);
    let xs = 0;
    assert.throws(
      () => {
        for (; xs < 200; xs++) mirror.accept(Buffer.from("x"));
      },
      (error: unknown) => error instanceof GrammarBudgetError && error.limit === "maxStacks",
    );
    // 13, 78, 297 stacks after one, two, three "x"; the fourth makes 791.
    assert.equal(xs, 3);
    // Text the grammar does not allow: the mirror says it lost track (-1) instead of guessing.
    const other = new GrammarStackMirror(compiled, DEFAULT_GRAMMAR_BUDGET.maxStacks);
    assert.equal(other.accept(Buffer.from("q")), -1);
  });

  it("follows a character split across tokens as llama.cpp does (UTF-8 bytes held until complete)", () => {
    const { compiled } = checkAndCompileGrammar('root ::= "é" [a-z]+', DEFAULT_GRAMMAR_BUDGET);
    const mirror = new GrammarStackMirror(compiled, 16);
    const e = Buffer.from("é");
    assert.equal(mirror.accept(e.subarray(0, 1)), 1);
    assert.ok(mirror.accept(Buffer.concat([e.subarray(1), Buffer.from("ab")])) >= 1);
  });

  it("names syntax problems as plain errors (left recursion, undefined rules, unterminated strings)", () => {
    assert.throws(() => checkGrammarBudget('root ::= root "x"', DEFAULT_GRAMMAR_BUDGET), /left recursion/);
    assert.throws(() => checkGrammarBudget("root ::= missing", DEFAULT_GRAMMAR_BUDGET), /not defined/);
    assert.throws(() => checkGrammarBudget('root ::= "abc', DEFAULT_GRAMMAR_BUDGET), /unterminated/);
  });

  it("accepts node-llama-cpp's example grammars (JSON, C, arithmetic, chess, lists)", () => {
    const folder = path.join(repoRoot, "node_modules/node-llama-cpp/llama/grammars");
    const files = readdirSync(folder).filter((name) => name.endsWith(".gbnf"));
    assert.ok(files.length >= 5);
    for (const file of files) {
      const stacks = checkGrammarBudget(
        readFileSync(path.join(folder, file), "utf8"),
        DEFAULT_GRAMMAR_BUDGET,
      );
      assert.ok(stacks <= DEFAULT_GRAMMAR_BUDGET.maxStacks, file);
    }
  });
});

describe("schema budget", () => {
  it("refuses a schema nested 3,000 deep before translating it (no stack overflow)", () => {
    assert.throws(
      () => toGrammarSchema(deepSchema(3000)),
      (error: unknown) => error instanceof SchemaError && /SCHEMA_MAX_DEPTH/.test(error.message),
    );
  });

  it("refuses a 50,000-value enum, too many enum bytes, properties and alternatives", () => {
    const budget = DEFAULT_SCHEMA_BUDGET;
    const refused = (schema: unknown, variable: string) =>
      assert.throws(
        () => checkSchemaBudget(schema, budget),
        (error: unknown) => error instanceof SchemaError && error.message.includes(variable),
      );
    refused({ enum: Array.from({ length: 50_000 }, (_, i) => `v${i}`) }, "SCHEMA_MAX_ENUM");
    refused(
      {
        type: "object",
        properties: { a: { enum: ["x".repeat(20_000)] }, b: { enum: ["y".repeat(20_000)] } },
      },
      "SCHEMA_MAX_ENUM_BYTES",
    );
    refused(
      {
        type: "object",
        properties: Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`p${i}`, {}])),
      },
      "SCHEMA_MAX_PROPERTIES",
    );
    refused({ anyOf: Array.from({ length: 200 }, () => ({ type: "string" })) }, "SCHEMA_MAX_ALTERNATIVES");
    refused({ $defs: { a: deepSchema(40) }, $ref: "#/$defs/a" }, "SCHEMA_MAX_DEPTH");
  });

  it("accepts realistic schemas: OpenAI structured outputs, tool parameters, 500-value enums", () => {
    const structured = {
      type: "object",
      properties: {
        steps: {
          type: "array",
          items: {
            type: "object",
            properties: { explanation: { type: "string" }, output: { type: "string" } },
            required: ["explanation", "output"],
            additionalProperties: false,
          },
        },
        final_answer: { type: "string" },
        country: { enum: Array.from({ length: 500 }, (_, i) => `country-${i}`) },
      },
      required: ["steps", "final_answer"],
      additionalProperties: false,
    };
    assert.doesNotThrow(() => toGrammarSchema(structured));
    assert.doesNotThrow(() => toGrammarSchema(deepSchema(DEFAULT_SCHEMA_BUDGET.maxDepth - 1)));
  });
});
