import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testModelName, testModelPath } from "../helpers/env.js";
import { startTextgen, type RunningTextgen } from "../helpers/servers.js";

/** Response bodies are read loosely: the assertions check their shape. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

describe("/v1/embeddings from the served model (no EMBEDDING_MODEL_PATH)", () => {
  let server: RunningTextgen;

  before(async () => {
    server = await startTextgen({ EMBEDDING_CONTEXT_SIZE: "64", EMBEDDING_MAX_INPUTS: "8" });
  });
  after(async () => server.close());

  async function embed(body: object) {
    const response = await fetch(`${server.url}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Loose };
  }

  it("embeds a string: one unit-length vector of the model's size, with usage", async () => {
    const { status, body } = await embed({ input: "Once upon a time", model: "anything" });
    assert.equal(status, 200);
    assert.equal(body.object, "list");
    assert.equal(body.model, testModelName);
    assert.equal(body.data.length, 1);
    const vector = body.data[0].embedding as number[];
    assert.equal(vector.length, 64, "stories260K's n_embd");
    const norm = Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
    assert.ok(Math.abs(norm - 1) < 1e-5);
    assert.ok(body.usage.prompt_tokens > 0);
    assert.equal(body.usage.total_tokens, body.usage.prompt_tokens);
  });

  it("embeds a list in order, each as it would be alone; base64 carries the same float32 values", async () => {
    const texts = ["The cat sat.", "A big red ball", "Once upon a time"];
    const batch = await embed({ input: texts });
    assert.deepEqual(
      batch.body.data.map((item: Loose) => item.index),
      [0, 1, 2],
    );
    const alone = await embed({ input: texts[2] });
    assert.deepEqual(batch.body.data[2].embedding, alone.body.data[0].embedding);
    assert.notDeepEqual(batch.body.data[0].embedding, batch.body.data[1].embedding);
    const encoded = await embed({ input: texts, encoding_format: "base64" });
    const bytes = Buffer.from(encoded.body.data[1].embedding as string, "base64");
    const decoded = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4));
    assert.deepEqual(decoded, batch.body.data[1].embedding);
  });

  it("dimensions below the model's: the first values, renormalised to unit length", async () => {
    const full = await embed({ input: "Once upon a time" });
    const short = await embed({ input: "Once upon a time", dimensions: 16 });
    assert.equal(short.status, 200);
    const vector = short.body.data[0].embedding as number[];
    assert.equal(vector.length, 16);
    const norm = Math.hypot(...vector);
    assert.ok(Math.abs(norm - 1) < 1e-5, `unit length, got ${norm}`);
    const head = (full.body.data[0].embedding as number[]).slice(0, 16);
    const headNorm = Math.hypot(...head);
    vector.forEach((value, i) => assert.ok(Math.abs(value - head[i]! / headNorm) < 1e-5));
  });

  it("refuses clearly: more dimensions than the model's, too many inputs, an input too long", async () => {
    const dimensions = await embed({ input: "hello", dimensions: 65 });
    assert.equal(dimensions.status, 400);
    assert.equal(dimensions.body.error.param, "dimensions");
    assert.match(dimensions.body.error.message, /64 dimensions/);
    assert.equal((await embed({ input: "hello", dimensions: 64 })).status, 200);
    const many = await embed({ input: Array.from({ length: 9 }, () => "hi") });
    assert.equal(many.status, 400);
    const long = await embed({ input: ["short", "Once upon a time there was a cat. ".repeat(20)] });
    assert.equal(long.status, 400);
    assert.match(long.body.error.message, /input 1 is \d+ tokens/);
    const huge = await embed({ input: "x".repeat(2 * 1024 * 1024) });
    assert.equal(huge.status, 413);
  });
});

describe("/v1/embeddings from EMBEDDING_MODEL_PATH", () => {
  it("loads that model on first use and answers with its name", async () => {
    const server = await startTextgen({ EMBEDDING_MODEL_PATH: testModelPath });
    try {
      const response = await fetch(`${server.url}/v1/embeddings`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ input: ["Once upon a time"] }),
      });
      assert.equal(response.status, 200);
      const body = (await response.json()) as Loose;
      assert.equal(body.model, testModelName);
      assert.equal(body.data[0].embedding.length, 64);
    } finally {
      await server.close();
    }
  });
});
