/**
 * Issue #25: OpenAI's Responses API as its real clients call it (openai's `responses`, the AI SDK's
 * default `openai()` provider, LangChain's `useResponsesApi`), against the app on the test model.
 * The model writes children's stories: every object and call that comes back valid is the grammar's.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createOpenAI } from "@ai-sdk/openai";
import { ChatOpenAI } from "@langchain/openai";
import { generateObject, generateText, stepCountIs, streamText, tool } from "ai";
import OpenAI from "openai";
import { z } from "zod";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const Character = z.object({
  name: z.string().min(1).max(12),
  age: z.number().int().min(1).max(99),
  mood: z.enum(["happy", "sad", "angry"]),
});
const WeatherInput = z.object({ city: z.string().min(1).max(20), unit: z.enum(["celsius", "fahrenheit"]) });
const weatherTool = {
  type: "function" as const,
  name: "get_weather",
  description: "The weather in a city",
  parameters: z.toJSONSchema(WeatherInput) as Record<string, unknown>,
  strict: true,
};

describe("Responses API: real clients against the app on the test model", () => {
  let server: RunningTextgen;
  let client: OpenAI;
  let baseURL: string;

  before(async () => {
    server = await startTextgen();
    baseURL = `${server.url}/v1`;
    client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
  });
  after(async () => server.close());

  it("responses.create: a message item with output_text, usage, and the same text streamed", async () => {
    const request = { model: "llama", input: "Tell me a story.", max_output_tokens: 12, temperature: 0 };
    const response = await client.responses.create(request);
    assert.equal(response.object, "response");
    assert.equal(response.status, "incomplete");
    assert.equal(response.incomplete_details?.reason, "max_output_tokens");
    const message = response.output[0]!;
    assert.equal(message.type, "message");
    assert.ok(response.output_text.length > 0);
    assert.equal(response.usage!.output_tokens, 12);
    assert.ok(response.usage!.input_tokens > 0);

    const stream = await client.responses.create({ ...request, stream: true });
    const types: string[] = [];
    const sequence: number[] = [];
    let text = "";
    let final: OpenAI.Responses.Response | undefined;
    for await (const event of stream) {
      types.push(event.type);
      sequence.push(event.sequence_number);
      if (event.type === "response.output_text.delta") text += event.delta;
      if (event.type === "response.incomplete" || event.type === "response.completed") final = event.response;
    }
    assert.equal(text, response.output_text);
    assert.deepEqual(sequence, [...sequence.keys()], "sequence_number counts every event from 0");
    assert.deepEqual(types.slice(0, 4), [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    assert.ok(types.includes("response.output_text.done") && types.includes("response.output_item.done"));
    assert.equal(types.at(-1), "response.incomplete");
    assert.equal(final!.output_text ?? text, text);
  });

  it("tools: a forced call, then a function_call_output round trip", async () => {
    const input: OpenAI.Responses.ResponseInput = [{ role: "user", content: "Weather in Oslo?" }];
    const first = await client.responses.create({
      model: "llama",
      input,
      tools: [weatherTool],
      tool_choice: "required",
      temperature: 0,
    });
    const call = first.output.find((item) => item.type === "function_call");
    assert.ok(call && call.type === "function_call");
    assert.equal(call.name, "get_weather");
    WeatherInput.parse(JSON.parse(call.arguments));
    const second = await client.responses.create({
      model: "llama",
      input: [
        ...input,
        { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
        { type: "function_call_output", call_id: call.call_id, output: '{"temperature": 21}' },
      ],
      tools: [weatherTool],
      tool_choice: "none",
      max_output_tokens: 8,
      temperature: 0,
    });
    assert.equal(second.output[0]!.type, "message");
    assert.ok(second.output_text.length > 0);
    // The call and its result are part of the prompt the model read.
    const bare = await client.responses.inputTokens.count({ model: "llama", input });
    assert.ok(second.usage!.input_tokens > bare.input_tokens);
  });

  it("a forced call cut by max_output_tokens is still a function_call, incomplete", async () => {
    const response = await client.responses.create({
      model: "llama",
      input: "Weather in Oslo?",
      tools: [weatherTool],
      tool_choice: { type: "function", name: "get_weather" },
      max_output_tokens: 12,
      temperature: 0,
    });
    assert.equal(response.status, "incomplete");
    assert.deepEqual(
      response.output.map((item) => item.type),
      ["function_call"],
    );
  });

  it("chat: a forced call cut by max_tokens is still tool_calls, finish_reason length, plain and streamed", async () => {
    const request = {
      model: "llama",
      messages: [{ role: "user" as const, content: "Weather in Oslo?" }],
      tools: [
        {
          type: "function" as const,
          function: { name: weatherTool.name, parameters: weatherTool.parameters },
        },
      ],
      tool_choice: "required" as const,
      max_tokens: 40,
      temperature: 0,
    };
    const completion = await client.chat.completions.create(request);
    const choice = completion.choices[0]!;
    assert.equal(choice.finish_reason, "length");
    assert.equal(choice.message.content, null);
    const call = choice.message.tool_calls![0]!;
    assert.ok(call.type === "function" && call.function.name === "get_weather");
    assert.ok(call.function.arguments.length > 0, "the arguments generated so far");
    const final = await client.chat.completions.stream(request).finalChatCompletion();
    assert.equal(final.choices[0]!.finish_reason, "length");
    const streamed = final.choices[0]!.message.tool_calls![0]!;
    assert.ok(streamed.type === "function");
    assert.equal(streamed.function.arguments, call.function.arguments);
  });

  it("text.format json_schema: output_text parses and matches", async () => {
    const response = await client.responses.create({
      model: "llama",
      input: "Describe a character.",
      text: {
        format: { type: "json_schema", name: "character", schema: z.toJSONSchema(Character), strict: true },
      },
      temperature: 0,
    });
    Character.parse(JSON.parse(response.output_text));
  });

  it("responses.inputTokens.count counts the rendered input; an id the store never kept is a 404", async () => {
    const short = await client.responses.inputTokens.count({ model: "llama", input: "Hi" });
    const long = await client.responses.inputTokens.count({
      model: "llama",
      input: "Hi there, tell me a long story about a cat.",
      instructions: "Be brief.",
    });
    assert.equal(short.object, "response.input_tokens");
    assert.ok(short.input_tokens > 0 && long.input_tokens > short.input_tokens);
    // Issue #34: store is accepted (kept by default, `store` says so; test/textgen/responses-store.test.ts
    // covers the store), and an id the store never kept is a 404 in OpenAI's shape.
    const stored = await client.responses.create({
      model: "llama",
      input: "Hi",
      store: true,
      max_output_tokens: 2,
    });
    assert.equal((stored as unknown as { store: boolean }).store, true);
    await assert.rejects(
      client.responses.create({ model: "llama", input: "Hi", previous_response_id: "resp_1" }),
      (error: InstanceType<typeof OpenAI.APIError>) =>
        error.status === 404 &&
        /resp_1/.test(error.message) &&
        (error.error as { param?: string }).param === "previous_response_id",
    );
  });

  describe("AI SDK's default openai() provider (Responses)", () => {
    const model = () => createOpenAI({ baseURL, apiKey: "unused" })("llama");

    it("generateText and streamText give the same text", async () => {
      const options = {
        model: model(),
        prompt: "Tell me a story.",
        maxOutputTokens: 10,
        temperature: 0,
        maxRetries: 0,
      };
      const plain = await generateText(options);
      assert.ok(plain.text.length > 0);
      assert.equal(plain.finishReason, "length");
      assert.equal(plain.usage.outputTokens, 10);
      const streamed = streamText(options);
      let text = "";
      for await (const piece of streamed.textStream) text += piece;
      assert.equal(text, plain.text);
    });

    it("generateObject returns a valid object", async () => {
      const { object } = await generateObject({
        model: model(),
        schema: Character,
        prompt: "Describe a character.",
        temperature: 0,
        maxRetries: 0,
      });
      Character.parse(object);
    });

    it("tools with stopWhen: the call runs and its result goes back in the next step", async () => {
      const calls: z.infer<typeof WeatherInput>[] = [];
      const result = await generateText({
        model: model(),
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
        prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? "required" : "none" }),
        stopWhen: stepCountIs(2),
        maxOutputTokens: 200,
        temperature: 0,
        maxRetries: 0,
      });
      assert.equal(result.steps.length, 2);
      assert.equal(calls.length, 1);
      WeatherInput.parse(calls[0]);
      assert.deepEqual(result.steps[0]!.toolResults[0]!.output, { temperature: 21 });
      assert.ok(result.text.length > 0, "the second step answers in text");
    });
  });

  it("LangChain ChatOpenAI with useResponsesApi", async () => {
    const chat = new ChatOpenAI({
      model: "llama",
      apiKey: "unused",
      temperature: 0,
      maxTokens: 10,
      maxRetries: 0,
      useResponsesApi: true,
      configuration: { baseURL },
    });
    const message = await chat.invoke("Tell me a story.");
    assert.ok(message.text.length > 0);
    let streamed = "";
    for await (const chunk of await chat.stream("Tell me a story.")) streamed += chunk.text;
    assert.equal(streamed, message.text);
  });
});
