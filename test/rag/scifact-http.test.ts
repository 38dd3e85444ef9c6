/**
 * BEIR SciFact through HTTP: the whole corpus in one POST /rag/build, queries before and after a
 * restart. The collection is not part of the repository: set LECTERN_IR_DIR, or keep it at
 * ../shared/ir/scifact (relative to the repository root). Skipped when it is missing.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { repoRoot } from "../helpers/env.js";
import {
  assertStatus,
  makeTempDir,
  openRagApp,
  ragClient,
  removeTempDirs,
  type RagClient,
} from "../helpers/rag-http.js";

const dir = path.resolve(repoRoot, process.env.LECTERN_IR_DIR ?? "../shared/ir/scifact");
const available = existsSync(path.join(dir, "corpus.jsonl")) && existsSync(path.join(dir, "queries.jsonl"));

const readJsonLines = (file: string) =>
  readFileSync(path.join(dir, file), "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Record<string, string>);

/** query id → relevant document ids, from qrels.tsv (or qrels/test.tsv). */
function readQrels(): Map<string, Set<string>> {
  const file = existsSync(path.join(dir, "qrels.tsv")) ? "qrels.tsv" : path.join("qrels", "test.tsv");
  const qrels = new Map<string, Set<string>>();
  for (const line of readFileSync(path.join(dir, file), "utf8").split("\n")) {
    const [queryId, docId, score] = line.split("\t");
    if (!queryId || !docId || !/^\d+$/.test(score?.trim() ?? "") || Number(score) <= 0) continue;
    if (!qrels.has(queryId)) qrels.set(queryId, new Set());
    qrels.get(queryId)!.add(docId);
  }
  return qrels;
}

after(() => removeTempDirs());

describe(
  "SciFact through HTTP",
  { skip: available ? false : `no BEIR collection at ${dir} (set LECTERN_IR_DIR)` },
  () => {
    it("builds all 5,183 documents in one request; 20 queries answer the same after a restart", async (t) => {
      const corpus = readJsonLines("corpus.jsonl");
      const qrels = readQrels();
      const judged = readJsonLines("queries.jsonl").filter((q) => qrels.has(q._id!));
      // 20 queries spread over the judged ones.
      const queries = Array.from({ length: 20 }, (_, i) => judged[Math.floor((i * judged.length) / 20)]!);
      assert.equal(corpus.length, 5183);
      assert.equal(new Set(queries.map((q) => q._id)).size, 20);

      const dataDir = makeTempDir("rag-scifact");
      const ask = async (rag: RagClient) => {
        const answers = [];
        for (const q of queries) {
          const res = await rag.query({ index_name: "scifact", query: q.text, top_k: 10, answer: "none" });
          assertStatus(res, 200);
          const results = res.json().results as Array<{ document_id: string; score: number }>;
          answers.push(results.map((r) => ({ id: r.document_id, score: r.score })));
        }
        return answers;
      };

      let started = performance.now();
      const first = await openRagApp({ DATA_DIR: dataDir });
      let answers: Awaited<ReturnType<typeof ask>>;
      let chunks: number;
      try {
        const rag = ragClient(first.app);
        const built = await rag.build({
          index_name: "scifact",
          mode: "create",
          scorer: "bm25",
          documents: corpus.map((doc) => ({ id: doc._id, title: doc.title, text: doc.text })),
        });
        assertStatus(built, 201);
        assert.equal(built.json().documents_count, 5183);
        chunks = built.json().chunks_count;
        assert.ok(chunks >= 5183, `chunks ${chunks}`);
        t.diagnostic(`build: ${Math.round(performance.now() - started)} ms, ${chunks} chunks`);

        started = performance.now();
        answers = await ask(rag);
        t.diagnostic(`20 queries: ${Math.round(performance.now() - started)} ms`);
        for (const results of answers) {
          assert.equal(results.length, 10);
          for (let i = 1; i < results.length; i++) assert.ok(results[i - 1]!.score >= results[i]!.score);
          assert.ok(results.every((r) => r.score >= 0 && r.score <= 1));
        }
        // A sanity check of relevance: most queries find a judged-relevant document in their top 10.
        const hits = queries.filter((q, i) => answers[i]!.some((r) => qrels.get(q._id!)!.has(r.id))).length;
        assert.ok(hits >= 14, `${hits} of 20 queries have a relevant document in the top 10`);
      } finally {
        await first.app.close();
      }

      started = performance.now();
      const second = await openRagApp({ DATA_DIR: dataDir });
      try {
        const rag = ragClient(second.app);
        assert.deepEqual(await ask(rag), answers, "same ids and scores after the restart");
        t.diagnostic(`reopen and 20 queries: ${Math.round(performance.now() - started)} ms`);

        const list = (await rag.indices()).json();
        assert.equal(list.count, 1);
        assert.equal(list.indices[0].name, "scifact");
        assert.equal(list.indices[0].scorer, "bm25");
        assert.equal(list.indices[0].documents_count, 5183);
        assert.equal(list.indices[0].chunks_count, chunks);
        const stats = (await rag.stats()).json();
        assert.equal(stats.indices_count, 1);
        assert.equal(stats.documents_count, 5183);
        assert.equal(stats.chunks_count, chunks);
        assert.equal(stats.queries_served, 20);
        assert.ok(stats.storage.size_bytes > 8_000_000);
        const index = (await rag.indexStats("scifact")).json();
        assert.equal(index.documents_count, 5183);
        assert.equal(index.chunks_count, chunks);
      } finally {
        await second.app.close();
      }
    });
  },
);
