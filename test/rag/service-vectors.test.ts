/**
 * Vectors through the RAG service, on both stores: a build with an embedder records the index's
 * embedding space and stores one vector per chunk with each segment; dense search over the served
 * index equals brute force over the live chunks' vectors, after appends, replaced and deleted documents,
 * merges and a reload from the store; an append must use the index's model; an embedder that fails
 * mid-append leaves the index as it was.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";

import { DomainError } from "../../src/core/errors.js";
import { RagService, type DocumentInput } from "../../src/rag/service.js";
import { engineText } from "../../src/rag/service/documents.js";
import { TieredMergePolicy } from "../../src/rag/search/index.js";
import { PostgresIndexStore } from "../../src/rag/store/postgres-store.js";
import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import type { IndexKey, IndexStore } from "../../src/rag/store/types.js";
import { cosine, HashEmbedder, hashVector } from "../helpers/hash-embedder.js";
import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../helpers/pg.js";
import { makeProse, seededRandom } from "../helpers/text-fixtures.js";

const KEY: IndexKey = { tenantId: "default", name: "dense" };
const CHUNKING = { chunkSize: 200, overlap: 20 };
const DIMENSION = 16;
/** Score tolerance of f16 storage. */
const F16 = 3e-3;

const dirs: string[] = [];
const databases: TestDatabase[] = [];
after(async () => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  for (const db of databases) await db.drop();
});

const random = seededRandom(41);
const makeDocument = (id: string): DocumentInput => ({
  id,
  title: id.endsWith("3") ? `Title ${id}` : null,
  text: makeProse(random, 100 + Math.floor(random() * 500)),
});

/** Every live chunk of the index (engine key, engine text), read from the store. */
async function liveChunks(store: IndexStore, key: IndexKey) {
  const documents = (await store.listDocuments(key)).map((document) => document.id);
  const chunks: Array<{ key: number; text: string }> = [];
  for (const { title, chunks: ofDocument } of (await store.getDocumentChunks(key, documents)).values()) {
    for (const chunk of ofDocument)
      chunks.push({ key: chunk.engineKey, text: engineText(title, chunk.text) });
  }
  return chunks;
}

/**
 * Dense search through the service equals brute force over the live chunks: the same scores (within the
 * storage's precision: f16 keeps about 3 decimal digits), the same keys where scores are not that close.
 */
async function assertDenseExact(
  service: RagService,
  store: IndexStore,
  query: string,
  tolerance = 1e-5,
): Promise<void> {
  const loaded = await service.load(KEY);
  const q = hashVector(query, DIMENSION);
  const expected = (await liveChunks(store, KEY))
    .map(({ key, text }) => ({ key, score: cosine(q, hashVector(text, DIMENSION)) }))
    .sort((a, b) => b.score - a.score || a.key - b.key)
    .slice(0, 10);
  const got = loaded.engine.searchDense(q, { topK: 10 });
  assert.equal(got.length, expected.length);
  const detail = () => JSON.stringify({ got, expected });
  got.forEach((hit, i) => assert.ok(Math.abs(hit.score - expected[i]!.score) < tolerance, detail()));
  const reference = new Map(expected.map((hit) => [hit.key, hit.score]));
  for (const hit of got) {
    const score = reference.get(hit.key);
    // A key not in the reference's top k: only where its score ties the reference's within precision.
    if (score !== undefined) assert.ok(Math.abs(score - hit.score) < tolerance, detail());
    else
      assert.ok(
        expected.some((e) => Math.abs(e.score - hit.score) < 2 * tolerance),
        detail(),
      );
  }
  assert.equal(loaded.engine.vectorStats()?.count, loaded.meta.chunksCount);
}

/** Creates the test index from `documents`, each chunk with its vector, stored as `storage`. */
function createWithVectors(
  service: RagService,
  documents: DocumentInput[],
  embedder: HashEmbedder,
  storage: "f16" | "i8",
) {
  return service.build({
    key: KEY,
    documents,
    ...CHUNKING,
    scorer: "bm25",
    mode: "create",
    embedding: { embedder, storage },
  });
}

const stores: Array<[string, () => Promise<IndexStore>]> = [
  [
    "sqlite",
    async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-vectors-"));
      dirs.push(dir);
      return SqliteIndexStore.open(dir);
    },
  ],
];
const unavailable = await postgresUnavailable();
if (unavailable === null) {
  stores.push([
    "postgres",
    async () => {
      const db = await createTestDatabase();
      databases.push(db);
      return PostgresIndexStore.open(db.url);
    },
  ]);
}

for (const [kind, openStore] of stores) {
  describe(`vectors through the service (${kind})`, () => {
    it("records the space, keeps vectors per segment through appends, deletes, merges and reloads", async () => {
      const store = await openStore();
      const service = new RagService(store, {
        mergePolicy: new TieredMergePolicy({ segmentsPerTier: 2, maxMergeAtOnce: 2 }),
      });
      try {
        const embedder = new HashEmbedder("hash-test", DIMENSION);
        const documents = Array.from({ length: 12 }, (_, i) => makeDocument(`doc-${i}`));
        const built = await createWithVectors(service, documents, embedder, "f16");
        assert.deepEqual(built.meta.vectors, { model: "hash-test", dimension: DIMENSION, storage: "f16" });
        const stored = await store.loadIndex(KEY);
        assert.ok(stored!.segments.every((segment) => segment.vectors instanceof Uint8Array));
        await assertDenseExact(service, store, "index storage engine", F16);

        for (let round = 0; round < 4; round++) {
          await service.upsertDocuments(KEY, [makeDocument(`new-${round}`), makeDocument(`doc-${round}`)], {
            embedder,
          });
          await service.deleteDocument(KEY, `doc-${round + 6}`);
        }
        await service.mergesSettled();
        await assertDenseExact(service, store, "tenant version snapshot", F16);
        assert.ok((await service.indexStats(KEY)).merges.completed > 0, "merges ran");

        // A fresh process reads the vectors back with their segments.
        const again = new RagService(store);
        try {
          await assertDenseExact(again, store, "tenant version snapshot", F16);
        } finally {
          await again.close();
        }
      } finally {
        await service.close();
        await store.close();
      }
    });

    it("a write of 10,000 chunks and more gets its graph (built on a worker thread), and answers exactly", async () => {
      const store = await openStore();
      const service = new RagService(store);
      try {
        const embedder = new HashEmbedder("hash-test", DIMENSION);
        const documents = Array.from({ length: 10_050 }, (_, i) => ({
          id: `short-${i}`,
          text: `${makeProse(random, 8)} ${i}`,
        }));
        const built = await createWithVectors(service, documents, embedder, "i8");
        assert.equal(built.chunksCount, documents.length);
        const { engine } = await service.load(KEY);
        const [segment] = engine.segments();
        assert.ok(engine.segmentById(segment!.id)?.vectors?.graph, "the written segment has its graph");
        await assertDenseExact(service, store, "storage index engine", 2e-2);
        // Loaded afresh from the store, the segment's stored bytes carry the graph too.
        const reloaded = new RagService(store);
        const fresh = await reloaded.load(KEY);
        assert.ok(fresh.engine.segmentById(segment!.id)?.vectors?.graph);
        await reloaded.close();
      } finally {
        await service.close();
        await store.close();
      }
    });

    it("appends only with the index's model, and an embedder failing mid-append commits nothing", async () => {
      const store = await openStore();
      const service = new RagService(store);
      try {
        const embedder = new HashEmbedder("hash-test", DIMENSION);
        await service.build({
          key: KEY,
          documents: [makeDocument("a"), makeDocument("b")],
          ...CHUNKING,
          scorer: "bm25",
          mode: "create",
          embedding: { embedder },
        });
        const before = await store.loadIndex(KEY);
        const isError = (status: string, message: RegExp) => (error: unknown) =>
          error instanceof DomainError && error.kind === status && message.test(error.message);
        await assert.rejects(
          service.upsertDocuments(KEY, [makeDocument("c")]),
          isError("conflict", /hash-test.*no embedder/),
        );
        await assert.rejects(
          service.upsertDocuments(KEY, [makeDocument("c")], {
            embedder: new HashEmbedder("other", DIMENSION),
          }),
          isError("conflict", /hash-test.*other/),
        );
        await assert.rejects(
          service.upsertDocuments(KEY, [makeDocument("c"), makeDocument("d")], {
            embedder: new HashEmbedder("hash-test", DIMENSION, 0),
          }),
          isError("not_ready", /embedder unavailable/),
        );
        assert.deepEqual(await store.loadIndex(KEY), before);
        await assertDenseExact(service, store, "anything at all");
        // Deleting needs no embedder.
        await service.deleteDocument(KEY, "a");
        await assertDenseExact(service, store, "anything at all");
      } finally {
        await service.close();
        await store.close();
      }
    });

    it("leaves a build without an embedder lexical", async () => {
      const store = await openStore();
      const service = new RagService(store);
      try {
        const built = await service.build({
          key: KEY,
          documents: [makeDocument("a")],
          ...CHUNKING,
          scorer: "bm25",
          mode: "create",
        });
        assert.equal(built.meta.vectors, null);
        const loaded = await service.load(KEY);
        assert.equal(loaded.engine.vectorStats(), null);
        assert.throws(
          () => loaded.engine.searchDense(new Float32Array(DIMENSION), { topK: 1 }),
          /no vectors/,
        );
        // An embedder given to an append of a lexical index is not used.
        const embedder = new HashEmbedder();
        await service.upsertDocuments(KEY, [makeDocument("b")], { embedder });
        assert.equal(embedder.calls, 0);
      } finally {
        await service.close();
        await store.close();
      }
    });
  });
}
