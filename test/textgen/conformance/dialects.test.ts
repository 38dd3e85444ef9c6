/**
 * The dialect contract (issue #34): over a scripted generator, every dialect, streamed and not,
 * encodes every script (text, reasoning, text then a tool call, a length stop, a failure) to its
 * reference shape, read back by the dialect's own client library wherever one exists (its stream
 * accumulators check the event order too). A streamed answer and a non-streamed one are the same
 * answer: both come from the one event stream.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { DomainError } from "../../../src/core/errors.js";
import { sseEvents } from "../../helpers/servers.js";
import { startScriptedApp, type ScriptedApp } from "../../helpers/scripted-app.js";
import type { Script } from "../../helpers/scripted-generator.js";

/** Response bodies are read loosely: the assertions check their shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

const CALL = { name: "get_weather", arguments: '{"city":"Oslo","unit":"celsius"}' };
const scripts: Record<string, Script> = {
  text: { steps: [{ text: "Hello there, world." }] },
  reasoning: { steps: [{ reasoning: "First I think." }, { text: "Then I answer." }] },
  tool: { steps: [{ text: "Let me check." }, { toolCall: CALL }] },
  length: { steps: [{ text: "one two three four five six" }] },
  fail: { steps: [{ text: "Partial" }, { fail: new DomainError("upstream", "the scripted model failed") }] },
};

/** An answer as any dialect carries it, in common terms. */
interface Answer {
  text: string;
  reasoning?: string;
  calls: { name: string; arguments: unknown }[];
  finish: "stop" | "length" | "tool_calls";
}

const expected: Record<string, Answer> = {
  text: { text: "Hello there, world.", calls: [], finish: "stop" },
  reasoning: { text: "Then I answer.", reasoning: "First I think.", calls: [], finish: "stop" },
  tool: {
    text: "Let me check.",
    calls: [{ name: CALL.name, arguments: JSON.parse(CALL.arguments) }],
    finish: "tool_calls",
  },
  // Four characters a token: three tokens of the text.
  length: { text: "one two thre", calls: [], finish: "length" },
};
/** The length script runs with this many new tokens at most. */
const LENGTH_LIMIT = 3;

const tools = [
  {
    name: CALL.name,
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string" } } },
  },
];

type Dialect = (script: string, stream: boolean) => Promise<Answer>;
/** Text-only dialects (a raw prompt) never meet reasoning or tool calls. */
const textOnly = ["text", "length"];

describe("dialect contract over a scripted generator", () => {
  let app: ScriptedApp;
  let openai: OpenAI;
  let anthropic: Anthropic;
  let ollama: Ollama;

  before(async () => {
    app = await startScriptedApp(scripts);
    openai = new OpenAI({ baseURL: `${app.url}/v1`, apiKey: "unused", maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: app.url, apiKey: "unused", maxRetries: 0 });
    ollama = new Ollama({ host: app.url });
  });
  after(async () => app.close());

  const limitOf = (script: string) => (script === "length" ? LENGTH_LIMIT : 100);

  const dialects: Record<string, { run: Dialect; scripts: string[] }> = {
    "OpenAI chat": {
      scripts: Object.keys(expected),
      run: async (script, stream) => {
        const request = {
          model: "m",
          messages: [{ role: "user" as const, content: `script:${script}` }],
          max_tokens: limitOf(script),
          tools: tools.map((tool) => ({ type: "function" as const, function: tool })),
        };
        if (!stream) {
          const completion = await openai.chat.completions.create(request);
          const choice = completion.choices[0]!;
          const message = choice.message as typeof choice.message & { reasoning_content?: string };
          assert.equal(completion.object, "chat.completion");
          assert.equal(
            completion.usage!.total_tokens,
            completion.usage!.prompt_tokens + completion.usage!.completion_tokens,
          );
          return {
            text: message.content ?? "",
            ...(message.reasoning_content !== undefined && { reasoning: message.reasoning_content }),
            calls: (message.tool_calls ?? []).map((call) => ({
              name: (call as Loose).function.name,
              arguments: JSON.parse((call as Loose).function.arguments),
            })),
            finish: choice.finish_reason as Answer["finish"],
          };
        }
        const chunks = await openai.chat.completions.create({
          ...request,
          stream: true,
          stream_options: { include_usage: true },
        });
        let text = "";
        let reasoning = "";
        let finish = "";
        let usage: Loose;
        const calls: { name: string; arguments: string }[] = [];
        let first = true;
        for await (const chunk of chunks) {
          if (chunk.usage) usage = chunk.usage;
          const choice = chunk.choices[0];
          if (!choice) continue;
          if (first)
            assert.deepEqual(
              choice.delta,
              { role: "assistant", content: "" },
              "the first chunk gives the role",
            );
          first = false;
          const delta = choice.delta as Loose;
          text += delta.content ?? "";
          reasoning += delta.reasoning_content ?? "";
          for (const call of delta.tool_calls ?? []) {
            if (call.id) calls[call.index] = { name: call.function.name, arguments: "" };
            calls[call.index]!.arguments += call.function.arguments ?? "";
          }
          if (choice.finish_reason) finish = choice.finish_reason;
        }
        assert.ok(usage && usage.completion_tokens > 0, "include_usage gives a usage chunk");
        return {
          text,
          ...(reasoning !== "" && { reasoning }),
          calls: calls.map((call) => ({ name: call.name, arguments: JSON.parse(call.arguments) })),
          finish: finish as Answer["finish"],
        };
      },
    },
    "OpenAI completions": {
      scripts: textOnly,
      run: async (script, stream) => {
        const request = { model: "m", prompt: `script:${script}`, max_tokens: limitOf(script) };
        if (!stream) {
          const completion = await openai.completions.create(request);
          return {
            text: completion.choices[0]!.text,
            calls: [],
            finish: completion.choices[0]!.finish_reason as Answer["finish"],
          };
        }
        let text = "";
        let finish = "";
        for await (const chunk of await openai.completions.create({ ...request, stream: true })) {
          text += chunk.choices[0]?.text ?? "";
          finish = chunk.choices[0]?.finish_reason ?? finish;
        }
        return { text, calls: [], finish: finish as Answer["finish"] };
      },
    },
    "OpenAI Responses": {
      scripts: Object.keys(expected),
      run: async (script, stream) => {
        const request = {
          model: "m",
          input: `script:${script}`,
          max_output_tokens: limitOf(script),
          tools: tools.map((tool) => ({ type: "function" as const, strict: false, ...tool })),
        };
        const response = stream
          ? await openai.responses.stream(request).finalResponse()
          : await openai.responses.create(request);
        const output = response.output;
        const reasoning = output.find((item) => item.type === "reasoning") as Loose;
        if (reasoning)
          assert.deepEqual(reasoning.summary, [{ type: "summary_text", text: reasoning.content[0].text }]);
        const calls = output.filter((item) => item.type === "function_call") as Loose[];
        return {
          text: response.output_text,
          ...(reasoning && { reasoning: reasoning.content[0].text }),
          calls: calls.map((call) => ({ name: call.name, arguments: JSON.parse(call.arguments) })),
          finish: response.status === "incomplete" ? "length" : calls.length > 0 ? "tool_calls" : "stop",
        };
      },
    },
    "Anthropic Messages": {
      scripts: Object.keys(expected),
      run: async (script, stream) => {
        const request = {
          model: "m",
          max_tokens: limitOf(script),
          messages: [{ role: "user" as const, content: `script:${script}` }],
          tools: tools.map((tool) => ({
            name: tool.name,
            description: tool.description,
            input_schema: tool.parameters as Loose,
          })),
        };
        let message: Anthropic.Message;
        if (stream) {
          const events: string[] = [];
          const messages = anthropic.messages.stream(request);
          let startTokens = -1;
          messages.on("streamEvent", (event) => {
            events.push(event.type);
            if (event.type === "message_start") startTokens = event.message.usage.input_tokens;
          });
          message = await messages.finalMessage();
          assert.ok(startTokens > 0, "message_start reports the prompt's tokens");
          assert.equal(events[0], "message_start");
          assert.deepEqual(events.slice(-2), ["message_delta", "message_stop"]);
        } else message = await anthropic.messages.create(request);
        assert.ok(message.usage.input_tokens > 0);
        const text = message.content
          .filter((block) => block.type === "text")
          .map((block) => block.text)
          .join("");
        const thinking = message.content.find((block) => block.type === "thinking");
        const stopWords: Record<string, Answer["finish"]> = {
          end_turn: "stop",
          max_tokens: "length",
          tool_use: "tool_calls",
        };
        return {
          text,
          ...(thinking?.type === "thinking" && { reasoning: thinking.thinking }),
          calls: message.content.flatMap((block) =>
            block.type === "tool_use" ? [{ name: block.name, arguments: block.input }] : [],
          ),
          finish: stopWords[message.stop_reason!]!,
        };
      },
    },
    "Ollama chat": {
      scripts: Object.keys(expected),
      run: async (script, stream) => {
        const request = {
          model: "m",
          messages: [{ role: "user", content: `script:${script}` }],
          options: { num_predict: limitOf(script) },
          tools: tools.map((tool) => ({ type: "function", function: tool })) as Loose,
        };
        const parts: Loose[] = [];
        if (stream)
          for await (const part of await ollama.chat({ ...request, stream: true })) parts.push(part);
        else parts.push(await ollama.chat({ ...request, stream: false }));
        const last = parts.at(-1);
        assert.equal(last.done, true);
        const reasoning = parts.map((part) => part.message.thinking ?? "").join("");
        const calls = parts.flatMap((part) => part.message.tool_calls ?? []);
        return {
          text: parts.map((part) => part.message.content).join(""),
          ...(reasoning !== "" && { reasoning }),
          calls: calls.map((call: Loose) => ({
            name: call.function.name,
            arguments: call.function.arguments,
          })),
          finish: last.done_reason === "length" ? "length" : calls.length > 0 ? "tool_calls" : "stop",
        };
      },
    },
    "Ollama generate": {
      scripts: textOnly,
      run: async (script, stream) => {
        const request = {
          model: "m",
          prompt: `script:${script}`,
          raw: true,
          options: { num_predict: limitOf(script) },
        };
        const parts: Loose[] = [];
        if (stream)
          for await (const part of await ollama.generate({ ...request, stream: true })) parts.push(part);
        else parts.push(await ollama.generate({ ...request, stream: false }));
        return {
          text: parts.map((part) => part.response).join(""),
          calls: [],
          finish: parts.at(-1).done_reason,
        };
      },
    },
    "/predict": {
      scripts: textOnly,
      run: async (script, stream) => {
        const response = await fetch(`${app.url}/predict`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ text: `script:${script}`, max_length: limitOf(script), stream }),
        });
        if (!stream) {
          const body = (await response.json()) as Loose;
          return { text: body.generated_text, calls: [], finish: body.finish_reason };
        }
        let text = "";
        let done: Loose;
        for await (const event of sseEvents(response)) {
          if (event.event === "done") done = JSON.parse(event.data);
          else text += (JSON.parse(event.data) as { token: string }).token;
        }
        assert.equal(done.generated_text, text, "the last event holds what the pieces add up to");
        return { text, calls: [], finish: done.finish_reason };
      },
    },
  };

  for (const [name, dialect] of Object.entries(dialects))
    describe(name, () => {
      for (const script of dialect.scripts)
        it(`"${script}": streamed and not, the script's answer`, async () => {
          const whole = await dialect.run(script, false);
          const streamed = await dialect.run(script, true);
          assert.deepEqual(whole, expected[script]);
          assert.deepEqual(streamed, expected[script]);
        });
    });

  describe("a failure: before a stream opens, a plain error in the dialect's shape; after, an error in the stream", () => {
    it("OpenAI chat", async () => {
      const request = { model: "m", messages: [{ role: "user" as const, content: "script:fail" }] };
      await assert.rejects(openai.chat.completions.create(request), (error: Loose) => {
        assert.equal(error.status, 502);
        assert.equal(error.error.type, "server_error");
        assert.match(error.message, /scripted model failed/);
        return true;
      });
      const chunks = await openai.chat.completions.create({ ...request, stream: true });
      let text = "";
      await assert.rejects(
        (async () => {
          for await (const chunk of chunks) text += chunk.choices[0]?.delta.content ?? "";
        })(),
        /scripted model failed/,
      );
      assert.equal(text, "Partial");
    });

    it("Anthropic Messages", async () => {
      const request = {
        model: "m",
        max_tokens: 50,
        messages: [{ role: "user" as const, content: "script:fail" }],
      };
      await assert.rejects(anthropic.messages.create(request), (error: Loose) => {
        assert.equal(error.status, 502);
        assert.equal(error.error.type, "error");
        assert.equal(error.error.error.type, "api_error");
        return true;
      });
      await assert.rejects(anthropic.messages.stream(request).finalMessage(), /scripted model failed/);
    });

    it("OpenAI Responses", async () => {
      const request = { model: "m", input: "script:fail" };
      await assert.rejects(openai.responses.create(request), (error: Loose) => error.status === 502);
      // OpenAI's stream reports a failure as an `error` event (then response.failed); openai 7 throws
      // at the error event, after yielding what came before it.
      const events: Loose[] = [];
      const stream = await openai.responses.create({ ...request, stream: true });
      await assert.rejects(
        (async () => {
          for await (const event of stream) events.push(event);
        })(),
        /scripted model failed/,
      );
      assert.equal(events[0].type, "response.created");
      assert.ok(events.some((event) => event.type === "response.output_text.delta"));
      // On the wire: the error event, then response.failed.
      const response = await fetch(`${app.url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...request, stream: true }),
      });
      const wire = (await response.text()).split("\n").filter((line) => line.startsWith("event: "));
      const errorAt = wire.indexOf("event: error");
      assert.ok(errorAt > 0, wire.join(" "));
      assert.equal(wire.at(-1), "event: response.failed");
    });

    it("Ollama chat and /predict", async () => {
      await assert.rejects(
        ollama.chat({ model: "m", messages: [{ role: "user", content: "script:fail" }], stream: false }),
        /scripted model failed/,
      );
      const lines: Loose[] = [];
      await assert.rejects(
        (async () => {
          for await (const part of await ollama.chat({
            model: "m",
            messages: [{ role: "user", content: "script:fail" }],
            stream: true,
          }))
            lines.push(part);
        })(),
        /scripted model failed/,
      );
      assert.equal(lines.map((line) => line.message.content).join(""), "Partial");
      const predicted = await fetch(`${app.url}/predict`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ text: "script:fail", stream: true }),
      });
      const events = [];
      for await (const event of sseEvents(predicted)) events.push(event);
      assert.equal(events.at(-1)!.event, "error");
      assert.equal(JSON.parse(events.at(-1)!.data).error.code, "upstream_error");
    });
  });

  it("n: 2 gives two choices, streamed and not, with the prompt counted once", async () => {
    const request = { model: "m", messages: [{ role: "user" as const, content: "script:text" }], n: 2 };
    const completion = await openai.chat.completions.create(request);
    assert.deepEqual(
      completion.choices.map((choice) => [choice.index, choice.message.content]),
      [
        [0, "Hello there, world."],
        [1, "Hello there, world."],
      ],
    );
    const single = await openai.chat.completions.create({ ...request, n: 1 });
    assert.equal(completion.usage!.prompt_tokens, single.usage!.prompt_tokens);
    assert.equal(completion.usage!.completion_tokens, 2 * single.usage!.completion_tokens);
    const texts = ["", ""];
    for await (const chunk of await openai.chat.completions.create({ ...request, stream: true }))
      for (const choice of chunk.choices) texts[choice.index] += choice.delta.content ?? "";
    assert.deepEqual(texts, ["Hello there, world.", "Hello there, world."]);
  });
});
