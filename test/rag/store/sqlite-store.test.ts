import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";

import Database from "better-sqlite3";

import {
  SQLITE_MIGRATIONS,
  SQLITE_FILE_NAME,
  SqliteIndexStore,
} from "../../../src/rag/store/sqlite-store.js";
import { IndexModel, makeEntries, makeWrite } from "../../helpers/store-fixtures.js";
import { serialiseDocument, StaleVersionError } from "../../../src/rag/store/common.js";
import { toApiError } from "../../../src/core/http.js";
import { HEALTH_BOUND_MS } from "../../helpers/liveness.js";
import { storeContract } from "./store-contract.js";

const tempDirs: string[] = [];
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-sqlite-"));
  tempDirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

storeContract("sqlite", async () => {
  const dir = tempDir();
  return {
    open: async () => SqliteIndexStore.open(dir),
    cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }),
  };
});

describe("SqliteIndexStore", () => {
  it("creates the data dir and lectern.db with WAL, the schema version and the pragmas", async () => {
    const dir = path.join(tempDir(), "nested", "data");
    const store = SqliteIndexStore.open(dir);
    assert.equal(store.kind, "sqlite");
    assert.ok(fs.existsSync(path.join(dir, SQLITE_FILE_NAME)));
    assert.equal(store.integrityCheck(), "ok");
    await store.close();

    const db = new Database(path.join(dir, SQLITE_FILE_NAME), { readonly: true });
    assert.equal(db.pragma("journal_mode", { simple: true }), "wal");
    assert.equal(db.pragma("user_version", { simple: true }), SQLITE_MIGRATIONS.length);
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
      .pluck()
      .all();
    assert.deepEqual(tables, [
      "chunks",
      "documents",
      "indices",
      "openai_objects",
      "segment_vectors",
      "segments",
      "store_state",
      "tombstones",
    ]);
    db.close();
  });

  it("migrates once and refuses a database from a newer version", async () => {
    const dir = tempDir();
    const store = SqliteIndexStore.open(dir);
    await store.write(makeWrite({ tenantId: "t", name: "n" }, "create", makeEntries(2)));
    await store.close();
    // Reopening applies nothing again and keeps the data.
    const again = SqliteIndexStore.open(dir);
    assert.equal((await again.listIndices(null)).length, 1);
    await again.close();

    const db = new Database(path.join(dir, SQLITE_FILE_NAME));
    db.pragma(`user_version = ${SQLITE_MIGRATIONS.length + 1}`);
    db.close();
    assert.throws(() => SqliteIndexStore.open(dir), /newer than this program/);
  });

  it("brings an old-format database (one engine blob, a chunk order) to segments without losing a chunk", async () => {
    const dir = tempDir();
    // A database as the previous release left it: only the first migration, an index in the old format.
    const db = new Database(path.join(dir, SQLITE_FILE_NAME));
    db.exec(SQLITE_MIGRATIONS[0]!);
    db.pragma("user_version = 1");
    const entries = makeEntries(3);
    const chunks = entries.flatMap((e) => e.chunks);
    const chunkOrder = chunks.map((c) => c.chunkId).reverse();
    db.prepare(
      `INSERT INTO indices (id, tenant_id, name, scorer, chunk_size, overlap, documents_count, chunks_count,
         vocabulary_size, size_bytes, version, created_at, updated_at, chunk_order, engine_index)
       VALUES (1, 't', 'old', 'bm25', 200, 20, 3, ?, 50, 123456, 7, '2026-01-01T00:00:00.000Z',
         '2026-01-02T00:00:00.000Z', ?, x'0102')`,
    ).run(chunks.length, JSON.stringify(chunkOrder));
    db.prepare("UPDATE store_state SET last_version = 7").run();
    for (const { document, chunks: documentChunks } of entries) {
      db.prepare(
        `INSERT INTO documents (index_id, doc_id, chunks_count, size_bytes, title, source, metadata, text)
         VALUES (1, ?, ?, 100, NULL, NULL, '{}', ?)`,
      ).run(document.id, documentChunks.length, document.text);
      for (const chunk of documentChunks) {
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
    assert.equal(store.integrityCheck(), "ok");
    const key = { tenantId: "t", name: "old" };
    const stored = await store.loadIndex(key);
    // No segment yet, chunks there: the service re-indexes it from its chunk texts.
    assert.deepEqual(stored!.segments, []);
    assert.equal(stored!.meta.chunksCount, chunks.length);
    assert.equal(stored!.meta.segmentsCount, 0);
    assert.equal(stored!.meta.version, 7);
    assert.deepEqual(stored!.meta.engine, { nextKey: chunks.length, nextSegmentId: 0, totalLength: 0 });
    // Size: the documents' bytes only (the old blob and order are gone).
    assert.equal(stored!.meta.sizeBytes, 300);
    // Engine key = the chunk's position in the old order.
    const hits = await store.getChunks(
      key,
      chunkOrder.map((_, k) => k),
    );
    assert.deepEqual(
      hits.map((h) => h.chunkId),
      chunkOrder,
    );
    const raw = new Database(path.join(dir, SQLITE_FILE_NAME), { readonly: true });
    const indexColumns = (raw.pragma("table_info(indices)") as Array<{ name: string }>).map((c) => c.name);
    raw.close();
    assert.ok(!indexColumns.includes("engine_index") && !indexColumns.includes("chunk_order"));

    // The re-index: one segment over the existing chunks, then ordinary writes.
    const reindex = await store.write({
      key,
      mode: "update",
      settings: { scorer: "bm25", chunkSize: 200, overlap: 20 },
      upsert: [],
      deleteDocumentIds: [],
      segment: { id: 0, documentCount: chunks.length, bytes: new Uint8Array([1, 2, 3]) },
      tombstones: [],
      engine: { nextKey: chunks.length, nextSegmentId: 1, totalLength: 99 },
      vocabularySize: 50,
      expectedVersion: 7,
    });
    assert.equal(reindex.segmentsCount, 1);
    assert.equal(reindex.sizeBytes, 303);
    assert.equal(store.integrityCheck(), "ok");
    await store.close();
  });

  it("runs the hot statements of writes and queries as indexed lookups, never a scan of the index", async () => {
    const store = SqliteIndexStore.open(tempDir());
    const plans = store.queryPlans();
    await store.close();
    const expectations: Record<string, RegExp> = {
      getChunks: /SEARCH c USING INDEX chunks_by_engine_key \(index_id=\? AND engine_key=\?\)/,
      insertTombstones: /SCAN t VIRTUAL TABLE/,
      updateIndex: /SEARCH indices USING INTEGER PRIMARY KEY/,
      deleteDocument: /SEARCH documents USING INDEX \S+ \(index_id=\? AND doc_id=\?\)/,
      deleteDocumentChunks:
        /SEARCH chunks USING COVERING INDEX chunks_by_document \(index_id=\? AND doc_id=\?\)/,
      segmentDocumentCount: /SEARCH segments USING INDEX \S+ \(index_id=\? AND segment_id=\?\)/,
      segmentDocumentTotal: /SEARCH segments USING INDEX \S+ \(index_id=\?\)/,
      tombstonesSince:
        /SEARCH tombstones USING COVERING INDEX tombstones_by_version \(index_id=\? AND created_version>\?\)/,
      segmentTombstones: /SEARCH tombstones USING PRIMARY KEY \(index_id=\? AND segment_id=\?\)/,
    };
    for (const [name, plan] of Object.entries(plans)) {
      // The only scans allowed are of the statement's own JSON argument (json_each).
      for (const step of plan) {
        if (step.startsWith("SCAN")) assert.match(step, /VIRTUAL TABLE/, `${name}: ${plan.join("; ")}`);
      }
      const expected = expectations[name];
      if (expected)
        assert.ok(
          plan.some((step) => expected.test(step)),
          `${name}: ${plan.join("; ")}`,
        );
    }
    // Plain single-row inserts have no plan steps at all.
    assert.deepEqual(plans.insertSegment, []);
    assert.deepEqual(plans.insertChunk, []);
  });

  it("writes 5,183 documents and ~10,000 chunks in one transaction, and appends to them by segments", async (t) => {
    const dir = tempDir();
    const store = SqliteIndexStore.open(dir);
    const key = { tenantId: "default", name: "big" };
    const settings = { scorer: "bm25" as const, chunkSize: 1000, overlap: 128 };
    const model = new IndexModel();
    const created = model.prepare(key, "create", makeEntries(5183, { length: 1500, settings, seed: 3 }), {
      settings,
    });
    const meta = await store.write(created.change);
    created.apply();
    assert.equal(meta.documentsCount, 5183);
    assert.ok(meta.chunksCount >= 10_000, `${meta.chunksCount} chunks`);

    const appended = model.prepare(key, "update", makeEntries(5, { prefix: "more-", settings }), {
      settings,
      deleteDocumentIds: ["doc-17"],
    });
    const after = await store.write(appended.change);
    appended.apply();
    assert.equal(after.documentsCount, 5183 + 5 - 1);
    assert.equal(after.segmentsCount, 2);
    const changes = await store.loadChanges(key, meta.version);
    assert.equal(changes!.addedSegments.length, 1);
    assert.equal(changes!.bytesLoaded, appended.change.segment!.bytes.byteLength);
    assert.equal(await store.deleteIndex(key), true);
    assert.equal(store.integrityCheck(), "ok");
    await store.close();
    t.diagnostic(`${meta.chunksCount} chunks, then an append of ${appended.change.upsert.length} documents`);
  });
});

describe("SqliteIndexStore: a large write commits in slices, the loop free between them (#35)", () => {
  const KEY = { tenantId: "default", name: "large" };
  // Above SLICED_WRITE_CHARS: 12 documents of 600,000 characters, chunks of 2,000.
  const settings = { scorer: "bm25" as const, chunkSize: 2000, overlap: 100 };
  const big = () => makeEntries(12, { prefix: "big-", length: 600_000, settings });

  it("leaves the loop free, reads see the state before until it commits, then all of it", async (t) => {
    const store = SqliteIndexStore.open(tempDir());
    const model = new IndexModel();
    const created = model.prepare(KEY, "create", makeEntries(3, { settings }));
    const first = await store.write(created.change);
    created.apply();
    const entries = big();
    const prepared = model.prepare(KEY, "update", entries, { expectedVersion: first.version });
    let slowest = 0;
    let last = performance.now();
    const ticker = setInterval(() => {
      const now = performance.now();
      slowest = Math.max(slowest, now - last);
      last = now;
    }, 10);
    let settled = false;
    const writing = store.write(prepared.change).finally(() => (settled = true));
    let meta: Awaited<typeof writing>;
    try {
      await new Promise((resolve) => setTimeout(resolve, 20));
      // The loop ran while the write went on, and a read in the meantime sees the index before it.
      assert.equal(settled, false, "the write was over before the loop could run");
      assert.equal((await store.getMeta(KEY))!.version, first.version);
    } finally {
      meta = await writing;
      clearInterval(ticker);
    }
    t.diagnostic(`slowest timer gap during the write: ${Math.round(slowest)} ms`);
    assert.ok(slowest < HEALTH_BOUND_MS, `the loop stalled ${Math.round(slowest)} ms`);
    assert.ok(meta.version > first.version);
    assert.equal(meta.documentsCount, 3 + entries.length);
    // Each document of 1.2 M characters (text and chunks) went in two parts: its row with the first.
    const stored = await store.getDocumentChunks(KEY, ["big-4"]);
    assert.deepEqual(
      stored.get("big-4")!.chunks.map((chunk) => chunk.text),
      entries[4]!.chunks.map((chunk) => chunk.text),
    );
    assert.equal(meta.chunksCount, first.chunksCount + entries.reduce((n, e) => n + e.chunks.length, 0));
    const rows = new Database(store.path, { readonly: true });
    const row = rows.prepare("SELECT chunks_count, size_bytes FROM documents WHERE doc_id = 'big-4'").get();
    rows.close();
    const { document, chunks } = entries[4]!;
    assert.deepEqual(row, {
      chunks_count: chunks.length,
      size_bytes: serialiseDocument(document, chunks).bytes,
    });
    assert.equal(store.integrityCheck(), "ok");
    await store.close();
  });

  it("fails as an inline write would: a stale version is a StaleVersionError, nothing written", async () => {
    const store = SqliteIndexStore.open(tempDir());
    const model = new IndexModel();
    const created = model.prepare(KEY, "create", makeEntries(2, { settings }));
    const first = await store.write(created.change);
    created.apply();
    const stale = model.prepare(KEY, "update", big(), { expectedVersion: first.version + 1000 }).change;
    await assert.rejects(store.write(stale), (error: unknown) => error instanceof StaleVersionError);
    const exists = makeWrite(KEY, "create", big().slice(0, 8), { settings });
    await assert.rejects(store.write(exists), (error: unknown) => toApiError(error).statusCode === 409);
    const meta = (await store.getMeta(KEY))!;
    assert.equal(meta.version, first.version);
    assert.equal(meta.documentsCount, 2);
    await store.close();
  });
});
