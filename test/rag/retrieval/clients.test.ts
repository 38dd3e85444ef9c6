/**
 * RAG's embedding and rerank clients (src/rag/retrieval/embedder.ts, reranker.ts) against real servers:
 * our text generation app on a real socket, serving an embedding model and two rerankers made at test
 * time (synthetic weights: their vectors and scores mean nothing, but they are the model's), reached
 * over HTTP and in-process; a closed port and a server that never answers for the 503s.
 */
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { after, before, describe, it } from "node:test";

import { freePort } from "../../../scripts/lib/free-port.js";
import { syntheticModel } from "../../../scripts/lib/synthetic-gguf.js";
import { loadConfig } from "../../../src/core/config.js";
import { DomainError } from "../../../src/core/errors.js";
import { toApiError } from "../../../src/core/http.js";
import {
  embedderFor,
  embedFor,
  HttpEmbedder,
  LocalEmbedder,
  type Embedder,
} from "../../../src/rag/retrieval/embedder.js";
import { HttpReranker, LocalReranker, rerankerFor } from "../../../src/rag/retrieval/reranker.js";
import { localEmbedding, localRerank } from "../../../src/rag/local-models.js";
import { testModelPath } from "../../helpers/env.js";
import { modelCacheDir, modelsDirOf, retrievalModels, TINY } from "../../helpers/retrieval-models.js";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const TEXTS = ["The cat sat.", "A big red ball", "Once upon a time", "lily", "the dog ran far away"];
const DOCUMENTS = ["the cat sat on the mat", "a dog ran far away", "once upon a time", "lily"];
const QUERY = "once upon a time there was a cat";

/** The DomainError a promise rejects with, and its HTTP status. */
async function failure(promise: Promise<unknown>): Promise<{ error: DomainError; status: number }> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof DomainError, `expected a DomainError, got ${String(error)}`);
    return { error, status: toApiError(error).statusCode };
  }
  assert.fail("expected a rejection");
}

let server: RunningTextgen;
let base: string;

before(async () => {
  const files = {
    ...(await retrievalModels()),
    swapped: await syntheticModel(testModelPath, TINY, { dir: modelCacheDir, rankHead: { swapped: true } }),
  };
  const dir = modelsDirOf(files);
  // Two inputs per /v1/embeddings request at most: a client that did not batch would be refused.
  server = await startTextgen({ MODELS_DIR: dir, MAX_CONCURRENT: "2", EMBEDDING_MAX_INPUTS: "2" });
  base = `${server.url}/v1`;
});
after(async () => server?.close());

/** What /v1/embeddings answers for one text alone. */
async function embeddingAlone(text: string): Promise<Float32Array> {
  const response = await fetch(`${base}/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "embed", input: text }),
  });
  assert.equal(response.status, 200);
  const body = (await response.json()) as { data: { embedding: number[] }[] };
  return Float32Array.from(body.data[0]!.embedding);
}

const remote = (options: Partial<ConstructorParameters<typeof HttpEmbedder>[0]> = {}) =>
  new HttpEmbedder({
    baseUrl: base,
    model: "embed",
    apiKey: null,
    batchSize: 2,
    timeoutMs: 60_000,
    ...options,
  });

describe("embedding clients", () => {
  it("HTTP: batches of EMBEDDING_BATCH_SIZE, vectors in order, each as the server embeds it alone", async () => {
    const embedder = remote();
    try {
      assert.equal(embedder.dimension, undefined);
      const vectors = await embedder.embed(TEXTS);
      assert.equal(vectors.length, TEXTS.length);
      for (let i = 0; i < TEXTS.length; i++) assert.deepEqual(vectors[i], await embeddingAlone(TEXTS[i]!));
      assert.equal(embedder.model, "embed");
      assert.equal(embedder.dimension, TINY.embedding);
    } finally {
      await embedder.close();
    }
    // One request for all five texts is more than the server takes: its 400 is the input's problem.
    const unbatched = remote({ batchSize: 5 });
    const { error, status } = await failure(unbatched.embed(TEXTS));
    assert.equal(status, 422);
    assert.match(error.message, /embedder refused the input/);
    await unbatched.close();
  });

  it("HTTP without a model: the server's default, and the name it answers with", async () => {
    const embedder = remote({ model: null });
    const [vector] = await embedder.embed(["hello"]);
    assert.ok(vector instanceof Float32Array && vector.length > 0);
    assert.notEqual(embedder.model, "");
    await embedder.close();
  });

  it("in-process: the same vectors through the text generation service, no HTTP", async () => {
    const embedder = new LocalEmbedder(localEmbedding(server.app.textgenService), "embed", 2);
    const vectors = await embedder.embed(TEXTS);
    for (let i = 0; i < TEXTS.length; i++) assert.deepEqual(vectors[i], await embeddingAlone(TEXTS[i]!));
    assert.equal(embedder.model, "embed");
    assert.equal(embedder.dimension, TINY.embedding);
    // A model this process does not serve is the request's to fix (404), not a 503.
    const unknown = await failure(
      new LocalEmbedder(localEmbedding(server.app.textgenService), "nope", 2).embed(["x"]),
    );
    assert.equal(unknown.status, 404);
  });

  it("a dimension or model other than the index's is a 409 naming both", async () => {
    const embedder: Embedder = remote();
    const dimension = await failure(embedFor(embedder, ["hello"], { model: "embed", dimension: 32 }));
    assert.equal(dimension.status, 409);
    assert.match(dimension.error.message, /model embed \(32 dimensions\).*embedder is embed, 64 dimensions/);
    const model = await failure(embedFor(embedder, ["hello"], { model: "minilm", dimension: 64 }));
    assert.equal(model.status, 409);
    assert.match(model.error.message, /model minilm \(64 dimensions\).*embedder is embed, 64 dimensions/);
    // The index's own space passes.
    const [vector] = await embedFor(embedder, ["hello"], { model: "embed", dimension: 64 });
    assert.equal(vector?.length, 64);
    await embedder.close();
  });

  it("an embedder that cannot be reached, or does not answer in time, is a 503", async () => {
    const closed = remote({ baseUrl: `http://127.0.0.1:${await freePort()}/v1` });
    const unreachable = await failure(closed.embed(["hello"]));
    assert.equal(unreachable.status, 503);
    assert.match(unreachable.error.message, /^embedder unavailable: .*unreachable/);
    assert.equal(toApiError(unreachable.error).headers["retry-after"], "5");
    await closed.close();

    // A server that accepts the connection and never answers.
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const { port } = silent.address() as net.AddressInfo;
    const slow = remote({ baseUrl: `http://127.0.0.1:${port}/v1`, timeoutMs: 300 });
    try {
      const late = await failure(slow.embed(["hello"]));
      assert.equal(late.status, 503);
      assert.match(late.error.message, /did not answer within 300 ms/);
    } finally {
      await slow.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it("a model the server does not know is a 502 naming it; the caller's abort stops the work", async () => {
    const unknown = remote({ model: "nope" });
    const { error, status } = await failure(unknown.embed(["hello"]));
    assert.equal(status, 502);
    assert.match(error.message, /nope/);
    const controller = new AbortController();
    controller.abort(new Error("client gone"));
    await assert.rejects(unknown.embed(["hello"], controller.signal), /client gone/);
    await unknown.close();
  });

  it("embedderFor: EMBEDDING_URL first, else this process, else none", () => {
    const env = { MODEL_PATH: testModelPath, EMBEDDING_MODEL: "embed", EMBEDDING_BATCH_SIZE: "8" };
    assert.ok(
      embedderFor(loadConfig({ ...env, EMBEDDING_URL: base }).rag, undefined) instanceof HttpEmbedder,
    );
    assert.ok(
      embedderFor(loadConfig(env).rag, localEmbedding(server.app.textgenService)) instanceof LocalEmbedder,
    );
    assert.equal(embedderFor(loadConfig(env).rag, undefined), null);
    assert.throws(() => loadConfig({ ...env, EMBEDDING_BATCH_SIZE: "0" }), /EMBEDDING_BATCH_SIZE/);
    assert.throws(() => loadConfig({ ...env, RERANK_URL: "ftp://x" }), /RERANK_URL/);
  });
});

describe("rerank clients", () => {
  /** What /v1/rerank answers, as scores in the documents' order. */
  async function serverScores(model: string): Promise<number[]> {
    const response = await fetch(`${base}/rerank`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, query: QUERY, documents: DOCUMENTS }),
    });
    assert.equal(response.status, 200);
    const body = (await response.json()) as { results: { index: number; relevance_score: number }[] };
    const scores: number[] = [];
    for (const result of body.results) scores[result.index] = result.relevance_score;
    return scores;
  }

  it("HTTP (llama.cpp / Jina / Cohere shape) and in-process: one score per candidate, in order", async () => {
    const expected = await serverScores("rerank");
    assert.equal(expected.length, DOCUMENTS.length);
    const remote = new HttpReranker({ baseUrl: base, model: "rerank", apiKey: null, timeoutMs: 60_000 });
    assert.deepEqual(await remote.rerank(QUERY, DOCUMENTS), expected);
    assert.deepEqual(await remote.rerank(QUERY, []), []);
    await remote.close();
    const local = new LocalReranker(localRerank(server.app.textgenService), "rerank");
    const scores = await local.rerank(QUERY, DOCUMENTS);
    for (let i = 0; i < DOCUMENTS.length; i++) assert.ok(Math.abs(scores[i]! - expected[i]!) < 1e-6);
    assert.equal(local.model, "rerank");
    // The model's own scores: its head's rows swapped gives 1 − each one.
    const swapped = await new LocalReranker(localRerank(server.app.textgenService), "swapped").rerank(
      QUERY,
      DOCUMENTS,
    );
    for (let i = 0; i < DOCUMENTS.length; i++) assert.ok(Math.abs(swapped[i]! + scores[i]! - 1) < 1e-4);
  });

  it("a reranker that cannot be reached is a 503; an unknown model a 502 (HTTP) or 404 (in-process)", async () => {
    const closed = new HttpReranker({
      baseUrl: `http://127.0.0.1:${await freePort()}/v1`,
      model: "rerank",
      apiKey: null,
      timeoutMs: 60_000,
    });
    const unreachable = await failure(closed.rerank(QUERY, DOCUMENTS));
    assert.equal(unreachable.status, 503);
    assert.match(unreachable.error.message, /^reranker unavailable: /);
    await closed.close();
    const unknown = new HttpReranker({ baseUrl: base, model: "nope", apiKey: null, timeoutMs: 60_000 });
    assert.equal((await failure(unknown.rerank(QUERY, DOCUMENTS))).status, 502);
    await unknown.close();
    assert.equal(
      (
        await failure(
          new LocalReranker(localRerank(server.app.textgenService), "nope").rerank(QUERY, DOCUMENTS),
        )
      ).status,
      404,
    );
  });

  it("rerankerFor: RERANK_URL first, else this process, else none", () => {
    const env = { MODEL_PATH: testModelPath, RERANK_MODEL: "rerank" };
    assert.ok(rerankerFor(loadConfig({ ...env, RERANK_URL: base }).rag, undefined) instanceof HttpReranker);
    assert.ok(
      rerankerFor(loadConfig(env).rag, localRerank(server.app.textgenService)) instanceof LocalReranker,
    );
    assert.equal(rerankerFor(loadConfig(env).rag, undefined), null);
  });
});

describe("answers that break the API", () => {
  /** A server that answers every request with this status and body (not ours: any upstream may). */
  async function answering(
    status: number,
    body: unknown,
  ): Promise<{ base: string; close: () => Promise<void> }> {
    const upstream = http.createServer((request, response) => {
      request.resume();
      response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    const { port } = upstream.address() as net.AddressInfo;
    return {
      base: `http://127.0.0.1:${port}/v1`,
      close: () => new Promise((resolve) => upstream.close(() => resolve())),
    };
  }
  const embedderAt = (baseUrl: string) =>
    new HttpEmbedder({ baseUrl, model: "m", apiKey: null, batchSize: 8, timeoutMs: 10_000 });
  const rerankerAt = (baseUrl: string) =>
    new HttpReranker({ baseUrl, model: "m", apiKey: null, timeoutMs: 10_000 });

  it("a 5xx is a 503, a 429 stays a 429, too few vectors or scores a 502", async () => {
    const cases: Array<[number, unknown, number, RegExp]> = [
      [
        500,
        { error: { message: "CUDA out of memory" } },
        503,
        /embedder unavailable: .*HTTP 500: CUDA out of memory/,
      ],
      [429, { error: "slow down" }, 429, /embedder busy/],
      [200, { data: [{ index: 0, embedding: [1, 2] }] }, 502, /1 embeddings for 2 inputs/],
      [
        200,
        {
          data: [
            { index: 0, embedding: [1, 2] },
            { index: 1, embedding: [1] },
          ],
        },
        502,
        /1 and 2 dimensions/,
      ],
      [200, { nothing: true }, 502, /no data list/],
    ];
    for (const [status, body, expected, message] of cases) {
      const upstream = await answering(status, body);
      const embedder = embedderAt(upstream.base);
      try {
        const { error, status: got } = await failure(embedder.embed(["a", "b"]));
        assert.equal(got, expected, JSON.stringify(body));
        assert.match(error.message, message);
      } finally {
        await embedder.close();
        await upstream.close();
      }
    }
    const partial = await answering(200, { results: [{ index: 1, relevance_score: 0.5 }] });
    const reranker = rerankerAt(partial.base);
    const { error, status } = await failure(reranker.rerank("q", ["a", "b"]));
    assert.equal(status, 502);
    assert.match(error.message, /no score for document 0 of 2/);
    await reranker.close();
    await partial.close();
  });

  it("base64 embeddings decode to the same float32 values; scores are placed by index", async () => {
    const values = [0.25, -1.5, 3];
    const encoded = Buffer.from(new Float32Array(values).buffer).toString("base64");
    const upstream = await answering(200, { model: "m", data: [{ index: 0, embedding: encoded }] });
    const embedder = embedderAt(upstream.base);
    assert.deepEqual(await embedder.embed(["a"]), [Float32Array.from(values)]);
    await embedder.close();
    await upstream.close();
    const ranked = await answering(200, {
      results: [
        { index: 2, relevance_score: 0.9 },
        { index: 0, relevance_score: 0.5 },
        { index: 1, relevance_score: 0.1 },
      ],
    });
    const reranker = rerankerAt(ranked.base);
    assert.deepEqual(await reranker.rerank("q", ["a", "b", "c"]), [0.5, 0.1, 0.9]);
    await reranker.close();
    await ranked.close();
  });
});
