/**
 * Issue #34: kept Responses as the openai client uses them, against the real app on the test model
 * (stories260K): three turns over `previous_response_id`, retrieve, input items, delete, and the
 * Conversations API; then the same over PostgreSQL (LECTERN_TEST_DATABASE_URL, a database of its
 * own, dropped after), and a kept response surviving the server process being killed.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, type ModelMessage } from "ai";
import OpenAI from "openai";
import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../../helpers/pg.js";
import { startServe, waitHealthy } from "../../helpers/serve-process.js";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const isNotFound = (id: string) => (error: unknown) =>
  error instanceof OpenAI.NotFoundError &&
  error.status === 404 &&
  (error.error as { type?: string }).type === "not_found_error" &&
  error.message.includes(id);

/** The client flow every store must carry: each step's assertions say what must hold. */
async function threeTurnsAndBack(client: OpenAI): Promise<void> {
  const ask = { model: "llama", max_output_tokens: 8, temperature: 0 };
  const first = await client.responses.create({ ...ask, input: "Once upon a time" });
  const second = await client.responses.create({ ...ask, input: "Then", previous_response_id: first.id });
  const third = await client.responses.create({
    ...ask,
    input: [{ role: "user", content: "The end" }],
    previous_response_id: second.id,
  });
  assert.equal(third.previous_response_id, second.id);
  // The third turn's prompt holds the two before it: it counts more input tokens than the first.
  assert.ok(third.usage!.input_tokens > second.usage!.input_tokens);
  assert.ok(second.usage!.input_tokens > first.usage!.input_tokens);

  const retrieved = await client.responses.retrieve(second.id);
  assert.equal(retrieved.id, second.id);
  assert.equal(retrieved.output_text, second.output_text);
  assert.deepEqual(retrieved.output, second.output);

  const items: OpenAI.Responses.ResponseItem[] = [];
  for await (const item of client.responses.inputItems.list(third.id, { order: "asc", limit: 1 }))
    items.push(item);
  assert.equal(items.length, 1);
  assert.equal(items[0]!.type, "message");
  assert.deepEqual((items[0] as OpenAI.Responses.ResponseInputMessageItem).content, [
    { type: "input_text", text: "The end" },
  ]);

  await client.responses.delete(first.id);
  await assert.rejects(client.responses.retrieve(first.id), isNotFound(first.id));
  await assert.rejects(client.responses.delete(first.id), isNotFound(first.id));
  await assert.rejects(
    client.responses.create({ ...ask, input: "More", previous_response_id: third.id }),
    isNotFound(first.id),
  );
}

async function conversationFlow(client: OpenAI): Promise<void> {
  const conversation = await client.conversations.create({
    items: [{ type: "message", role: "user", content: "Tell me about a cat." }],
    metadata: { topic: "cats" },
  });
  assert.equal(conversation.object, "conversation");
  const response = await client.responses.create({
    model: "llama",
    input: "And a dog.",
    conversation: conversation.id,
    max_output_tokens: 6,
    temperature: 0,
  });
  assert.equal(response.conversation?.id, conversation.id);
  const items: OpenAI.Conversations.ConversationItem[] = [];
  for await (const item of client.conversations.items.list(conversation.id, { order: "asc", limit: 2 }))
    items.push(item);
  assert.deepEqual(
    items.map((item) => (item as OpenAI.Conversations.Message).role),
    ["user", "user", "assistant"],
  );
  assert.equal((items[2] as OpenAI.Conversations.Message).id, response.output[0]!.id);
  const added = await client.conversations.items.create(conversation.id, {
    items: [{ type: "message", role: "user", content: "Thanks." }],
  });
  const one = await client.conversations.items.retrieve(added.data[0]!.id!, {
    conversation_id: conversation.id,
  });
  assert.deepEqual(one, added.data[0]);
  await client.conversations.items.delete(added.data[0]!.id!, { conversation_id: conversation.id });
  const updated = await client.conversations.update(conversation.id, { metadata: { topic: "pets" } });
  assert.deepEqual(updated.metadata, { topic: "pets" });
  const deleted = await client.conversations.delete(conversation.id);
  assert.deepEqual(deleted, { id: conversation.id, object: "conversation.deleted", deleted: true });
  await assert.rejects(client.conversations.retrieve(conversation.id), isNotFound(conversation.id));
}

describe("kept Responses through the openai client (SQLite under DATA_DIR)", () => {
  let server: RunningTextgen;
  let client: OpenAI;
  before(async () => {
    server = await startTextgen();
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  after(async () => server.close());

  it("responses.create over three turns with previous_response_id, retrieve, inputItems.list, delete", async () => {
    await threeTurnsAndBack(client);
  });

  it("conversations.create, responses.create with conversation, items list/create/retrieve/delete", async () => {
    await conversationFlow(client);
  });

  it("the AI SDK's default openai() provider over three turns sends its answers back as item references", async () => {
    const sent: Array<{ input: Array<{ type?: string; id?: string }> }> = [];
    const provider = createOpenAI({
      baseURL: `${server.url}/v1`,
      apiKey: "unused",
      fetch: async (url, init) => {
        sent.push(JSON.parse(String(init!.body)) as (typeof sent)[number]);
        return fetch(url, init);
      },
    });
    const messages: ModelMessage[] = [];
    const inputTokens: number[] = [];
    for (const turn of ["Once upon a time", "Then", "The end"]) {
      messages.push({ role: "user", content: turn });
      const result = await generateText({
        model: provider("llama"),
        messages,
        maxOutputTokens: 6,
        temperature: 0,
      });
      messages.push(...result.response.messages);
      inputTokens.push(result.usage.inputTokens!);
    }
    const references = sent[2]!.input.filter((item) => item.type === "item_reference");
    assert.equal(references.length, 2, JSON.stringify(sent[2]!.input));
    // A reference the store did not have would be a 404; resolved, each turn's prompt holds every answer.
    assert.ok(inputTokens[0]! < inputTokens[1]! && inputTokens[1]! < inputTokens[2]!, String(inputTokens));
  });
});

const pgUnavailable = await postgresUnavailable();

describe("kept Responses through the openai client (PostgreSQL)", { skip: pgUnavailable ?? false }, () => {
  let db: TestDatabase;
  let server: RunningTextgen;
  let client: OpenAI;
  before(async () => {
    db = await createTestDatabase("lectern_responses_test");
    server = await startTextgen({ DATABASE_URL: db.url });
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  after(async () => {
    await server?.close();
    await db?.drop();
  });

  it("the same three turns, retrieve, inputItems.list and delete", async () => {
    await threeTurnsAndBack(client);
  });

  it("the same Conversations API flow", async () => {
    await conversationFlow(client);
  });

  it("another app over the same database retrieves and continues what this one kept", async () => {
    const kept = await client.responses.create({ model: "llama", input: "Hello", max_output_tokens: 4 });
    const other = await startTextgen({ DATABASE_URL: db.url });
    try {
      const otherClient = new OpenAI({ baseURL: `${other.url}/v1`, apiKey: "unused", maxRetries: 0 });
      assert.deepEqual((await otherClient.responses.retrieve(kept.id)).output, kept.output);
      const next = await otherClient.responses.create({
        model: "llama",
        input: "Again",
        previous_response_id: kept.id,
        max_output_tokens: 4,
      });
      assert.ok(next.usage!.input_tokens > kept.usage!.input_tokens);
    } finally {
      await other.close();
    }
  });
});

describe("a kept response survives its server being killed", () => {
  let dataDir: string;
  before(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), "lectern-responses-kill-"));
  });
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  it("answered whole, then SIGKILL: a new process retrieves it and continues it", async () => {
    const env = { DATA_DIR: dataDir };
    const first = await startServe("textgen", env);
    let kept: OpenAI.Responses.Response;
    try {
      await waitHealthy(first);
      const client = new OpenAI({ baseURL: `${first.url}/v1`, apiKey: "unused", maxRetries: 0 });
      kept = await client.responses.create({ model: "llama", input: "Once", max_output_tokens: 6 });
    } finally {
      // No shutdown: a whole response is answered once its save has committed.
      first.child.kill("SIGKILL");
      await first.exited;
    }
    const second = await startServe("textgen", env);
    try {
      await waitHealthy(second);
      const client = new OpenAI({ baseURL: `${second.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const retrieved = await client.responses.retrieve(kept.id);
      assert.deepEqual(retrieved.output, kept.output);
      const next = await client.responses.create({
        model: "llama",
        input: "Twice",
        previous_response_id: kept.id,
        max_output_tokens: 4,
      });
      assert.equal(next.previous_response_id, kept.id);
    } finally {
      second.child.kill("SIGTERM");
      await second.exited;
    }
  });
});
