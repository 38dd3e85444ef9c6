/** Every route of the RAG API contract, through `app.inject()` on a real SQLite store in a temp folder. */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  SMALL_CORPUS,
  assertApiError,
  assertStatus,
  openRagApp,
  ragClient,
  removeTempDirs,
  withoutElapsed,
  type RagApp,
  type RagClient,
} from "../helpers/rag-http.js";

interface QueryResult {
  text: string;
  score: number;
  document_id: string;
  file: string;
  chunk_id: string;
  title: string | null;
  metadata: Record<string, unknown>;
}

const RESULT_FIELDS = ["chunk_id", "document_id", "file", "metadata", "score", "text", "title"];
const INDEX_FIELDS = [
  "chunks_count",
  "created_at",
  "documents_count",
  "name",
  "scorer",
  "size_bytes",
  "tenant_id",
  "updated_at",
  "vocabulary_size",
];

function assertResults(results: QueryResult[]): void {
  for (const result of results) {
    for (const field of RESULT_FIELDS) assert.ok(field in result, `result lacks ${field}`);
    assert.equal(typeof result.text, "string");
    assert.ok(result.text.length > 0);
    assert.ok(result.score >= 0 && result.score <= 1, `score ${result.score} outside 0 … 1`);
    assert.equal(typeof result.document_id, "string");
    assert.equal(typeof result.file, "string");
    assert.match(result.chunk_id, /^.+#\d+$/);
    assert.ok(result.chunk_id.startsWith(`${result.document_id}#`));
    assert.ok(result.title === null || typeof result.title === "string");
    assert.equal(typeof result.metadata, "object");
  }
  for (let i = 1; i < results.length; i++) {
    assert.ok(results[i - 1]!.score >= results[i]!.score, "scores sorted descending");
  }
}

after(() => removeTempDirs());

describe("RAG API routes", () => {
  let app: RagApp;
  let rag: RagClient;

  before(async () => {
    ({ app } = await openRagApp());
    rag = ragClient(app);
    assertStatus(await rag.build({ index_name: "corpus", documents: SMALL_CORPUS }), 201);
  });
  after(async () => app.close());

  describe("service routes", () => {
    it("GET /health is healthy and names the storage", async () => {
      const res = await rag.send("GET", "/health");
      assertStatus(res, 200);
      assert.equal(res.json().status, "healthy");
      assert.equal(res.json().storage, "sqlite");
    });

    it('GET / is "Lectern RAG API v0.2.0"', async () => {
      const res = await rag.send("GET", "/");
      assertStatus(res, 200);
      assert.equal(res.json().message, "Lectern RAG API v0.2.0");
      assert.equal(res.json().docs, "/docs");
    });

    it("GET /openapi.json documents every /rag path", async () => {
      const res = await rag.send("GET", "/openapi.json");
      assertStatus(res, 200);
      const doc = res.json();
      assert.equal(doc.info.version, "0.2.0");
      const paths = Object.keys(doc.paths);
      for (const p of [
        "/rag/build",
        "/rag/query",
        "/rag/indices",
        "/rag/stats",
        "/rag/stats/{index_name}",
        "/rag/indices/{index_name}",
        "/rag/indices/{index_name}/documents",
        "/rag/indices/{index_name}/documents/{document_id}",
      ]) {
        assert.ok(paths.includes(p), `openapi.json lacks ${p}: ${paths.join(", ")}`);
      }
      assert.ok(doc.paths["/rag/build"].post);
      assert.ok(doc.paths["/rag/query"].post);
      assert.ok(doc.paths["/rag/indices/{index_name}"].delete);
    });

    it("GET /docs answers 200 with Swagger UI", async () => {
      const res = await rag.send("GET", "/docs");
      assertStatus(res, 200);
      assert.match(res.body, /swagger-ui/i);
    });
  });

  describe("POST /rag/build", () => {
    it("inline objects: 201 with every field of the contract", async () => {
      const res = await rag.build({ index_name: "objects", documents: SMALL_CORPUS });
      assertStatus(res, 201);
      const body = res.json();
      assert.deepEqual(Object.keys(body).sort(), [
        "build_ms",
        "chunks_count",
        "documents_count",
        "index_name",
        "message",
        "success",
        "tenant_id",
        "vocabulary_size",
      ]);
      assert.equal(body.success, true);
      assert.equal(body.index_name, "objects");
      assert.equal(body.tenant_id, "default");
      assert.equal(body.documents_count, 4);
      assert.ok(Number.isInteger(body.chunks_count) && body.chunks_count >= 4);
      assert.ok(Number.isInteger(body.vocabulary_size) && body.vocabulary_size > 20);
      assert.equal(typeof body.build_ms, "number");
      assert.ok(body.build_ms >= 0);
      assert.equal(typeof body.message, "string");
      assert.ok(body.message.length > 0);
    });

    it("inline strings: ids are assigned, file falls back to the id, title is null", async () => {
      const res = await rag.build({
        index_name: "strings",
        documents: ["Kites fly high in a strong wind.", "Rivers run down to the sea."],
      });
      assertStatus(res, 201);
      assert.equal(res.json().documents_count, 2);
      const query = await rag.query({ index_name: "strings", query: "kites wind" });
      assertStatus(query, 200);
      const [top] = query.json().results as QueryResult[];
      assert.ok(top);
      assert.equal(top.text, "Kites fly high in a strong wind.");
      assert.ok(top.document_id.length > 0);
      assert.equal(top.file, top.document_id);
      assert.equal(top.title, null);
      // Only the chunk's position: the document has no metadata of its own.
      assert.deepEqual(top.metadata, { start: 0, end: top.text.length });
    });

    it("strings and objects mix in one request", async () => {
      const res = await rag.build({
        index_name: "mixed",
        documents: [
          "A plain string document about tea.",
          { id: "coffee", text: "Coffee is brewed from beans." },
        ],
      });
      assertStatus(res, 201);
      assert.equal(res.json().documents_count, 2);
    });

    it('mode "create" on an existing name is a 409 and leaves the index alone', async () => {
      const before = (await rag.indexStats("corpus")).json();
      const res = await rag.build({ index_name: "corpus", documents: ["Something else entirely."] });
      assertApiError(res, 409);
      assert.equal(res.json().error.code, "conflict");
      assert.deepEqual((await rag.indexStats("corpus")).json(), before);
    });

    it('mode "replace" creates a missing index, then overwrites it', async () => {
      const first = await rag.build({
        index_name: "replaced",
        mode: "replace",
        documents: ["Old text about apples."],
      });
      assertStatus(first, 201);
      const second = await rag.build({
        index_name: "replaced",
        mode: "replace",
        documents: ["New text about pears.", "More about plums."],
      });
      assertStatus(second, 201);
      assert.equal(second.json().documents_count, 2);
      const stats = (await rag.indexStats("replaced")).json();
      assert.equal(stats.documents_count, 2);
      const apples = (await rag.query({ index_name: "replaced", query: "apples" })).json();
      assert.equal(apples.count, 0);
      const pears = (await rag.query({ index_name: "replaced", query: "pears" })).json();
      assert.equal(pears.results[0].text, "New text about pears.");
    });

    it('mode "append" adds to an existing index and is a 404 on a missing one', async () => {
      assertStatus(
        await rag.build({ index_name: "appended", documents: [{ id: "a", text: "Owls hunt at night." }] }),
        201,
      );
      const res = await rag.build({
        index_name: "appended",
        mode: "append",
        documents: [{ id: "b", text: "Hawks hunt by day." }],
      });
      assertStatus(res, 201);
      assert.equal(res.json().documents_count, 1, "documents written by this request");
      assert.equal((await rag.indexStats("appended")).json().documents_count, 2);
      const hunt = (await rag.query({ index_name: "appended", query: "hunt" })).json();
      assert.deepEqual(hunt.results.map((r: QueryResult) => r.document_id).sort(), ["a", "b"]);

      const missing = await rag.build({ index_name: "never-built", mode: "append", documents: ["x y z"] });
      assertApiError(missing, 404);
      assertApiError(await rag.indexStats("never-built"), 404);
    });

    for (const scorer of ["bm25", "tfidf"] as const) {
      it(`scorer ${scorer} builds, is listed, and ranks the matching document first`, async () => {
        const name = `scorer-${scorer}`;
        assertStatus(await rag.build({ index_name: name, scorer, documents: SMALL_CORPUS }), 201);
        assert.equal((await rag.indexStats(name)).json().scorer, scorer);
        const res = await rag.query({ index_name: name, query: "which planet is the largest" });
        assertStatus(res, 200);
        assert.equal(res.json().results[0].document_id, "solar");
        assertResults(res.json().results);
      });
    }

    it('the default scorer is "tfidf", chunk_size 1000, overlap 128', async () => {
      const stats = (await rag.indexStats("corpus")).json();
      assert.equal(stats.scorer, "tfidf");
      assert.equal(stats.chunk_size, 1000);
      assert.equal(stats.overlap, 128);
    });

    const bounds: Array<[string, Record<string, unknown>, number]> = [
      ["chunk_size 100, overlap 50 (= chunk_size/2)", { chunk_size: 100, overlap: 50 }, 201],
      ["chunk_size 100, overlap 0", { chunk_size: 100, overlap: 0 }, 201],
      ["chunk_size 99", { chunk_size: 99, overlap: 10 }, 400],
      ["chunk_size 10000", { chunk_size: 10_000 }, 201],
      ["chunk_size 10001", { chunk_size: 10_001 }, 400],
      ["chunk_size 0", { chunk_size: 0 }, 400],
      ["chunk_size 500.5", { chunk_size: 500.5 }, 400],
      ["overlap 51 > chunk_size/2", { chunk_size: 100, overlap: 51 }, 400],
      ["overlap 501 > 1000/2", { overlap: 501 }, 400],
      ["overlap 500 = 1000/2", { overlap: 500 }, 201],
      ["overlap -1", { overlap: -1 }, 400],
    ];
    for (const [label, fields, status] of bounds) {
      it(`${label} → ${status}`, async () => {
        const name = `bounds-${label.replace(/[^A-Za-z0-9]+/g, "-")}`;
        const res = await rag.build({ index_name: name, documents: SMALL_CORPUS, ...fields });
        if (status === 201) {
          assertStatus(res, 201);
          const stats = (await rag.indexStats(name)).json();
          if (fields.chunk_size !== undefined) assert.equal(stats.chunk_size, fields.chunk_size);
          if (fields.overlap !== undefined) assert.equal(stats.overlap, fields.overlap);
        } else {
          assertApiError(res, status);
          assertApiError(await rag.indexStats(name), 404);
        }
      });
    }

    it("a small chunk_size splits long documents into more chunks", async () => {
      const small = await rag.build({
        index_name: "small-chunks",
        documents: SMALL_CORPUS,
        chunk_size: 100,
        overlap: 0,
      });
      const large = (await rag.indexStats("corpus")).json();
      assert.ok(small.json().chunks_count > large.chunks_count);
    });

    it("chunk_size 100 alone (default overlap) builds: the default overlap fits within chunk_size/2", async () => {
      const res = await rag.build({
        index_name: "chunk-100-default-overlap",
        documents: SMALL_CORPUS,
        chunk_size: 100,
      });
      assertStatus(res, 201);
    });
  });

  describe("POST /rag/query", () => {
    it("takes the index as index, as /rag/chat does; index and index_name must agree; one is needed", async () => {
      const query = "What is the largest planet orbiting the Sun?";
      const byAlias = await rag.query({ index: "corpus", query });
      assertStatus(byAlias, 200);
      const byName = (await rag.query({ index_name: "corpus", query })).json();
      assert.deepEqual(
        byAlias.json().results.map((r: QueryResult) => r.chunk_id),
        byName.results.map((r: QueryResult) => r.chunk_id),
      );
      assertStatus(await rag.query({ index: "corpus", index_name: "corpus", query }), 200);
      const differ = await rag.query({ index: "corpus", index_name: "other", query });
      assertApiError(differ, 400);
      assert.match(differ.json().error.message, /index and index_name differ/);
      const neither = await rag.query({ query });
      assertApiError(neither, 400);
      assert.match(neither.json().error.message, /index_name \(or index\)/);
    });

    it("answers with every field of the contract; results sorted, scores in 0 … 1", async () => {
      const res = await rag.query({
        index_name: "corpus",
        query: "What is the largest planet orbiting the Sun?",
      });
      assertStatus(res, 200);
      const body = res.json();
      assert.deepEqual(Object.keys(body).sort(), [
        "answer",
        "answer_mode",
        "count",
        "elapsed_ms",
        "query",
        "results",
        "sources_used",
      ]);
      assert.equal(body.query, "What is the largest planet orbiting the Sun?");
      assert.equal(body.count, body.results.length);
      assert.ok(body.count >= 1 && body.count <= 5, "default top_k 5");
      assert.equal(typeof body.elapsed_ms, "number");
      assert.equal(body.answer_mode, "extractive");
      assert.equal(typeof body.answer, "string");
      assert.match(body.answer, /\[1\]/);
      assert.match(body.answer, /Jupiter|planet/);
      // The results the extractive answer quotes: as many as its distinct [n].
      assert.equal(body.sources_used, new Set(body.answer.match(/\[\d+\]/g)).size);
      const top = body.results[0] as QueryResult;
      assert.deepEqual(Object.keys(top).sort(), RESULT_FIELDS);
      assert.equal(top.document_id, "solar");
      assert.equal(top.file, "solar");
      assert.equal(top.chunk_id, "solar#0");
      assert.equal(top.title, "The Solar System");
      assert.deepEqual(top.metadata, { topic: "space", year: 2020, start: 0, end: top.text.length });
      assert.ok(top.text.includes("Jupiter"));
      assertResults(body.results);
    });

    it("question is an alias of query", async () => {
      const a = await rag.query({ index_name: "corpus", query: "whale ocean" });
      const b = await rag.query({ index_name: "corpus", question: "whale ocean" });
      assertStatus(b, 200);
      assert.deepEqual(withoutElapsed(b.json()), withoutElapsed(a.json()));
      const both = await rag.query({ index_name: "corpus", query: "whale ocean", question: "whale ocean" });
      assertStatus(both, 200);
    });

    const topKs: Array<[number | string, number]> = [
      [1, 200],
      [100, 200],
      [0, 400],
      [101, 400],
      [-1, 400],
      [2.5, 400],
      ["3", 400],
    ];
    for (const [topK, status] of topKs) {
      it(`top_k ${JSON.stringify(topK)} → ${status}`, async () => {
        const res = await rag.query({ index_name: "corpus", query: "the", top_k: topK });
        if (status === 200) {
          assertStatus(res, 200);
          assert.ok(res.json().count <= (topK as number));
          assertResults(res.json().results);
        } else {
          assertApiError(res, status);
        }
      });
    }

    it("top_k limits the count; a larger top_k returns a prefix-compatible list", async () => {
      const query = "the sun and the ocean and the volcano and the bread";
      const one = (await rag.query({ index_name: "corpus", query, top_k: 1 })).json();
      const all = (await rag.query({ index_name: "corpus", query, top_k: 100 })).json();
      assert.equal(one.count, 1);
      assert.equal(all.count, 4);
      assert.deepEqual(one.results[0], all.results[0]);
      assertResults(all.results);
    });

    it("min_score 0 … 1 is accepted; it drops the results scoring below it", async () => {
      const query = "the sun and the ocean and the volcano and the bread";
      const all = (await rag.query({ index_name: "corpus", query, top_k: 100, min_score: 0 })).json();
      const scores = (all.results as QueryResult[]).map((r) => r.score);
      assert.equal(scores.length, 4);
      assert.ok(new Set(scores).size >= 2, `distinct scores: ${scores.join(", ")}`);
      const sorted = [...new Set(scores)].sort((a, b) => b - a);
      const threshold = (sorted[0]! + sorted[1]!) / 2;
      const high = (
        await rag.query({ index_name: "corpus", query, top_k: 100, min_score: threshold })
      ).json();
      assert.ok(high.count >= 1 && high.count < all.count);
      assert.deepEqual(
        high.results,
        (all.results as QueryResult[]).filter((r) => r.score >= threshold),
      );
      const one = await rag.query({ index_name: "corpus", query, min_score: 1 });
      assertStatus(one, 200);
      for (const r of one.json().results as QueryResult[]) assert.equal(r.score, 1);
      assertApiError(await rag.query({ index_name: "corpus", query, min_score: -0.01 }), 400);
      assertApiError(await rag.query({ index_name: "corpus", query, min_score: 1.01 }), 400);
    });

    it("filter keeps the chunks whose metadata equals every given key", async () => {
      const query = "the surface of the earth, water, rock and bread";
      const nature = (
        await rag.query({ index_name: "corpus", query, top_k: 100, filter: { topic: "nature" } })
      ).json();
      assert.deepEqual(nature.results.map((r: QueryResult) => r.document_id).sort(), ["ocean", "volcano"]);
      const narrow = (
        await rag.query({ index_name: "corpus", query, top_k: 100, filter: { topic: "nature", year: 2020 } })
      ).json();
      assert.deepEqual(
        narrow.results.map((r: QueryResult) => r.document_id),
        ["volcano"],
      );
      const array = (
        await rag.query({ index_name: "corpus", query, top_k: 100, filter: { tags: ["kitchen", "baking"] } })
      ).json();
      assert.deepEqual(
        array.results.map((r: QueryResult) => r.document_id),
        ["bread"],
      );
      const none = (await rag.query({ index_name: "corpus", query, filter: { topic: "sports" } })).json();
      assert.equal(none.count, 0);
      assert.equal(none.answer, null);
      const typed = (await rag.query({ index_name: "corpus", query, filter: { year: "2020" } })).json();
      assert.equal(typed.count, 0, '2020 and "2020" differ');
      const empty = (await rag.query({ index_name: "corpus", query, top_k: 100, filter: {} })).json();
      const unfiltered = (await rag.query({ index_name: "corpus", query, top_k: 100 })).json();
      assert.deepEqual(empty.results, unfiltered.results);
    });

    it('answer "none" gives a null answer; "extractive" cites result numbers', async () => {
      const none = (await rag.query({ index_name: "corpus", query: "volcano lava", answer: "none" })).json();
      assert.equal(none.answer, null);
      assert.equal(none.answer_mode, "none");
      assert.ok(none.count >= 1);
      const extractive = (
        await rag.query({ index_name: "corpus", query: "volcano lava", answer: "extractive" })
      ).json();
      assert.equal(extractive.answer_mode, "extractive");
      assert.match(extractive.answer, /[Ll]ava.*\[1\]/);
      assert.deepEqual(extractive.results, none.results);
    });

    it('answer "generative" without GENERATION_URL falls back to extractive and says why', async () => {
      const res = await rag.query({ index_name: "corpus", query: "volcano lava", answer: "generative" });
      assertStatus(res, 200);
      const body = res.json();
      assert.equal(body.answer_mode, "extractive");
      assert.match(body.answer, /\[1\]/);
      assert.match(body.generation_skipped_reason, /GENERATION_URL/);
    });

    it("a query matching nothing returns no results and a null answer", async () => {
      const res = await rag.query({ index_name: "corpus", query: "zyxwv qwertz" });
      assertStatus(res, 200);
      assert.equal(res.json().count, 0);
      assert.deepEqual(res.json().results, []);
      assert.equal(res.json().answer, null);
    });

    it("a query of 4,096 characters is accepted", async () => {
      const res = await rag.query({ index_name: "corpus", query: "planet ".repeat(585).slice(0, 4096) });
      assertStatus(res, 200);
      assert.equal(res.json().results[0].document_id, "solar");
    });

    it("an unknown index is a 404", async () => {
      const res = await rag.query({ index_name: "no-such-index", query: "planet" });
      assertApiError(res, 404);
      assert.equal(res.json().error.code, "not_found");
    });
  });

  describe("GET /rag/indices", () => {
    it("lists the tenant's indices with their counts", async () => {
      const res = await rag.indices();
      assertStatus(res, 200);
      const body = res.json();
      assert.equal(body.count, body.indices.length);
      const corpus = body.indices.find((i: { name: string }) => i.name === "corpus");
      assert.ok(corpus);
      for (const field of INDEX_FIELDS) assert.ok(field in corpus, `index info lacks ${field}`);
      assert.equal(corpus.tenant_id, "default");
      assert.equal(corpus.scorer, "tfidf");
      assert.equal(corpus.documents_count, 4);
      assert.ok(corpus.chunks_count >= 4);
      assert.ok(corpus.vocabulary_size > 20);
      assert.ok(corpus.size_bytes > 0);
      assert.ok(!Number.isNaN(Date.parse(corpus.created_at)));
      assert.ok(Date.parse(corpus.updated_at) >= Date.parse(corpus.created_at));
      // The stats of an index are its info plus its segments and this process's counters of them.
      const { segments, segments_count, deleted_chunks, vectors, merges, loaded, ...info } = (
        await rag.indexStats("corpus")
      ).json();
      assert.deepEqual(corpus, info);
      assert.equal(segments_count, segments.length);
      assert.equal(typeof deleted_chunks, "number");
      assert.equal(vectors, null, "a build without an embedder stores no vectors");
      assert.equal(typeof merges.completed, "number");
      assert.equal(typeof loaded.bytes_loaded, "number");
    });

    it("?tenant_id= scopes the list", async () => {
      assertStatus(
        await rag.build({
          index_name: "corpus",
          tenant_id: "listing-tenant",
          documents: ["Only one document."],
        }),
        201,
      );
      const tenant = (await rag.indices("listing-tenant")).json();
      assert.equal(tenant.count, 1);
      assert.equal(tenant.indices[0].name, "corpus");
      assert.equal(tenant.indices[0].tenant_id, "listing-tenant");
      assert.equal(tenant.indices[0].documents_count, 1);
      const defaults = (await rag.indices("default")).json();
      assert.deepEqual(defaults, (await rag.indices()).json());
      assert.ok(defaults.indices.every((i: { tenant_id: string }) => i.tenant_id === "default"));
      const empty = (await rag.indices("nobody")).json();
      assert.deepEqual(empty, { indices: [], count: 0 });
    });
  });

  describe("DELETE /rag/indices/{name}", () => {
    it("deletes without force, then the index is a 404 everywhere", async () => {
      assertStatus(await rag.build({ index_name: "doomed", documents: ["Short lived."] }), 201);
      const res = await rag.deleteIndex("doomed");
      assertStatus(res, 200);
      assert.equal(res.json().success, true);
      assertApiError(await rag.indexStats("doomed"), 404);
      assertApiError(await rag.query({ index_name: "doomed", query: "short" }), 404);
      assertApiError(await rag.deleteIndex("doomed"), 404);
      assert.ok(!(await rag.indices()).json().indices.some((i: { name: string }) => i.name === "doomed"));
      // The name is free again.
      assertStatus(await rag.build({ index_name: "doomed", documents: ["Born again."] }), 201);
    });

    it("accepts force=true", async () => {
      assertStatus(await rag.build({ index_name: "forced", documents: ["Forced out."] }), 201);
      assertStatus(await rag.deleteIndex("forced", "?force=true"), 200);
      assertApiError(await rag.deleteIndex("forced", "?force=true"), 404);
      assertApiError(await rag.indexStats("forced"), 404);
    });
  });

  describe("documents of an index", () => {
    before(async () => {
      assertStatus(
        await rag.build({
          index_name: "docs",
          documents: [
            { id: "d1", text: "Penguins live in the cold south." },
            { id: "d2", text: "Camels cross the hot desert." },
          ],
        }),
        201,
      );
    });

    it("POST …/documents adds a document", async () => {
      const res = await rag.addDocuments("docs", {
        documents: [{ id: "d3", text: "Parrots talk in the tropical forest.", metadata: { kind: "bird" } }],
      });
      assertStatus(res, 200);
      const body = res.json();
      assert.equal(body.success, true);
      assert.equal(body.documents_count, 1);
      assert.equal(body.index_documents_count, 3);
      assert.equal((await rag.indexStats("docs")).json().documents_count, 3);
      const found = (await rag.query({ index_name: "docs", query: "parrots forest" })).json();
      assert.equal(found.results[0].document_id, "d3");
      const { start, end, ...own } = found.results[0].metadata;
      assert.deepEqual(own, { kind: "bird" });
      assert.equal(end - start, found.results[0].text.length);
    });

    it("sending the same id again replaces the document, never duplicates it", async () => {
      const before = (await rag.indexStats("docs")).json();
      for (const text of ["Penguins swim in icy water.", "Penguins waddle across the ice shelf."]) {
        const res = await rag.addDocuments("docs", { documents: [{ id: "d1", text }] });
        assertStatus(res, 200);
        assert.equal(res.json().index_documents_count, before.documents_count);
      }
      const after = (await rag.indexStats("docs")).json();
      assert.equal(after.documents_count, before.documents_count);
      assert.equal(after.chunks_count, before.chunks_count);
      const penguins = (await rag.query({ index_name: "docs", query: "penguins", top_k: 100 })).json();
      assert.equal(penguins.count, 1);
      assert.equal(penguins.results[0].document_id, "d1");
      assert.equal(penguins.results[0].text, "Penguins waddle across the ice shelf.");
      assert.equal((await rag.query({ index_name: "docs", query: "cold south" })).json().count, 0);
      assert.equal((await rag.query({ index_name: "docs", query: "icy water swim" })).json().count, 0);
    });

    it("a string document sent twice is stored once", async () => {
      const before = (await rag.indexStats("docs")).json().documents_count;
      for (let i = 0; i < 2; i++) {
        assertStatus(await rag.addDocuments("docs", { documents: ["Lemurs leap between the trees."] }), 200);
      }
      assert.equal((await rag.indexStats("docs")).json().documents_count, before + 1);
      assert.equal((await rag.query({ index_name: "docs", query: "lemurs", top_k: 100 })).json().count, 1);
    });

    it("POST …/documents on an unknown index is a 404", async () => {
      assertApiError(await rag.addDocuments("no-such-index", { documents: ["text"] }), 404);
      assertApiError(await rag.indexStats("no-such-index"), 404);
    });

    it("DELETE …/documents/{id} removes one document; an unknown id is a 404", async () => {
      const before = (await rag.indexStats("docs")).json().documents_count;
      const res = await rag.deleteDocument("docs", "d2");
      assertStatus(res, 200);
      assert.equal(res.json().success, true);
      assert.equal((await rag.indexStats("docs")).json().documents_count, before - 1);
      assert.equal((await rag.query({ index_name: "docs", query: "camels desert" })).json().count, 0);
      assertApiError(await rag.deleteDocument("docs", "d2"), 404);
      assertApiError(await rag.deleteDocument("docs", "never-there"), 404);
      assertApiError(await rag.deleteDocument("no-such-index", "d1"), 404);
      assert.equal((await rag.indexStats("docs")).json().documents_count, before - 1);
    });

    it("ids with reserved URL characters can be deleted", async () => {
      const id = "folder/file name#1?.txt";
      assertStatus(
        await rag.addDocuments("docs", { documents: [{ id, text: "Odd identifiers are fine." }] }),
        200,
      );
      assertStatus(await rag.deleteDocument("docs", id), 200);
      assert.equal((await rag.query({ index_name: "docs", query: "odd identifiers" })).json().count, 0);
    });

    it("deleting every document leaves an empty index that answers with no results", async () => {
      assertStatus(
        await rag.build({ index_name: "emptied", documents: [{ id: "only", text: "The last one." }] }),
        201,
      );
      assertStatus(await rag.deleteDocument("emptied", "only"), 200);
      const stats = (await rag.indexStats("emptied")).json();
      assert.equal(stats.documents_count, 0);
      assert.equal(stats.chunks_count, 0);
      const res = await rag.query({ index_name: "emptied", query: "last" });
      assertStatus(res, 200);
      assert.equal(res.json().count, 0);
      assertStatus(
        await rag.addDocuments("emptied", { documents: [{ id: "next", text: "The next one." }] }),
        200,
      );
      assert.equal(
        (await rag.query({ index_name: "emptied", query: "next" })).json().results[0].document_id,
        "next",
      );
    });
  });

  describe("GET /rag/stats/{index_name}", () => {
    it("gives the index's counts, sizes, vocabulary and dates", async () => {
      const res = await rag.indexStats("corpus");
      assertStatus(res, 200);
      const body = res.json();
      for (const field of INDEX_FIELDS) assert.ok(field in body, `stats lacks ${field}`);
      assert.equal(body.name, "corpus");
      assert.equal(body.documents_count, 4);
      assert.ok(body.size_bytes > 0);
    });

    it("shows its segments, deleted chunks, merges and what this process loaded", async () => {
      // Ten documents of one chunk each: one deleted is 10 %, too few deletes for the merge policy to
      // rewrite the segment in the background while this test reads the stats.
      const documents = Array.from({ length: 10 }, (_, i) => ({
        id: i === 2 ? "two" : `doc-${i}`,
        text: `Document number ${i} of the segmented index.`,
      }));
      const built = (await rag.build({ index_name: "segmented", documents })).json();
      assert.equal(built.chunks_count, 10);
      assertStatus(
        await rag.addDocuments("segmented", { documents: [{ id: "three", text: "An appended third." }] }),
        200,
      );
      assertStatus(await rag.deleteDocument("segmented", "two"), 200);
      const stats = (await rag.indexStats("segmented")).json();
      // The build's segment and the append's; the delete only marked the chunk of "two" deleted.
      assert.equal(stats.segments_count, 2);
      assert.deepEqual(
        stats.segments.map((s: { documents: number; deleted: number }) => [s.documents, s.deleted]),
        [
          [built.chunks_count, 1],
          [1, 0],
        ],
      );
      assert.ok(stats.segments.every((s: { bytes: number }) => s.bytes > 0));
      assert.equal(stats.deleted_chunks, 1);
      assert.equal(stats.chunks_count, built.chunks_count);
      assert.equal(stats.documents_count, 10);
      assert.deepEqual(stats.merges, { completed: 0, running: 0 });
      // Built and written here: nothing was read back from the store.
      assert.deepEqual(stats.loaded, { segments_loaded: 0, bytes_loaded: 0 });
    });

    it("an unknown index is a 404", async () => {
      const res = await rag.indexStats("unknown-index");
      assertApiError(res, 404);
      assert.equal(res.json().error.code, "not_found");
    });
  });
});

describe("GET /rag/stats (fresh app)", () => {
  it("counts indices, documents, chunks, queries and builds; reports latency, storage, uptime, memory", async () => {
    const { app } = await openRagApp();
    const rag = ragClient(app);
    try {
      const empty = (await rag.stats()).json();
      assert.equal(empty.indices_count, 0);
      assert.equal(empty.documents_count, 0);
      assert.equal(empty.queries_served, 0);
      assert.equal(empty.builds_served, 0);

      const a = (await rag.build({ index_name: "a", documents: SMALL_CORPUS })).json();
      const b = (
        await rag.build({
          index_name: "b",
          tenant_id: "t2",
          documents: ["One.", "Two words.", "Three little words."],
        })
      ).json();
      for (let i = 0; i < 7; i++)
        assertStatus(await rag.query({ index_name: "a", query: `planet ${i}` }), 200);
      assertStatus(await rag.query({ index_name: "b", tenant_id: "t2", query: "words" }), 200);

      const res = await rag.stats();
      assertStatus(res, 200);
      const stats = res.json();
      assert.equal(stats.indices_count, 2);
      assert.equal(stats.documents_count, 4 + 3);
      assert.equal(stats.chunks_count, a.chunks_count + b.chunks_count);
      assert.equal(stats.queries_served, 8);
      assert.equal(stats.builds_served, 2);
      assert.equal(stats.segments_count, 2);
      assert.equal(stats.deleted_chunks, 0);
      assert.deepEqual(stats.merges, { completed: 0, running: 0 });
      assert.deepEqual(stats.loaded, { segments_loaded: 0, bytes_loaded: 0 });
      const latency = stats.query_latency;
      assert.equal(typeof latency.mean_ms, "number");
      assert.equal(typeof latency.p95_ms, "number");
      assert.ok(latency.mean_ms > 0 && latency.p95_ms > 0);
      assert.equal(latency.samples, 8);
      assert.equal(stats.storage.backend, "sqlite");
      assert.ok(stats.storage.size_bytes > 0);
      assert.equal(typeof stats.uptime_s, "number");
      assert.ok(stats.uptime_s >= 0);
      assert.ok(stats.memory.rss_bytes > 0);
      assert.ok(stats.memory.heap_used_bytes > 0);
    } finally {
      await app.close();
    }
  });
});
