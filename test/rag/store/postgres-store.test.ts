/**
 * The PostgreSQL store: the shared store contract (each test on a fresh database), plus what only a
 * shared store has: migrations under concurrent start-up, LISTEN/NOTIFY, writers in several
 * processes, snapshots under concurrent writes.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import pg from "pg";

import { DomainError } from "../../../src/core/errors.js";
import { StaleVersionError } from "../../../src/rag/store/common.js";
import { CHANGE_CHANNEL, PG_MIGRATIONS, PostgresIndexStore } from "../../../src/rag/store/postgres-store.js";
import type {
  ChangeFeed,
  IndexChange,
  IndexKey,
  IndexMeta,
  IndexWrite,
} from "../../../src/rag/store/types.js";
import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../../helpers/pg.js";
import {
  IndexModel,
  SETTINGS,
  entry,
  fakeSegmentBytes,
  makeDocument,
  makeEntries,
  makeWrite,
} from "../../helpers/store-fixtures.js";
import { storeContract } from "./store-contract.js";
import { toApiError } from "../../../src/core/http.js";

const unavailable = await postgresUnavailable();
const KEY: IndexKey = { tenantId: "default", name: "shared" };

/**
 * An append of one document computed from the stored state alone (engine counters of `meta`), as a
 * replica that holds `meta.version` would prepare it: a new segment with one key, no tombstones.
 */
function appendOne(meta: IndexMeta, id: string): IndexWrite {
  const [document] = [entry(makeDocument(id, `Document ${id} about locks.`))];
  const key = meta.engine.nextKey;
  const segmentId = meta.engine.nextSegmentId;
  return {
    key: { tenantId: meta.tenantId, name: meta.name },
    mode: "update",
    settings: SETTINGS,
    upsert: [{ document: document!.document, chunks: [{ ...document!.chunks[0]!, engineKey: key }] }],
    deleteDocumentIds: [],
    segment: { id: segmentId, documentCount: 1, bytes: fakeSegmentBytes(segmentId, [key]) },
    tombstones: [],
    engine: { nextKey: key + 1, nextSegmentId: segmentId + 1, totalLength: meta.engine.totalLength + 1 },
    vocabularySize: 42,
    expectedVersion: meta.version,
  };
}

/** Polls `condition`; the timeout only turns a hang into a message, it is no timing assertion. */
async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

if (unavailable !== null) {
  describe("IndexStore contract: postgres", { skip: unavailable }, () => {
    it("needs PostgreSQL", () => undefined);
  });
} else {
  storeContract("postgres", async () => {
    const db = await createTestDatabase();
    return {
      open: () => PostgresIndexStore.open(db.url),
      cleanup: () => db.drop(),
    };
  });

  describe("PostgresIndexStore", () => {
    const databases: TestDatabase[] = [];
    const stores: PostgresIndexStore[] = [];
    const fresh = async () => {
      const db = await createTestDatabase();
      databases.push(db);
      return db;
    };
    const open = async (url: string, options = {}) => {
      const store = await PostgresIndexStore.open(url, options);
      stores.push(store);
      return store;
    };
    after(async () => {
      for (const store of stores) await store.close();
      for (const db of databases) await db.drop();
    });

    it("creates its schema once, even when replicas start together, and refuses a newer one", async () => {
      const db = await fresh();
      const opened = await Promise.all(Array.from({ length: 4 }, () => open(db.url)));
      assert.ok(opened.every((s) => s.kind === "postgres"));
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        const migrations = await client.query("SELECT version, name FROM lectern_schema_migrations");
        assert.deepEqual(
          migrations.rows,
          PG_MIGRATIONS.map((m, i) => ({ version: i + 1, name: m.name })),
        );
        const tables = await client.query<{ table_name: string }>(
          `SELECT table_name FROM information_schema.columns
           WHERE column_name = 'tenant_id' AND table_schema = current_schema() ORDER BY table_name`,
        );
        assert.deepEqual(
          tables.rows.map((r) => r.table_name),
          [
            "lectern_chunks",
            "lectern_documents",
            "lectern_indices",
            "lectern_openai_objects",
            "lectern_segment_vectors",
            "lectern_segments",
            "lectern_tombstones",
          ],
        );
        await opened[0]!.write(makeWrite(KEY, "create", makeEntries(2)));
        // Opening again applies nothing and keeps the data.
        const again = await open(db.url);
        assert.equal((await again.listIndices(null)).length, 1);

        await client.query("INSERT INTO lectern_schema_migrations (version, name) VALUES ($1, 'future')", [
          PG_MIGRATIONS.length + 1,
        ]);
        await assert.rejects(PostgresIndexStore.open(db.url), /newer than this program/);
      } finally {
        await client.end();
      }
    });

    it("notifies every subscriber of committed writes and deletes, never of failed ones", async () => {
      const db = await fresh();
      const writer = await open(db.url);
      const reader = await open(db.url);
      const changes: IndexChange[] = [];
      const feed = reader.subscribe((change) => changes.push(change));
      await until(() => feed.live, "the LISTEN connection");
      assert.equal(feed.epoch, 1);

      const v1 = (await writer.write(makeWrite(KEY, "create", makeEntries(2)))).version;
      await assert.rejects(writer.write(makeWrite(KEY, "create", makeEntries(1))), DomainError);
      await assert.rejects(
        writer.write(makeWrite(KEY, "replace", makeEntries(1), { expectedVersion: v1 + 1000 })),
        StaleVersionError,
      );
      const v2 = (await writer.write(makeWrite(KEY, "replace", makeEntries(3)))).version;
      assert.equal(await writer.deleteIndex(KEY), true);
      assert.equal(await writer.deleteIndex(KEY), false);
      await until(() => changes.length >= 3, "three notifications");
      // Notifications arrive in commit order: once a later write's has come, no earlier one is still due.
      const sentinel: IndexKey = { tenantId: "default", name: "sentinel" };
      await writer.write(makeWrite(sentinel, "create", makeEntries(1)));
      await until(
        () => changes.some((change) => change.name === sentinel.name),
        "the sentinel's notification",
      );
      assert.deepEqual(
        changes.filter((change) => change.name === KEY.name),
        [
          { tenantId: "default", name: "shared", version: v1 },
          { tenantId: "default", name: "shared", version: v2 },
          { tenantId: "default", name: "shared", version: null },
        ],
      );
      feed.close();
    });

    it("reconnects its LISTEN connection after it is killed, with a new epoch", async () => {
      const db = await fresh();
      const errors: string[] = [];
      const reader = await open(db.url, {
        applicationName: "lectern-listen-test",
        onError: (e: Error) => errors.push(e.message),
      });
      const writer = await open(db.url);
      const changes: IndexChange[] = [];
      const feed: ChangeFeed = reader.subscribe((change) => changes.push(change));
      await until(() => feed.live, "the LISTEN connection");
      const admin = new pg.Client({ connectionString: db.url });
      await admin.connect();
      try {
        const killed = await admin.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE application_name = 'lectern-listen-test' AND datname = current_database()
             AND query ILIKE $1`,
          [`%LISTEN ${CHANGE_CHANNEL}%`],
        );
        assert.ok((killed.rowCount ?? 0) >= 1, "found the LISTEN backend");
      } finally {
        await admin.end();
      }
      await until(() => !feed.live || feed.epoch > 1, "the feed to notice");
      await until(() => feed.live && feed.epoch === 2, "the feed to reconnect");
      assert.ok(errors.length >= 1);
      const meta = await writer.write(makeWrite(KEY, "create", makeEntries(1)));
      await until(() => changes.some((c) => c.version === meta.version), "a notification after reconnecting");
    });

    it("rejects a stale expectedVersion from another process's writer; withWriteLock makes them queue", async () => {
      const db = await fresh();
      const a = await open(db.url);
      const b = await open(db.url);
      const base = await a.write(makeWrite(KEY, "create", makeEntries(1, { prefix: "base-" })));

      // Both read version `base`, both write: exactly one wins, the other is told its read is stale.
      const attempt = async (store: PostgresIndexStore, id: string) => store.write(appendOne(base, id));
      const outcomes = await Promise.allSettled([attempt(a, "a-0"), attempt(b, "b-0")]);
      assert.equal(outcomes.filter((o) => o.status === "fulfilled").length, 1);
      const rejected = outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult;
      assert.ok(rejected.reason instanceof StaleVersionError);
      assert.equal(toApiError(rejected.reason).statusCode, 409);

      // Read-modify-write under withWriteLock from two stores at once: nothing is lost, no conflict.
      const append = (store: PostgresIndexStore, id: string) =>
        store.withWriteLock(KEY, async () => store.write(appendOne((await store.getMeta(KEY))!, id)));
      const ids = Array.from({ length: 16 }, (_, i) => `locked-${i}`);
      await Promise.all(ids.map((id, i) => append(i % 2 === 0 ? a : b, id)));
      for (const id of ids) assert.ok(await a.hasDocument(KEY, id), id);
      const stored = (await a.loadIndex(KEY))!;
      assert.equal(stored.meta.documentsCount, 2 + ids.length);
      assert.equal(stored.segments.length, 2 + ids.length);
      assert.deepEqual(
        stored.segments.map((segment) => segment.id),
        Array.from({ length: 2 + ids.length }, (_, i) => i),
      );
    });

    it("tells replicas which version changed; loadChanges gives them only the new segment and tombstones", async () => {
      const db = await fresh();
      const writer = await open(db.url);
      const replica = await open(db.url);
      const changes: IndexChange[] = [];
      const feed = replica.subscribe((change) => changes.push(change));
      await until(() => feed.live, "the LISTEN connection");
      const model = new IndexModel();
      const commit = async <T extends { apply(): void }>(prepared: T, run: (p: T) => Promise<IndexMeta>) => {
        const meta = await run(prepared);
        prepared.apply();
        await until(
          () => changes.some((c) => c.version === meta.version),
          `the notification of ${meta.version}`,
        );
        return meta;
      };
      const v1 = await commit(model.prepare(KEY, "create", makeEntries(20, { prefix: "a-" })), (p) =>
        writer.write(p.change),
      );
      // The replica loads everything once, then only deltas.
      const loaded = (await replica.loadIndex(KEY))!;
      assert.equal(loaded.meta.version, v1.version);

      const append = model.prepare(KEY, "update", makeEntries(2, { prefix: "b-" }), {
        deleteDocumentIds: ["a-3"],
      });
      const v2 = await commit(append, (p) => writer.write(p.change));
      const delta = (await replica.loadChanges(KEY, v1.version))!;
      assert.equal(delta.meta.version, v2.version);
      assert.deepEqual(
        delta.addedSegments.map((segment) => segment.id),
        [append.change.segment!.id],
      );
      assert.equal(delta.bytesLoaded, append.change.segment!.bytes.byteLength);
      assert.deepEqual(delta.tombstones, append.change.tombstones);
      assert.deepEqual(delta.liveSegmentIds, [0, 1]);

      const merged = model.merge(KEY, [0, 1], v2.version);
      const v3 = await commit(merged, (p) => writer.commitMerge(p.change));
      const afterMerge = (await replica.loadChanges(KEY, v2.version))!;
      assert.equal(afterMerge.meta.version, v3.version);
      assert.deepEqual(afterMerge.liveSegmentIds, [merged.change.segment.id]);
      assert.equal(afterMerge.addedSegments.length, 1);
      assert.equal(afterMerge.bytesLoaded, merged.change.segment.bytes.byteLength);
      feed.close();
    });

    it("brings an old-format database (one engine blob, a chunk order) to segments without losing a chunk", async () => {
      const db = await fresh();
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      const entries = makeEntries(3);
      const chunks = entries.flatMap((e) => e.chunks);
      const chunkOrder = chunks.map((c) => c.chunkId).reverse();
      try {
        // The schema as the previous release left it: the first migration only, an index in the old format.
        await client.query(
          "CREATE TABLE lectern_schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
        );
        await client.query(PG_MIGRATIONS[0]!.sql);
        await client.query("INSERT INTO lectern_schema_migrations (version, name) VALUES (1, $1)", [
          PG_MIGRATIONS[0]!.name,
        ]);
        await client.query("SELECT setval('lectern_version_seq', 7)");
        const { rows } = await client.query<{ id: string }>(
          `INSERT INTO lectern_indices (tenant_id, name, scorer, chunk_size, overlap, documents_count, chunks_count,
             vocabulary_size, size_bytes, version, created_at, updated_at, chunk_order, engine_index)
           VALUES ('t', 'old', 'bm25', 200, 20, 3, $1, 50, 123456, 7, now(), now(), $2, '\\x0102') RETURNING id`,
          [chunks.length, JSON.stringify(chunkOrder)],
        );
        const id = rows[0]!.id;
        for (const { document, chunks: documentChunks } of entries) {
          await client.query(
            `INSERT INTO lectern_documents (tenant_id, index_id, doc_id, chunks_count, size_bytes, title, source, metadata, text)
             VALUES ('t', $1, $2, $3, 100, NULL, NULL, '{}', $4)`,
            [id, document.id, documentChunks.length, document.text],
          );
          for (const chunk of documentChunks) {
            await client.query(
              `INSERT INTO lectern_chunks (tenant_id, index_id, doc_id, seq, chunk_id, start_offset, end_offset, metadata, text)
               VALUES ('t', $1, $2, $3, $4, $5, $6, $7, $8)`,
              [
                id,
                document.id,
                chunk.seq,
                chunk.chunkId,
                chunk.start,
                chunk.end,
                JSON.stringify(chunk.metadata),
                chunk.text,
              ],
            );
          }
        }
      } finally {
        await client.end();
      }
      const store = await open(db.url);
      const key = { tenantId: "t", name: "old" };
      const stored = (await store.loadIndex(key))!;
      assert.deepEqual(stored.segments, []);
      assert.equal(stored.meta.chunksCount, chunks.length);
      assert.equal(stored.meta.version, 7);
      assert.deepEqual(stored.meta.engine, { nextKey: chunks.length, nextSegmentId: 0, totalLength: 0 });
      assert.equal(stored.meta.sizeBytes, 300);
      const hits = await store.getChunks(
        key,
        chunkOrder.map((_, k) => k),
      );
      assert.deepEqual(
        hits.map((h) => h.chunkId),
        chunkOrder,
      );
      const reindexed = await store.write({
        key,
        mode: "update",
        settings: SETTINGS,
        upsert: [],
        deleteDocumentIds: [],
        segment: { id: 0, documentCount: chunks.length, bytes: new Uint8Array([1, 2, 3]) },
        tombstones: [],
        engine: { nextKey: chunks.length, nextSegmentId: 1, totalLength: 99 },
        vocabularySize: 50,
        expectedVersion: 7,
      });
      assert.equal(reindexed.segmentsCount, 1);
      assert.equal(reindexed.sizeBytes, 303);
    });

    it("never mixes two versions in a loadIndex read during concurrent writes and merges", async () => {
      const db = await fresh();
      const writer = await open(db.url);
      const reader = await open(db.url);
      const model = new IndexModel();
      const first = model.prepare(KEY, "create", makeEntries(30, { seed: 0 }));
      await writer.write(first.change);
      first.apply();
      let writing = true;
      const writes = (async () => {
        for (let round = 1; round <= 15; round++) {
          const version = (await writer.getMeta(KEY))!.version;
          const prepared =
            round % 4 === 0
              ? model.merge(KEY, [...model.segments.keys()], version)
              : model.prepare(KEY, "update", makeEntries(2, { prefix: `r${round}-`, seed: round }), {
                  deleteDocumentIds: [`doc-${round}`],
                });
          await ("removedSegmentIds" in prepared.change
            ? writer.commitMerge(prepared.change)
            : writer.write(prepared.change));
          prepared.apply();
        }
        writing = false;
      })();
      let reads = 0;
      while (writing) {
        const stored = (await reader.loadIndex(KEY))!;
        // The fake segment bytes name their keys: segments, tombstones and counters must agree.
        let live = 0;
        for (const segment of stored.segments) {
          const { keys } = JSON.parse(Buffer.from(segment.bytes).toString()) as { keys: number[] };
          assert.equal(keys.length, segment.documentCount);
          live += segment.documentCount - segment.deleted.length;
        }
        assert.equal(live, stored.meta.chunksCount);
        assert.equal(stored.segments.length, stored.meta.segmentsCount);
        reads++;
      }
      await writes;
      assert.ok(reads > 0);
    });

    it("answers a 400 for text PostgreSQL cannot store, and keeps the index", async () => {
      const db = await fresh();
      const store = await open(db.url);
      await store.write(makeWrite(KEY, "create", makeEntries(2)));
      const before = await store.getMeta(KEY);
      await assert.rejects(
        store.write(makeWrite(KEY, "replace", [entry(makeDocument("nul", "bad \u0000 byte"))])),
        (e: unknown) => toApiError(e).statusCode === 400 && /NUL/.test((e as Error).message),
      );
      assert.deepEqual(await store.getMeta(KEY), before);
    });
  });
}
