/** The one validation stage (issue #34): defaults, ranges, clamps, seed, stop, tools, schemas, reasoning. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DomainError } from "../../../src/core/errors.js";
import type { ChatRequest } from "../../../src/textgen/engine/generator.js";
import {
  validateRequest,
  type DecodedRequest,
  type DialectProfile,
} from "../../../src/textgen/engine/validation.js";

const foreign: DialectProfile = {
  defaultMaxTokens: (max) => Math.min(256, max),
  defaultTemperature: 1,
  clampMaxTokens: true,
  fields: { maxTokens: "/max_tokens", seed: "/options/seed" },
  toolParametersPath: (i) => `/tools/${i}/function/parameters`,
};
const strictProfile: DialectProfile = {
  ...foreign,
  clampMaxTokens: false,
  fields: { maxTokens: "/max_length" },
};
const limits = { maxNewTokens: 2048 };
const chat = (extra: DecodedRequest = {}): DecodedRequest => ({
  messages: [{ role: "user", content: "Hi" }],
  ...extra,
});

function refused(fn: () => unknown, message: RegExp, path?: string): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof DomainError && error.kind === "invalid");
    assert.match(error.message, message);
    if (path) assert.deepEqual(error.details[0], { path });
    return true;
  });
}

describe("validateRequest", () => {
  it("applies the dialect's defaults once", () => {
    const { request, n } = validateRequest(chat(), foreign, limits);
    assert.equal(request.maxTokens, 256);
    assert.equal(request.temperature, 1);
    assert.equal(n, 1);
    assert.deepEqual(request.stop, []);
  });

  it("clamps a token limit past MAX_NEW_TOKENS in foreign dialects, refuses it in strict ones", () => {
    const { request } = validateRequest(chat({ maxTokens: 32_000 }), foreign, limits);
    assert.equal(request.maxTokens, 2048);
    assert.equal(request.clampMaxTokens, true);
    refused(
      () => validateRequest(chat({ maxTokens: 32_000 }), strictProfile, limits),
      /max_length must be at most 2048/,
    );
    refused(() => validateRequest(chat({ maxTokens: 0 }), foreign, limits), /max_tokens/, "/max_tokens");
  });

  it("one seed rule: -1 and absent are random, below -1 is refused naming the dialect's field", () => {
    assert.equal(validateRequest(chat({ seed: -1 }), foreign, limits).request.seed, undefined);
    assert.equal(validateRequest(chat({ seed: 7 }), foreign, limits).request.seed, 7);
    assert.equal(validateRequest(chat({ seed: 2 ** 32 + 5 }), foreign, limits).request.seed, 5);
    refused(() => validateRequest(chat({ seed: -2 }), foreign, limits), /options\.seed/, "/options/seed");
  });

  it("ranges are checked once, named by the dialect's path", () => {
    refused(
      () => validateRequest(chat({ temperature: 2.5 }), foreign, limits),
      /temperature must be between 0 and 2/,
    );
    refused(() => validateRequest(chat({ topP: -0.1 }), foreign, limits), /top_p/);
    refused(() => validateRequest(chat({ n: 17 }), foreign, limits), /n must be between 1 and 16/);
    refused(() => validateRequest(chat({ logitBias: { x: 1 } }), foreign, limits), /token ids/);
  });

  it("stop: a string or a list, empty strings dropped", () => {
    assert.deepEqual(validateRequest(chat({ stop: "END" }), foreign, limits).request.stop, ["END"]);
    assert.deepEqual(validateRequest(chat({ stop: ["a", ""] }), foreign, limits).request.stop, ["a"]);
  });

  it("tools: auto only describes (no grammar, nothing refused); a forced call gets a grammar and notes", () => {
    const tools = [
      {
        name: "f",
        parameters: { type: "object", properties: { u: { type: "string", format: "uri" } }, not: {} },
      },
    ];
    const auto = validateRequest(chat({ tools }), foreign, limits);
    assert.equal((auto.request as ChatRequest).tools![0]!.grammar, undefined);
    assert.deepEqual(auto.unenforced, []);
    const forced = validateRequest(chat({ tools, toolChoice: "required" }), foreign, limits);
    assert.ok((forced.request as ChatRequest).tools![0]!.grammar);
    assert.deepEqual(forced.unenforced.sort(), [
      "tools.0.function.parameters.not",
      "tools.0.function.parameters.properties.u.format",
    ]);
    refused(
      () =>
        validateRequest(
          chat({ tools: [{ ...tools[0]!, strict: true }], toolChoice: { name: "f" } }),
          foreign,
          limits,
        ),
      /tools\.0\.function\.parameters\.(not|properties\.u\.format)/,
      "/tools/0/function/parameters",
    );
    refused(
      () => validateRequest(chat({ tools, toolChoice: { name: "g" } }), foreign, limits),
      /"g", which is not in tools/,
    );
  });

  it("reasoning: effort becomes a budget within max_tokens; none and disabled turn thinking off", () => {
    const medium = validateRequest(chat({ maxTokens: 2048, reasoning: { effort: "low" } }), foreign, limits);
    assert.equal((medium.request as ChatRequest).thinkingBudget, 1024);
    const high = validateRequest(chat({ maxTokens: 512, reasoning: { effort: "high" } }), foreign, limits);
    assert.equal(
      (high.request as ChatRequest).thinkingBudget,
      undefined,
      "a budget past max_tokens says nothing",
    );
    assert.equal(
      (validateRequest(chat({ reasoning: { effort: "none" } }), foreign, limits).request as ChatRequest)
        .thinking,
      false,
    );
    assert.equal(
      (validateRequest(chat({ reasoning: { enabled: false } }), foreign, limits).request as ChatRequest)
        .thinking,
      false,
    );
    assert.equal(
      (validateRequest(chat({ reasoning: { budgetTokens: 100 } }), foreign, limits).request as ChatRequest)
        .thinkingBudget,
      100,
    );
  });

  it("messages need a user or system message; outputs are one at most", () => {
    refused(
      () => validateRequest({ messages: [{ role: "assistant", content: "x" }] }, foreign, limits),
      /user or system/,
    );
    refused(
      () =>
        validateRequest(
          chat({ outputs: [{ type: "json_object" }, { type: "grammar", grammar: "root ::= x" }] }),
          foreign,
          limits,
        ),
      /only one/,
    );
  });
});
