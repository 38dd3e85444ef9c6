/**
 * Two replicas (two RagServices, each with its own connection pool and change feed) on one PostgreSQL
 * database, serving an index with vectors: what A builds B serves with its vectors, and an append on A
 * reaches B as exactly that one new segment with its vectors (B's counters grow by one segment and by
 * that segment's postings and vector bytes, not by the index), after which B's dense search equals A's.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import { RagService } from "../../src/rag/service.js";
import { TieredMergePolicy } from "../../src/rag/search/index.js";
import { PostgresIndexStore } from "../../src/rag/store/postgres-store.js";
import type { IndexKey } from "../../src/rag/store/types.js";
import { HashEmbedder, hashVector } from "../helpers/hash-embedder.js";
import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../helpers/pg.js";
import { makeProse, seededRandom } from "../helpers/text-fixtures.js";

const unavailable = await postgresUnavailable();
const KEY: IndexKey = { tenantId: "default", name: "replicated" };
const DIMENSION = 32;

const databases: TestDatabase[] = [];
after(async () => {
  for (const db of databases) await db.drop();
});

async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("replicas with vectors (postgres)", { skip: unavailable ?? false }, () => {
  it("an append on A reaches B as that one new segment with its vectors", async () => {
    const db = await createTestDatabase();
    databases.push(db);
    // No merges: the one new segment is all an append adds.
    const options = { mergePolicy: new TieredMergePolicy({ segmentsPerTier: 1000 }) };
    const storeA = await PostgresIndexStore.open(db.url);
    const storeB = await PostgresIndexStore.open(db.url);
    const a = new RagService(storeA, options);
    const b = new RagService(storeB, options);
    try {
      await until(async () => a.changeFeedLive && b.changeFeedLive, "both change feeds");
      const random = seededRandom(5);
      const embedder = new HashEmbedder("hash", DIMENSION);
      const documents = Array.from({ length: 20 }, (_, i) => ({ id: `d${i}`, text: makeProse(random, 400) }));
      await a.build({
        key: KEY,
        documents,
        chunkSize: 200,
        overlap: 20,
        scorer: "bm25",
        mode: "create",
        embedding: { embedder, storage: "i8" },
      });
      const query = hashVector("index segment replica", DIMENSION);
      const dense = async (service: RagService) =>
        (await service.load(KEY)).engine.searchDense(query, { topK: 10, exact: true });
      assert.deepEqual(await dense(b), await dense(a));
      const before = (await b.indexStats(KEY)).loaded;
      const version = (await storeA.getMeta(KEY))!.version;

      const appended = await a.upsertDocuments(KEY, [{ id: "new", text: makeProse(random, 600) }], {
        embedder,
      });
      const delta = await storeA.loadChanges(KEY, version);
      assert.equal(delta!.addedSegments.length, 1);
      const segment = delta!.addedSegments[0]!;
      assert.ok(
        segment.vectors instanceof Uint8Array && segment.vectors.byteLength > 0,
        "the segment's vectors",
      );
      assert.equal(segment.documentCount, appended.chunksCount);

      await until(async () => (await b.load(KEY)).meta.version === appended.meta.version, "B catching up");
      const after = (await b.indexStats(KEY)).loaded;
      assert.equal(after.segmentsLoaded - before.segmentsLoaded, 1, "B loaded one segment");
      assert.equal(
        after.bytesLoaded - before.bytesLoaded,
        segment.bytes.byteLength + segment.vectors.byteLength,
        "B loaded that segment's postings and vectors, nothing else",
      );
      assert.deepEqual(await dense(b), await dense(a));
      assert.deepEqual((await b.load(KEY)).engine.vectorStats(), (await a.load(KEY)).engine.vectorStats());
    } finally {
      await a.close();
      await b.close();
      await storeA.close();
      await storeB.close();
    }
  });
});
