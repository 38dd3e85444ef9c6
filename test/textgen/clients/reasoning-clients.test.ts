/**
 * Issue #34: reasoning visible through the clients people use, not only the raw SDKs
 * (reasoning.test.ts): the AI SDK's OpenAI (Responses), OpenAI-compatible (chat), Anthropic (adaptive
 * thinking) and Ollama (think) providers, LangChain's ChatOpenAI (chat and Responses), ChatAnthropic
 * (adaptive thinking) and ChatOllama (think), and the Anthropic SDK with adaptive thinking. The crafted
 * model writes exactly REASONING, `</think>`, ANSWER, so each client must show exactly those two parts.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import Anthropic from "@anthropic-ai/sdk";
import { ChatAnthropic } from "@langchain/anthropic";
import type { AIMessageChunk } from "@langchain/core/messages";
import { ChatOllama } from "@langchain/ollama";
import { ChatOpenAI } from "@langchain/openai";
import { generateText, streamText, type LanguageModel } from "ai";
import { createOllama } from "ollama-ai-provider-v2";
import { ANSWER, REASONING, reasoningModel } from "../../helpers/reasoning-model.js";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const question = "Why is the sky blue?";

/** The reasoning a LangChain message carries, wherever its integration puts it. */
function langchainReasoning(message: AIMessageChunk): string {
  const blocks = message.contentBlocks.filter((block) => block.type === "reasoning");
  if (blocks.length > 0) return blocks.map((block) => String(block.reasoning ?? "")).join("");
  const kwargs = message.additional_kwargs as { reasoning_content?: string };
  return kwargs.reasoning_content ?? "";
}

describe("reasoning through the AI SDK, LangChain and the Anthropic SDK (crafted reasoning model)", () => {
  let server: RunningTextgen;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lectern-reasoning-clients-"));
    server = await startTextgen({ MODEL_PATH: await reasoningModel(dir) });
  });
  after(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** generateText and streamText both show REASONING as reasoning and ANSWER as text. */
  async function assertAiSdk(
    model: () => LanguageModel,
    providerOptions?: Record<string, Record<string, never>>,
  ) {
    const request = { prompt: question, maxOutputTokens: 60, temperature: 0, maxRetries: 0, providerOptions };
    const plain = await generateText({ model: model(), ...request });
    assert.equal(plain.reasoningText, REASONING);
    assert.equal(plain.text.trim(), ANSWER);
    const streamed = streamText({ model: model(), ...request });
    let reasoning = "";
    let text = "";
    for await (const part of streamed.fullStream) {
      if (part.type === "reasoning-delta") reasoning += part.text;
      if (part.type === "text-delta") text += part.text;
    }
    assert.equal(reasoning, REASONING);
    assert.equal(text.trim(), ANSWER);
  }

  describe("the AI SDK", () => {
    it("openai() (Responses): reasoning parts, plain and streamed", async () => {
      const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
      await assertAiSdk(() => openai("m"));
    });

    it("openai-compatible (chat completions): reasoning_content read as reasoning", async () => {
      const provider = createOpenAICompatible({
        name: "lectern",
        baseURL: `${server.url}/v1`,
        apiKey: "unused",
      });
      await assertAiSdk(() => provider.chatModel("m"));
    });

    it("anthropic with adaptive thinking", async () => {
      const anthropic = createAnthropic({ baseURL: `${server.url}/v1`, apiKey: "unused" });
      await assertAiSdk(() => anthropic("claude-sonnet-4-5"), {
        anthropic: { thinking: { type: "adaptive" } } as unknown as Record<string, never>,
      });
    });

    it("the Ollama provider with think", async () => {
      const ollama = createOllama({ baseURL: `${server.url}/api` });
      await assertAiSdk(() => ollama("m"), { ollama: { think: true } as unknown as Record<string, never> });
    });
  });

  describe("LangChain", () => {
    async function assertLangChain(chat: {
      invoke(input: string): Promise<AIMessageChunk>;
      stream(input: string): Promise<AsyncIterable<AIMessageChunk>>;
    }) {
      const message = await chat.invoke(question);
      assert.equal(langchainReasoning(message), REASONING);
      assert.equal(message.text.trim(), ANSWER);
      let whole: AIMessageChunk | undefined;
      for await (const chunk of await chat.stream(question)) whole = whole ? whole.concat(chunk) : chunk;
      assert.ok(whole);
      assert.equal(langchainReasoning(whole), REASONING);
      assert.equal(whole.text.trim(), ANSWER);
    }

    it("ChatOpenAI over chat completions: reasoning_content", async () => {
      const chat = new ChatOpenAI({
        model: "m",
        apiKey: "unused",
        configuration: { baseURL: `${server.url}/v1` },
        maxTokens: 60,
        maxRetries: 0,
      });
      await assertLangChain(chat as never);
    });

    it("ChatOpenAI over Responses: reasoning blocks", async () => {
      const chat = new ChatOpenAI({
        model: "m",
        apiKey: "unused",
        configuration: { baseURL: `${server.url}/v1` },
        useResponsesApi: true,
        maxTokens: 60,
        maxRetries: 0,
      });
      await assertLangChain(chat as never);
    });

    it("ChatAnthropic with adaptive thinking", async () => {
      const chat = new ChatAnthropic({
        model: "claude-sonnet-4-5",
        anthropicApiUrl: server.url,
        apiKey: "unused",
        maxRetries: 0,
        thinking: { type: "adaptive" } as never,
      });
      await assertLangChain(chat as never);
    });

    it("ChatOllama with think", async () => {
      const chat = new ChatOllama({ model: "m", baseUrl: server.url, think: true, numPredict: 60 });
      await assertLangChain(chat as never);
    });
  });

  it("the Anthropic SDK with adaptive thinking: a thinking block, then text, streamed alike", async () => {
    const anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
    const request = {
      model: "claude-sonnet-4-5",
      max_tokens: 60,
      messages: [{ role: "user" as const, content: question }],
      thinking: { type: "adaptive" as const },
    } as Anthropic.MessageCreateParamsNonStreaming;
    const message = await anthropic.messages.create(request);
    const parts = message.content.map((block) =>
      block.type === "thinking"
        ? ["thinking", block.thinking]
        : block.type === "text"
          ? ["text", block.text]
          : [block.type],
    );
    assert.deepEqual(parts, [
      ["thinking", REASONING],
      ["text", ANSWER],
    ]);
    const final = await anthropic.messages.stream(request).finalMessage();
    assert.deepEqual(final.content, message.content);
  });
});
