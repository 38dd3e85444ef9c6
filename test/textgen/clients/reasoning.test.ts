/**
 * Issue #25: reasoning split from the answer in all four dialects. The model is the test model's
 * tokenizer with random weights (scripts/lib/synthetic-gguf.ts) carrying a Qwen3-thinking-style chat
 * template whose assistant turn opens `<think>`, as Qwen3-Thinking's and DeepSeek-R1's do: what the
 * model writes is reasoning until it closes the block. (The opening is in the assistant header, not
 * only the generation prompt: node-llama-cpp's Jinja wrapper renders the header, not that prompt.) A GBNF grammar steers the chat answer through
 * `</think>`, so both parts show in one answer; elsewhere the answer is cut inside the reasoning.
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
import { testModelPath } from "../../helpers/env.js";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const QWEN3_THINKING_TEMPLATE = [
  "{%- for message in messages -%}",
  "{%- if message.role == 'assistant' -%}",
  // Earlier reasoning is dropped from the history, as Qwen3's template does.
  "{{- '<|assistant|>\\n<think>\\n' + (message.content.split('</think>') | last | trim) + '<|end|>\\n' -}}",
  "{%- else -%}",
  "{{- '<|' + message.role + '|>\\n' + message.content + '<|end|>\\n' -}}",
  "{%- endif -%}",
  "{%- endfor -%}",
  "{%- if add_generation_prompt -%}",
  "{{- '<|assistant|>\\n<think>\\n' -}}",
  "{%- endif -%}",
].join("\n");

/** Lower-case words, then the closing marker, then more words: reasoning and an answer. */
const THINK_THEN_ANSWER = 'root ::= [a-z]{3,8} " " [a-z]{3,8} "</think>" [a-z]{3,8}';

describe("reasoning separated in every dialect (synthetic model with a reasoning template)", () => {
  let server: RunningTextgen;
  let dir: string;
  let openai: OpenAI;
  let anthropic: Anthropic;
  let ollama: Ollama;
  const question = "Why is the sky blue?";

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lectern-reasoning-"));
    const model = await syntheticModel(
      testModelPath,
      { embedding: 64, feedForward: 128, layers: 2, heads: 4, kvHeads: 4 },
      { chatTemplate: QWEN3_THINKING_TEMPLATE, tag: "qwen3-thinking", dir },
    );
    server = await startTextgen({ MODEL_PATH: model });
    openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
    ollama = new Ollama({ host: server.url });
  });
  after(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe("OpenAI chat", () => {
    const request = {
      model: "m",
      messages: [{ role: "user" as const, content: question }],
      temperature: 0,
      max_tokens: 60,
      grammar: THINK_THEN_ANSWER,
    };

    it("reasoning_content holds the thinking, content the answer; streamed as deltas alike", async () => {
      const completion = await openai.chat.completions.create(
        request as OpenAI.ChatCompletionCreateParamsNonStreaming,
      );
      const message = completion.choices[0]!.message as (typeof completion.choices)[0]["message"] & {
        reasoning_content?: string;
      };
      assert.match(message.reasoning_content ?? "", /^[a-z]{3,8} [a-z]{3,8}$/);
      assert.match(message.content ?? "", /^[a-z]{3,8}$/);
      const stream = await openai.chat.completions.create({
        ...(request as OpenAI.ChatCompletionCreateParamsNonStreaming),
        stream: true,
      });
      let reasoning = "";
      let content = "";
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
        reasoning += delta?.reasoning_content ?? "";
        content += delta?.content ?? "";
      }
      assert.equal(reasoning, message.reasoning_content);
      assert.equal(content, message.content);
    });

    it('reasoning_format "none" keeps it in the text; enable_thinking false gives no reasoning', async () => {
      const kept = await openai.chat.completions.create({
        ...request,
        reasoning_format: "none",
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      const text = kept.choices[0]!.message.content ?? "";
      assert.match(text, /^[a-z]{3,8} [a-z]{3,8}<\/think>[a-z]{3,8}$/);
      assert.equal((kept.choices[0]!.message as { reasoning_content?: string }).reasoning_content, undefined);
      const off = await openai.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: question }],
        temperature: 0,
        max_tokens: 8,
        chat_template_kwargs: { enable_thinking: false },
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      assert.equal((off.choices[0]!.message as { reasoning_content?: string }).reasoning_content, undefined);
      assert.equal(off.usage!.completion_tokens, 8);
      // Thinking off renders an empty thought block: a longer prompt than with thinking on.
      const on = await openai.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: question }],
        temperature: 0,
        max_tokens: 8,
      });
      assert.ok(off.usage!.prompt_tokens > on.usage!.prompt_tokens);
      assert.ok(
        ((on.choices[0]!.message as { reasoning_content?: string }).reasoning_content ?? "").length > 0,
      );
      assert.equal(on.choices[0]!.message.content, "");
    });
  });

  it("Responses: a reasoning item before the message, streamed as reasoning_text deltas", async () => {
    const request = { model: "m", input: question, temperature: 0, max_output_tokens: 10 };
    const response = await openai.responses.create(request);
    const reasoning = response.output[0] as { type: string; content?: { type: string; text: string }[] };
    assert.equal(reasoning.type, "reasoning");
    const thought = reasoning.content![0]!.text;
    assert.ok(thought.length > 0);
    assert.equal(response.output_text, "", "the answer was cut inside the reasoning");
    let streamed = "";
    const types: string[] = [];
    for await (const event of await openai.responses.create({ ...request, stream: true })) {
      types.push(event.type);
      if ((event.type as string) === "response.reasoning_text.delta")
        streamed += (event as { delta: string }).delta;
    }
    assert.equal(streamed, thought);
    assert.ok(types.indexOf("response.reasoning_text.done") < types.indexOf("response.output_text.done"));
    const off = await openai.responses.create({ ...request, reasoning: { effort: "none" as never } });
    assert.deepEqual(
      off.output.map((item) => item.type),
      ["message"],
    );
    assert.ok(off.output_text.length > 0);
  });

  it("Anthropic Messages: a thinking block, streamed as thinking_delta; thinking disabled gives none", async () => {
    const request = {
      model: "m",
      max_tokens: 10,
      messages: [{ role: "user" as const, content: question }],
      thinking: { type: "enabled" as const, budget_tokens: 1024 },
    };
    const message = await anthropic.messages.create(request);
    const thinking = message.content[0]!;
    assert.ok(thinking.type === "thinking" && thinking.thinking.length > 0);
    const stream = anthropic.messages.stream(request);
    const deltas: string[] = [];
    stream.on("streamEvent", (event) => {
      if (event.type === "content_block_delta" && event.delta.type === "thinking_delta")
        deltas.push(event.delta.thinking);
    });
    const final = await stream.finalMessage();
    assert.ok(deltas.length > 0);
    const streamedThinking = final.content[0]!;
    assert.ok(streamedThinking.type === "thinking");
    assert.equal(deltas.join(""), streamedThinking.thinking);
    const off = await anthropic.messages.create({ ...request, thinking: { type: "disabled" } });
    assert.deepEqual(
      off.content.map((block) => block.type),
      ["text"],
    );
  });

  it("Ollama: message.thinking, streamed; think false gives none", async () => {
    const request = {
      model: "m",
      messages: [{ role: "user", content: question }],
      options: { temperature: 0, num_predict: 10, seed: 1 },
    };
    const plain = await ollama.chat({ ...request, stream: false });
    assert.ok((plain.message.thinking ?? "").length > 0);
    assert.equal(plain.message.content, "");
    let thinking = "";
    for await (const part of await ollama.chat({ ...request, stream: true }))
      thinking += part.message.thinking ?? "";
    assert.equal(thinking, plain.message.thinking);
    const off = await ollama.chat({ ...request, think: false, stream: false });
    assert.equal(off.message.thinking, undefined);
    assert.ok(off.message.content.length > 0);
    const generated = await ollama.generate({
      model: "m",
      prompt: question,
      options: { temperature: 0, num_predict: 10 },
    });
    assert.ok((generated.thinking ?? "").length > 0);
  });
});
