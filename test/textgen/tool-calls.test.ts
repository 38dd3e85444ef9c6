import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Llama2ChatWrapper, QwenChatWrapper } from "node-llama-cpp";
import {
  AutoCallHoldback,
  ForcedCallStream,
  parseAutoCalls,
  toChatHistory,
  type ToolCallDelta,
} from "../../src/textgen/engine/tool-calls.js";
import { sseEvents, startTextgen, type RunningTextgen } from "../helpers/servers.js";

/** Response bodies are read loosely: the assertions check their shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", minLength: 1, maxLength: 20 },
        unit: { enum: ["celsius", "fahrenheit"] },
      },
      required: ["city", "unit"],
    },
  },
};
const time = {
  type: "function",
  function: {
    name: "get_time",
    description: "The time in a time zone",
    parameters: { type: "object", properties: { zone: { type: "string", maxLength: 10 } } },
  },
};

function assertWeatherArguments(json: string): void {
  const args = JSON.parse(json) as Record<string, unknown>;
  assert.equal(typeof args.city, "string");
  assert.ok((args.city as string).length >= 1 && (args.city as string).length <= 20);
  assert.ok(["celsius", "fahrenheit"].includes(args.unit as string));
}

describe("tool calls on the test model", () => {
  let server: RunningTextgen;

  before(async () => {
    server = await startTextgen();
  });
  after(async () => server.close());

  async function chat(body: object) {
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: "What is the weather in Paris?" }],
        max_tokens: 200,
        ...body,
      }),
    });
    return { status: response.status, body: (await response.json()) as Loose };
  }

  it("tool_choice required: a grammar-constrained call that parses and matches, whatever the sampling", async () => {
    for (const sampling of [
      { temperature: 0 },
      { temperature: 1.5, seed: 1 },
      { temperature: 1.5, seed: 2 },
    ]) {
      const { status, body } = await chat({ tools: [weather], tool_choice: "required", ...sampling });
      assert.equal(status, 200);
      const choice = body.choices[0];
      assert.equal(choice.finish_reason, "tool_calls");
      assert.equal(choice.message.content, null);
      assert.equal(choice.message.tool_calls.length, 1);
      const call = choice.message.tool_calls[0];
      assert.match(call.id, /^call_/);
      assert.equal(call.type, "function");
      assert.equal(call.function.name, "get_weather");
      assertWeatherArguments(call.function.arguments);
    }
  });

  it("a named tool_choice calls that tool, among several", async () => {
    const { status, body } = await chat({
      tools: [weather, time],
      tool_choice: { type: "function", function: { name: "get_time" } },
      temperature: 0,
    });
    assert.equal(status, 200);
    const call = body.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, "get_time");
    const args = JSON.parse(call.function.arguments) as Record<string, unknown>;
    assert.deepEqual(Object.keys(args), ["zone"]);
  });

  it("an unknown tool in tool_choice is a 400 naming it", async () => {
    const { status, body } = await chat({
      tools: [weather],
      tool_choice: { type: "function", function: { name: "launch" } },
    });
    assert.equal(status, 400);
    assert.equal(body.error.type, "invalid_request_error");
    assert.match(body.error.message, /"launch"/);
  });

  it("what a forced call's grammar cannot enforce is named in x-lectern-unenforced; strict refuses it", async () => {
    // Issue #34: forced calls enforce what the grammar can and drop the rest with a note.
    const parameters = { ...weather.function.parameters, not: { required: ["x"] } };
    const lenient = { ...weather, function: { ...weather.function, parameters } };
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: "What is the weather in Paris?" }],
        max_tokens: 200,
        temperature: 0,
        tools: [lenient],
        tool_choice: "required",
      }),
    });
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("x-lectern-unenforced"), "tools.0.function.parameters.not");
    const answer = (await response.json()) as Loose;
    assertWeatherArguments(answer.choices[0].message.tool_calls[0].function.arguments);
    const strict = { ...weather, function: { ...weather.function, parameters, strict: true } };
    const { status, body } = await chat({ tools: [strict], tool_choice: "required" });
    assert.equal(status, 400);
    assert.match(body.error.message, /tools\.0\.function\.parameters\.not/);
    assert.equal(body.error.param, "tools.0.function.parameters");
  });

  it("tool_choice none answers in text", async () => {
    const { status, body } = await chat({
      tools: [weather],
      tool_choice: "none",
      max_tokens: 8,
      temperature: 0,
    });
    assert.equal(status, 200);
    assert.equal(typeof body.choices[0].message.content, "string");
    assert.equal(body.choices[0].message.tool_calls, undefined);
  });

  it("streams a call as OpenAI does: deltas with index, id, name, then arguments", async () => {
    const request = { tools: [weather], tool_choice: "required", temperature: 0 };
    const plain = await chat(request);
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: "What is the weather in Paris?" }],
        max_tokens: 200,
        stream: true,
        ...request,
      }),
    });
    const calls: { id?: string; name?: string; arguments: string }[] = [];
    let finish: string | null = null;
    let argumentDeltas = 0;
    for await (const event of sseEvents(response)) {
      if (event.data === "[DONE]") break;
      const choice = (JSON.parse(event.data) as Loose).choices[0];
      finish = choice?.finish_reason ?? finish;
      for (const delta of choice?.delta?.tool_calls ?? []) {
        assert.equal(typeof delta.index, "number");
        const call = (calls[delta.index] ??= { arguments: "" });
        call.id ??= delta.id;
        call.name ??= delta.function?.name;
        call.arguments += delta.function?.arguments ?? "";
        if (delta.function?.arguments) argumentDeltas++;
      }
    }
    assert.equal(finish, "tool_calls");
    assert.ok(argumentDeltas > 1, `the arguments arrive as they are generated (${argumentDeltas} deltas)`);
    assert.equal(calls.length, 1);
    assert.match(calls[0]!.id!, /^call_/);
    assert.equal(calls[0]!.name, "get_weather");
    assert.equal(calls[0]!.arguments, plain.body.choices[0].message.tool_calls[0].function.arguments);
    assertWeatherArguments(calls[0]!.arguments);
  });

  it("with tool_choice auto, a text answer still streams as it is written", async () => {
    const request = { tools: [weather], tool_choice: "auto", max_tokens: 24, temperature: 0 };
    const plain = await chat(request);
    assert.equal(plain.body.choices[0].message.tool_calls, undefined, "the test model writes a story");
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: "What is the weather in Paris?" }],
        stream: true,
        ...request,
      }),
    });
    const pieces: string[] = [];
    for await (const event of sseEvents(response)) {
      if (event.data === "[DONE]") break;
      const content = (JSON.parse(event.data) as Loose).choices[0]?.delta?.content;
      if (content) pieces.push(content);
    }
    assert.ok(pieces.length > 2, `${pieces.length} pieces`);
    assert.equal(pieces.join(""), plain.body.choices[0].message.content);
  });

  it("accepts a history with an assistant's tool calls (content null) and the tool's result", async () => {
    const { status, body } = await chat({
      messages: [
        { role: "user", content: "What is the weather in Paris?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "call_1",
              type: "function",
              function: { name: "get_weather", arguments: '{"city":"Paris","unit":"celsius"}' },
            },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: '{"temperature":21}' },
      ],
      tools: [weather],
      max_tokens: 8,
      temperature: 0,
    });
    assert.equal(status, 200);
    assert.ok(["stop", "length", "tool_calls"].includes(body.choices[0].finish_reason));
  });
});

describe("a forced call followed as it is generated", () => {
  it("announces the call by name, then passes the arguments on piece by piece", () => {
    const text =
      '{ "name": "get_\\"weather", "arguments": { "city": "a}b", "list": [1, {"x": 2}] } }\n\n\n\n';
    for (const size of [1, 3, 7, text.length]) {
      const deltas: ToolCallDelta[] = [];
      const stream = new ForcedCallStream((delta) => deltas.push(delta));
      for (let i = 0; i < text.length; i += size) stream.push(text.slice(i, i + size));
      assert.equal(deltas[0]!.name, 'get_"weather');
      assert.equal(deltas[0]!.id, stream.id);
      const args = deltas.map((delta) => delta.arguments).join("");
      assert.equal(args, '{ "city": "a}b", "list": [1, {"x": 2}] }');
      assert.deepEqual(stream.call(), { id: stream.id, name: 'get_"weather', arguments: args });
    }
  });

  it("has no call when the text ends before the arguments close", () => {
    const stream = new ForcedCallStream();
    stream.push('{"name": "get_weather", "arguments": {"city": "Os');
    assert.equal(stream.call(), undefined);
  });
});

describe("tool calls in freely written answers (tool_choice auto)", () => {
  const tools = [{ name: "get_weather" }, { name: "get_time" }];

  it("streams text until something may begin a call, then holds the rest", () => {
    const released: string[] = [];
    const holdback = new AutoCallHoldback(new Llama2ChatWrapper(), (piece) => released.push(piece));
    for (const piece of ["Let me ", "look. |", "|ca", 'll: get_weather({"city": "Oslo"})', " more"])
      holdback.push(piece);
    assert.equal(released.join(""), "Let me look. ");
    assert.equal(holdback.released, "Let me look. ");
    const plain = new AutoCallHoldback(new Llama2ChatWrapper());
    for (const piece of ["The sky ", "is blue", "."]) plain.push(piece);
    assert.equal(plain.released, "The sky is blue.");
  });

  it("reads the chat wrapper's own call syntax", () => {
    const parsed = parseAutoCalls(
      'Let me look. ||call: get_weather({"city": "Paris"})',
      new Llama2ChatWrapper(),
      tools,
    );
    assert.ok(parsed);
    assert.equal(parsed.content, "Let me look.");
    assert.equal(parsed.calls.length, 1);
    assert.equal(parsed.calls[0]!.name, "get_weather");
    assert.deepEqual(JSON.parse(parsed.calls[0]!.arguments), { city: "Paris" });
  });

  it("reads Hermes/Qwen <tool_call> JSON, several calls at once", () => {
    const parsed = parseAutoCalls(
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n' +
        '<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET"}}\n</tool_call>',
      new QwenChatWrapper(),
      tools,
    );
    assert.ok(parsed);
    assert.deepEqual(
      parsed.calls.map((call) => [call.name, JSON.parse(call.arguments)]),
      [
        ["get_weather", { city: "Oslo" }],
        ["get_time", { zone: "CET" }],
      ],
    );
    assert.equal(parsed.content, "");
  });

  it("leaves text that calls no known tool alone", () => {
    assert.equal(parseAutoCalls("The sky is blue.", new Llama2ChatWrapper(), tools), undefined);
    assert.equal(
      parseAutoCalls('{"name": "launch_rocket", "arguments": {}}', new Llama2ChatWrapper(), tools),
      undefined,
    );
  });

  it("attaches tool results to their calls in the history node-llama-cpp renders", () => {
    const history = toChatHistory([
      { role: "user", content: "Weather?" },
      {
        role: "assistant",
        content: "",
        toolCalls: [{ id: "call_9", name: "get_weather", arguments: '{"city":"Rome"}' }],
      },
      { role: "tool", content: '{"temperature":30}', toolCallId: "call_9" },
    ]);
    assert.deepEqual(history[1], {
      type: "model",
      response: [
        { type: "functionCall", name: "get_weather", params: { city: "Rome" }, result: { temperature: 30 } },
      ],
    });
  });
});
