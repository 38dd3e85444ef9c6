/**
 * Issue #34's dialect fields, over the scripted generator: what each field does to the validated
 * request the engine gets (ScriptedGenerator.requests), what is accepted with no effect, and what is
 * ignored and named in `x-lectern-ignored-fields`. Plus both apps' HTTP edges: an empty JSON body is no
 * body, integer query parameters are coerced.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { ChatRequest } from "../../../src/textgen/engine/generator.js";
import { openRagApp, removeTempDirs } from "../../helpers/rag-http.js";
import { startScriptedApp, type ScriptedApp } from "../../helpers/scripted-app.js";

/** Response bodies are read loosely: the assertions check their shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

const scripts = {
  text: { steps: [{ text: "Hello." }] },
  tool: { steps: [{ toolCall: { name: "read_file", arguments: '{"path":"a"}' } }] },
};

describe("dialect fields on the scripted generator", () => {
  let app: ScriptedApp;

  before(async () => {
    app = await startScriptedApp(scripts, { MAX_NEW_TOKENS: "512" });
  });
  after(async () => app.close());

  async function post(path: string, body: object, headers: Record<string, string> = {}) {
    const response = await fetch(`${app.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
    return {
      status: response.status,
      ignored: response.headers.get("x-lectern-ignored-fields"),
      body: (await response.json()) as Loose,
    };
  }
  const lastRequest = () => app.generator.requests.at(-1) as ChatRequest;

  it("OpenAI chat: reasoning_effort, max_completion_tokens clamped, prediction/store/metadata accepted", async () => {
    const { status, ignored, body } = await post("/v1/chat/completions", {
      model: "gpt-5",
      messages: [
        { role: "developer", content: "Be brief." },
        { role: "user", content: "script:text" },
      ],
      max_completion_tokens: 32_000,
      reasoning_effort: "none",
      prediction: { type: "content", content: "Hello." },
      store: true,
      metadata: { run: "1" },
      service_tier: "auto",
      verbosity: "low",
    });
    assert.equal(status, 200, JSON.stringify(body));
    assert.equal(ignored, null);
    assert.equal(lastRequest().maxTokens, 512, "clamped to MAX_NEW_TOKENS");
    assert.equal(lastRequest().thinking, false);
    assert.equal(lastRequest().messages[0]!.role, "system");
    await post("/v1/chat/completions", {
      messages: [{ role: "user", content: "script:text" }],
      reasoning_effort: "low",
      max_tokens: 500,
    });
    assert.equal(
      lastRequest().thinkingBudget,
      undefined,
      "low (1,024) is past max_tokens: nothing more to cap",
    );
    await post("/v1/chat/completions", {
      messages: [{ role: "user", content: "script:text" }],
      reasoning_effort: "minimal",
      max_tokens: 500,
    });
    assert.equal(lastRequest().thinkingBudget, 256);
  });

  it("Anthropic: system-role messages, echoed fields, cache_control, server tools and unknown blocks", async () => {
    const { status, ignored, body } = await post(
      "/v1/messages",
      {
        model: "claude",
        max_tokens: 64,
        cache_control: { type: "ephemeral" },
        thinking: { type: "enabled", budget_tokens: 16 },
        tools: [
          {
            name: "read_file",
            input_schema: { type: "object" },
            defer_loading: true,
            eager_input_streaming: true,
          },
          { type: "web_search_20250305", name: "web_search", max_uses: 3 },
        ],
        messages: [
          { role: "system", content: "Extra system text." },
          { role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral" } }] },
          {
            role: "assistant",
            content: [
              { type: "text", text: "calling", citations: null },
              { type: "tool_use", id: "t1", name: "read_file", input: {}, caller: null },
              { type: "server_tool_use", id: "s1", name: "web_search", input: {} },
            ],
          },
          {
            role: "user",
            content: [{ type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "ok" }] }],
          },
          { role: "user", content: "script:text" },
        ],
      },
      { "anthropic-version": "2023-06-01" },
    );
    assert.equal(status, 200, JSON.stringify(body));
    assert.equal(ignored, "messages.2.content.2 (server_tool_use), tools.1 (web_search_20250305)");
    const request = lastRequest();
    assert.deepEqual(
      request.messages.map((message) => message.role),
      ["system", "user", "assistant", "tool", "user"],
    );
    assert.equal(request.messages[0]!.content, "Extra system text.");
    assert.deepEqual(
      request.tools!.map((tool) => tool.name),
      ["read_file"],
    );
    assert.equal(request.thinkingBudget, 16);
    assert.equal(body.content[0].type, "text");
    assert.equal(body.container, null);
  });

  it("Anthropic: output_config.format constrains; effort sets the budget; adaptive display omitted", async () => {
    await post("/v1/messages", {
      model: "claude",
      max_tokens: 500,
      thinking: { type: "adaptive", display: "omitted" },
      output_config: {
        effort: "low",
        format: { type: "json_schema", schema: { type: "object", properties: { a: { type: "string" } } } },
      },
      messages: [{ role: "user", content: "script:text" }],
    });
    assert.equal(lastRequest().constraint?.type, "json_schema");
    assert.equal(
      lastRequest().thinkingBudget,
      undefined,
      "low (1,024) is past max_tokens 500: nothing to cap",
    );
  });

  it("Anthropic models, when the request carries anthropic-version: Anthropic's page shape", async () => {
    const list = (await (
      await fetch(`${app.url}/v1/models?limit=1`, { headers: { "anthropic-version": "2023-06-01" } })
    ).json()) as Loose;
    assert.equal(list.data.length, 1);
    assert.equal(list.data[0].type, "model");
    assert.equal(typeof list.data[0].display_name, "string");
    assert.ok(!Number.isNaN(Date.parse(list.data[0].created_at)));
    assert.equal(list.first_id, list.data[0].id);
    assert.equal(list.last_id, list.data[0].id);
    assert.equal(typeof list.has_more, "boolean");
    const one = await fetch(`${app.url}/v1/models/${list.data[0].id}`, {
      headers: { "anthropic-version": "2023-06-01" },
    });
    assert.equal(((await one.json()) as Loose).type, "model");
    const missing = await fetch(`${app.url}/v1/models/nope`, {
      headers: { "anthropic-version": "2023-06-01" },
    });
    assert.equal(missing.status, 404);
    assert.equal(((await missing.json()) as Loose).error.type, "not_found_error");
    const openai = (await (await fetch(`${app.url}/v1/models`)).json()) as Loose;
    assert.equal(openai.object, "list");
  });

  it("Responses: hosted tools named, namespace functions offered and called with their namespace, item_reference needs a store", async () => {
    const { status, ignored, body } = await post("/v1/responses", {
      model: "m",
      input: [{ role: "user", content: "script:tool" }],
      tools: [
        { type: "web_search" },
        { type: "code_interpreter", container: { type: "auto" } },
        {
          type: "namespace",
          name: "repo",
          description: "r",
          tools: [{ type: "function", name: "read_file" }],
        },
      ],
      prompt_cache_key: "k",
      client_metadata: { a: 1 },
      metadata: { b: "2" },
      safety_identifier: "s",
      parallel_tool_calls: false,
      truncation: "auto",
    });
    assert.equal(status, 200, JSON.stringify(body));
    assert.equal(ignored, "tools.0 (web_search), tools.1 (code_interpreter)");
    assert.deepEqual(
      lastRequest().tools!.map((tool) => tool.name),
      ["read_file"],
    );
    assert.equal(lastRequest().truncate, true);
    const call = body.output.find((item: Loose) => item.type === "function_call");
    assert.equal(call.name, "read_file");
    assert.equal(call.namespace, "repo");
    assert.deepEqual(body.metadata, { b: "2" });
    const reference = await post("/v1/responses", {
      model: "m",
      input: [{ type: "item_reference", id: "msg_1" }],
    });
    assert.equal(reference.status, 404);
    assert.equal(reference.body.error.param, "input.0");
  });

  it("Ollama: top-level fields the AI SDK's provider sends are read (options win); unknown options are named", async () => {
    const { status, ignored } = await post("/api/chat", {
      model: "m",
      messages: [{ role: "user", content: "script:text" }],
      stream: false,
      temperature: 0.2,
      max_output_tokens: 10,
      think: false,
      options: { num_predict: 5, made_up: 1, mirostat: 1 },
    });
    assert.equal(status, 200);
    assert.equal(ignored, "options.made_up");
    assert.equal(lastRequest().thinking, false);
    assert.equal(lastRequest().maxTokens, 5);
    assert.equal(lastRequest().temperature, 0.2);
    const topLevel = await post("/api/chat", {
      model: "m",
      messages: [{ role: "user", content: "script:text" }],
      stream: false,
      max_output_tokens: 7,
    });
    assert.equal(topLevel.status, 200);
    assert.equal(lastRequest().maxTokens, 7);
  });

  it("an empty body with content-type application/json is read as no body", async () => {
    const response = await fetch(`${app.url}/api/tags`, {
      method: "GET",
      headers: { "content-type": "application/json" },
    });
    assert.equal(response.status, 200);
    const empty = await fetch(`${app.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
    });
    // No body at all: the request is invalid, not unparseable.
    assert.equal(empty.status, 400);
    assert.doesNotMatch(((await empty.json()) as Loose).error.message, /empty|JSON/i);
  });
});

describe("the RAG app: an empty JSON DELETE body, ?limit= coerced", () => {
  after(() => removeTempDirs());

  it("reads both as a client sends them", async () => {
    const { app } = await openRagApp();
    try {
      const deleted = await app.inject({
        method: "DELETE",
        url: "/rag/indices/nothing",
        headers: { "content-type": "application/json" },
      });
      assert.equal(deleted.statusCode, 404, deleted.body);
      const listed = await app.inject({ method: "GET", url: "/v1/vector_stores?limit=5" });
      assert.equal(listed.statusCode, 200, listed.body);
      const bad = await app.inject({ method: "GET", url: "/v1/vector_stores?limit=many" });
      assert.equal(bad.statusCode, 400);
    } finally {
      await app.close();
    }
  });
});
