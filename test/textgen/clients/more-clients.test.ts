/**
 * Issue #34: the clients the other files leave out, as their users call them, against one app on the
 * test model: the AI SDK's Anthropic and Ollama providers, LangChain's ChatAnthropic with its default
 * max_tokens, LlamaIndex's OpenAI LLM, and the Anthropic SDK's structured output, messages.parse and
 * models.list. The test model knows nothing of JSON or tools: what comes back valid is the grammar's.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createAnthropic } from "@ai-sdk/anthropic";
import Anthropic from "@anthropic-ai/sdk";
import { zodOutputFormat } from "@anthropic-ai/sdk/helpers/zod";
import { ChatAnthropic } from "@langchain/anthropic";
import { OpenAI as LlamaIndexOpenAI } from "@llamaindex/openai";
import { generateText, Output, streamText, tool } from "ai";
import { createOllama } from "ollama-ai-provider-v2";
import { z } from "zod";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

/**
 * Enums and booleans only: the Anthropic SDK and provider move string and number bounds into the
 * description (Anthropic's structured outputs take no such keywords), so a bounded string would be
 * unbounded on the wire and the test model would ramble past it.
 */
const Character = z.object({
  name: z.enum(["Max", "Lily", "Tom"]),
  mood: z.enum(["happy", "sad", "angry"]),
  brave: z.boolean(),
});
const WeatherInput = z.object({ city: z.string().min(1).max(20), unit: z.enum(["celsius", "fahrenheit"]) });

describe("more clients against the app on the test model", () => {
  let server: RunningTextgen;

  before(async () => {
    server = await startTextgen();
  });
  after(async () => server.close());

  describe("AI SDK's Anthropic provider (@ai-sdk/anthropic)", () => {
    const model = () =>
      createAnthropic({ baseURL: `${server.url}/v1`, apiKey: "unused" })("claude-sonnet-4-5");

    it("generateText and streamText give the same text, with input tokens counted", async () => {
      const request = { prompt: "Tell me a story.", maxOutputTokens: 10, temperature: 0, maxRetries: 0 };
      const plain = await generateText({ model: model(), ...request });
      assert.ok(plain.text.length > 0);
      assert.ok((plain.usage.inputTokens ?? 0) > 0, JSON.stringify(plain.usage));
      const streamed = streamText({ model: model(), ...request });
      assert.equal(await streamed.text, plain.text);
      assert.ok(((await streamed.usage).inputTokens ?? 0) > 0);
    });

    it("a forced tool call with valid input; structured output matching the schema", async () => {
      const called = await generateText({
        model: model(),
        prompt: "Weather in Oslo?",
        tools: { get_weather: tool({ description: "The weather in a city", inputSchema: WeatherInput }) },
        toolChoice: "required",
        temperature: 0,
        maxRetries: 0,
      });
      const call = called.toolCalls[0]!;
      assert.equal(call.toolName, "get_weather");
      WeatherInput.parse(call.input);
      const { output } = await generateText({
        model: model(),
        prompt: "Describe a character.",
        output: Output.object({ schema: Character }),
        temperature: 0,
        maxRetries: 0,
      });
      Character.parse(output);
    });
  });

  describe("AI SDK's Ollama provider (ollama-ai-provider-v2)", () => {
    const model = () => createOllama({ baseURL: `${server.url}/api` })("llama");

    it("generateText and streamText give the same text", async () => {
      const request = { prompt: "Tell me a story.", maxOutputTokens: 10, temperature: 0, maxRetries: 0 };
      const plain = await generateText({ model: model(), ...request });
      assert.ok(plain.text.length > 0);
      assert.equal(await streamText({ model: model(), ...request }).text, plain.text);
    });
    // No forced tool call here: Ollama's API has no tool_choice, and the test model calls nothing unforced.
  });

  it("LangChain's ChatAnthropic: a plain invoke() with its default max_tokens, and stream()", async () => {
    const chat = new ChatAnthropic({
      model: "claude-sonnet-4-5",
      anthropicApiUrl: server.url,
      apiKey: "unused",
      temperature: 0,
      maxRetries: 0,
    });
    const message = await chat.invoke("Tell me a story.");
    assert.ok(message.text.length > 0);
    assert.ok((message.usage_metadata?.input_tokens ?? 0) > 0);
    let streamed = "";
    for await (const chunk of await chat.stream("Tell me a story.")) streamed += chunk.text;
    assert.equal(streamed, message.text);
  });

  it("LlamaIndex's OpenAI LLM: chat, plain and streamed", async () => {
    const llm = new LlamaIndexOpenAI({
      model: "gpt-4o",
      apiKey: "unused",
      baseURL: `${server.url}/v1`,
      temperature: 0,
      maxTokens: 10,
    });
    const messages = [{ role: "user" as const, content: "Tell me a story." }];
    const { message } = await llm.chat({ messages });
    assert.ok(typeof message.content === "string" && message.content.length > 0);
    let streamed = "";
    for await (const chunk of await llm.chat({ messages, stream: true })) streamed += chunk.delta;
    assert.equal(streamed, message.content);
  });

  describe("@anthropic-ai/sdk: structured output and models", () => {
    const client = () => new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });

    it("messages.parse with output_config.format (zod) gives a parsed object", async () => {
      const message = await client().messages.parse({
        model: "llama",
        max_tokens: 200,
        messages: [{ role: "user", content: "Describe a character." }],
        output_config: { format: zodOutputFormat(Character) },
      });
      Character.parse(message.parsed_output);
    });

    it("models.list names the served model; count_tokens counts", async () => {
      const models = [];
      for await (const model of client().models.list()) models.push(model);
      assert.ok(models.length >= 1);
      assert.equal(models[0]!.type, "model");
      const counted = await client().messages.countTokens({
        model: models[0]!.id,
        messages: [{ role: "user", content: "Hello there" }],
      });
      assert.ok(counted.input_tokens > 0);
    });
  });
});
