/**
 * Issue #37: the Responses API's file_search tool over the RAG app's vector stores, through the
 * official openai client: the file_search_call item (with results when `include` asks), citations of
 * the files that hold the answer, the stream's events in order, max_num_results and score_threshold,
 * several stores, tenants, the RAG app in this process (inject) and elsewhere (RAG_URL).
 *
 * The in-process suite generates with the scripted generator, so every answer, and so every
 * citation, is known; the RAG_URL suite generates with the test model (stories260K), whose text
 * means nothing: it checks the protocol only.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import OpenAI, { toFile } from "openai";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { freePort } from "../../scripts/lib/free-port.js";
import { buildRagApp } from "../../src/rag/app.js";
import { serve, type Listening } from "../../src/server.js";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { fileSearchPortOf } from "../../src/textgen/http/dialects/file-search.js";
import type { ChatRequest } from "../../src/textgen/engine/generator.js";
import { createGenerator } from "../../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../../src/textgen/engine/llama-generator.js";
import { testConfig } from "../helpers/env.js";
import { ScriptedGenerator } from "../helpers/scripted-generator.js";

// Response bodies are read loosely where the SDK's union types would hide the fields checked.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

const TEAM_A = "team-a-secret";
const TEAM_B = "team-b-secret";
const ANSWER = "Restores take two hours [2]. Keys rotate [1].";
const scripts = {
  text: { steps: [{ text: "From the files." }] },
  cite: { steps: [{ text: ANSWER }] },
};
/** Three files with distinct content: a query's best file is known. */
const FILES = {
  "keys.md": "API keys of the database are rotated every thirty days by the security team.",
  "backups.md": "Database backups run nightly. A database restore takes two hours to finish.",
  "holidays.md": "Employees receive twenty five holidays each year, approved by the people team.",
};
const EXTRA = {
  "restore-drill.md": "The restore drill runs quarterly: a restore of the database is rehearsed.",
};
const QUESTION = "How long does a database restore take?";

const folders: string[] = [];
after(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});
function folder(): string {
  const made = mkdtempSync(path.join(os.tmpdir(), "lectern-file-search-"));
  folders.push(made);
  return made;
}

/**
 * A vector store holding `files`, built as the openai client builds one (fileBatches.uploadAndPoll);
 * its id as the RAG app answers it, and each file's id by name.
 */
async function makeStore(client: OpenAI, name: string, files: Record<string, string>) {
  const store = await client.vectorStores.create({ name });
  const uploads = await Promise.all(
    Object.entries(files).map(([filename, text]) => toFile(Buffer.from(text), filename)),
  );
  const batch = await client.vectorStores.fileBatches.uploadAndPoll(store.id, { files: uploads });
  assert.equal(batch.status, "completed");
  assert.equal(batch.file_counts.completed, uploads.length);
  const ids: Record<string, string> = {};
  for await (const file of client.vectorStores.files.list(store.id))
    ids[(await client.files.retrieve(file.id)).filename] = file.id;
  assert.equal(Object.keys(ids).length, uploads.length);
  return { id: store.id, ids };
}

async function collect(stream: AsyncIterable<ResponseStreamEvent>): Promise<Loose[]> {
  const events: Loose[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

const toolOf = (storeIds: string[], extra: object = {}) => ({
  type: "file_search" as const,
  vector_store_ids: storeIds,
  ...extra,
});

describe("file_search with the RAG app in this process", () => {
  let rag: Awaited<ReturnType<typeof buildRagApp>>;
  let textgen: Awaited<ReturnType<typeof buildTextgenApp>>;
  let generator: ScriptedGenerator;
  let ragA: OpenAI;
  let ragB: OpenAI;
  let a: OpenAI;
  let b: OpenAI;
  let handbook: { id: string; ids: Record<string, string> };
  let drills: { id: string; ids: Record<string, string> };

  before(async () => {
    const dir = folder();
    writeFileSync(path.join(dir, "keys"), `${TEAM_A} team-a\n${TEAM_B} team-b\n`);
    const config = testConfig({
      DATA_DIR: dir,
      API_KEYS_FILE: path.join(dir, "keys"),
      GENERATION_UPSTREAM_URL: "http://127.0.0.1:9/v1",
    });
    rag = await buildRagApp({ config });
    generator = new ScriptedGenerator(scripts);
    textgen = await buildTextgenApp({ config, generator, fileSearch: fileSearchPortOf(config, () => rag) });
    const ragUrl = await rag.listen({ host: "127.0.0.1", port: 0 });
    const textgenUrl = await textgen.listen({ host: "127.0.0.1", port: 0 });
    const client = (baseURL: string, apiKey: string) => new OpenAI({ baseURL, apiKey, maxRetries: 0 });
    ragA = client(`${ragUrl}/v1`, TEAM_A);
    ragB = client(`${ragUrl}/v1`, TEAM_B);
    a = client(`${textgenUrl}/v1`, TEAM_A);
    b = client(`${textgenUrl}/v1`, TEAM_B);
    handbook = await makeStore(ragA, "Team handbook", FILES);
    drills = await makeStore(ragA, "Restore drills (2026)", EXTRA);
  });
  after(async () => {
    await textgen.close();
    await rag.close();
  });

  it("a file_search_call, the passages given to the model, the answer's [n] cited by file", async () => {
    const response = await a.responses.create({
      model: "m",
      input: `${QUESTION} script:cite`,
      tools: [toolOf([handbook.id])],
    });
    assert.equal(response.status, "completed");
    assert.equal(response.output.length, 2);
    const [call, message] = response.output as Loose[];
    assert.equal(call.type, "file_search_call");
    assert.match(call.id, /^fs_/);
    assert.equal(call.status, "completed");
    assert.deepEqual(call.queries, [`${QUESTION} script:cite`]);
    assert.equal(call.results, null, "results only when include asks for them");
    assert.equal(message.type, "message");
    const part = message.content[0];
    assert.equal(part.text, ANSWER);
    assert.equal(response.output_text, ANSWER);

    // What the model read: the passages, numbered, best first, before the question.
    const page = [];
    for await (const r of ragA.vectorStores.search(handbook.id, { query: `${QUESTION} script:cite` }))
      page.push(r);
    assert.equal(page[0]!.filename, "backups.md", "the restore question's best file");
    const prompt = (generator.requests.at(-1) as ChatRequest).messages.at(-1)!.content;
    page.forEach((result, n) => {
      assert.ok(prompt.includes(`[${n + 1}] ${result.filename}:\n${result.content[0]!.text}`), prompt);
    });
    assert.ok(prompt.endsWith(`${QUESTION} script:cite`));

    // [2] and [1] name the second and first results' files, just after each marker.
    assert.deepEqual(part.annotations, [
      {
        type: "file_citation",
        file_id: page[1]!.file_id,
        filename: page[1]!.filename,
        index: ANSWER.indexOf("[2]") + 3,
      },
      {
        type: "file_citation",
        file_id: page[0]!.file_id,
        filename: page[0]!.filename,
        index: ANSWER.indexOf("[1]") + 3,
      },
    ]);
    assert.equal(part.annotations[1].file_id, handbook.ids["backups.md"]);
  });

  it("include file_search_call.results: the RAG app's results, exactly; no marker: every file cited at the end", async () => {
    const response = await a.responses.create({
      model: "m",
      input: [{ role: "user", content: `${QUESTION} script:text` }],
      tools: [toolOf([handbook.id])],
      include: ["file_search_call.results"],
    });
    const [call, message] = response.output as Loose[];
    const page = [];
    for await (const r of ragA.vectorStores.search(handbook.id, { query: `${QUESTION} script:text` }))
      page.push(r);
    assert.deepEqual(
      call.results,
      page.map((r) => ({
        file_id: r.file_id,
        filename: r.filename,
        score: r.score,
        attributes: r.attributes,
        text: r.content[0]!.text,
      })),
    );
    const text = "From the files.";
    assert.deepEqual(
      message.content[0].annotations,
      [...new Map(page.map((r) => [r.file_id, r])).values()].map((r) => ({
        type: "file_citation",
        file_id: r.file_id,
        filename: r.filename,
        index: text.length,
      })),
    );
    assert.equal(message.content[0].annotations[0].filename, "backups.md");
  });

  it("streamed: the search's events, then the message with its annotation events, numbered in order", async () => {
    const events = await collect(
      await a.responses.create({
        model: "m",
        input: `${QUESTION} script:cite`,
        tools: [toolOf([handbook.id])],
        include: ["file_search_call.results"],
        stream: true,
      }),
    );
    assert.deepEqual(
      events.map((event) => event.sequence_number),
      events.map((_event, index) => index),
    );
    const types = events.map((event) => event.type);
    assert.deepEqual(types.slice(0, 7), [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.file_search_call.in_progress",
      "response.file_search_call.searching",
      "response.file_search_call.completed",
      "response.output_item.done",
    ]);
    const callId = events[2].item.id;
    for (const event of events.slice(2, 7)) assert.equal(event.output_index, 0);
    for (const event of events.slice(3, 6)) assert.equal(event.item_id, callId);
    assert.equal(events[2].item.status, "in_progress");
    assert.equal(events[6].item.status, "completed");
    assert.ok(events[6].item.results.length >= 1);

    const done = events.at(-1);
    assert.equal(done.type, "response.completed");
    const [call, message] = done.response.output;
    assert.deepEqual(call, events[6].item);
    const added = events.filter((event) => event.type === "response.output_text.annotation.added");
    assert.deepEqual(
      added.map((event) => [event.output_index, event.item_id, event.content_index, event.annotation_index]),
      [
        [1, message.id, 0, 0],
        [1, message.id, 0, 1],
      ],
    );
    assert.deepEqual(
      added.map((event) => event.annotation),
      message.content[0].annotations,
    );
    assert.equal(message.content[0].annotations.length, 2);
    // The annotations come after the text and before it is done; the part and item carry them.
    const textDone = types.indexOf("response.output_text.done");
    assert.ok(
      types.lastIndexOf("response.output_text.delta") <
        types.indexOf("response.output_text.annotation.added"),
    );
    assert.ok(types.lastIndexOf("response.output_text.annotation.added") < textDone);
    const partDone = events.find((event) => event.type === "response.content_part.done");
    assert.deepEqual(partDone.part.annotations, message.content[0].annotations);
    const itemDone = events.filter((event) => event.type === "response.output_item.done").at(-1);
    assert.deepEqual(itemDone.item, message);

    // Kept as answered, and a follow-up from it reads the earlier turns without naming the call ignored.
    assert.deepEqual((await a.responses.retrieve(done.response.id)).output, done.response.output);
    const { response, data } = await a.responses
      .create({ model: "m", previous_response_id: done.response.id, input: "And the keys? script:text" })
      .withResponse();
    assert.equal(data.status, "completed");
    assert.equal(response.headers.get("x-lectern-ignored-fields"), null);
  });

  it("max_num_results and score_threshold cut the results; several stores merge by score", async () => {
    const query = `${QUESTION} script:text`;
    const one = await a.responses.create({
      model: "m",
      input: query,
      tools: [toolOf([handbook.id], { max_num_results: 1 })],
      include: ["file_search_call.results"],
    });
    const results = (one.output[0] as Loose).results;
    assert.equal(results.length, 1);
    assert.equal(results[0].filename, "backups.md");

    const both = await a.responses.create({
      model: "m",
      input: query,
      tools: [toolOf([handbook.id, drills.id], { max_num_results: 2 })],
      include: ["file_search_call.results"],
    });
    const merged = (both.output[0] as Loose).results as { score: number; filename: string }[];
    const all = [];
    for (const id of [handbook.id, drills.id])
      for await (const r of ragA.vectorStores.search(id, { query })) all.push(r);
    const best = all.sort((x, y) => y.score - x.score).slice(0, 2);
    assert.deepEqual(
      merged.map((r) => [r.filename, r.score]),
      best.map((r) => [r.filename, r.score]),
    );
    assert.ok(
      merged.some((r) => r.filename === "restore-drill.md"),
      "the second store's file is among the best",
    );

    // Each store scores its best 1 (the RAG app's scale), so the two stores' best tie; a threshold
    // between the best score and the next keeps those and drops the rest.
    const scores = [...new Set(all.map((r) => r.score))];
    assert.ok(scores.length >= 2, `distinct scores: ${scores.join(", ")}`);
    const threshold = (scores[0]! + scores[1]!) / 2;
    const cut = await a.responses.create({
      model: "m",
      input: query,
      tools: [
        toolOf([handbook.id, drills.id], { ranking_options: { ranker: "auto", score_threshold: threshold } }),
      ],
      include: ["file_search_call.results"],
    });
    const kept = (cut.output[0] as Loose).results as { file_id: string; score: number }[];
    assert.deepEqual(
      kept.map((r) => r.file_id),
      all.filter((r) => r.score >= threshold).map((r) => r.file_id),
    );
    assert.ok(kept.length >= 1 && kept.length < all.length, `${kept.length} of ${all.length} kept`);
  });

  it("a filter reaches the search; bad tool fields are 400s naming them", async () => {
    const filtered = await a.responses.create({
      model: "m",
      input: `${QUESTION} script:text`,
      tools: [toolOf([handbook.id], { filters: { type: "eq", key: "no_such_key", value: "x" } })],
      include: ["file_search_call.results"],
    });
    assert.deepEqual((filtered.output[0] as Loose).results, []);
    assert.deepEqual((filtered.output[1] as Loose).content[0].annotations, []);

    for (const [tool, param] of [
      [toolOf([handbook.id], { max_num_results: 51 }), "tools.0.max_num_results"],
      [toolOf([]), "tools.0.vector_store_ids"],
      [
        toolOf([handbook.id], { ranking_options: { score_threshold: 2 } }),
        "tools.0.ranking_options.score_threshold",
      ],
    ] as const)
      await assert.rejects(
        a.responses.create({ model: "m", input: "x", tools: [tool as Loose] }),
        (error: unknown) => error instanceof OpenAI.BadRequestError && error.param === param,
      );
  });

  it("a tenant's key cannot search another tenant's store (404, as for a store that does not exist)", async () => {
    await assert.rejects(
      b.responses.create({ model: "m", input: QUESTION, tools: [toolOf([handbook.id])] }),
      (error: unknown) => error instanceof OpenAI.NotFoundError && /vector store/.test(error.message),
    );
    const own = await makeStore(ragB, "handbook", { "b.md": "Team B restores the database in ten minutes." });
    const response = await b.responses.create({
      model: "m",
      input: QUESTION,
      tools: [toolOf([own.id])],
      include: ["file_search_call.results"],
    });
    assert.deepEqual(
      (response.output[0] as Loose).results.map((r: Loose) => r.file_id),
      [own.ids["b.md"]],
    );
  });
});

describe("file_search with the RAG app at RAG_URL", () => {
  let rag: Awaited<ReturnType<typeof buildRagApp>>;
  let ragUrl: string;
  let store: { id: string; ids: Record<string, string> };
  const apps: Awaited<ReturnType<typeof buildTextgenApp>>[] = [];

  before(async () => {
    const dir = folder();
    writeFileSync(path.join(dir, "keys"), `${TEAM_A} team-a\n`);
    rag = await buildRagApp({ config: testConfig({ DATA_DIR: dir, API_KEYS_FILE: path.join(dir, "keys") }) });
    ragUrl = await rag.listen({ host: "127.0.0.1", port: 0 });
    const ragClient = new OpenAI({ baseURL: `${ragUrl}/v1`, apiKey: TEAM_A, maxRetries: 0 });
    store = await makeStore(ragClient, "handbook", FILES);
  });
  after(async () => {
    for (const app of apps) await app.close();
    await rag.close();
  });

  /** A text generation app on the test model, with these variables; its client (no key). */
  async function textgenWith(env: Record<string, string>): Promise<OpenAI> {
    const config = testConfig({ DATA_DIR: folder(), ...env });
    const generator = createGenerator(config) as LlamaGenerator;
    const app = await buildTextgenApp({ config, generator });
    apps.push(app);
    await generator.ready();
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    return new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
  }

  it("RAG_URL with RAG_API_KEY: the search goes over HTTP, as that key's tenant; streamed and not", async () => {
    // RAG_URL written with /v1, as GENERATION_URL is, works the same.
    const client = await textgenWith({ RAG_URL: `${ragUrl}/v1`, RAG_API_KEY: TEAM_A });
    const response = await client.responses.create({
      input: QUESTION,
      max_output_tokens: 8,
      tools: [toolOf([store.id])],
      include: ["file_search_call.results"],
    });
    const [call, message] = response.output as Loose[];
    assert.equal(call.type, "file_search_call");
    assert.equal(call.results[0].file_id, store.ids["backups.md"]);
    // The model's text means nothing; whatever it is, each citation names a file that was found.
    const found = new Map(call.results.map((r: Loose) => [r.file_id, r.filename]));
    for (const annotation of message.content[0].annotations) {
      assert.equal(found.get(annotation.file_id), annotation.filename);
      assert.ok(annotation.index >= 0 && annotation.index <= message.content[0].text.length);
    }
    assert.ok(message.content[0].annotations.length >= 1);

    const events = await collect(
      await client.responses.create({
        input: QUESTION,
        max_output_tokens: 8,
        tools: [toolOf([store.id])],
        stream: true,
      }),
    );
    assert.equal(events[3].type, "response.file_search_call.in_progress");
    const final = events.at(-1).response;
    assert.equal(final.output[0].type, "file_search_call");
    assert.equal(final.output[0].results, null);
  });

  it("RAG_URL without a key the RAG app knows: its 401 is a 403 naming the RAG app", async () => {
    const client = await textgenWith({ RAG_URL: ragUrl });
    await assert.rejects(
      client.responses.create({ input: QUESTION, max_output_tokens: 4, tools: [toolOf([store.id])] }),
      (error: unknown) => error instanceof OpenAI.PermissionDeniedError && error.message.includes("RAG_URL="),
    );
  });

  it("neither RAG_URL nor a RAG app in this process: a 400 naming both", async () => {
    const client = await textgenWith({});
    await assert.rejects(
      client.responses.create({ input: QUESTION, max_output_tokens: 4, tools: [toolOf([store.id])] }),
      (error: unknown) =>
        error instanceof OpenAI.BadRequestError &&
        error.param === "tools" &&
        /RAG_URL/.test(error.message) &&
        /lectern serve all/.test(error.message),
    );
  });
});

describe("file_search with both apps started as serve all starts them", () => {
  let listening: Listening[] = [];
  after(async () => {
    await Promise.all(listening.map((app) => app.close()));
  });

  it("the text generation app searches the RAG app of its process, as the caller's tenant", async () => {
    const dir = folder();
    writeFileSync(path.join(dir, "keys"), `${TEAM_A} team-a\n${TEAM_B} team-b\n`);
    const [textgenPort, ragPort] = [await freePort(), await freePort()];
    listening = await serve(
      "all",
      testConfig({
        DATA_DIR: dir,
        API_KEYS_FILE: path.join(dir, "keys"),
        HOST: "127.0.0.1",
        TEXTGEN_PORT: String(textgenPort),
        RAG_PORT: String(ragPort),
      }),
    );
    // Generous: the model loads in the background on a loaded 2-core machine; a real hang still fails.
    const deadline = performance.now() + 180_000;
    while ((await fetch(`http://127.0.0.1:${textgenPort}/health`).catch(() => null))?.status !== 200) {
      assert.ok(performance.now() < deadline, "the model did not load");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const client = (port: number, apiKey: string) =>
      new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0 });
    const store = await makeStore(client(ragPort, TEAM_A), "handbook", FILES);
    const response = await client(textgenPort, TEAM_A).responses.create({
      input: QUESTION,
      max_output_tokens: 8,
      tools: [toolOf([store.id], { max_num_results: 2 })],
      include: ["file_search_call.results"],
    });
    const results = (response.output[0] as Loose).results;
    assert.equal(results.length, 2);
    assert.equal(results[0].file_id, store.ids["backups.md"]);
    await assert.rejects(
      client(textgenPort, TEAM_B).responses.create({ input: QUESTION, tools: [toolOf([store.id])] }),
      OpenAI.NotFoundError,
    );
  });
});
