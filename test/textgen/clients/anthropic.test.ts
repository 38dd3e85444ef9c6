/** Issue #25: Anthropic's Messages API through @anthropic-ai/sdk, against the app on the test model. */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { z } from "zod";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const WeatherInput = z.object({ city: z.string().min(1).max(20), unit: z.enum(["celsius", "fahrenheit"]) });
const weatherTool: Anthropic.Tool = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: z.toJSONSchema(WeatherInput) as Anthropic.Tool.InputSchema,
};

/** This SDK's types leave temperature out; the API takes it, and greedy decoding makes runs comparable. */
const greedy = { temperature: 0 };

describe("Anthropic Messages: @anthropic-ai/sdk against the app on the test model", () => {
  let server: RunningTextgen;
  let client: Anthropic;

  before(async () => {
    server = await startTextgen();
    client = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
  });
  after(async () => server.close());

  it("messages.create, and messages.stream giving the same message", async () => {
    const request = {
      model: "llama",
      max_tokens: 12,
      system: "You tell stories.",
      messages: [{ role: "user" as const, content: "Tell me a story." }],
      temperature: 0,
    };
    const message = await client.messages.create(request);
    assert.equal(message.type, "message");
    assert.equal(message.role, "assistant");
    assert.equal(message.stop_reason, "max_tokens");
    assert.equal(message.usage.output_tokens, 12);
    const block = message.content[0]!;
    assert.ok(block.type === "text" && block.text.length > 0);

    const stream = client.messages.stream(request);
    const events: string[] = [];
    stream.on("streamEvent", (event) => events.push(event.type));
    const final = await stream.finalMessage();
    assert.deepEqual(final.content, message.content);
    assert.equal(final.stop_reason, "max_tokens");
    assert.equal(events[0], "message_start");
    assert.ok(events.includes("content_block_delta"));
    assert.deepEqual(events.slice(-3), ["content_block_stop", "message_delta", "message_stop"]);
  });

  it("a tool_use → tool_result round trip", async () => {
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "Weather in Oslo?" }];
    const first = await client.messages.create({
      model: "llama",
      max_tokens: 200,
      messages,
      tools: [weatherTool],
      tool_choice: { type: "any" },
      ...greedy,
    });
    assert.equal(first.stop_reason, "tool_use");
    const use = first.content.find((block) => block.type === "tool_use");
    assert.ok(use && use.type === "tool_use");
    assert.equal(use.name, "get_weather");
    WeatherInput.parse(use.input);
    const second = await client.messages.create({
      model: "llama",
      max_tokens: 8,
      messages: [
        ...messages,
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: use.id, content: '{"temperature": 21}' }],
        },
      ],
      tools: [weatherTool],
      tool_choice: { type: "none" },
      ...greedy,
    });
    assert.equal(second.content[0]!.type, "text");
    assert.ok(second.usage.input_tokens + (second.usage.cache_read_input_tokens ?? 0) > 0);
  });

  it("a forced tool use cut by max_tokens stays a tool_use with stop_reason max_tokens, streamed too", async () => {
    const request = {
      model: "llama",
      max_tokens: 30,
      messages: [{ role: "user" as const, content: "Weather in Oslo?" }],
      tools: [weatherTool],
      tool_choice: { type: "tool" as const, name: "get_weather" },
      temperature: 0,
    };
    const message = await client.messages.create(request);
    assert.equal(message.stop_reason, "max_tokens");
    assert.deepEqual(
      message.content.map((block) => block.type),
      ["tool_use"],
    );
    const streamed = await client.messages.stream(request).finalMessage();
    assert.equal(streamed.stop_reason, "max_tokens");
    assert.equal(streamed.content[0]!.type, "tool_use");
  });

  it("countTokens counts the rendered messages", async () => {
    const short = await client.messages.countTokens({
      model: "llama",
      messages: [{ role: "user", content: "Hi" }],
    });
    const withTools = await client.messages.countTokens({
      model: "llama",
      messages: [{ role: "user", content: "Hi" }],
      tools: [weatherTool],
    });
    assert.ok(short.input_tokens > 0 && withTools.input_tokens > short.input_tokens);
  });

  it("errors in Anthropic's shape: a wrong type, an image block; an unknown field is ignored and named", async () => {
    const send = (extra: object) =>
      fetch(`${server.url}/v1/messages`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "llama",
          max_tokens: 4,
          messages: [{ role: "user", content: "Hi" }],
          ...extra,
        }),
      });
    // Issue #34: a field no reference defines is ignored, and named in a header.
    const unknown = await send({ foo: 1 });
    assert.equal(unknown.status, 200);
    assert.equal(unknown.headers.get("x-lectern-ignored-fields"), "foo");
    const wrongType = await send({ temperature: "warm" });
    assert.equal(wrongType.status, 400);
    const body = (await wrongType.json()) as { type: string; error: { type: string; message: string } };
    assert.equal(body.type, "error");
    assert.equal(body.error.type, "invalid_request_error");
    assert.match(body.error.message, /temperature/);
    await assert.rejects(
      client.messages.create({
        model: "llama",
        max_tokens: 4,
        messages: [
          {
            role: "user",
            content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }],
          },
        ],
      }),
      (error: InstanceType<typeof Anthropic.APIError>) =>
        error.status === 400 && /image blocks are not supported/.test(error.message),
    );
  });
});
