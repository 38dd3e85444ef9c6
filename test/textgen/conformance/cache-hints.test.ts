/**
 * Issue #36's wiring in the dialects: the cache hints each API has (OpenAI `prompt_cache_key`, a
 * Responses conversation's id, Anthropic `cache_control` breakpoints) and llama.cpp's per-request
 * `lora` reach the GenerationRequest the engine runs. The engine's side (what a hint keeps, what an
 * adapter changes) is tested in test/textgen/engine/{prefix-cache,lora}.test.ts; the reused-token
 * counts each dialect reports in test/textgen/prompt-cache.test.ts and test/textgen/clients/*.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeMessages } from "../../../src/textgen/http/dialects/anthropic.js";
import { chatProfile, decodeChat, type ChatBody } from "../../../src/textgen/http/dialects/openai-chat.js";
import { decodeResponses } from "../../../src/textgen/http/dialects/openai-responses.js";
import { validateRequest } from "../../../src/textgen/engine/validation.js";

const limits = { maxNewTokens: 256 };
const ephemeral = { type: "ephemeral" };

function chatRequest(body: Partial<ChatBody>) {
  const full = { model: "m", messages: [{ role: "user" as const, content: "Hi" }], ...body } as ChatBody;
  return validateRequest(decodeChat(full).decoded, chatProfile(full), limits).request;
}

describe("cache hints and LoRA from the dialects to the engine's request", () => {
  it("OpenAI chat: prompt_cache_key is the hint's key; lora is passed as llama.cpp's server takes it", () => {
    const request = chatRequest({ prompt_cache_key: "session-7", lora: [{ id: 0, scale: 0.5 }] });
    assert.deepEqual(request.cacheHint, { key: "session-7" });
    assert.deepEqual(request.lora, [{ id: 0, scale: 0.5 }]);
    const plain = chatRequest({});
    assert.equal(plain.cacheHint, undefined);
    assert.equal(plain.lora, undefined);
  });

  it("Responses: prompt_cache_key, else the conversation's id", () => {
    const profile = chatProfile({ model: "m", messages: [] } as unknown as ChatBody);
    const input = [{ type: "message", role: "user", content: "Hi" }];
    const keyOf = (body: object) =>
      validateRequest(
        decodeResponses({ model: "m", ...body } as never, input as never).decoded,
        profile,
        limits,
      ).request.cacheHint;
    assert.deepEqual(keyOf({ prompt_cache_key: "k" }), { key: "k" });
    assert.deepEqual(keyOf({ conversation: "conv_1" }), { key: "conv_1" });
    assert.deepEqual(keyOf({ conversation: { id: "conv_2" }, prompt_cache_key: "k2" }), { key: "k2" });
    assert.equal(keyOf({}), undefined);
  });

  it("Anthropic: each cache_control breakpoint is the count of chat messages up to it", () => {
    const { decoded } = decodeMessages({
      model: "m",
      max_tokens: 8,
      tools: [{ name: "t", input_schema: { type: "object" }, cache_control: ephemeral }],
      system: [{ type: "text", text: "You are kind.", cache_control: ephemeral }],
      messages: [
        { role: "user", content: [{ type: "text", text: "Hello", cache_control: ephemeral }] },
        { role: "assistant", content: "Hi" },
        { role: "user", content: [{ type: "text", text: "Again" }] },
      ],
    } as never);
    // tools (0), system (1 message), the first user turn (2 messages).
    assert.deepEqual(decoded.cacheHint, { prefixes: [0, 1, 2] });
    assert.equal(decoded.messages!.length, 4);
    const request = validateRequest(decoded, chatProfile({} as ChatBody), limits).request;
    assert.deepEqual(request.cacheHint, { prefixes: [0, 1, 2] });
  });

  it("Anthropic: a top-level cache_control marks the whole conversation; no marks, no hint", () => {
    const body = { model: "m", max_tokens: 8, messages: [{ role: "user", content: "Hello" }] };
    const automatic = decodeMessages({ ...body, cache_control: ephemeral } as never).decoded;
    assert.deepEqual(automatic.cacheHint, { prefixes: [1] });
    const none = validateRequest(decodeMessages(body as never).decoded, chatProfile({} as ChatBody), limits);
    assert.equal(none.request.cacheHint, undefined);
  });

  it("at most 4 distinct breakpoints reach the engine (Anthropic's limit)", () => {
    const messages = Array.from({ length: 6 }, (_, i) => ({
      role: i % 2 === 0 ? "user" : "assistant",
      content: [{ type: "text", text: `turn ${i}`, cache_control: ephemeral }],
    }));
    const { decoded } = decodeMessages({ model: "m", max_tokens: 8, messages } as never);
    const request = validateRequest(decoded, chatProfile({} as ChatBody), limits).request;
    assert.deepEqual(request.cacheHint, { prefixes: [1, 2, 3, 4] });
  });
});
