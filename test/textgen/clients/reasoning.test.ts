/**
 * Issue #25: reasoning split from the answer in all four dialects, streamed and not, each through
 * its real client library. The model is a real GGUF llama.cpp runs: the test model's tokenizer with
 * crafted weights (scripts/lib/synthetic-gguf.ts, `chain`) that write one fixed text after any prompt,
 * reasoning then `</think>` then an answer, and a Qwen3-thinking-style chat template whose assistant
 * turn opens `<think>`, as Qwen3-Thinking's and DeepSeek-R1's do. (The opening is in the assistant
 * header, not only the generation prompt: node-llama-cpp's Jinja wrapper renders the header, not that
 * prompt.) Steering by the weights, not by a grammar or `format`, because it is the same in every
 * dialect and needs no request field: the answer is what a real reasoning model's would be, so every
 * dialect's test asserts the exact reasoning and the exact answer.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { syntheticModel } from "../../../scripts/lib/synthetic-gguf.js";
import { ANSWER, OUTPUT, REASONING, REASONING_SHAPE, reasoningModel } from "../../helpers/reasoning-model.js";
import { testModelPath } from "../../helpers/env.js";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

type WithReasoning = { content?: string | null; reasoning_content?: string };

describe("reasoning separated in every dialect (crafted-weight model with a reasoning template)", () => {
  let server: RunningTextgen;
  let dir: string;
  let openai: OpenAI;
  let anthropic: Anthropic;
  let ollama: Ollama;
  const question = "Why is the sky blue?";

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lectern-reasoning-"));
    const model = await reasoningModel(dir);
    server = await startTextgen({ MODEL_PATH: model });
    openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
    ollama = new Ollama({ host: server.url });
  });
  after(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the crafted model refuses a text whose next token would be ambiguous", async () => {
    // "Lily" twice: what follows it could not depend on the last token only.
    await assert.rejects(
      syntheticModel(testModelPath, REASONING_SHAPE, { chain: "Lily was Lily", dir }),
      /repeats the token "▁Lily"/,
    );
  });

  describe("OpenAI chat", () => {
    const request = { model: "m", messages: [{ role: "user" as const, content: question }], max_tokens: 60 };

    it("reasoning_content holds the thinking, content the answer; streamed as deltas alike", async () => {
      const completion = await openai.chat.completions.create(request);
      const message = completion.choices[0]!.message as WithReasoning;
      assert.equal(message.reasoning_content, REASONING);
      assert.equal(message.content, ANSWER);
      assert.equal(completion.choices[0]!.finish_reason, "stop");
      const stream = await openai.chat.completions.create({ ...request, stream: true });
      const reasoning: string[] = [];
      const content: string[] = [];
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta as WithReasoning | undefined;
        if (delta?.reasoning_content) reasoning.push(delta.reasoning_content);
        if (delta?.content) content.push(delta.content);
      }
      assert.ok(reasoning.length > 1, "the reasoning came as several deltas");
      assert.equal(reasoning.join(""), REASONING);
      assert.equal(content.join(""), ANSWER);
    });

    it('reasoning_format "none" keeps it in the text; enable_thinking false splits nothing', async () => {
      const kept = await openai.chat.completions.create({
        ...request,
        reasoning_format: "none",
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      assert.equal(kept.choices[0]!.message.content, OUTPUT);
      assert.equal((kept.choices[0]!.message as WithReasoning).reasoning_content, undefined);
      const off = await openai.chat.completions.create({
        ...request,
        chat_template_kwargs: { enable_thinking: false },
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      // The prompt closes an empty thought block, so whatever the model writes is answer.
      assert.equal((off.choices[0]!.message as WithReasoning).reasoning_content, undefined);
      assert.equal(off.choices[0]!.message.content, OUTPUT);
      const on = await openai.chat.completions.create(request);
      assert.ok(off.usage!.prompt_tokens > on.usage!.prompt_tokens);
    });
  });

  describe("OpenAI Responses", () => {
    const request = { model: "m", input: question, max_output_tokens: 60 };

    it("a reasoning item, then the message with output_text", async () => {
      const response = await openai.responses.create(request);
      assert.deepEqual(
        response.output.map((item) => item.type),
        ["reasoning", "message"],
      );
      const reasoning = response.output[0] as { content?: { type: string; text: string }[] };
      assert.deepEqual(reasoning.content, [{ type: "reasoning_text", text: REASONING }]);
      const message = response.output[1]!;
      assert.ok(message.type === "message");
      assert.deepEqual(
        message.content.map((part) => part.type === "output_text" && part.text),
        [ANSWER],
      );
      assert.equal(response.output_text, ANSWER);
      assert.equal(response.status, "completed");
    });

    it("streamed: reasoning_text deltas, then output_text deltas, the same as unstreamed", async () => {
      const reasoning: string[] = [];
      const text: string[] = [];
      const types: string[] = [];
      let completed: OpenAI.Responses.Response | undefined;
      for await (const event of await openai.responses.create({ ...request, stream: true })) {
        types.push(event.type);
        if ((event.type as string) === "response.reasoning_text.delta")
          reasoning.push((event as { delta: string }).delta);
        if (event.type === "response.output_text.delta") text.push(event.delta);
        if (event.type === "response.completed") completed = event.response;
      }
      assert.equal(reasoning.join(""), REASONING);
      assert.equal(text.join(""), ANSWER);
      assert.ok(types.indexOf("response.reasoning_text.done") < types.indexOf("response.output_text.delta"));
      assert.deepEqual(
        completed!.output.map((item) => item.type),
        ["reasoning", "message"],
      );
      // (The SDK adds the `output_text` shortcut to unstreamed responses only.)
      const message = completed!.output[1]!;
      assert.ok(message.type === "message");
      assert.deepEqual(
        message.content.map((part) => part.type === "output_text" && part.text),
        [ANSWER],
      );
    });

    it("reasoning effort none: no reasoning item, all the text in the message", async () => {
      const off = await openai.responses.create({ ...request, reasoning: { effort: "none" as never } });
      assert.deepEqual(
        off.output.map((item) => item.type),
        ["message"],
      );
      assert.equal(off.output_text, OUTPUT);
    });
  });

  describe("Anthropic Messages", () => {
    const request = {
      model: "m",
      max_tokens: 60,
      messages: [{ role: "user" as const, content: question }],
      thinking: { type: "enabled" as const, budget_tokens: 1024 },
    };

    it("a thinking block, then a text block", async () => {
      const message = await anthropic.messages.create(request);
      assert.deepEqual(
        message.content.map((block) => block.type),
        ["thinking", "text"],
      );
      const [thinking, text] = message.content;
      assert.ok(thinking!.type === "thinking" && text!.type === "text");
      assert.equal(thinking.thinking, REASONING);
      assert.equal(text.text, ANSWER);
      assert.equal(message.stop_reason, "end_turn");
    });

    it("a thinking budget spent closes the thought block; the answer follows within max_tokens", async () => {
      // Issue #34: budget_tokens (and efforts) cap the reasoning. The crafted model would think
      // "Lily was happy"; after one or two tokens the block is closed for it, and it answers.
      const message = await anthropic.messages.create({
        ...request,
        thinking: { type: "enabled", budget_tokens: 1 },
      });
      const thinking = message.content.find((block) => block.type === "thinking");
      const text = message.content.find((block) => block.type === "text");
      assert.ok(thinking?.type === "thinking" && text?.type === "text");
      assert.ok(thinking.thinking.length > 0 && REASONING.startsWith(thinking.thinking));
      assert.ok(thinking.thinking.length < REASONING.length, `thinking "${thinking.thinking}"`);
      assert.ok(text.text.length > 0);
      assert.ok(message.usage.output_tokens <= request.max_tokens);
    });

    it("streamed: thinking_delta events, then text_delta events, in two blocks", async () => {
      const stream = anthropic.messages.stream(request);
      const thinking: string[] = [];
      const text: string[] = [];
      const starts: string[] = [];
      stream.on("streamEvent", (event) => {
        if (event.type === "content_block_start") starts.push(event.content_block.type);
        if (event.type === "content_block_delta" && event.delta.type === "thinking_delta")
          thinking.push(event.delta.thinking);
        if (event.type === "content_block_delta" && event.delta.type === "text_delta")
          text.push(event.delta.text);
      });
      const final = await stream.finalMessage();
      assert.deepEqual(starts, ["thinking", "text"]);
      assert.equal(thinking.join(""), REASONING);
      assert.equal(text.join(""), ANSWER);
      assert.deepEqual(
        final.content.map((block) =>
          block.type === "thinking" ? block.thinking : block.type === "text" && block.text,
        ),
        [REASONING, ANSWER],
      );
    });

    it("thinking disabled: one text block holding everything", async () => {
      const off = await anthropic.messages.create({ ...request, thinking: { type: "disabled" } });
      assert.deepEqual(
        off.content.map((block) => block.type === "text" && block.text),
        [OUTPUT],
      );
    });
  });

  describe("Ollama", () => {
    const request = {
      model: "m",
      messages: [{ role: "user", content: question }],
      options: { num_predict: 60 },
    };

    it("/api/chat: message.thinking and message.content, streamed alike", async () => {
      const plain = await ollama.chat({ ...request, stream: false });
      assert.equal(plain.message.thinking, REASONING);
      assert.equal(plain.message.content, ANSWER);
      assert.equal(plain.done_reason, "stop");
      const thinking: string[] = [];
      const content: string[] = [];
      for await (const part of await ollama.chat({ ...request, stream: true })) {
        if (part.message.thinking) thinking.push(part.message.thinking);
        if (part.message.content) content.push(part.message.content);
      }
      assert.equal(thinking.join(""), REASONING);
      assert.equal(content.join(""), ANSWER);
    });

    it("/api/generate: thinking and response, streamed alike", async () => {
      const generateRequest = { model: "m", prompt: question, options: { num_predict: 60 } };
      const plain = await ollama.generate({ ...generateRequest, stream: false });
      assert.equal(plain.thinking, REASONING);
      assert.equal(plain.response, ANSWER);
      const thinking: string[] = [];
      const response: string[] = [];
      for await (const part of await ollama.generate({ ...generateRequest, stream: true })) {
        if (part.thinking) thinking.push(part.thinking);
        if (part.response) response.push(part.response);
      }
      assert.equal(thinking.join(""), REASONING);
      assert.equal(response.join(""), ANSWER);
    });

    it("think false: no thinking, all the text in the content", async () => {
      const off = await ollama.chat({ ...request, think: false, stream: false });
      assert.equal(off.message.thinking, undefined);
      assert.equal(off.message.content, OUTPUT);
      const generated = await ollama.generate({ model: "m", prompt: question, think: false, stream: false });
      assert.equal(generated.thinking, undefined);
      assert.equal(generated.response, OUTPUT);
    });
  });
});
