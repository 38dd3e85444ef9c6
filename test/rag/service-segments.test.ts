/**
 * The RAG service on the segmented index (SQLite): a write commits what it adds — one new segment for
 * an append, the tombstones of the old chunks for a delete — and what queries answer after any
 * sequence of writes, with background merges running or done, equals a fresh build over the same
 * live documents, through the service (hits, scores, texts, metadata).
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";

import Database from "better-sqlite3";

import { chunkDocument } from "../../src/rag/ingest/chunker.js";
import {
  RagService,
  normaliseDocuments,
  type DocumentInput,
  type QueryInput,
} from "../../src/rag/service.js";
import { TieredMergePolicy, type ScorerName } from "../../src/rag/search/index.js";
import { SQLITE_MIGRATIONS, SQLITE_FILE_NAME, SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import type { IndexKey, IndexMeta } from "../../src/rag/store/types.js";
import { makeProse, seededRandom } from "../helpers/text-fixtures.js";

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-segments-"));
  dirs.push(dir);
  return dir;
}
const openSqlite = () => SqliteIndexStore.open(tempDir());

const KEY: IndexKey = { tenantId: "default", name: "segmented" };
const CHUNKING = { chunkSize: 300, overlap: 30 };

const random = seededRandom(23);
function makeDocument(id: string): DocumentInput {
  const n = Number(id.replace(/\D/g, "")) || 0;
  return {
    id,
    title: n % 4 === 0 ? `Title of ${id}` : null,
    text: makeProse(random, 150 + Math.floor(random() * 700)),
    metadata: { group: n % 3 === 0 ? "a" : "b", n },
  };
}

const QUERIES: Array<Omit<QueryInput, "key">> = [
  { query: "search engine index storage", topK: 10, minScore: 0 },
  { query: "tenant snapshot version", topK: 100, minScore: 0 },
  { query: "crash write overlap", topK: 3, minScore: 0, filter: { group: "a" } },
  { query: "query answer model token", topK: 5, minScore: 0.3 },
  { query: "boundary", topK: 1, minScore: 0 },
];

/** Everything a query answers, timing left out. */
async function answers(service: RagService, key: IndexKey) {
  const all = [];
  for (const query of QUERIES) all.push((await service.query({ key, ...query })).results);
  return all;
}

/**
 * Answers without the positions a write records in chunk metadata (start, end, headings): an index of
 * the previous release has none, and its re-index keeps its chunks as they were.
 */
function withoutPositions(all: Awaited<ReturnType<typeof answers>>) {
  return all.map((results) =>
    results.map((result) => {
      const { start: _start, end: _end, headings: _headings, ...metadata } = result.metadata ?? {};
      return { ...result, metadata };
    }),
  );
}

/** The answers of a fresh build (a new store, one write) over `documents` in the given order. */
async function freshAnswers(documents: DocumentInput[], scorer: ScorerName) {
  const store = openSqlite();
  const service = new RagService(store);
  try {
    await service.build({ key: KEY, documents, ...CHUNKING, scorer, mode: "create" });
    return await answers(service, KEY);
  } finally {
    await service.close();
    await store.close();
  }
}

describe("a write commits only what it adds", () => {
  it("an append adds one segment; a replace one segment and tombstones; a delete tombstones only", async () => {
    const store = openSqlite();
    // Merges would add segments of their own to the deltas checked here: none for this test.
    const service = new RagService(store, {
      mergePolicy: new TieredMergePolicy({ segmentsPerTier: 1000, deletesPctAllowed: 100 }),
    });
    const documents = Array.from({ length: 30 }, (_, i) => makeDocument(`doc-${i}`));
    const built = await service.build({ key: KEY, documents, ...CHUNKING, scorer: "bm25", mode: "create" });
    assert.equal(built.meta.segmentsCount, 1);

    // One new document: one new segment holding its chunks, no tombstone.
    const appended = await service.upsertDocuments(KEY, [makeDocument("new-1")]);
    const afterAppend = await store.loadChanges(KEY, built.meta.version);
    assert.ok(afterAppend);
    assert.equal(afterAppend.addedSegments.length, 1);
    assert.equal(afterAppend.addedSegments[0]!.documentCount, appended.chunksCount);
    assert.deepEqual(afterAppend.addedSegments[0]!.deleted, []);
    assert.deepEqual(afterAppend.tombstones, []);
    assert.equal(afterAppend.liveSegmentIds.length, 2);
    assert.equal(afterAppend.bytesLoaded, afterAppend.addedSegments[0]!.bytes.byteLength);

    // A document replaced: one new segment, and one tombstone per chunk of its old version.
    const oldVersion = (await store.getDocumentChunks(KEY, ["doc-4"])).get("doc-4")!.chunks;
    assert.ok(oldVersion.length > 0);
    const replaced = await service.upsertDocuments(KEY, [makeDocument("doc-4")]);
    const afterReplace = await store.loadChanges(KEY, appended.meta.version);
    assert.ok(afterReplace);
    assert.equal(afterReplace.addedSegments.length, 1);
    assert.equal(afterReplace.addedSegments[0]!.documentCount, replaced.chunksCount);
    assert.equal(afterReplace.tombstones.length, oldVersion.length);

    // A deleted document: its chunks' tombstones, no segment.
    const deletedChunks = (await store.getDocumentChunks(KEY, ["doc-7"])).get("doc-7")!.chunks;
    const deleted = await service.deleteDocument(KEY, "doc-7");
    const afterDelete = await store.loadChanges(KEY, replaced.meta.version);
    assert.ok(afterDelete);
    assert.deepEqual(afterDelete.addedSegments, []);
    assert.equal(afterDelete.bytesLoaded, 0);
    assert.equal(afterDelete.tombstones.length, deletedChunks.length);
    assert.equal(deleted.segmentsCount, 3);
    assert.equal(deleted.deletedChunksCount, oldVersion.length + deletedChunks.length);

    // The service's view agrees with the store's.
    const stats = await service.indexStats(KEY);
    assert.equal(stats.segments.length, 3);
    assert.equal(stats.deletedChunks, deleted.deletedChunksCount);
    assert.equal(
      stats.segments.reduce((sum, segment) => sum + segment.documentCount - segment.deletedCount, 0),
      deleted.chunksCount,
    );
    await service.close();
    await store.close();
  });
});

describe("queries through the service equal a fresh build's", () => {
  for (const scorer of ["bm25", "tfidf"] as const) {
    it(`${scorer}: after every write, with merges running and after they are done, and after a restart`, async () => {
      const store = openSqlite();
      // Eager merging, so that this small index merges often.
      const mergePolicy = new TieredMergePolicy({ segmentsPerTier: 2, maxMergeAtOnce: 3 });
      const service = new RagService(store, { mergePolicy });
      // The live documents in key order: a document written again moves to the end.
      const live = new Map<string, DocumentInput>();
      const write = (documents: DocumentInput[]) => {
        for (const document of documents) {
          live.delete(document.id!);
          live.set(document.id!, document);
        }
      };
      const check = async (step: string) => {
        const expected = await freshAnswers([...live.values()], scorer);
        assert.deepEqual(await answers(service, KEY), expected, `${step}, merges maybe running`);
        await service.mergesSettled();
        assert.deepEqual(await answers(service, KEY), expected, `${step}, merges done`);
      };

      const first = Array.from({ length: 12 }, (_, i) => makeDocument(`doc-${i}`));
      await service.build({ key: KEY, documents: first, ...CHUNKING, scorer, mode: "create" });
      write(first);
      await check("build");
      let next = 12;
      let writes = 1;
      for (let step = 0; step < 12; step++) {
        // New documents, and (every other step) a new version of an existing one.
        const batch = Array.from({ length: 1 + (step % 3) }, () => makeDocument(`doc-${next++}`));
        if (step % 2 === 1) batch.push(makeDocument([...live.keys()][step]!));
        await service.upsertDocuments(KEY, batch);
        write(batch);
        writes++;
        await check(`write ${step}`);
        if (step % 3 === 2) {
          const victim = [...live.keys()][(step * 7) % live.size]!;
          await service.deleteDocument(KEY, victim);
          live.delete(victim);
          writes++;
          await check(`delete of ${victim}`);
        }
      }
      // One atomic write that upserts and deletes (the folder sync's).
      const upsert = [makeDocument(`doc-${next++}`), makeDocument([...live.keys()][1]!)];
      const deleteIds = [[...live.keys()][0]!, "not-there"];
      await service.applyDocumentChanges(KEY, { upsert, deleteIds });
      live.delete(deleteIds[0]!);
      write(upsert);
      writes++;
      await check("upsert and delete in one write");

      const stats = await service.indexStats(KEY);
      assert.ok(stats.merges.completed > 0, "no merge ran");
      assert.ok(stats.segments.length < writes, `${stats.segments.length} segments after ${writes} writes`);
      const meta: IndexMeta = stats.meta;
      assert.equal(meta.documentsCount, live.size);

      // A filtered query widens its candidates until it has top_k: its hits are exactly those of an
      // engine search that only accepts matching chunks (selective filters need several rounds).
      const chunks = await store.getChunks(
        KEY,
        Array.from({ length: meta.engine.nextKey }, (_, k) => k),
      );
      const metadataByKey = new Map(chunks.map((chunk) => [chunk.engineKey, chunk.metadata] as const));
      const chunkIds = new Map(chunks.map((chunk) => [chunk.engineKey, chunk.chunkId] as const));
      for (const filter of [{ group: "a" }, { n: 5 }, { n: 13 }, { group: "b", n: 20 }, { n: -1 }]) {
        for (const topK of [1, 2, 7]) {
          const input = { key: KEY, query: "index search engine storage", topK, minScore: 0, filter };
          const { results, loaded } = await service.query(input);
          const exact = loaded.engine.search(input.query, {
            topK,
            accept: (key) =>
              Object.entries(filter).every(([field, value]) => metadataByKey.get(key)?.[field] === value),
          });
          assert.deepEqual(
            results.map((result) => [result.chunk_id, result.score]),
            exact.map((hit) => [chunkIds.get(hit.key), Math.round(hit.score * 1e6) / 1e6]),
            `filter ${JSON.stringify(filter)}, top ${topK}`,
          );
        }
      }

      // Another process on the same store loads the segments and tombstones: the same answers.
      const expected = await answers(service, KEY);
      await service.close();
      const restarted = new RagService(store);
      assert.deepEqual(await answers(restarted, KEY), expected);
      await restarted.close();
      await store.close();
    });
  }
});

describe("background merges", () => {
  it("one that lost its index to a replace is dropped and logged; close() waits for a running one", async () => {
    const store = openSqlite();
    const logged: string[] = [];
    const service = new RagService(store, {
      mergePolicy: new TieredMergePolicy({ segmentsPerTier: 2, maxMergeAtOnce: 2, floorSegmentDocuments: 1 }),
      log: { warn: (_details, message) => logged.push(message) },
    });
    /** Appends one document at a time until a write has started a merge. */
    const appendUntilMerging = async (prefix: string) => {
      for (let i = 0; i < 20; i++) {
        await service.upsertDocuments(KEY, [makeDocument(`${prefix}-${i}`)]);
        // The merge is registered before the write returns; it commits only later, under the lock.
        if ((await service.indexStats(KEY)).merges.running === 1) return;
      }
      assert.fail("20 appends started no merge");
    };
    await service.build({
      key: KEY,
      documents: [makeDocument("doc-0")],
      ...CHUNKING,
      scorer: "bm25",
      mode: "create",
    });
    await appendUntilMerging("append");
    // The merge takes its snapshot in the event loop's next check phase (after the write's reply):
    // once that has passed, it runs on a copy of this index. The replace below is queued for the
    // index's writer lock before the merge can be (it waits for its worker): it then finds a new index.
    await new Promise((resolve) => setImmediate(resolve));
    const replacement = Array.from({ length: 5 }, (_, i) => makeDocument(`new-${i}`));
    await service.build({ key: KEY, documents: replacement, ...CHUNKING, scorer: "bm25", mode: "replace" });
    await service.mergesSettled();
    assert.deepEqual(logged, ["segment merge dropped: the index was replaced, reloaded or deleted"]);
    assert.equal((await service.indexStats(KEY)).merges.completed, 0);
    assert.deepEqual(await answers(service, KEY), await freshAnswers(replacement, "bm25"));

    // A merge running at close: close() resolves once it is done, without committing it.
    await appendUntilMerging("late");
    await new Promise((resolve) => setImmediate(resolve));
    const version = (await store.getMeta(KEY))!.version;
    await service.close();
    assert.equal((await store.getMeta(KEY))!.version, version);
    const reopened = new RagService(store);
    assert.equal((await reopened.indexStats(KEY)).meta.version, version);
    await reopened.close();
    await store.close();
  });
});

describe("another process on the same store", () => {
  it("follows every write and merge by loading only what changed, and a replace with another scorer", async () => {
    const store = openSqlite();
    const writer = new RagService(store, {
      mergePolicy: new TieredMergePolicy({ segmentsPerTier: 2, maxMergeAtOnce: 3 }),
    });
    const reader = new RagService(store);
    const documents = Array.from({ length: 10 }, (_, i) => makeDocument(`doc-${i}`));
    await writer.build({ key: KEY, documents, ...CHUNKING, scorer: "bm25", mode: "create" });
    assert.deepEqual(await answers(reader, KEY), await answers(writer, KEY));
    let next = 10;
    for (let step = 0; step < 8; step++) {
      const held = (await reader.indexStats(KEY)).meta.version;
      const before = (await reader.indexStats(KEY)).loaded;
      if (step % 3 === 2) await writer.deleteDocument(KEY, `doc-${step}`);
      else await writer.upsertDocuments(KEY, [makeDocument(`doc-${next++}`), makeDocument(`doc-${step}`)]);
      await writer.mergesSettled();
      // What the store says changed since the reader's version is all the reader reads.
      const delta = (await store.loadChanges(KEY, held))!;
      assert.deepEqual(await answers(reader, KEY), await answers(writer, KEY), `step ${step}`);
      const after = (await reader.indexStats(KEY)).loaded;
      assert.equal(after.segmentsLoaded, before.segmentsLoaded + delta.addedSegments.length);
      assert.equal(after.bytesLoaded, before.bytesLoaded + delta.bytesLoaded);
    }
    assert.ok((await writer.indexStats(KEY)).merges.completed > 0, "no merge ran");
    assert.deepEqual((await reader.indexStats(KEY)).segments, (await writer.indexStats(KEY)).segments);

    // A replace with another scorer: the reader must not keep scoring with its old one.
    const replacement = Array.from({ length: 6 }, (_, i) => makeDocument(`new-${i}`));
    await writer.build({ key: KEY, documents: replacement, ...CHUNKING, scorer: "tfidf", mode: "replace" });
    await writer.mergesSettled();
    assert.deepEqual(await answers(reader, KEY), await freshAnswers(replacement, "tfidf"));
    await Promise.all([writer.close(), reader.close()]);
    await store.close();
  });
});

describe("an index written before segments existed", () => {
  it("is re-indexed once from its chunks on first use, then answers as a fresh build and takes writes", async () => {
    // A database as the previous release left it: the first migration only, an index in the old
    // format (an engine blob, now meaningless, and the chunk order), chunks in document order.
    const dir = tempDir();
    const inputs = Array.from({ length: 8 }, (_, i) => makeDocument(`old-${i}`));
    const entries = normaliseDocuments(inputs).map((document) => ({
      document,
      chunks: chunkDocument(document, CHUNKING),
    }));
    const chunkOrder = entries.flatMap(({ chunks }) => chunks.map((chunk) => chunk.chunkId));
    const db = new Database(path.join(dir, SQLITE_FILE_NAME));
    db.exec(SQLITE_MIGRATIONS[0]!);
    db.pragma("user_version = 1");
    db.prepare(
      `INSERT INTO indices (id, tenant_id, name, scorer, chunk_size, overlap, documents_count, chunks_count,
         vocabulary_size, size_bytes, version, created_at, updated_at, chunk_order, engine_index)
       VALUES (1, ?, ?, 'bm25', ?, ?, ?, ?, 0, 0, 3, '2026-01-01T00:00:00.000Z',
         '2026-01-01T00:00:00.000Z', ?, x'00')`,
    ).run(
      KEY.tenantId,
      KEY.name,
      CHUNKING.chunkSize,
      CHUNKING.overlap,
      entries.length,
      chunkOrder.length,
      JSON.stringify(chunkOrder),
    );
    db.prepare("UPDATE store_state SET last_version = 3").run();
    for (const { document, chunks } of entries) {
      db.prepare(
        `INSERT INTO documents (index_id, doc_id, chunks_count, size_bytes, title, source, metadata, text)
         VALUES (1, ?, ?, 0, ?, NULL, ?, ?)`,
      ).run(document.id, chunks.length, document.title, JSON.stringify(document.metadata), document.text);
      for (const chunk of chunks) {
        db.prepare(
          `INSERT INTO chunks (index_id, doc_id, seq, chunk_id, start_offset, end_offset, metadata, text)
           VALUES (1, ?, ?, ?, ?, ?, ?, ?)`,
        ).run(
          document.id,
          chunk.seq,
          chunk.chunkId,
          chunk.start,
          chunk.end,
          JSON.stringify(chunk.metadata),
          chunk.text,
        );
      }
    }
    db.close();

    const store = SqliteIndexStore.open(dir);
    const service = new RagService(store);
    assert.deepEqual(await answers(service, KEY), withoutPositions(await freshAnswers(inputs, "bm25")));
    const reindexed = (await store.getMeta(KEY))!;
    assert.equal(reindexed.segmentsCount, 1);
    assert.equal(reindexed.chunksCount, chunkOrder.length);
    assert.ok(reindexed.version > 3);

    // Another process finds the segment and loads it: no second re-index.
    const other = new RagService(store);
    assert.deepEqual(await answers(other, KEY), await answers(service, KEY));
    assert.equal((await other.indexStats(KEY)).loaded.segmentsLoaded, 1);
    assert.equal((await store.getMeta(KEY))!.version, reindexed.version);

    // And it takes ordinary writes.
    const added = makeDocument("new-0");
    await service.upsertDocuments(KEY, [added]);
    assert.equal((await store.getMeta(KEY))!.segmentsCount, 2);
    assert.deepEqual(
      withoutPositions(await answers(other, KEY)),
      withoutPositions(await freshAnswers([...inputs, added], "bm25")),
    );
    await Promise.all([service.close(), other.close()]);
    await store.close();
  });
});
