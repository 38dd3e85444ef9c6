/**
 * Issue #15's "done when": the real clients, as their users call them, against the app on the test
 * model. The test model writes children's stories and knows nothing of JSON or tools, so every
 * object and call that comes back valid is the grammar's doing.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { tool as langchainTool } from "@langchain/core/tools";
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai";
import { embed, embedMany, generateObject, generateText, streamObject, tool } from "ai";
import OpenAI from "openai";
import { z } from "zod";
import { startTextgen, type RunningTextgen } from "../helpers/servers.js";

/** Bounded fields, so that even a model that rambles finishes the object within its budget. */
const Character = z.object({
  name: z.string().min(1).max(12),
  age: z.number().int().min(1).max(99),
  mood: z.enum(["happy", "sad", "angry"]),
  likes: z.array(z.string().max(10)).max(3),
});
const characterSchema = z.toJSONSchema(Character) as Record<string, unknown>;

const WeatherInput = z.object({ city: z.string().min(1).max(20), unit: z.enum(["celsius", "fahrenheit"]) });
const weatherTool: OpenAI.ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: z.toJSONSchema(WeatherInput) as Record<string, unknown>,
  },
};

describe("real clients against the app on the test model", () => {
  let server: RunningTextgen;
  let baseURL: string;

  before(async () => {
    server = await startTextgen();
    baseURL = `${server.url}/v1`;
  });
  after(async () => server.close());

  describe("openai", () => {
    let client: OpenAI;
    before(() => {
      client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
    });

    it("json_schema: a parsed object that matches, plain and streamed", async () => {
      const request = {
        model: "llama",
        messages: [{ role: "user" as const, content: "Describe a character." }],
        temperature: 0,
        response_format: {
          type: "json_schema" as const,
          json_schema: { name: "character", schema: characterSchema, strict: true },
        },
      };
      const completion = await client.chat.completions.create(request);
      const plain = Character.parse(JSON.parse(completion.choices[0]!.message.content!));
      const stream = await client.chat.completions.create({ ...request, stream: true });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
      assert.deepEqual(Character.parse(JSON.parse(text)), plain);
    });

    it('tools with tool_choice "required": a parseable call, plain and streamed', async () => {
      const request = {
        model: "llama",
        messages: [{ role: "user" as const, content: "Weather in Oslo?" }],
        tools: [weatherTool],
        tool_choice: "required" as const,
        temperature: 0,
      };
      const completion = await client.chat.completions.create(request);
      const choice = completion.choices[0]!;
      assert.equal(choice.finish_reason, "tool_calls");
      const call = choice.message.tool_calls![0]!;
      assert.ok(call.type === "function");
      assert.equal(call.function.name, "get_weather");
      const args = WeatherInput.parse(JSON.parse(call.function.arguments));
      // The streaming helper assembles deltas by index, as applications do.
      const runner = client.chat.completions.stream(request);
      const final = await runner.finalChatCompletion();
      const streamedCall = final.choices[0]!.message.tool_calls![0]!;
      assert.ok(streamedCall.type === "function");
      assert.deepEqual(WeatherInput.parse(JSON.parse(streamedCall.function.arguments)), args);
      assert.equal(final.choices[0]!.finish_reason, "tool_calls");
    });

    it("logprobs, plain and streamed", async () => {
      const request = {
        model: "llama",
        messages: [{ role: "user" as const, content: "Tell me a story." }],
        max_tokens: 8,
        temperature: 0,
        logprobs: true,
        top_logprobs: 2,
      };
      const completion = await client.chat.completions.create(request);
      const content = completion.choices[0]!.logprobs!.content!;
      assert.equal(content.length, completion.usage!.completion_tokens);
      assert.ok(content.every((entry) => entry.top_logprobs.length === 2 && entry.logprob <= 0));
      const stream = await client.chat.completions.create({ ...request, stream: true });
      const streamed: OpenAI.ChatCompletionTokenLogprob[] = [];
      for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
      // The same tokens; the values agree to float precision (the second request reuses the first's
      // cached prompt, evaluated in a different batch).
      assert.deepEqual(
        streamed.map((entry) => entry.token),
        content.map((entry) => entry.token),
      );
      streamed.forEach((entry, i) => assert.ok(Math.abs(entry.logprob - content[i]!.logprob) < 1e-3));
    });

    it("embeddings (the client asks for base64 and decodes it)", async () => {
      const result = await client.embeddings.create({ model: "llama", input: ["Once upon a time", "A cat"] });
      assert.equal(result.data.length, 2);
      assert.equal(result.data[0]!.embedding.length, 64);
      assert.ok(result.usage.prompt_tokens > 0);
      const float = await client.embeddings.create({
        model: "llama",
        input: "A cat",
        encoding_format: "float",
      });
      assert.deepEqual(
        float.data[0]!.embedding.map((value) => Math.fround(value)),
        result.data[1]!.embedding.map((value) => Math.fround(value)),
      );
    });
  });

  describe("AI SDK (ai + @ai-sdk/openai-compatible)", () => {
    const provider = () =>
      createOpenAICompatible({ name: "lectern", baseURL, apiKey: "unused", supportsStructuredOutputs: true });

    it("generateObject with a zod schema returns a valid object; streamObject too", async () => {
      const { object } = await generateObject({
        model: provider()("llama"),
        schema: Character,
        prompt: "Describe a character.",
        temperature: 0,
        maxRetries: 0,
      });
      Character.parse(object);
      const streamed = streamObject({
        model: provider()("llama"),
        schema: Character,
        prompt: "Describe a character.",
        temperature: 0,
        maxRetries: 0,
      });
      let partials = 0;
      for await (const partial of streamed.partialObjectStream) if (partial) partials++;
      assert.ok(partials > 1, "the object grows as it streams");
      assert.deepEqual(await streamed.object, object);
    });

    it("generateText with a tool makes a valid call and runs it", async () => {
      const calls: z.infer<typeof WeatherInput>[] = [];
      const result = await generateText({
        model: provider()("llama"),
        prompt: "What is the weather in Oslo?",
        tools: {
          get_weather: tool({
            description: "The weather in a city",
            inputSchema: WeatherInput,
            execute: async (input) => {
              calls.push(input);
              return { temperature: 21 };
            },
          }),
        },
        toolChoice: "required",
        temperature: 0,
        maxRetries: 0,
      });
      assert.equal(result.toolCalls.length, 1);
      assert.equal(result.toolCalls[0]!.toolName, "get_weather");
      assert.equal(calls.length, 1);
      WeatherInput.parse(calls[0]);
      assert.deepEqual(result.toolResults[0]!.output, { temperature: 21 });
    });

    it("embed and embedMany", async () => {
      const one = await embed({ model: provider().embeddingModel("llama"), value: "A cat", maxRetries: 0 });
      assert.equal(one.embedding.length, 64);
      const many = await embedMany({
        model: provider().embeddingModel("llama"),
        values: ["A cat", "A dog"],
        maxRetries: 0,
      });
      assert.equal(many.embeddings.length, 2);
      assert.deepEqual(many.embeddings[0], one.embedding);
    });
  });

  describe("LangChain (@langchain/openai)", () => {
    const chatModel = () =>
      new ChatOpenAI({
        model: "llama",
        apiKey: "unused",
        temperature: 0,
        maxRetries: 0,
        configuration: { baseURL },
      });

    it("withStructuredOutput returns a valid object", async () => {
      const structured = chatModel().withStructuredOutput(Character, { name: "character" });
      const object = await structured.invoke("Describe a character.");
      Character.parse(object);
    });

    it('withStructuredOutput with method "jsonSchema" too', async () => {
      const structured = chatModel().withStructuredOutput(Character, {
        name: "character",
        method: "jsonSchema",
      });
      Character.parse(await structured.invoke("Describe a character."));
    });

    it("bindTools: the model's message carries a parseable tool call", async () => {
      const weather = langchainTool(async () => "sunny", {
        name: "get_weather",
        description: "The weather in a city",
        schema: WeatherInput,
      });
      const model = chatModel().bindTools([weather], { tool_choice: "required" });
      const message = await model.invoke("What is the weather in Oslo?");
      assert.equal(message.tool_calls?.length, 1);
      assert.equal(message.tool_calls![0]!.name, "get_weather");
      WeatherInput.parse(message.tool_calls![0]!.args);
    });

    it("OpenAIEmbeddings embeds queries and documents", async () => {
      const embeddings = new OpenAIEmbeddings({
        model: "llama",
        apiKey: "unused",
        configuration: { baseURL },
      });
      const query = await embeddings.embedQuery("A cat");
      assert.equal(query.length, 64);
      const documents = await embeddings.embedDocuments(["A cat", "A dog", "A boat"]);
      assert.equal(documents.length, 3);
      assert.ok(documents.every((vector) => vector.length === 64));
    });
  });
});
