/**
 * Conversations (POST /rag/chat, `messages` on /rag/query) with the model in the same process, as
 * `npm start` wires it, and without a model. The corpus is built so that the second question, "How
 * long does that take?", alone matches the backups document best: only with the first question
 * carried into the search does the API keys document come first.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { buildRagApp } from "../../src/rag/app.js";
import { localModels } from "../../src/rag/local-models.js";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { createGenerator } from "../../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../../src/textgen/engine/llama-generator.js";
import { testConfig } from "../helpers/env.js";
import { HANDBOOK } from "../helpers/handbook.js";
import { sseEvents } from "../helpers/servers.js";

const FIRST = "How do I rotate the API keys?";
const SECOND = "How long does that take?";
const THIRD = "Who approves it?";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function ragWith(localModel: boolean) {
  const config = testConfig({ DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-chat-")) });
  let textgen: Awaited<ReturnType<typeof buildTextgenApp>> | null = null;
  if (localModel) {
    const generator = createGenerator(config) as LlamaGenerator;
    textgen = await buildTextgenApp({ config, generator });
    await generator.ready();
  }
  const rag = await buildRagApp({
    config,
    ...(textgen && { local: localModels(textgen.textgenService, config.generation) }),
  });
  const built = await rag.inject({
    method: "POST",
    url: "/rag/build",
    payload: { index_name: "handbook", documents: HANDBOOK, scorer: "bm25" },
  });
  assert.equal(built.statusCode, 201, built.body);
  return {
    rag,
    close: async () => {
      await rag.close();
      await textgen?.close();
    },
  };
}

async function chat(rag: Awaited<ReturnType<typeof buildRagApp>>, payload: Json): Promise<Json> {
  const res = await rag.inject({ method: "POST", url: "/rag/chat", payload });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

describe("POST /rag/chat with the in-process model", () => {
  let env: Awaited<ReturnType<typeof ragWith>>;
  before(async () => (env = await ragWith(true)));
  after(() => env.close());

  it("three turns: each follow-up is searched with the conversation and finds the keys document", async () => {
    const messages: Json[] = [{ role: "user", content: FIRST }];
    // One generative answer (turn two) is enough here: generation on the tiny model is the slow part.
    const first = await chat(env.rag, { index: "handbook", messages, top_k: 2, answer: "extractive" });
    assert.equal(first.query_rewritten, false, "a first question needs no rewrite");
    assert.equal(first.search_query, FIRST);
    assert.equal(first.results[0].document_id, "keys");
    assert.equal(first.answer_mode, "extractive");
    assert.equal(typeof first.answer, "string");

    messages.push({ role: "assistant", content: first.answer }, { role: "user", content: SECOND });
    const second = await chat(env.rag, { index: "handbook", messages, top_k: 2 });
    assert.equal(second.query, SECOND);
    assert.equal(second.query_rewritten, true);
    // The rewrite is bound by a grammar to words of the conversation (and a "?" unless it was cut at
    // its token limit).
    const words = new Set(
      messages.flatMap((m) => m.content.toLowerCase().match(/[a-z0-9]+(?:['-][a-z0-9]+)*/g) ?? []),
    );
    assert.ok(second.standalone_question.length > 0);
    for (const word of second.standalone_question.replace(/\?$/, "").split(" "))
      assert.ok(words.has(word), `"${word}" of the rewrite is not a word of the conversation`);
    assert.ok(second.search_query.startsWith(second.standalone_question));
    assert.ok(second.search_query.includes(FIRST), "the earlier question is searched too");
    assert.equal(second.results[0].document_id, "keys");
    assert.equal(second.answer_mode, "generative", second.generation_skipped_reason);
    assert.ok(Array.isArray(second.citations));

    messages.push({ role: "assistant", content: second.answer }, { role: "user", content: THIRD });
    const third = await chat(env.rag, { index: "handbook", messages, top_k: 2, answer: "none" });
    assert.equal(third.query_rewritten, true);
    assert.ok(third.search_query.includes(SECOND) && third.search_query.includes(FIRST));
    assert.equal(third.results[0].document_id, "keys");
  });

  it("streams the events /rag/query does: results (with what was searched), tokens, done", async () => {
    await env.rag.listen({ host: "127.0.0.1", port: 0 });
    const { port } = env.rag.server.address() as { port: number };
    const response = await fetch(`http://127.0.0.1:${port}/rag/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        index: "handbook",
        stream: true,
        messages: [
          { role: "user", content: FIRST },
          { role: "assistant", content: "Create a new key, deploy it, revoke the old one [1]." },
          { role: "user", content: SECOND },
        ],
      }),
    });
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /text\/event-stream/);
    const events: { event: string; data: string }[] = [];
    for await (const event of sseEvents(response)) events.push(event);
    assert.equal(events[0]!.event, "results");
    const results = JSON.parse(events[0]!.data);
    assert.equal(results.query_rewritten, true);
    assert.equal(results.results[0].document_id, "keys");
    const done = events.at(-1)!;
    assert.equal(done.event, "done");
    const whole = JSON.parse(done.data);
    const tokens = events.filter((e) => e.event === "message").map((e) => JSON.parse(e.data).token);
    assert.ok(tokens.length > 0);
    assert.equal(tokens.join("").trim(), whole.answer);
    assert.equal(whole.search_query, results.search_query);
  });

  it("/rag/query takes messages too", async () => {
    const res = await env.rag.inject({
      method: "POST",
      url: "/rag/query",
      payload: {
        index_name: "handbook",
        answer: "none",
        messages: [
          { role: "user", content: FIRST },
          { role: "assistant", content: "Create a new key [1]." },
          { role: "user", content: SECOND },
        ],
      },
    });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.query_rewritten, true);
    assert.equal(body.results[0].document_id, "keys");
  });
});

describe("POST /rag/chat without a model", () => {
  let env: Awaited<ReturnType<typeof ragWith>>;
  before(async () => (env = await ragWith(false)));
  after(() => env.close());

  it("searches the last user turn as it stands, and says so", async () => {
    const body = await chat(env.rag, {
      index: "handbook",
      messages: [
        { role: "user", content: FIRST },
        { role: "assistant", content: "Create a new key [1]." },
        { role: "user", content: SECOND },
      ],
    });
    assert.equal(body.query_rewritten, false);
    assert.equal(body.search_query, SECOND);
    assert.match(body.rewrite_skipped_reason, /no generation model/);
    // Searched alone, the follow-up finds the wrong document: why conversations need the rewrite.
    assert.equal(body.results[0].document_id, "backups");
    assert.equal(body.answer_mode, "extractive");
    assert.doesNotMatch(body.answer, /^#/);
  });

  it("refuses a conversation that does not end with a user turn, and unknown fields", async () => {
    const assistantLast = await env.rag.inject({
      method: "POST",
      url: "/rag/chat",
      payload: { index: "handbook", messages: [{ role: "assistant", content: "Hi" }] },
    });
    assert.equal(assistantLast.statusCode, 400);
    assert.match(assistantLast.json().error.message, /end with a user message/);
    const unknown = await env.rag.inject({
      method: "POST",
      url: "/rag/chat",
      payload: { index: "handbook", topk: 1, messages: [{ role: "user", content: "keys" }] },
    });
    assert.equal(unknown.statusCode, 400);
    assert.match(unknown.json().error.message, /unknown field "topk"/);
  });

  it("/rag/query names an unknown field, and says in words what an index name may be", async () => {
    const unknown = await env.rag.inject({
      method: "POST",
      url: "/rag/query",
      payload: { index_name: "handbook", query: "keys", topk: 1 },
    });
    assert.equal(unknown.statusCode, 400);
    assert.match(unknown.json().error.message, /unknown field "topk"/);
    const badName = await env.rag.inject({
      method: "POST",
      url: "/rag/query",
      payload: { index_name: "hand book", query: "keys" },
    });
    assert.equal(badName.statusCode, 400);
    const message: string = badName.json().error.message;
    assert.match(message, /index_name must be 1 to 128 letters, digits/);
    assert.doesNotMatch(message, /\(\?!/, "no raw regex");
  });
});
