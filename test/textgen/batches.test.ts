/**
 * Issue #36: OpenAI's Batch API on the text generation app, through the official `openai` client
 * against the real CLI (a child process on the stories260K model, one llama.cpp thread): files
 * uploaded with purpose "batch", batches created, followed, listed, cancelled; output and error
 * files read back; tenants kept apart; a batch resumed after SIGKILL with each line once in its
 * output; an interactive request answered while a batch holds every sequence.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import OpenAI, { toFile } from "openai";
import type { AddressInfo } from "node:net";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { testConfig } from "../helpers/env.js";
import { ScriptedGenerator } from "../helpers/scripted-generator.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";

const ALICE = "alice-batch-key-0123456789";
const BOB = "bob-batch-key-0123456789";
/**
 * A liveness bound for a batch to reach a final status, not a speed figure: hundreds of short
 * generations on one thread of a loaded 2-core machine.
 */
const BATCH_BOUND_MS = 300_000;
const FINAL = new Set(["completed", "failed", "expired", "cancelled"]);

const folders: string[] = [];
const folder = () => {
  const made = mkdtempSync(path.join(os.tmpdir(), "lectern-batches-"));
  folders.push(made);
  return made;
};
after(() => {
  for (const made of folders) rmSync(made, { recursive: true, force: true });
});

/** A server on `dataDir` with two tenants' keys. */
async function serve(dataDir: string, env: Record<string, string> = {}): Promise<ServedProcess> {
  const keys = path.join(dataDir, "keys.txt");
  writeFileSync(keys, `${ALICE} alice\n${BOB} bob\n`);
  const served = await startServe("textgen", {
    DATA_DIR: dataDir,
    API_KEYS_FILE: keys,
    MAX_CONCURRENT: "2",
    BATCH_CONCURRENCY: "2",
    ...env,
  });
  await waitHealthy(served);
  return served;
}

const client = (served: ServedProcess, key: string) =>
  new OpenAI({ baseURL: `${served.url}/v1`, apiKey: key, maxRetries: 0 });

function chatLine(customId: string, maxTokens = 8, content = "Once upon a time") {
  return {
    custom_id: customId,
    method: "POST",
    url: "/v1/chat/completions",
    body: { messages: [{ role: "user", content }], max_tokens: maxTokens, temperature: 0 },
  };
}

const jsonl = (lines: unknown[]) =>
  lines.map((line) => (typeof line === "string" ? line : JSON.stringify(line))).join("\n") + "\n";

async function upload(openai: OpenAI, text: string) {
  return openai.files.create({ file: await toFile(Buffer.from(text), "input.jsonl"), purpose: "batch" });
}

async function startBatch(
  openai: OpenAI,
  lines: unknown[],
  endpoint: "/v1/chat/completions" = "/v1/chat/completions",
) {
  const file = await upload(openai, jsonl(lines));
  return openai.batches.create({ input_file_id: file.id, endpoint, completion_window: "24h" });
}

/** Polls until `done` holds for the batch (or the bound passes). */
async function until(openai: OpenAI, id: string, done: (batch: OpenAI.Batch) => boolean) {
  const deadline = performance.now() + BATCH_BOUND_MS;
  for (;;) {
    const batch = await openai.batches.retrieve(id);
    if (done(batch)) return batch;
    assert.ok(performance.now() < deadline, `batch ${id} still ${batch.status} after ${BATCH_BOUND_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;
async function lines(openai: OpenAI, fileId: string | null | undefined): Promise<Loose[]> {
  assert.ok(fileId, "the batch names the file");
  const text = await (await openai.files.content(fileId)).text();
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as Loose);
}

describe("Batch API (openai client, the CLI on the test model)", () => {
  let served: ServedProcess;
  before(async () => {
    served = await serve(folder(), { BATCH_MAX_FILE_BYTES: "64K", BATCH_MAX_LINES: "250" });
  });
  after(() => served?.child.kill("SIGKILL"));

  it("runs a batch: output lines as the endpoint answers, bad lines in the error file", async () => {
    const alice = client(served, ALICE);
    const good = Array.from({ length: 5 }, (_, i) => chatLine(`chat-${i}`));
    const created = await startBatch(alice, [
      ...good,
      { ...chatLine("wrong-url"), url: "/v1/completions" },
      { ...chatLine("refused"), body: { messages: [{ role: "user", content: "Hi" }], max_tokens: -1 } },
    ]);
    assert.match(created.id, /^batch_/);
    assert.equal(created.object, "batch");
    assert.equal(created.status, "validating");
    assert.equal(created.endpoint, "/v1/chat/completions");
    const batch = await until(alice, created.id, (b) => FINAL.has(b.status));
    assert.equal(batch.status, "completed", JSON.stringify(batch.errors));
    assert.deepEqual(batch.request_counts, { total: 7, completed: 5, failed: 2 });
    assert.ok(batch.completed_at! >= batch.in_progress_at! && batch.in_progress_at! >= batch.created_at);

    const output = await lines(alice, batch.output_file_id);
    assert.deepEqual(
      output.map((line) => line.custom_id).sort(),
      good.map((line) => line.custom_id),
    );
    for (const line of output) {
      assert.match(line.id, /^batch_req_/);
      assert.equal(line.error, null);
      assert.equal(line.response.status_code, 200);
      assert.equal(typeof line.response.request_id, "string");
      assert.equal(line.response.body.object, "chat.completion");
      assert.equal(typeof line.response.body.choices[0].message.content, "string");
    }
    const errors = await lines(alice, batch.error_file_id);
    const byId = Object.fromEntries(errors.map((line) => [line.custom_id, line]));
    assert.equal(byId["wrong-url"].error.code, "invalid_request");
    assert.equal(byId["wrong-url"].response, null);
    // Refused by the same validation as an interactive request of the endpoint.
    assert.equal(byId.refused.response.status_code, 400);
    assert.equal(typeof byId.refused.response.body.error.message, "string");

    const outputFile = await alice.files.retrieve(batch.output_file_id!);
    assert.equal(outputFile.purpose, "batch_output");
  });

  it("runs /v1/completions and /v1/embeddings lines as those endpoints answer", async () => {
    const alice = client(served, ALICE);
    const run = async (endpoint: "/v1/completions" | "/v1/embeddings", body: object) => {
      const file = await upload(alice, jsonl([{ custom_id: "one", method: "POST", url: endpoint, body }]));
      const created = await alice.batches.create({
        input_file_id: file.id,
        endpoint,
        completion_window: "24h",
      });
      const batch = await until(alice, created.id, (b) => FINAL.has(b.status));
      assert.deepEqual(batch.request_counts, { total: 1, completed: 1, failed: 0 });
      return (await lines(alice, batch.output_file_id))[0].response.body;
    };
    const completion = await run("/v1/completions", { prompt: "Once upon a time", max_tokens: 4 });
    assert.equal(completion.object, "text_completion");
    assert.equal(typeof completion.choices[0].text, "string");
    const embedding = await run("/v1/embeddings", { input: ["a cat", "a dog"] });
    assert.equal(embedding.object, "list");
    assert.equal(embedding.data.length, 2);
    assert.ok(embedding.data[0].embedding.length > 0);
  });

  it("fails a batch of more than BATCH_MAX_LINES requests", async () => {
    const alice = client(served, ALICE);
    const created = await startBatch(
      alice,
      Array.from({ length: 251 }, (_, i) => chatLine(`many-${i}`)),
    );
    const batch = await until(alice, created.id, (b) => FINAL.has(b.status));
    assert.equal(batch.status, "failed");
    assert.deepEqual(
      batch.errors!.data!.map((error) => [error.code, error.line]),
      [["too_many_requests", 251]],
    );
  });

  it("an internal call's header from a client is no key (401)", async () => {
    const response = await fetch(`${served.url}/v1/batches`, {
      headers: { "x-lectern-internal-call": "guessed-token" },
    });
    assert.equal(response.status, 401);
  });

  it("refuses a file past BATCH_MAX_FILE_BYTES (413) and another purpose (400)", async () => {
    const alice = client(served, ALICE);
    const big = jsonl(Array.from({ length: 1000 }, (_, i) => chatLine(`big-${i}`)));
    assert.ok(big.length > 64 * 1024);
    await assert.rejects(upload(alice, big), (error: unknown) => {
      assert.ok(error instanceof OpenAI.APIError);
      assert.equal(error.status, 413);
      return true;
    });
    const file = await toFile(Buffer.from(jsonl([chatLine("x")])), "input.jsonl");
    await assert.rejects(alice.files.create({ file, purpose: "assistants" }), OpenAI.BadRequestError);
    assert.deepEqual(
      (await alice.files.list()).data.filter(
        (one) => one.filename === "input.jsonl" && one.bytes > 64 * 1024,
      ),
      [],
    );
  });

  it("fails a batch whose file is not JSONL, naming the lines", async () => {
    const alice = client(served, ALICE);
    const created = await startBatch(alice, [chatLine("a"), "not json", chatLine("a")]);
    const batch = await until(alice, created.id, (b) => FINAL.has(b.status));
    assert.equal(batch.status, "failed");
    const codes = batch.errors!.data!.map((error) => [error.code, error.line]);
    assert.deepEqual(codes, [
      ["invalid_json_line", 2],
      ["duplicate_custom_id", 3],
    ]);
    assert.equal(batch.output_file_id, null);
  });

  it("lists batches and files by page; another tenant sees none of them", async () => {
    const alice = client(served, ALICE);
    const bob = client(served, BOB);
    const made: OpenAI.Batch[] = [];
    for (let i = 0; i < 3; i++) made.push(await startBatch(alice, [chatLine(`list-${i}`, 2)]));
    const first = await alice.batches.list({ limit: 2 });
    assert.deepEqual(
      first.data.map((b) => b.id),
      [made[2]!.id, made[1]!.id],
    );
    assert.equal(first.has_more, true);
    const second = await alice.batches.list({ limit: 2, after: made[1]!.id });
    assert.equal(second.data[0]!.id, made[0]!.id);
    const all: string[] = [];
    for await (const batch of alice.batches.list({ limit: 2 })) all.push(batch.id);
    assert.ok(made.every((batch) => all.includes(batch.id)));

    assert.deepEqual((await bob.batches.list()).data, []);
    assert.deepEqual((await bob.files.list()).data, []);
    await assert.rejects(bob.batches.retrieve(made[0]!.id), OpenAI.NotFoundError);
    await assert.rejects(bob.files.retrieve(made[0]!.input_file_id), OpenAI.NotFoundError);
    await assert.rejects(bob.files.content(made[0]!.input_file_id), OpenAI.NotFoundError);
    await assert.rejects(bob.batches.cancel(made[0]!.id), OpenAI.NotFoundError);
    const input = await (await alice.files.content(made[0]!.input_file_id)).text();
    assert.equal(JSON.parse(input).custom_id, "list-0");
    const files = await alice.files.list({ limit: 100 });
    assert.ok(files.data.some((file) => file.id === made[0]!.input_file_id && file.purpose === "batch"));
    await alice.files.delete(made[0]!.input_file_id);
    await assert.rejects(alice.files.retrieve(made[0]!.input_file_id), OpenAI.NotFoundError);
    for (const batch of made) await until(alice, batch.id, (b) => FINAL.has(b.status));
  });

  it("answers an interactive request while a batch holds every sequence", async () => {
    const alice = client(served, ALICE);
    const created = await startBatch(
      alice,
      Array.from({ length: 200 }, (_, i) => chatLine(`busy-${i}`, 48)),
    );
    // Both sequences are taken by batch lines once the first results are in.
    await until(alice, created.id, (b) => b.request_counts!.completed > 0);
    const answer = await alice.chat.completions.create({
      model: "any",
      messages: [{ role: "user", content: "Once upon a time" }],
      max_tokens: 8,
    });
    assert.equal(answer.object, "chat.completion");
    // Answered ahead of the batch, not after it: the batch still has lines to run.
    const during = await alice.batches.retrieve(created.id);
    assert.ok(
      during.request_counts!.completed + during.request_counts!.failed < 200,
      `the batch had finished: ${JSON.stringify(during.request_counts)}`,
    );
    await alice.batches.cancel(created.id);
    await until(alice, created.id, (b) => FINAL.has(b.status));
  });
});

describe("Batch API across a SIGKILL", () => {
  it("resumes after the kill and records each line once", async () => {
    const dataDir = folder();
    let served = await serve(dataDir);
    try {
      const alice = client(served, ALICE);
      const created = await startBatch(
        alice,
        Array.from({ length: 200 }, (_, i) => chatLine(`kill-${i}`, 16)),
      );
      const midway = await until(alice, created.id, (b) => b.request_counts!.completed >= 20);
      assert.ok(midway.request_counts!.completed < 200, "the batch finished before the kill");
      served.child.kill("SIGKILL");
      await served.exited;

      served = await serve(dataDir);
      const resumed = client(served, ALICE);
      const batch = await until(resumed, created.id, (b) => FINAL.has(b.status));
      assert.equal(batch.status, "completed");
      assert.deepEqual(batch.request_counts, { total: 200, completed: 200, failed: 0 });
      const output = await lines(resumed, batch.output_file_id);
      const ids = output.map((line) => line.custom_id as string);
      assert.equal(ids.length, 200);
      assert.deepEqual([...new Set(ids)].sort(), Array.from({ length: 200 }, (_, i) => `kill-${i}`).sort());
    } finally {
      served.child.kill("SIGKILL");
    }
  });
});

describe("Batch lines in-process (scripted generator: what the model was asked, known)", () => {
  it("reach the scheduler as batch jobs, an interactive request as interactive; /v1/responses lines too", async () => {
    const config = testConfig({ GENERATION_UPSTREAM_URL: "http://127.0.0.1:9/v1", DATA_DIR: folder() });
    const generator = new ScriptedGenerator({ text: { steps: [{ text: "Hello." }] } });
    const app = await buildTextgenApp({ config, generator });
    try {
      await app.listen({ host: "127.0.0.1", port: 0 });
      const port = (app.server.address() as AddressInfo).port;
      const openai = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0 });
      const chat = await startBatch(openai, [chatLine("c1"), chatLine("c2")]);
      await until(openai, chat.id, (b) => FINAL.has(b.status));
      const file = await upload(
        openai,
        jsonl([{ custom_id: "r1", method: "POST", url: "/v1/responses", body: { model: "m", input: "Hi" } }]),
      );
      const responses = await openai.batches.create({
        input_file_id: file.id,
        endpoint: "/v1/responses",
        completion_window: "24h",
      });
      const done = await until(openai, responses.id, (b) => FINAL.has(b.status));
      assert.deepEqual(done.request_counts, { total: 1, completed: 1, failed: 0 });
      const [line] = await lines(openai, done.output_file_id);
      assert.equal(line.response.body.object, "response");
      assert.equal(line.response.body.output_text ?? line.response.body.output[0].content[0].text, "Hello.");
      await openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "Hi" }] });
      assert.deepEqual(
        generator.requests.map((request) => request.priority),
        ["batch", "batch", "batch", "interactive"],
      );
    } finally {
      await app.close();
    }
  });
  it("cancels a batch: cancelling while its lines wait, then cancelled with what had run", async () => {
    // The generator holds every line at a gate until the cancel is in: no race with a fast model.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    class GatedGenerator extends ScriptedGenerator {
      override async generate(...args: Parameters<ScriptedGenerator["generate"]>) {
        await gate;
        return super.generate(...args);
      }
    }
    const config = testConfig({ GENERATION_UPSTREAM_URL: "http://127.0.0.1:9/v1", DATA_DIR: folder() });
    const app = await buildTextgenApp({
      config,
      generator: new GatedGenerator({ text: { steps: [{ text: "Hello." }] } }),
    });
    try {
      await app.listen({ host: "127.0.0.1", port: 0 });
      const port = (app.server.address() as AddressInfo).port;
      const openai = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0 });
      const total = 20;
      const created = await startBatch(
        openai,
        Array.from({ length: total }, (_, i) => chatLine(`cancel-${i}`)),
      );
      const cancelling = await openai.batches.cancel(created.id);
      assert.equal(cancelling.status, "cancelling");
      open();
      const batch = await until(openai, created.id, (b) => FINAL.has(b.status));
      assert.equal(batch.status, "cancelled");
      assert.ok(batch.cancelled_at! >= batch.cancelling_at!);
      assert.equal(batch.finalizing_at, null, "a cancelled batch goes from cancelling to cancelled");
      // Only the lines already at the gate (BATCH_CONCURRENCY at most) ran.
      assert.ok(
        batch.request_counts!.completed <= config.batches.concurrency,
        JSON.stringify(batch.request_counts),
      );
    } finally {
      open();
      await app.close();
    }
  });
});
