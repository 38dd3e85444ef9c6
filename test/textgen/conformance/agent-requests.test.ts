/**
 * Issue #34's "done when" requests, as the coding-agent tools send them, on a real GGUF llama.cpp runs:
 * a synthetic model (scripts/lib/synthetic-gguf.ts, random weights: what it writes means nothing)
 * with a 64k context and a reasoning chat template.
 *
 * - Anthropic Messages: 32,000 max_tokens (clamped to MAX_NEW_TOKENS), adaptive thinking,
 *   context_management, output_config, 20 tools with defer_loading / pattern / format: uri, a
 *   system-role message and a 40 KB system prompt: streams an answer, with the real prompt size in
 *   message_start.
 * - OpenAI Responses: prompt_cache_key, client_metadata, a developer message, a web_search tool and a
 *   tool group: streams an answer, the hosted tool named in the ignored-fields header.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { syntheticModel } from "../../../scripts/lib/synthetic-gguf.js";
import { testModelPath } from "../../helpers/env.js";
import { sseEvents, startTextgen, type RunningTextgen } from "../../helpers/servers.js";

/** Response bodies are read loosely: the assertions check their shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

const REASONING_TEMPLATE = [
  "{%- for message in messages -%}",
  "{{- '<|' + message.role + '|>\\n' + message.content + '<|end|>\\n' -}}",
  "{%- endfor -%}",
  "{%- if add_generation_prompt -%}",
  "{{- '<|assistant|>\\n<think>\\n' -}}",
  "{%- endif -%}",
].join("\n");

/** New tokens at most on this server: the 32,000 asked for is clamped to it. */
const MAX_NEW_TOKENS = 24;

/** 40 KB of system prompt in words the test model's tokenizer knows. */
const SYSTEM_PROMPT =
  "Once upon a time there was a little girl named Lily. She liked to play outside. ".repeat(520);

function agentTools() {
  return Array.from({ length: 20 }, (_, i) => ({
    name: `tool_${i}`,
    description: `Tool number ${i}`,
    defer_loading: i % 2 === 0,
    input_schema: {
      type: "object",
      properties: {
        id: { type: "string", pattern: "^[a-z]{3}-[0-9]+$" },
        url: { type: "string", format: "uri" },
        count: { type: "integer", minimum: 0 },
      },
      required: ["id"],
    },
  }));
}

describe("the agent requests of issue #34 on a 64k-context synthetic model", () => {
  let server: RunningTextgen;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lectern-agent-"));
    const model = await syntheticModel(
      testModelPath,
      { embedding: 64, feedForward: 128, layers: 1, heads: 4, kvHeads: 4 },
      {
        dir,
        tag: "ctx64k",
        chatTemplate: REASONING_TEMPLATE,
        metadata: { "llama.context_length": 65_536 },
        plainByteTokens: true,
      },
    );
    server = await startTextgen({
      MODEL_PATH: model,
      LLAMA_CONTEXT_SIZE: "65536",
      MAX_CONCURRENT: "1",
      MAX_NEW_TOKENS: String(MAX_NEW_TOKENS),
    });
  });
  after(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("Anthropic: 32,000 max_tokens, adaptive thinking, context_management, 20 tools, 40 KB system: streams", async () => {
    assert.ok(SYSTEM_PROMPT.length >= 40_000);
    const response = await fetch(`${server.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({
        model: "claude-sonnet-5",
        max_tokens: 32_000,
        stream: true,
        system: [{ type: "text", text: SYSTEM_PROMPT, cache_control: { type: "ephemeral" } }],
        thinking: { type: "adaptive", display: "summarized" },
        output_config: { effort: "medium" },
        context_management: {
          edits: [{ type: "clear_thinking_20251015", keep: { type: "thinking_turns", value: 1 } }],
        },
        tools: agentTools(),
        metadata: { user_id: "someone" },
        messages: [
          { role: "system", content: "Answer briefly." },
          { role: "user", content: [{ type: "text", text: "Hello", cache_control: { type: "ephemeral" } }] },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "An earlier thought.", signature: "sig" },
              { type: "text", text: "Hi.", citations: null },
            ],
          },
          { role: "user", content: "Tell me more." },
          {
            role: "assistant",
            content: [
              { type: "thinking", thinking: "A later thought.", signature: "sig" },
              {
                type: "tool_use",
                id: "toolu_1",
                name: "tool_3",
                input: { id: "abc-1" },
                caller: { type: "direct" },
              },
            ],
          },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "done" }] },
        ],
      }),
    });
    assert.equal(response.status, 200, await response.clone().text());
    assert.equal(response.headers.get("content-type"), "text/event-stream; charset=utf-8");
    const events: { event: string; data: Loose }[] = [];
    for await (const event of sseEvents(response))
      events.push({ event: event.event, data: JSON.parse(event.data) });
    const names = events.map((event) => event.event);
    assert.equal(names[0], "message_start");
    assert.deepEqual(names.slice(-2), ["message_delta", "message_stop"]);
    assert.ok(!names.includes("error"), JSON.stringify(events.find((event) => event.event === "error")));
    // The prompt was counted before the first token: the 40 KB system prompt is thousands of tokens.
    const inputTokens = events[0]!.data.message.usage.input_tokens as number;
    assert.ok(inputTokens > 8000, `input_tokens ${inputTokens}`);
    const delta = events.at(-2)!.data;
    assert.equal(delta.usage.input_tokens + delta.usage.cache_read_input_tokens, inputTokens);
    assert.ok(delta.usage.output_tokens >= 1 && delta.usage.output_tokens <= MAX_NEW_TOKENS);
    assert.ok(["max_tokens", "end_turn", "tool_use"].includes(delta.delta.stop_reason));
    // One earlier thinking turn cleared, the last one kept.
    assert.equal(delta.context_management.applied_edits[0].cleared_thinking_turns, 1);
  });

  it("Responses: prompt_cache_key, client_metadata, developer message, web_search and a tool group: streams", async () => {
    const response = await fetch(`${server.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "gpt-5-codex",
        stream: true,
        store: false,
        prompt_cache_key: "session-1",
        client_metadata: { client: "agent" },
        safety_identifier: "user-1",
        parallel_tool_calls: true,
        truncation: "auto",
        reasoning: { effort: "low", summary: "auto" },
        include: ["reasoning.encrypted_content"],
        instructions: "You are a coding agent.",
        tools: [
          { type: "web_search" },
          {
            type: "namespace",
            name: "repo",
            description: "Repository tools",
            tools: [
              {
                type: "function",
                name: "read_file",
                description: "Read a file",
                parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
                defer_loading: true,
              },
            ],
          },
          {
            type: "function",
            name: "shell",
            parameters: {
              type: "object",
              properties: { command: { type: "array", items: { type: "string" } } },
            },
            strict: false,
          },
        ],
        input: [
          { type: "message", role: "developer", content: [{ type: "input_text", text: "Be careful." }] },
          { type: "message", role: "user", content: [{ type: "input_text", text: "Fix the bug." }] },
        ],
      }),
    });
    assert.equal(response.status, 200, await response.clone().text());
    assert.equal(response.headers.get("x-lectern-ignored-fields"), "tools.0 (web_search)");
    const events: Loose[] = [];
    for await (const event of sseEvents(response)) events.push(JSON.parse(event.data));
    assert.equal(events[0].type, "response.created");
    const last = events.at(-1);
    assert.ok(["response.completed", "response.incomplete"].includes(last.type), last.type);
    assert.deepEqual(
      events.map((event) => event.sequence_number),
      events.map((_, i) => i),
    );
    assert.equal(last.response.prompt_cache_key, "session-1");
    assert.ok(last.response.usage.input_tokens > 10);
  });
});
