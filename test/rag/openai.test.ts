/**
 * The official openai client against the RAG app: vector stores over indices, files, search with
 * OpenAI's filters, models, and chat completions answering from an index (plain and streamed), with
 * the model in the same process as `npm start` wires it.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import OpenAI, { toFile } from "openai";
import { buildRagApp } from "../../src/rag/app.js";
import { localModels } from "../../src/rag/local-models.js";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { createGenerator } from "../../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../../src/textgen/engine/llama-generator.js";
import { testConfig } from "../helpers/env.js";
import { HANDBOOK } from "../helpers/handbook.js";

describe("OpenAI's API on the RAG app, through the openai client", () => {
  let rag: Awaited<ReturnType<typeof buildRagApp>>;
  let textgen: Awaited<ReturnType<typeof buildTextgenApp>>;
  let client: OpenAI;
  const ids: Record<string, string> = {};
  /** The handbook store's id (`vs_…`): also the name of the index behind it, its model for chat. */
  let handbook = "";

  before(async () => {
    const config = testConfig({ DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-openai-rag-")) });
    const generator = createGenerator(config) as LlamaGenerator;
    textgen = await buildTextgenApp({ config, generator });
    await generator.ready();
    rag = await buildRagApp({ config, local: localModels(textgen.textgenService, config.generation) });
    await rag.listen({ host: "127.0.0.1", port: 0 });
    const { port } = rag.server.address() as AddressInfo;
    client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  after(async () => {
    await rag.close();
    await textgen.close();
  });

  it("vector stores: create, add uploaded files, list, retrieve", async () => {
    const store = await client.vectorStores.create({ name: "handbook" });
    assert.match(store.id, /^vs_/);
    assert.equal(store.name, "handbook");
    handbook = store.id;
    assert.equal(store.object, "vector_store");
    const attributes: Record<string, { team: string; minutes: number }> = {
      keys: { team: "security", minutes: 10 },
      backups: { team: "operations", minutes: 120 },
      holidays: { team: "people", minutes: 0 },
    };
    for (const doc of HANDBOOK) {
      const file = await client.files.create({
        file: await toFile(Buffer.from(doc.text), `${doc.id}.md`),
        purpose: "assistants",
      });
      assert.match(file.id, /^file-/);
      assert.equal(file.filename, `${doc.id}.md`);
      const added = await client.vectorStores.files.createAndPoll(handbook, {
        file_id: file.id,
        attributes: attributes[doc.id],
      });
      assert.equal(added.status, "completed");
      ids[doc.id] = file.id;
    }
    const listed = [];
    for await (const s of client.vectorStores.list()) listed.push(s.id);
    assert.deepEqual(listed, [handbook]);
    const retrieved = await client.vectorStores.retrieve(handbook);
    assert.equal(retrieved.file_counts.completed, 3);
    const files = [];
    for await (const f of client.vectorStores.files.list(handbook)) files.push(f.id);
    assert.deepEqual(files.sort(), Object.values(ids).sort());
  });

  it("search: query, comparison and compound filters, max_num_results, score_threshold", async () => {
    const plain = [];
    for await (const r of client.vectorStores.search(handbook, { query: "how long does a restore take" }))
      plain.push(r);
    assert.equal(plain[0]!.file_id, ids.backups);
    assert.equal(plain[0]!.filename, "backups.md");
    assert.equal(plain[0]!.content[0]!.type, "text");
    assert.equal(plain[0]!.attributes?.team, "operations");
    assert.equal(plain[0]!.attributes?.minutes, 120);

    const filtered = [];
    for await (const r of client.vectorStores.search(handbook, {
      query: "how long does it take",
      filters: {
        type: "and",
        filters: [
          { type: "ne", key: "team", value: "operations" },
          { type: "lte", key: "minutes", value: 60 },
        ],
      },
    }))
      filtered.push(r);
    assert.deepEqual(
      filtered.map((r) => r.file_id),
      [ids.keys],
    );

    const either = [];
    for await (const r of client.vectorStores.search(handbook, {
      query: "team approves",
      max_num_results: 1,
      filters: {
        type: "or",
        filters: [
          { type: "eq", key: "team", value: "security" },
          { type: "gt", key: "minutes", value: 1000 },
        ],
      },
    }))
      either.push(r);
    assert.deepEqual(
      either.map((r) => r.file_id),
      [ids.keys],
    );

    const none = [];
    for await (const r of client.vectorStores.search(handbook, {
      query: "restore",
      ranking_options: { score_threshold: 1 },
    }))
      none.push(r);
    assert.ok(none.every((r) => r.score >= 1));
  });

  it("models lists the indices; chat completions answer from one, citing it", async () => {
    const models = [];
    for await (const m of client.models.list()) models.push(m.id);
    assert.deepEqual(models, [handbook]);
    assert.equal((await client.models.retrieve(handbook)).id, handbook);

    const completion = await client.chat.completions.create({
      model: handbook,
      messages: [{ role: "user", content: "How do I rotate the API keys?" }],
    });
    const content = completion.choices[0]!.message.content!;
    assert.match(content, /Sources:\n\[1\] /);
    const citations = (completion as unknown as { citations: { document_id: string }[] }).citations;
    assert.equal(citations[0]!.document_id, ids.keys);
    // The answer's real token counts; "length" when it was cut at its limit, which the tiny model reaches.
    const usage = completion.usage!;
    assert.ok(usage.prompt_tokens > 0, JSON.stringify(usage));
    assert.ok(usage.completion_tokens >= 1);
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
    const finishWhole = completion.choices[0]!.finish_reason;
    assert.ok(finishWhole === "stop" || finishWhole === "length", finishWhole);
    const sourcesUsed = (completion as unknown as { sources_used: number }).sources_used;
    assert.ok(sourcesUsed >= 1 && sourcesUsed <= citations.length);

    const stream = await client.chat.completions.create({
      model: handbook,
      messages: [{ role: "user", content: "How do I rotate the API keys?" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let first: unknown;
    let finish: string | null = null;
    let streamedUsage: unknown;
    for await (const chunk of stream) {
      first ??= chunk;
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      streamedUsage = chunk.usage ?? streamedUsage;
    }
    // Greedy decoding: the streamed answer ends as the whole one did, with the same counts.
    assert.equal(finish, finishWhole);
    assert.deepEqual(streamedUsage, usage);
    assert.match(text, /Sources:\n\[1\] /);
    assert.equal((first as { citations: { document_id: string }[] }).citations[0]!.document_id, ids.keys);
    assert.equal((first as { sources_used: number }).sources_used, sourcesUsed);
  });

  it("errors in OpenAI's shape: unknown index, unknown field", async () => {
    await assert.rejects(
      client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "hi" }] }),
      (error: unknown) => error instanceof OpenAI.NotFoundError,
    );
    await assert.rejects(
      client.vectorStores.search(handbook, { query: "x", topk: 1 } as never),
      (error: unknown) => error instanceof OpenAI.BadRequestError && /topk/.test(error.message),
    );
  });

  it("vector stores: delete", async () => {
    const deleted = await client.vectorStores.delete(handbook);
    assert.equal(deleted.deleted, true);
    await assert.rejects(client.vectorStores.retrieve(handbook), OpenAI.NotFoundError);
  });
});

describe("OpenAI's API on the RAG app: keys and tenants", () => {
  let rag: Awaited<ReturnType<typeof buildRagApp>>;
  let baseURL: string;

  before(async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-openai-keys-"));
    writeFileSync(path.join(dir, "keys"), "team-a-secret team-a\nteam-b-secret team-b\n");
    rag = await buildRagApp({
      config: testConfig({ DATA_DIR: dir, API_KEYS_FILE: path.join(dir, "keys") }),
    });
    await rag.listen({ host: "127.0.0.1", port: 0 });
    baseURL = `http://127.0.0.1:${(rag.server.address() as AddressInfo).port}/v1`;
  });
  after(() => rag.close());

  it("a key sees its own tenant's vector stores only; no key is a 401 in OpenAI's shape", async () => {
    const teamA = new OpenAI({ baseURL, apiKey: "team-a-secret", maxRetries: 0 });
    const teamB = new OpenAI({ baseURL, apiKey: "team-b-secret", maxRetries: 0 });
    const notes = (await teamA.vectorStores.create({ name: "notes" })).id;
    const listedA = [];
    for await (const s of teamA.vectorStores.list()) listedA.push(s.id);
    assert.deepEqual(listedA, [notes]);
    const listedB = [];
    for await (const s of teamB.vectorStores.list()) listedB.push(s.id);
    assert.deepEqual(listedB, []);
    await assert.rejects(teamB.vectorStores.retrieve(notes), OpenAI.NotFoundError);
    const anonymous = new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 });
    await assert.rejects(
      anonymous.vectorStores.list(),
      (error: unknown) =>
        error instanceof OpenAI.AuthenticationError &&
        (error.error as { type?: string } | undefined)?.type === "authentication_error",
    );
  });
});
