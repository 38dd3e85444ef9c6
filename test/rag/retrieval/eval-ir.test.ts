/**
 * `npm run eval:ir -- --retrieval … --embedding-url … --rerank-url …` (bench/eval-ir.ts over
 * scripts/lib/ir-retrieval.ts) against our text generation app serving an embedding model and a
 * reranker made at test time, on a tiny BEIR folder. The models' vectors and scores mean nothing, so
 * the figures do not either: what is checked is that the runs are the ones asked for (the dense run
 * ranks by the cosine of the server's own embeddings, the hybrid run by RRF of the two lists, the
 * reranked run by the reranker's scores).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";

import { loadBeir, ndcgAt } from "../../../scripts/lib/ir-eval.js";
import { runRetrieval } from "../../../scripts/lib/ir-retrieval.js";
import { HttpEmbedder } from "../../../src/rag/retrieval/embedder.js";
import { reciprocalRankFusion } from "../../../src/rag/retrieval/fusion.js";
import { HttpReranker } from "../../../src/rag/retrieval/reranker.js";
import { SegmentedIndex, IndexWriter } from "../../../src/rag/search/index.js";
import { cosine } from "../../helpers/hash-embedder.js";
import { modelsDirOf, retrievalModels, TINY } from "../../helpers/retrieval-models.js";
import { startTextgen, type RunningTextgen } from "../../helpers/servers.js";

const CORPUS = [
  { _id: "d1", title: "Birds", text: "Many birds migrate south in winter to find food." },
  { _id: "d2", title: "Cats", text: "The cat sat on the mat and purred." },
  { _id: "d3", title: "Snow", text: "Cold months bring snow and ice to the north." },
  { _id: "d4", title: "Dogs", text: "A dog ran far away across the field." },
  { _id: "d5", title: "Fish", text: "Salmon swim upstream to spawn in autumn." },
];
const QUERIES = [
  { _id: "q1", text: "how do birds survive the cold months" },
  { _id: "q2", text: "where do salmon spawn" },
];
const QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td5\t1\n";

let server: RunningTextgen;
let base: string;
let dir: string;

before(async () => {
  const files = await retrievalModels();
  const models = modelsDirOf(files);
  server = await startTextgen({ MODELS_DIR: models, MAX_CONCURRENT: "2" });
  base = `${server.url}/v1`;
  dir = mkdtempSync(path.join(os.tmpdir(), "lectern-beir-"));
  writeFileSync(path.join(dir, "corpus.jsonl"), CORPUS.map((d) => JSON.stringify(d)).join("\n"));
  writeFileSync(path.join(dir, "queries.jsonl"), QUERIES.map((q) => JSON.stringify(q)).join("\n"));
  writeFileSync(path.join(dir, "qrels.tsv"), QRELS);
});
after(async () => {
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("eval:ir with an embedder and a reranker", () => {
  it("dense ranks by cosine, hybrid by RRF of the lexical and dense lists, rerank by the reranker", async () => {
    const collection = loadBeir(dir);
    const embedder = new HttpEmbedder({
      baseUrl: base,
      model: "embed",
      apiKey: null,
      batchSize: 2,
      timeoutMs: 60_000,
    });
    const reranker = new HttpReranker({ baseUrl: base, model: "rerank", apiKey: null, timeoutMs: 60_000 });
    try {
      const docs = await embedder.embed(collection.documents.map((d) => d.text));
      const lexicalIndex = SegmentedIndex.create({ scorer: "bm25" });
      new IndexWriter(lexicalIndex).prepare({ add: collection.documents.map((d) => d.text) }).apply();
      for (const query of collection.queries) {
        const [q] = await embedder.embed([query.text]);
        const dense = docs
          .map((vector, key) => ({ key, score: cosine(q!, vector) }))
          .sort((a, b) => b.score - a.score || a.key - b.key);
        const lexical = lexicalIndex.search(query.text, { topK: 100 });
        const fused = reciprocalRankFusion({ lexical, dense });
        const scores = await reranker.rerank(
          query.text,
          fused.map((hit) => collection.documents[hit.key]!.text),
        );
        const reranked = fused
          .map((hit, order) => ({ key: hit.key, score: scores[order]!, order }))
          .sort((a, b) => b.score - a.score || a.order - b.order);
        // One query at a time, so that each run's metrics are this query's alone.
        const one = {
          ...collection,
          queries: [query],
          qrels: new Map([[query.id, collection.qrels.get(query.id)!]]),
        };
        // nDCG@10 of the ranking as trec_eval orders it (ties by document id).
        const expectedNdcg = (ranking: Array<{ key: number; score: number }>) =>
          ndcgAt(
            ranking.map((hit) => ({ docId: collection.documents[hit.key]!.id, score: hit.score })),
            collection.qrels.get(query.id)!,
            10,
          );
        const options = { lexical: { scorer: "bm25" as const }, embedder };
        const denseRun = await runRetrieval(one, { ...options, retrieval: "dense" });
        assert.ok(Math.abs(denseRun.ndcg10 - expectedNdcg(dense)) < 1e-9, `dense ${query.id}`);
        const ids = (ranking: Array<{ key: number }>) =>
          ranking.map((hit) => collection.documents[hit.key]!.id);
        const ranked = (run: { rankings: Map<string, Array<{ docId: string }>> }) =>
          run.rankings.get(query.id)!.map((hit) => hit.docId);
        assert.deepEqual(ranked(denseRun), ids(dense));
        assert.equal(denseRun.dimension, TINY.embedding);
        const hybridRun = await runRetrieval(one, { ...options, retrieval: "hybrid" });
        assert.ok(Math.abs(hybridRun.ndcg10 - expectedNdcg(fused)) < 1e-9, `hybrid ${query.id}`);
        assert.deepEqual(ranked(hybridRun), ids(fused));
        const rerankRun = await runRetrieval(one, { ...options, retrieval: "hybrid", reranker });
        assert.ok(Math.abs(rerankRun.ndcg10 - expectedNdcg(reranked)) < 1e-9, `rerank ${query.id}`);
        assert.deepEqual(ranked(rerankRun), ids(reranked));
        assert.equal(rerankRun.rerankModel, "rerank");
      }
    } finally {
      await embedder.close();
      await reranker.close();
    }
  });

  it("the command line takes --retrieval, --embedding-url, --embedding-model, --rerank-url, --rerank-model", async () => {
    const script = path.resolve("bench/eval-ir.ts");
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        "--import",
        "tsx",
        script,
        dir,
        "--json",
        "--scorer",
        "bm25",
        "--retrieval",
        "hybrid",
        "--embedding-url",
        base,
        "--embedding-model",
        "embed",
        "--rerank-url",
        base,
        "--rerank-model",
        "rerank",
      ],
      { timeout: 120_000 },
    );
    const report = JSON.parse(stdout) as {
      results: Array<{
        retrieval: string;
        embeddingModel: string;
        rerankModel: string;
        queryCount: number;
        ndcg10: number;
      }>;
    };
    assert.equal(report.results.length, 1);
    const [run] = report.results;
    assert.equal(run!.retrieval, "hybrid");
    assert.equal(run!.embeddingModel, "embed");
    assert.equal(run!.rerankModel, "rerank");
    assert.equal(run!.queryCount, 2);
    assert.ok(run!.ndcg10 >= 0 && run!.ndcg10 <= 1);
    // Without the embedder a dense run is refused before anything is read.
    await assert.rejects(
      promisify(execFile)(process.execPath, ["--import", "tsx", script, dir, "--retrieval", "dense"]),
      (error: { code?: number; stderr?: string }) =>
        error.code === 2 && /needs --embedding-url/.test(error.stderr ?? ""),
    );
  });
});
