/**
 * Two RAG app processes on one PostgreSQL database, as replicas behind a load balancer would be:
 * what one builds the other serves, an append on one reaches the other as that one new segment (not
 * the whole index), a delete on one reaches the other's cache (by notification), and concurrent
 * appends through both lose nothing and duplicate nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../helpers/pg.js";
import { startReplica, type Replica } from "../helpers/replicas.js";
import { makeProse, seededRandom } from "../helpers/text-fixtures.js";

const unavailable = await postgresUnavailable();

interface Reply {
  status: number;
  body: Record<string, unknown>;
}

async function call(base: string, method: string, url: string, body?: unknown): Promise<Reply> {
  const response = await fetch(`${base}${url}`, {
    method,
    ...(body === undefined
      ? {}
      : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

interface SegmentStats {
  segments: Array<{ id: number; documents: number; deleted: number; bytes: number }>;
  segments_count: number;
  deleted_chunks: number;
  loaded: { segments_loaded: number; bytes_loaded: number };
}

async function segmentStats(base: string, name: string): Promise<SegmentStats> {
  const reply = await call(base, "GET", `/rag/stats/${name}`);
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  return reply.body as unknown as SegmentStats;
}

/** One sample of a metric of the replica's /metrics (labels ignored), as a number. */
async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  assert.ok(line, `${name} is not in /metrics`);
  return Number(line.slice(line.lastIndexOf(" ") + 1));
}

/** A query's answer without its timing. */
function answerOf(reply: Reply) {
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  const { elapsed_ms: _elapsed, ...rest } = reply.body;
  return rest;
}

/**
 * How long a replica may take to see another's write before the test gives up. A guard against a hang,
 * not a latency target: on a loaded 2-core CI machine a notification can take seconds.
 */
const CONVERGE_GUARD_MS = 60_000;

async function poll<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const random = seededRandom(7);
const DOCUMENTS = Array.from({ length: 40 }, (_, i) => ({
  id: `handbook-${i}`,
  title: i % 5 === 0 ? `Chapter ${i}` : undefined,
  text: makeProse(random, 400 + ((i * 131) % 1200)),
  metadata: { n: i, group: i % 3 === 0 ? "a" : "b" },
}));
const QUERIES = [
  { query: "search engine index storage" },
  { query: "tenant snapshot version", top_k: 10 },
  { query: "crash write overlap", top_k: 20, filter: { group: "a" } },
  { question: "which chunk holds the answer?", answer: "none" },
];

describe("two RAG replicas on one PostgreSQL database", { skip: unavailable ?? false }, () => {
  let db: TestDatabase;
  let a: Replica;
  let b: Replica;

  before(async () => {
    db = await createTestDatabase();
    [a, b] = await Promise.all([
      startReplica({ DATABASE_URL: db.url, LOG_LEVEL: process.env.REPLICA_LOG_LEVEL ?? "silent" }),
      startReplica({ DATABASE_URL: db.url, LOG_LEVEL: process.env.REPLICA_LOG_LEVEL ?? "silent" }),
    ]);
  });
  after(async () => {
    if (process.env.REPLICA_LOG_LEVEL) process.stderr.write(`A: ${a?.stderr()}\nB: ${b?.stderr()}\n`);
    await Promise.all([a?.stop(), b?.stop()]);
    await db?.drop();
  });

  it("both report the postgres store", async () => {
    for (const replica of [a, b]) {
      const health = await call(replica.url, "GET", "/health");
      assert.equal(health.status, 200);
      assert.equal(health.body.storage, "postgres");
    }
  });

  it("build on A, query on B: the same results; a replace on A reaches B's cache", async (t) => {
    const built = await call(a.url, "POST", "/rag/build", {
      index_name: "handbook",
      documents: DOCUMENTS,
      chunk_size: 300,
      overlap: 30,
      scorer: "bm25",
    });
    assert.equal(built.status, 201, JSON.stringify(built.body));
    for (const q of QUERIES) {
      const body = { index_name: "handbook", ...q };
      const onA = answerOf(await call(a.url, "POST", "/rag/query", body));
      const onB = answerOf(await call(b.url, "POST", "/rag/query", body));
      assert.deepEqual(onB, onA);
      assert.ok((onA.results as unknown[]).length > 0);
    }
    const listed = await call(b.url, "GET", "/rag/indices");
    assert.deepEqual(
      (listed.body.indices as Array<{ name: string; documents_count: number }>).map((i) => [
        i.name,
        i.documents_count,
      ]),
      [["handbook", DOCUMENTS.length]],
    );

    // B has the index cached now; a replace on A must reach it.
    const replaced = await call(a.url, "POST", "/rag/build", {
      index_name: "handbook",
      mode: "replace",
      documents: DOCUMENTS.slice(0, 10),
      chunk_size: 300,
      overlap: 30,
      scorer: "bm25",
    });
    assert.equal(replaced.status, 201);
    const body = { index_name: "handbook", query: "search engine index storage", top_k: 100 };
    const expected = answerOf(await call(a.url, "POST", "/rag/query", body));
    const started = Date.now();
    await poll("B to serve the replaced index", CONVERGE_GUARD_MS, async () => {
      const onB = answerOf(await call(b.url, "POST", "/rag/query", body));
      return JSON.stringify(onB) === JSON.stringify(expected) ? true : undefined;
    });
    t.diagnostic(`B served the replaced index after ${Date.now() - started} ms`);
  });

  it("an append on A reaches B as exactly that one new segment; a delete as tombstones only", async () => {
    const built = await call(a.url, "POST", "/rag/build", {
      index_name: "segments",
      documents: DOCUMENTS,
      chunk_size: 300,
      overlap: 30,
      scorer: "bm25",
    });
    assert.equal(built.status, 201, JSON.stringify(built.body));
    // B loads the whole index once.
    const body = { index_name: "segments", query: "zyzzyva quokka", top_k: 5, answer: "none" };
    assert.equal(answerOf(await call(b.url, "POST", "/rag/query", body)).count, 0);
    const before = await segmentStats(b.url, "segments");
    assert.equal(before.segments_count, 1);
    assert.equal(before.loaded.segments_loaded, 1);
    assert.equal(before.loaded.bytes_loaded, before.segments[0]!.bytes);
    const bytesMetricBefore = await metric(b.url, "lectern_rag_segment_bytes_loaded_total");
    const segmentsMetricBefore = await metric(b.url, "lectern_rag_segments_loaded_total");

    const appended = await call(a.url, "POST", "/rag/indices/segments/documents", {
      documents: [{ id: "quokka", text: "The zyzzyva and the quokka share one short appended document." }],
    });
    assert.equal(appended.status, 200, JSON.stringify(appended.body));
    // B learns of it from the change feed (or its next version check): poll until it serves it.
    await poll("B to serve the appended document", 60_000, async () => {
      const results = answerOf(await call(b.url, "POST", "/rag/query", body)).results as Array<{
        document_id: string;
      }>;
      return results[0]?.document_id === "quokka" ? true : undefined;
    });
    const after = await segmentStats(b.url, "segments");
    const onA = await segmentStats(a.url, "segments");
    assert.deepEqual(after.segments, onA.segments);
    assert.equal(after.segments_count, 2);
    const added = after.segments.filter((segment) => !before.segments.some((s) => s.id === segment.id));
    assert.equal(added.length, 1);
    assert.ok(added[0]!.bytes > 0);
    // Exactly one more segment loaded, and only its bytes: not the whole index again.
    assert.equal(after.loaded.segments_loaded, before.loaded.segments_loaded + 1);
    assert.equal(after.loaded.bytes_loaded, before.loaded.bytes_loaded + added[0]!.bytes);
    assert.equal(
      await metric(b.url, "lectern_rag_segment_bytes_loaded_total"),
      bytesMetricBefore + added[0]!.bytes,
    );
    assert.equal(await metric(b.url, "lectern_rag_segments_loaded_total"), segmentsMetricBefore + 1);

    // A delete on A (one document of the big segment): B applies its tombstones, loading no segment.
    const deleted = await call(a.url, "DELETE", "/rag/indices/segments/documents/handbook-1");
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    const deletedOnA = (await segmentStats(a.url, "segments")).deleted_chunks;
    assert.ok(deletedOnA > 0);
    const afterDelete = await poll("B to apply the delete", 60_000, async () => {
      const stats = await segmentStats(b.url, "segments");
      return stats.deleted_chunks === deletedOnA ? stats : undefined;
    });
    assert.deepEqual(afterDelete.loaded, after.loaded);
    assert.deepEqual(afterDelete.segments, (await segmentStats(a.url, "segments")).segments);
  });

  it("delete on B: A answers 404 once the notification arrives", async (t) => {
    // A serves the index from its cache before the delete.
    const warm = await call(a.url, "POST", "/rag/query", { index_name: "handbook", query: "index" });
    assert.equal(warm.status, 200, JSON.stringify(warm.body));
    const deleted = await call(b.url, "DELETE", "/rag/indices/handbook");
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    const started = Date.now();
    const reply = await poll("A to answer 404", CONVERGE_GUARD_MS, async () => {
      const r = await call(a.url, "POST", "/rag/query", { index_name: "handbook", query: "index" });
      return r.status === 404 ? r : undefined;
    });
    t.diagnostic(`A answered 404 after ${Date.now() - started} ms`);
    assert.equal((reply.body.error as { code: string }).code, "not_found");
  });

  it("20 concurrent appends split across A and B: every document present exactly once", async (t) => {
    const seed = await call(a.url, "POST", "/rag/build", {
      index_name: "shared",
      documents: [{ id: "seed", text: "The seed document of the shared index." }],
    });
    assert.equal(seed.status, 201);
    const ids = Array.from({ length: 20 }, (_, i) => i);
    const started = Date.now();
    const replies = await Promise.all(
      ids.map((i) =>
        call(i % 2 === 0 ? a.url : b.url, "POST", "/rag/indices/shared/documents", {
          documents: [
            {
              id: `doc-${i}`,
              text: `Appended document number ${i} carries the word marker${i} and some prose about replicas.`,
              metadata: { n: i },
            },
          ],
        }),
      ),
    );
    t.diagnostic(`20 appends through two replicas in ${Date.now() - started} ms`);
    for (const reply of replies) assert.equal(reply.status, 200, JSON.stringify(reply.body));

    for (const replica of [a, b]) {
      const listed = await call(replica.url, "GET", "/rag/indices");
      const shared = (listed.body.indices as Array<{ name: string; documents_count: number }>).find(
        (i) => i.name === "shared",
      );
      assert.equal(shared?.documents_count, 21);
      for (const i of ids) {
        // A replica may see the last writes of the other late (a notification away): poll.
        const hits = await poll(`doc-${i} on ${replica.url}`, CONVERGE_GUARD_MS, async () => {
          const r = await call(replica.url, "POST", "/rag/query", {
            index_name: "shared",
            query: `marker${i}`,
            top_k: 100,
            answer: "none",
          });
          assert.equal(r.status, 200);
          const results = r.body.results as Array<{ document_id: string }>;
          return results.some((h) => h.document_id === `doc-${i}`) ? results : undefined;
        });
        assert.equal(hits.filter((h) => h.document_id === `doc-${i}`).length, 1);
        assert.equal(hits[0]!.document_id, `doc-${i}`);
      }
    }
    const retries = await Promise.all(
      [a, b].map(async (r) => (await call(r.url, "GET", "/rag/stats")).body.write_retries),
    );
    t.diagnostic(`write retries after stale versions: A ${String(retries[0])}, B ${String(retries[1])}`);
  });
});
