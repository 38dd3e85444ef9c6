/**
 * The PostgreSQL store: the shared store contract (each test on a fresh database), plus what only a
 * shared store has: migrations under concurrent start-up, LISTEN/NOTIFY, writers in several
 * processes, snapshots under concurrent writes.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import pg from "pg";

import { ApiError } from "../../../src/core/errors.js";
import { StaleVersionError } from "../../../src/rag/store/common.js";
import { CHANGE_CHANNEL, PG_MIGRATIONS, PostgresIndexStore } from "../../../src/rag/store/postgres-store.js";
import type { ChangeFeed, IndexChange, IndexKey } from "../../../src/rag/store/types.js";
import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../../helpers/pg.js";
import {
  entry,
  fakeEngineIndex,
  makeDocument,
  makeEntries,
  makeWrite,
  orderAfterUpdate,
} from "../../helpers/store-fixtures.js";
import { storeContract } from "./store-contract.js";

const unavailable = await postgresUnavailable();
const KEY: IndexKey = { tenantId: "default", name: "shared" };

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 5000) {
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
          ["lectern_chunks", "lectern_documents", "lectern_indices"],
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
      await assert.rejects(writer.write(makeWrite(KEY, "create", makeEntries(1))), ApiError);
      await assert.rejects(
        writer.write(makeWrite(KEY, "replace", makeEntries(1), { expectedVersion: v1 + 1000 })),
        StaleVersionError,
      );
      const v2 = (await writer.write(makeWrite(KEY, "replace", makeEntries(3)))).version;
      assert.equal(await writer.deleteIndex(KEY), true);
      assert.equal(await writer.deleteIndex(KEY), false);
      await until(() => changes.length >= 3, "three notifications");
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.deepEqual(changes, [
        { tenantId: "default", name: "shared", version: v1 },
        { tenantId: "default", name: "shared", version: v2 },
        { tenantId: "default", name: "shared", version: null },
      ]);
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
      const attempt = async (store: PostgresIndexStore, prefix: string) => {
        const previous = await store.loadChunks(KEY);
        const upsert = makeEntries(1, { prefix });
        return store.write(
          makeWrite(KEY, "update", upsert, {
            chunkOrder: orderAfterUpdate(previous, upsert),
            expectedVersion: base.version,
          }),
        );
      };
      const outcomes = await Promise.allSettled([attempt(a, "a-"), attempt(b, "b-")]);
      assert.equal(outcomes.filter((o) => o.status === "fulfilled").length, 1);
      const rejected = outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult;
      assert.ok(rejected.reason instanceof StaleVersionError);
      assert.equal(rejected.reason.statusCode, 409);

      // Read-modify-write under withWriteLock from two stores at once: nothing is lost, no conflict.
      const append = (store: PostgresIndexStore, id: string) =>
        store.withWriteLock(KEY, async () => {
          const meta = (await store.getMeta(KEY))!;
          const previous = await store.loadChunks(KEY);
          const upsert = [entry(makeDocument(id, `Document ${id} about locks.`))];
          return store.write(
            makeWrite(KEY, "update", upsert, {
              chunkOrder: orderAfterUpdate(previous, upsert),
              expectedVersion: meta.version,
            }),
          );
        });
      const ids = Array.from({ length: 16 }, (_, i) => `locked-${i}`);
      await Promise.all(ids.map((id, i) => append(i % 2 === 0 ? a : b, id)));
      const snapshot = (await a.loadSnapshot(KEY))!;
      for (const id of ids) assert.ok(snapshot.documents.has(id), id);
      assert.equal(snapshot.meta.documentsCount, 2 + ids.length);
    });

    it("never mixes two versions in a snapshot read during concurrent writes", async () => {
      const db = await fresh();
      const writer = await open(db.url);
      const reader = await open(db.url);
      await writer.write(makeWrite(KEY, "create", makeEntries(30, { seed: 0 })));
      let writing = true;
      const writes = (async () => {
        for (let round = 1; round <= 15; round++) {
          await writer.write(makeWrite(KEY, "replace", makeEntries(30 + round, { seed: round })));
        }
        writing = false;
      })();
      let reads = 0;
      while (writing) {
        const snapshot = (await reader.loadSnapshot(KEY))!;
        // The fake engine index encodes the chunk order it was written with.
        assert.deepEqual(
          Buffer.from(snapshot.engineIndex),
          Buffer.from(fakeEngineIndex(snapshot.chunks.map((c) => c.chunkId))),
        );
        assert.equal(snapshot.chunks.length, snapshot.meta.chunksCount);
        assert.equal(snapshot.documents.size, snapshot.meta.documentsCount);
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
        (e: unknown) => e instanceof ApiError && e.statusCode === 400 && /NUL/.test(e.message),
      );
      assert.deepEqual(await store.getMeta(KEY), before);
    });
  });
}
