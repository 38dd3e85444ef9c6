/**
 * Issue #34: the structured-output helpers and options the other client files leave out —
 * LangChain's withStructuredOutput on ChatAnthropic and ChatOllama, the Ollama SDK's `format` with a
 * JSON schema, `n: 2` through the openai SDK, and embeddings with `dimensions` through the openai SDK,
 * the AI SDK and LangChain (truncated to the asked size and renormalised). The test model knows nothing
 * of JSON: what comes back valid is the grammar's.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createOpenAI } from "@ai-sdk/openai";
import { ChatAnthropic } from "@langchain/anthropic";
import { ChatOllama } from "@langchain/ollama";
import { OpenAIEmbeddings } from "@langchain/openai";
import { embed } from "ai";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { z } from "zod";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const Character = z.object({
  name: z.enum(["Max", "Lily", "Tom"]),
  mood: z.enum(["happy", "sad", "angry"]),
  brave: z.boolean(),
});

const norm = (vector: number[]) => Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0));

describe("structured output and dimensions in the remaining clients (test model)", () => {
  let server: RunningTextgen;

  before(async () => {
    server = await startTextgen();
  });
  after(async () => server.close());

  it("LangChain ChatAnthropic.withStructuredOutput gives a valid object", async () => {
    const chat = new ChatAnthropic({
      model: "claude-sonnet-4-5",
      anthropicApiUrl: server.url,
      apiKey: "unused",
      temperature: 0,
      maxRetries: 0,
    });
    Character.parse(await chat.withStructuredOutput(Character, { name: "character" }).invoke("A character?"));
  });

  it("LangChain ChatOllama.withStructuredOutput gives a valid object", async () => {
    const chat = new ChatOllama({ model: "m", baseUrl: server.url, temperature: 0 });
    Character.parse(await chat.withStructuredOutput(Character, { name: "character" }).invoke("A character?"));
  });

  it("ollama-js chat with a JSON schema as format", async () => {
    const ollama = new Ollama({ host: server.url });
    const response = await ollama.chat({
      model: "m",
      messages: [{ role: "user", content: "A character?" }],
      format: z.toJSONSchema(Character) as object,
      options: { temperature: 0 },
    });
    Character.parse(JSON.parse(response.message.content));
  });

  it("openai chat with n: 2 gives two choices, each with its index", async () => {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const completion = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "Tell me a story." }],
      max_tokens: 6,
      n: 2,
    });
    assert.deepEqual(
      completion.choices.map((choice) => choice.index),
      [0, 1],
    );
    for (const choice of completion.choices) assert.ok((choice.message.content ?? "").length > 0);
  });

  describe("embeddings with dimensions", () => {
    const dimensions = 16;

    it("the openai SDK (base64 on the wire)", async () => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const full = await client.embeddings.create({ model: "m", input: "A dragon." });
      const cut = await client.embeddings.create({ model: "m", input: "A dragon.", dimensions });
      const vector = cut.data[0]!.embedding;
      assert.equal(vector.length, dimensions);
      assert.ok(full.data[0]!.embedding.length > dimensions);
      assert.ok(Math.abs(norm(vector) - 1) < 1e-3);
      // The same direction as the full vector's first components.
      const head = full.data[0]!.embedding.slice(0, dimensions);
      const scale = norm(head);
      vector.forEach((x, i) => assert.ok(Math.abs(x - head[i]! / scale) < 1e-3));
    });

    it("the AI SDK's openai embedding model", async () => {
      const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
      const { embedding } = await embed({
        model: openai.embedding("m"),
        value: "A dragon.",
        providerOptions: { openai: { dimensions } },
        maxRetries: 0,
      });
      assert.equal(embedding.length, dimensions);
      assert.ok(Math.abs(norm(embedding) - 1) < 1e-3);
    });

    it("LangChain's OpenAIEmbeddings", async () => {
      const embeddings = new OpenAIEmbeddings({
        model: "m",
        apiKey: "unused",
        dimensions,
        maxRetries: 0,
        configuration: { baseURL: `${server.url}/v1` },
      });
      const [vector] = await embeddings.embedDocuments(["A dragon."]);
      assert.equal(vector!.length, dimensions);
      assert.ok(Math.abs(norm(vector!) - 1) < 1e-3);
    });
  });
});
