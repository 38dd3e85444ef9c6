/**
 * Issue #34: a tool whose schema has a `pattern` and a `format: "uri"` (as coding agents' tools do),
 * called and answered in every client that offers tools: forced where the API has a forced choice
 * (the grammar makes the arguments follow the pattern; `uri` is not enforceable and is named in
 * `x-lectern-unenforced`), then the call and its result sent back, which the model reads (the prompt
 * grows). Ollama's API has no forced choice: its clients send the same round trip as history.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import Anthropic from "@anthropic-ai/sdk";
import { ChatAnthropic } from "@langchain/anthropic";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { ChatOllama } from "@langchain/ollama";
import { ChatOpenAI } from "@langchain/openai";
import { generateText, jsonSchema, stepCountIs, tool, type LanguageModel, type ModelMessage } from "ai";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { createOllama } from "ollama-ai-provider-v2";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const ID_PATTERN = "^[a-z]{3}-[0-9]{1,4}$";
const parameters = {
  type: "object",
  properties: {
    id: { type: "string", pattern: ID_PATTERN, description: "The ticket id" },
    url: { type: "string", format: "uri", maxLength: 24, description: "Where the ticket lives" },
  },
  required: ["id", "url"],
  additionalProperties: false,
} as const;
type LookupInput = { id: string; url: string };
const NAME = "lookup_ticket";
const DESCRIPTION = "Looks a ticket up";
const question = "What does ticket abc-12 say?";
const RESULT = '{"status": "open", "title": "The dragon ate the bridge"}';

/** What must hold of forced arguments: the pattern by the grammar, the uri field a bounded string. */
function assertArguments(input: unknown): void {
  const { id, url } = input as LookupInput;
  assert.match(id, new RegExp(ID_PATTERN));
  assert.equal(typeof url, "string");
  assert.ok(url.length <= 24);
}

describe("tool round trips with pattern and format: uri in every client (test model)", () => {
  let server: RunningTextgen;
  let baseURL: string;

  before(async () => {
    server = await startTextgen();
    baseURL = `${server.url}/v1`;
  });
  after(async () => server.close());

  describe("OpenAI SDK", () => {
    const client = () => new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
    const tools: OpenAI.ChatCompletionTool[] = [
      { type: "function", function: { name: NAME, description: DESCRIPTION, parameters } },
    ];

    it("chat: forced call (uri named unenforced), then the tool message answered", async () => {
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: question }];
      const raw = await client()
        .chat.completions.create({ model: "m", messages, tools, tool_choice: "required", temperature: 0 })
        .withResponse();
      assert.match(raw.response.headers.get("x-lectern-unenforced") ?? "", /url\.format/);
      const call = raw.data.choices[0]!.message.tool_calls![0]!;
      assert.ok(call.type === "function");
      assertArguments(JSON.parse(call.function.arguments));
      const history: OpenAI.ChatCompletionMessageParam[] = [
        ...messages,
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: RESULT },
      ];
      const answer = { model: "m", tools, tool_choice: "none" as const, max_tokens: 8 };
      const second = await client().chat.completions.create({ ...answer, messages: history });
      assert.ok((second.choices[0]!.message.content ?? "").length > 0);
      const bare = await client().chat.completions.create({ ...answer, messages });
      assert.ok(second.usage!.prompt_tokens > bare.usage!.prompt_tokens, "the result was read");
    });

    it("Responses: forced function_call, then function_call_output answered", async () => {
      const tool = {
        type: "function" as const,
        name: NAME,
        description: DESCRIPTION,
        parameters,
        strict: false,
      };
      const first = await client().responses.create({
        model: "m",
        input: question,
        tools: [tool],
        tool_choice: "required",
        temperature: 0,
      });
      const answer = { model: "m", tools: [tool], tool_choice: "none" as const, max_output_tokens: 8 };
      const call = first.output.find((item) => item.type === "function_call");
      assert.ok(call?.type === "function_call");
      assertArguments(JSON.parse(call.arguments));
      const second = await client().responses.create({
        input: [
          { role: "user", content: question },
          { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
          { type: "function_call_output", call_id: call.call_id, output: RESULT },
        ],
        ...answer,
      });
      assert.ok(second.output_text.length > 0);
      const bare = await client().responses.create({ ...answer, input: question });
      assert.ok(second.usage!.input_tokens > bare.usage!.input_tokens, "the result was read");
    });
  });

  describe("the AI SDK: the call executed and its result sent back (stopWhen)", () => {
    async function roundTrip(model: LanguageModel) {
      const calls: unknown[] = [];
      const tools = {
        [NAME]: tool({
          description: DESCRIPTION,
          inputSchema: jsonSchema<LookupInput>(parameters as never),
          execute: async (input) => {
            calls.push(input);
            return JSON.parse(RESULT) as unknown;
          },
        }),
      };
      const result = await generateText({
        model,
        prompt: question,
        tools,
        prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? "required" : "none" }),
        stopWhen: stepCountIs(2),
        maxOutputTokens: 120,
        temperature: 0,
        maxRetries: 0,
      });
      assert.equal(calls.length, 1);
      assertArguments(calls[0]);
      assert.equal(result.steps.length, 2);
      assert.ok(result.text.length > 0);
      const bare = await generateText({
        model,
        prompt: question,
        tools,
        toolChoice: "none",
        maxOutputTokens: 8,
        maxRetries: 0,
      });
      assert.ok(
        (result.steps[1]!.usage.inputTokens ?? 0) > (bare.usage.inputTokens ?? 0),
        "the result was read",
      );
    }

    it("openai() (Responses)", async () => {
      await roundTrip(createOpenAI({ baseURL, apiKey: "unused" })("m"));
    });
    it("openai-compatible (chat completions)", async () => {
      await roundTrip(createOpenAICompatible({ name: "lectern", baseURL, apiKey: "unused" }).chatModel("m"));
    });
    it("anthropic", async () => {
      await roundTrip(createAnthropic({ baseURL, apiKey: "unused" })("claude-sonnet-4-5"));
    });
  });

  it("Anthropic SDK: forced tool_use, then tool_result answered", async () => {
    const client = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
    const tools: Anthropic.Tool[] = [
      { name: NAME, description: DESCRIPTION, input_schema: parameters as never },
    ];
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: question }];
    const first = await client.messages.create({
      model: "claude-sonnet-4-5",
      max_tokens: 200,
      messages,
      tools,
      tool_choice: { type: "any" },
    });
    const use = first.content.find((block) => block.type === "tool_use");
    assert.ok(use?.type === "tool_use");
    assertArguments(use.input);
    const answer = {
      model: "claude-sonnet-4-5",
      max_tokens: 8,
      tools,
      tool_choice: { type: "none" as const },
    };
    const second = await client.messages.create({
      ...answer,
      messages: [
        ...messages,
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: RESULT }] },
      ],
    });
    assert.equal(second.content[0]!.type, "text");
    const bare = await client.messages.create({ ...answer, messages });
    assert.ok(second.usage.input_tokens > bare.usage.input_tokens, "the result was read");
  });

  describe("LangChain: bindTools with a forced choice, then a ToolMessage", () => {
    const lookup = {
      type: "function" as const,
      function: { name: NAME, description: DESCRIPTION, parameters },
    };
    type Bindable = {
      bindTools(
        tools: unknown[],
        options?: { tool_choice?: string },
      ): {
        invoke(messages: unknown[]): Promise<AIMessage>;
      };
    };

    async function roundTrip(chat: Bindable, forced: string) {
      const first = await chat
        .bindTools([lookup], { tool_choice: forced })
        .invoke([new HumanMessage(question)]);
      const call = first.tool_calls?.[0];
      assert.ok(call?.id, JSON.stringify(first.tool_calls));
      assert.equal(call.name, NAME);
      assertArguments(call.args);
      const answering = chat.bindTools([lookup], { tool_choice: "none" });
      const second = await answering.invoke([
        new HumanMessage(question),
        first,
        new ToolMessage({ tool_call_id: call.id, content: RESULT }),
      ]);
      // Greedy decoding may end at once on this prompt: an answer, possibly empty, and no call.
      assert.equal(typeof second.text, "string");
      assert.deepEqual(second.tool_calls ?? [], []);
      const bare = await answering.invoke([new HumanMessage(question)]);
      assert.ok((second.usage_metadata?.input_tokens ?? 0) > (bare.usage_metadata?.input_tokens ?? 0));
    }

    it("ChatOpenAI", async () => {
      const chat = new ChatOpenAI({
        model: "m",
        apiKey: "unused",
        configuration: { baseURL },
        maxTokens: 120,
        temperature: 0,
        maxRetries: 0,
      });
      await roundTrip(chat as unknown as Bindable, "required");
    });
    it("ChatAnthropic", async () => {
      const chat = new ChatAnthropic({
        model: "claude-sonnet-4-5",
        anthropicApiUrl: server.url,
        apiKey: "unused",
        maxTokens: 120,
        temperature: 0,
        maxRetries: 0,
      });
      await roundTrip(chat as unknown as Bindable, "any");
    });
  });

  describe("Ollama clients: the tools shown and a round trip in the history", () => {
    const ollamaTool = {
      type: "function",
      function: { name: NAME, description: DESCRIPTION, parameters: structuredClone(parameters) as never },
    };
    const args = { id: "abc-12", url: "http://t.example/12" };

    it("ollama-js: the tool result is read (prompt_eval_count grows)", async () => {
      const ollama = new Ollama({ host: server.url });
      const request = {
        model: "m",
        tools: [ollamaTool],
        options: { num_predict: 8 },
        stream: false as const,
      };
      const bare = await ollama.chat({ ...request, messages: [{ role: "user", content: question }] });
      const answered = await ollama.chat({
        ...request,
        messages: [
          { role: "user", content: question },
          { role: "assistant", content: "", tool_calls: [{ function: { name: NAME, arguments: args } }] },
          { role: "tool", content: RESULT, tool_name: NAME },
        ],
      });
      assert.ok(answered.message.content.length > 0 || (answered.message.tool_calls ?? []).length > 0);
      assert.ok(answered.prompt_eval_count > bare.prompt_eval_count);
    });

    it("ChatOllama with bound tools and a ToolMessage", async () => {
      const chat = new ChatOllama({ model: "m", baseUrl: server.url, numPredict: 8, temperature: 0 });
      const bound = chat.bindTools([ollamaTool]);
      const bare = await bound.invoke([new HumanMessage(question)]);
      const answered = await bound.invoke([
        new HumanMessage(question),
        new AIMessage({ content: "", tool_calls: [{ id: "call_1", name: NAME, args }] }),
        new ToolMessage({ tool_call_id: "call_1", content: RESULT }),
      ]);
      assert.ok((answered.usage_metadata?.input_tokens ?? 0) > (bare.usage_metadata?.input_tokens ?? 0));
    });

    it("the AI SDK Ollama provider with a tool call and result in the messages", async () => {
      const model = createOllama({ baseURL: `${server.url}/api` })("m");
      const tools = {
        [NAME]: tool({ description: DESCRIPTION, inputSchema: jsonSchema<LookupInput>(parameters as never) }),
      };
      const messages: ModelMessage[] = [
        { role: "user", content: question },
        {
          role: "assistant",
          content: [{ type: "tool-call", toolCallId: "c1", toolName: NAME, input: args }],
        },
        {
          role: "tool",
          content: [
            {
              type: "tool-result",
              toolCallId: "c1",
              toolName: NAME,
              output: { type: "json", value: JSON.parse(RESULT) },
            },
          ],
        },
      ];
      const request = { model, tools, maxOutputTokens: 8, temperature: 0, maxRetries: 0 };
      const bare = await generateText({ ...request, prompt: question });
      const answered = await generateText({ ...request, messages });
      assert.ok((answered.usage.inputTokens ?? 0) > (bare.usage.inputTokens ?? 0));
    });
  });
});
