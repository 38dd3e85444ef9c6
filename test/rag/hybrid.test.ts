/**
 * Hybrid retrieval over HTTP (#26): the RAG app embeds and reranks through our text generation app on a
 * real socket, serving an embedding model and a reranker made at test time (synthetic weights: their
 * vectors and scores mean nothing, but they are the models'). Dense results are checked against a
 * brute-force cosine over the chunks' embeddings fetched from /v1/embeddings, hybrid results against
 * RRF of the lexical and dense lists computed here, reranked ones against /v1/rerank; the failures
 * (no embedder, another model, an embedder dying mid-append) leave the index as it was.
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { after, before, describe, it } from "node:test";

import { freePort } from "../../scripts/lib/free-port.js";
import { maxFusedScore, reciprocalRankFusion } from "../../src/rag/retrieval/fusion.js";
import { buildRagApp } from "../../src/rag/app.js";
import { localModels } from "../../src/rag/local-models.js";
import { testConfig } from "../helpers/env.js";
import { cosine } from "../helpers/hash-embedder.js";
import { modelsDirOf, retrievalModels, TINY } from "../helpers/retrieval-models.js";
import { makeTempDir, openRagApp, ragClient, removeTempDirs, type RagApp } from "../helpers/rag-http.js";
import { sseEvents, startTextgen, type RunningTextgen } from "../helpers/servers.js";

/** One chunk each (short, no title), so that a chunk's embedded text is its document's text. */
const DOCUMENTS = [
  { id: "birds", text: "Many birds migrate south in winter to find food.", metadata: { group: "a" } },
  { id: "cats", text: "The cat sat on the mat and purred all day.", metadata: { group: "b" } },
  { id: "snow", text: "Cold months bring snow and ice to the north.", metadata: { group: "a" } },
  { id: "dogs", text: "A dog ran far away across the green field.", metadata: { group: "b" } },
  { id: "fish", text: "Salmon swim upstream to spawn in the autumn.", metadata: { group: "a" } },
  { id: "bees", text: "Bees make honey from the nectar of flowers.", metadata: { group: "b" } },
  { id: "owls", text: "Owls hunt at night and sleep in the winter day.", metadata: { group: "a" } },
];
const MORE = [
  { id: "frogs", text: "Frogs sleep under the mud through the cold winter." },
  { id: "deer", text: "Deer grow thick coats before the winter comes." },
  { id: "ants", text: "Ants store food for the cold months in their nests." },
  { id: "bats", text: "Bats hang in caves and sleep through the winter." },
  { id: "geese", text: "Geese fly in a long line to warmer lands." },
];
const QUERY = "how do birds survive the cold months";

interface Result {
  text: string;
  score: number;
  document_id: string;
  chunk_id: string;
  metadata: Record<string, unknown>;
  scores?: { lexical?: number; dense?: number; rerank?: number };
}
interface QueryBody {
  results: Result[];
  retrieval: string;
  count: number;
  answer: string | null;
}

let textgen: RunningTextgen;
let v1: string;

before(async () => {
  const files = await retrievalModels();
  const dir = modelsDirOf({ ...files, embed2: files.embed });
  textgen = await startTextgen({ MODELS_DIR: dir, MAX_CONCURRENT: "2" });
  v1 = `${textgen.url}/v1`;
});
after(async () => {
  await textgen?.close();
  removeTempDirs();
});

/** The RAG app embedding and reranking through the text generation app (or `embeddingUrl`). */
function ragEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    EMBEDDING_URL: v1,
    EMBEDDING_MODEL: "embed",
    EMBEDDING_BATCH_SIZE: "2",
    RERANK_URL: v1,
    RERANK_MODEL: "rerank",
    ...overrides,
  };
}

async function embed(texts: string[]): Promise<Float32Array[]> {
  const response = await fetch(`${v1}/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "embed", input: texts }),
  });
  assert.equal(response.status, 200);
  const body = (await response.json()) as { data: Array<{ index: number; embedding: number[] }> };
  return body.data.sort((a, b) => a.index - b.index).map((item) => Float32Array.from(item.embedding));
}

/** Document ids by brute-force cosine to the query, best first (ids ascending on ties). */
async function bruteForce(documents: Array<{ id: string; text: string }>, query: string) {
  const vectors = await embed(documents.map((d) => d.text));
  const [q] = await embed([query]);
  return documents
    .map((d, i) => ({ id: d.id, score: cosine(q!, vectors[i]!) }))
    .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1));
}

const close = (actual: number, expected: number, what: string) =>
  assert.ok(Math.abs(actual - expected) < 1e-4, `${what}: ${actual} ≠ ${expected}`);

describe("hybrid retrieval over HTTP", () => {
  let app: RagApp;
  let rag: ReturnType<typeof ragClient>;
  let dataDir: string;

  before(async () => {
    ({ app, dataDir } = await openRagApp(ragEnv()));
    rag = ragClient(app);
    const built = await rag.build({ index_name: "h", scorer: "bm25", documents: DOCUMENTS });
    assert.equal(built.statusCode, 201, built.body);
    const plain = await rag.build({
      index_name: "plain",
      scorer: "bm25",
      documents: DOCUMENTS,
      embeddings: false,
    });
    assert.equal(plain.statusCode, 201, plain.body);
  });
  after(async () => app?.close());

  const query = async (body: Record<string, unknown>) => {
    const res = await rag.query({ index_name: "h", query: QUERY, answer: "none", ...body });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as QueryBody;
  };

  it("builds with embeddings by default; stats and listings show model, dimension, count and bytes", async () => {
    const stats = (await rag.indexStats("h")).json();
    assert.equal(stats.vectors.count, DOCUMENTS.length);
    assert.equal(stats.vectors.dimension, TINY.embedding);
    assert.equal(stats.vectors.model, "embed");
    assert.ok(stats.vectors.bytes >= DOCUMENTS.length * TINY.embedding, JSON.stringify(stats.vectors));
    assert.deepEqual(
      { model: stats.embeddings.model, dimension: stats.embeddings.dimension },
      { model: "embed", dimension: TINY.embedding },
    );
    assert.equal((await rag.indexStats("plain")).json().vectors, null);
    const whole = (await rag.stats()).json();
    assert.deepEqual(whole.vectors, { indices_count: 1, count: DOCUMENTS.length, models: ["embed"] });
    const listed = (await rag.indices()).json().indices as Array<{ name: string; embeddings: unknown }>;
    assert.equal(listed.find((index) => index.name === "plain")!.embeddings, null);
  });

  it("lexical is today's search: the same results as an index without embeddings, no scores field", async () => {
    const lexical = await query({ retrieval: "lexical", top_k: 5 });
    assert.equal(lexical.retrieval, "lexical");
    const plain = await rag.query({ index_name: "plain", query: QUERY, answer: "none", top_k: 5 });
    const plainBody = plain.json() as QueryBody;
    // A plain keyword query answers in the contract's shape: no retrieval field, no scores.
    assert.equal(plainBody.retrieval, undefined);
    assert.deepEqual(lexical.results, plainBody.results);
    assert.ok(lexical.results.every((result) => result.scores === undefined));
    // Dense on an index without embeddings is the request's mistake.
    const refused = await rag.query({ index_name: "plain", query: QUERY, retrieval: "dense" });
    assert.equal(refused.statusCode, 400, refused.body);
  });

  it("dense equals a brute-force cosine over the chunks' embeddings from /v1/embeddings", async () => {
    const dense = await query({ retrieval: "dense", top_k: DOCUMENTS.length });
    assert.equal(dense.retrieval, "dense");
    const expected = await bruteForce(DOCUMENTS, QUERY);
    assert.deepEqual(
      dense.results.map((r) => r.document_id),
      expected.map((e) => e.id),
    );
    dense.results.forEach((result, i) => {
      close(result.score, expected[i]!.score, result.document_id);
      close(result.scores!.dense!, expected[i]!.score, result.document_id);
      assert.equal(result.scores!.lexical, undefined);
    });
  });

  it("filters apply on the dense path: the brute force over the chunks that pass", async () => {
    const dense = await query({ retrieval: "dense", top_k: 3, filter: { group: "a" } });
    const expected = await bruteForce(
      DOCUMENTS.filter((d) => d.metadata.group === "a"),
      QUERY,
    );
    assert.deepEqual(
      dense.results.map((r) => r.document_id),
      expected.slice(0, 3).map((e) => e.id),
    );
    const hybrid = await query({ top_k: 5, filter: { group: "b" } });
    assert.ok(hybrid.results.length > 0);
    assert.ok(hybrid.results.every((r) => r.metadata.group === "b"));
  });

  it("hybrid (the default with embeddings) equals weighted RRF of the lexical and dense lists", async () => {
    const fusion = { method: "rrf", k: 10, weights: { lexical: 2, dense: 1 } };
    const hybrid = await query({ top_k: 5, fusion });
    assert.equal(hybrid.retrieval, "hybrid");
    // Each list as deep as the route takes it: max(4 × top_k, 50), more than the index holds.
    const lexical = await query({ retrieval: "lexical", top_k: 50 });
    const dense = await query({ retrieval: "dense", top_k: 50 });
    const keyOf = new Map(DOCUMENTS.map((d, i) => [d.id, i]));
    const list = (body: QueryBody) =>
      body.results.map((r) => ({ key: keyOf.get(r.document_id)!, score: r.score }));
    const options = { k: 10, weights: { lexical: 2, dense: 1 } };
    const expected = reciprocalRankFusion({ lexical: list(lexical), dense: list(dense) }, options);
    const scale = maxFusedScore(options);
    const expectedScore = new Map(expected.map((hit) => [DOCUMENTS[hit.key]!.id, hit.score / scale]));
    assert.equal(hybrid.results.length, 5);
    hybrid.results.forEach((result) =>
      close(result.score, expectedScore.get(result.document_id)!, result.document_id),
    );
    // The five best fused scores, whatever order equal ones take.
    assert.deepEqual(
      hybrid.results.map((r) => r.score.toFixed(5)),
      expected.slice(0, 5).map((hit) => (hit.score / scale).toFixed(5)),
    );
    for (const result of hybrid.results) {
      const inLexical = lexical.results.find((r) => r.document_id === result.document_id);
      if (inLexical) close(result.scores!.lexical!, inLexical.score, "lexical score");
      else assert.equal(result.scores!.lexical, undefined);
      close(
        result.scores!.dense!,
        dense.results.find((r) => r.document_id === result.document_id)!.score,
        "dense",
      );
    }
  });

  it("rerank orders by the reranker's scores, which are /v1/rerank's for the candidates' texts", async () => {
    const reranked = await query({ top_k: 4, rerank: { top_n: 6 } });
    const scores = reranked.results.map((r) => r.scores!.rerank!);
    assert.deepEqual(
      scores,
      [...scores].sort((a, b) => b - a),
    );
    reranked.results.forEach((r) => assert.equal(r.score, r.scores!.rerank));
    const direct = await fetch(`${v1}/rerank`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "rerank", query: QUERY, documents: reranked.results.map((r) => r.text) }),
    });
    const answer = (await direct.json()) as { results: Array<{ index: number; relevance_score: number }> };
    for (const { index, relevance_score } of answer.results)
      close(scores[index]!, relevance_score, `rerank ${index}`);
    // Lexical with a reranker too.
    const lexical = await query({ retrieval: "lexical", top_k: 3, rerank: true });
    assert.ok(lexical.results.every((r) => typeof r.scores?.rerank === "number"));
  });

  it("streaming and answers work on the dense path; /rag/chat takes the same fields", async () => {
    const res = await fetch(`http://127.0.0.1:${await listenOnce(app)}/rag/query`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        index_name: "h",
        query: QUERY,
        retrieval: "dense",
        answer: "generative",
        stream: true,
      }),
    });
    assert.equal(res.status, 200);
    const events: Array<{ event: string; data: string }> = [];
    for await (const event of sseEvents(res)) events.push(event);
    const results = JSON.parse(events.find((e) => e.event === "results")!.data) as QueryBody;
    assert.ok(results.results.every((r) => typeof r.scores?.dense === "number"));
    const done = JSON.parse(events.find((e) => e.event === "done")!.data) as QueryBody;
    assert.equal(done.retrieval, "dense");
    assert.equal(typeof done.answer, "string");
    const chat = await rag.send("POST", "/rag/chat", {
      index: "h",
      messages: [{ role: "user", content: QUERY }],
      retrieval: "dense",
      answer: "extractive",
    });
    assert.equal(chat.statusCode, 200, chat.body);
    assert.equal(chat.json().retrieval, "dense");
    const openapi = (await rag.send("GET", "/openapi.json")).body;
    for (const field of ["retrieval", "fusion", "rerank", "embeddings"])
      assert.ok(openapi.includes(`"${field}"`), field);
  });

  it("the OpenAI routes search an index with embeddings by hybrid retrieval; extractive answers on it", async () => {
    const search = await rag.send("POST", "/v1/vector_stores/h/search", { query: QUERY, max_num_results: 3 });
    assert.equal(search.statusCode, 200, search.body);
    const data = search.json().data as Array<{ file_id: string; score: number }>;
    assert.equal(data.length, 3);
    // The fused scores of /rag/query's default path, in its order.
    const hybrid = await query({ top_k: 3 });
    assert.deepEqual(
      data.map((d) => [d.file_id, d.score]),
      hybrid.results.map((r) => [r.document_id, r.score]),
    );
    const completion = await rag.send("POST", "/v1/chat/completions", {
      model: "h",
      messages: [{ role: "user", content: QUERY }],
    });
    assert.equal(completion.statusCode, 200, completion.body);
    const extractive = await query({ top_k: 3, answer: "extractive" });
    assert.equal(extractive.retrieval, "hybrid");
    assert.equal(typeof extractive.answer, "string");
  });

  it("a query through a server pinned to another embedding model is a 409 naming both", async () => {
    await app.close();
    const other = await openRagApp(ragEnv({ DATA_DIR: dataDir, EMBEDDING_MODEL: "embed2" }));
    try {
      const res = await ragClient(other.app).query({ index_name: "h", query: QUERY, retrieval: "dense" });
      assert.equal(res.statusCode, 409, res.body);
      assert.match(res.json().error.message, /embed\b.*embed2|embed2.*embed\b/);
      // Keywords still work without the embedder.
      const lexical = await ragClient(other.app).query({
        index_name: "h",
        query: QUERY,
        retrieval: "lexical",
      });
      assert.equal(lexical.statusCode, 200);
    } finally {
      await other.app.close();
    }
    // No embedder at all: keywords by default (dense when asked is a 503).
    const bare = await openRagApp({ DATA_DIR: dataDir });
    try {
      const plain = await ragClient(bare.app).query({ index_name: "h", query: QUERY, answer: "none" });
      assert.equal(plain.statusCode, 200, plain.body);
      assert.equal(plain.json().retrieval, undefined);
      const dense = await ragClient(bare.app).query({ index_name: "h", query: QUERY, retrieval: "dense" });
      assert.equal(dense.statusCode, 503, dense.body);
    } finally {
      await bare.app.close();
    }
    ({ app } = await openRagApp(ragEnv({ DATA_DIR: dataDir })));
    rag = ragClient(app);
  });
});

describe("folder sync keeps an index's embeddings", () => {
  it("a sync creates the index with vectors, and the next one embeds the new file", async () => {
    const files = makeTempDir("rag-hybrid-files");
    mkdirSync(path.join(files, "notes"));
    writeFileSync(path.join(files, "notes", "birds.txt"), DOCUMENTS[0]!.text);
    writeFileSync(path.join(files, "notes", "cats.txt"), DOCUMENTS[1]!.text);
    const { app } = await openRagApp(ragEnv({ RAG_FILES_DIR: files }));
    const rag = ragClient(app);
    try {
      const sync = () => rag.send("POST", "/rag/indices/synced/sync", { folder: "notes" });
      const first = await sync();
      assert.equal(first.statusCode, 200, first.body);
      assert.equal((await rag.indexStats("synced")).json().vectors.count, 2);
      writeFileSync(path.join(files, "notes", "snow.txt"), DOCUMENTS[2]!.text);
      const second = await sync();
      assert.equal(second.statusCode, 200, second.body);
      assert.equal(second.json().added, 1);
      assert.equal((await rag.indexStats("synced")).json().vectors.count, 3);
      const dense = await rag.query({
        index_name: "synced",
        query: DOCUMENTS[2]!.text,
        retrieval: "dense",
        answer: "none",
      });
      assert.equal((dense.json() as QueryBody).results.length, 3);
    } finally {
      await app.close();
    }
  });
});

describe("both apps in one process: embeddings and reranking without an HTTP hop", () => {
  it("builds with the process's embedding model by default, searches dense and reranks in-process", async () => {
    const dataDir = makeTempDir("rag-hybrid-local");
    // No EMBEDDING_URL / RERANK_URL: the text generation service of this process embeds and reranks.
    const config = testConfig({ DATA_DIR: dataDir, EMBEDDING_MODEL: "embed", RERANK_MODEL: "rerank" });
    const app = await buildRagApp({
      config,
      local: localModels(textgen.app.textgenService, config.generation),
    });
    const rag = ragClient(app);
    try {
      assert.match(app.retrieval.join("\n"), /embeddings from the model embed of this process/);
      assert.equal((await rag.build({ index_name: "local", documents: DOCUMENTS })).statusCode, 201);
      assert.equal((await rag.indexStats("local")).json().vectors.model, "embed");
      const res = await rag.query({
        index_name: "local",
        query: QUERY,
        retrieval: "dense",
        top_k: DOCUMENTS.length,
        answer: "none",
      });
      assert.equal(res.statusCode, 200, res.body);
      const expected = await bruteForce(DOCUMENTS, QUERY);
      const body = res.json() as QueryBody;
      assert.deepEqual(
        body.results.map((r) => r.document_id),
        expected.map((e) => e.id),
      );
      body.results.forEach((result, i) => close(result.score, expected[i]!.score, result.document_id));
      const reranked = (
        await rag.query({ index_name: "local", query: QUERY, rerank: true, answer: "none" })
      ).json();
      const scores = (reranked as QueryBody).results.map((r) => r.scores!.rerank!);
      assert.ok(scores.length > 0);
      assert.deepEqual(
        scores,
        [...scores].sort((a, b) => b - a),
      );
    } finally {
      await app.close();
    }
  });
});

/** Puts `app` on a real socket once (for streaming through fetch) and returns its port. */
const listening = new WeakMap<RagApp, number>();
async function listenOnce(app: RagApp): Promise<number> {
  let port = listening.get(app);
  if (port === undefined) {
    await app.listen({ host: "127.0.0.1", port: 0 });
    port = (app.server.address() as { port: number }).port;
    listening.set(app, port);
  }
  return port;
}

describe("the embedder down: 503, nothing committed", () => {
  /** The index's figures and top results, to compare before and after a failed write. */
  async function snapshot(rag: ReturnType<typeof ragClient>, name: string) {
    const stats = (await rag.indexStats(name)).json();
    const results = (
      await rag.query({ index_name: name, query: QUERY, retrieval: "lexical", answer: "none" })
    ).json();
    return {
      version: stats.version,
      chunks: stats.chunks_count,
      documents: stats.documents_count,
      results: results.results,
    };
  }

  /** An index "kept" built from DOCUMENTS in a new data directory, and its state: what a failed write keeps. */
  async function keptIndex(prefix: string) {
    const dataDir = makeTempDir(prefix);
    const good = await openRagApp(ragEnv({ DATA_DIR: dataDir }));
    assert.equal(
      (await ragClient(good.app).build({ index_name: "kept", documents: DOCUMENTS })).statusCode,
      201,
    );
    const before = await snapshot(ragClient(good.app), "kept");
    await good.app.close();
    return { dataDir, before };
  }

  it("build and append with the embedder at a closed port: 503, the index as before", async () => {
    const { dataDir, before } = await keptIndex("rag-hybrid-down");

    const closed = `http://127.0.0.1:${await freePort()}/v1`;
    const down = await openRagApp(ragEnv({ DATA_DIR: dataDir, EMBEDDING_URL: closed, RERANK_URL: closed }));
    const rag = ragClient(down.app);
    try {
      const built = await rag.build({ index_name: "new", documents: DOCUMENTS });
      assert.equal(built.statusCode, 503, built.body);
      assert.match(built.json().error.message, /embedder unavailable/);
      assert.equal((await rag.indexStats("new")).statusCode, 404);
      const appended = await rag.build({ index_name: "kept", mode: "append", documents: MORE });
      assert.equal(appended.statusCode, 503, appended.body);
      const added = await rag.addDocuments("kept", { documents: MORE });
      assert.equal(added.statusCode, 503, added.body);
      assert.deepEqual(await snapshot(rag, "kept"), before);
      // A reranker that cannot be reached is a 503 too; keywords alone still answer.
      const reranked = await rag.query({
        index_name: "kept",
        query: QUERY,
        retrieval: "lexical",
        rerank: true,
      });
      assert.equal(reranked.statusCode, 503, reranked.body);
      assert.match(reranked.json().error.message, /reranker unavailable/);
    } finally {
      await down.app.close();
    }
  });

  it("a crafted failure: the embedder dies mid-append (second batch); the index is as before, with a 503", async () => {
    // A proxy to the real embedder that forwards the first request and breaks the connection of the next.
    let requests = 0;
    const proxy = http.createServer((request, response) => {
      requests += 1;
      if (requests > 1) {
        request.socket.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        void fetch(`${v1}${request.url!.replace(/^\/v1/, "")}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: Buffer.concat(chunks),
        }).then(async (upstream) => {
          response.writeHead(upstream.status, { "content-type": "application/json" });
          response.end(Buffer.from(await upstream.arrayBuffer()));
        });
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const port = (proxy.address() as { port: number }).port;
    const { dataDir, before } = await keptIndex("rag-hybrid-mid");
    const flaky = await openRagApp(
      ragEnv({ DATA_DIR: dataDir, EMBEDDING_URL: `http://127.0.0.1:${port}/v1` }),
    );
    const rag = ragClient(flaky.app);
    try {
      // Five documents in batches of two: the second batch meets the broken connection.
      const appended = await rag.build({ index_name: "kept", mode: "append", documents: MORE });
      assert.equal(appended.statusCode, 503, appended.body);
      assert.match(appended.json().error.message, /embedder unavailable/);
      assert.ok(requests >= 2, `${requests} embedding requests`);
      assert.deepEqual(await snapshot(rag, "kept"), before);
      const dense = await rag.query({ index_name: "kept", query: QUERY, retrieval: "lexical", top_k: 20 });
      assert.ok(!(dense.json() as QueryBody).results.some((r) => MORE.some((m) => m.id === r.document_id)));
    } finally {
      await flaky.app.close();
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});
