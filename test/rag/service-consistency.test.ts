/**
 * RagService with a shared store, without PostgreSQL: a SQLite store wrapped so that another writer
 * (another RagService, as another replica would be) gets in at chosen moments, and with a change feed
 * the test drives by hand.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";

import { MAX_WRITE_ATTEMPTS, RagService } from "../../src/rag/service.js";
import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import type {
  ChangeFeed,
  IndexChange,
  IndexKey,
  IndexStore,
  IndexWrite,
  MergeWrite,
} from "../../src/rag/store/types.js";
import { toApiError } from "../../src/core/http.js";

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});
function openSqlite(): SqliteIndexStore {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-consistency-"));
  dirs.push(dir);
  return SqliteIndexStore.open(dir);
}

const KEY: IndexKey = { tenantId: "default", name: "shared" };
const doc = (id: string) => ({ id, text: `Document ${id} is about the word token${id.replace(/\W/g, "")}.` });

/**
 * Delegates to `inner`; runs `beforeWrite` first; counts getMeta, loadIndex and loadChanges calls;
 * optional hand-driven feed.
 */
class WrappedStore implements IndexStore {
  readonly kind = "sqlite" as const;
  getMetaCalls = 0;
  loadIndexCalls = 0;
  loadChangesCalls = 0;
  beforeWrite: (() => Promise<void>) | null = null;
  feedState = { live: false, epoch: 0 };
  listener: ((change: IndexChange) => void) | null = null;
  subscribe?: (listener: (change: IndexChange) => void) => ChangeFeed;

  constructor(
    private readonly inner: IndexStore,
    withFeed: boolean,
  ) {
    if (withFeed) {
      this.subscribe = (listener) => {
        this.listener = listener;
        const state = this.feedState;
        return {
          get live() {
            return state.live;
          },
          get epoch() {
            return state.epoch;
          },
          close: () => (this.listener = null),
        };
      };
    }
  }
  get objects() {
    return this.inner.objects;
  }
  listIndices(tenantId: string | null) {
    return this.inner.listIndices(tenantId);
  }
  getMeta(key: IndexKey) {
    this.getMetaCalls++;
    return this.inner.getMeta(key);
  }
  loadIndex(key: IndexKey) {
    this.loadIndexCalls++;
    return this.inner.loadIndex(key);
  }
  loadChanges(key: IndexKey, sinceVersion: number) {
    this.loadChangesCalls++;
    return this.inner.loadChanges(key, sinceVersion);
  }
  getChunks(key: IndexKey, engineKeys: readonly number[]) {
    return this.inner.getChunks(key, engineKeys);
  }
  getDocumentChunks(key: IndexKey, documentIds: readonly string[]) {
    return this.inner.getDocumentChunks(key, documentIds);
  }
  listDocuments(key: IndexKey) {
    return this.inner.listDocuments(key);
  }
  hasDocument(key: IndexKey, documentId: string) {
    return this.inner.hasDocument(key, documentId);
  }
  async write(change: IndexWrite) {
    if (this.beforeWrite) await this.beforeWrite();
    return this.inner.write(change);
  }
  commitMerge(change: MergeWrite) {
    return this.inner.commitMerge(change);
  }
  deleteIndex(key: IndexKey) {
    return this.inner.deleteIndex(key);
  }
  sizeBytes() {
    return this.inner.sizeBytes();
  }
  async close() {}
}

async function documentIds(store: IndexStore): Promise<string[]> {
  return (await store.listDocuments(KEY)).map((document) => document.id).sort();
}

describe("RagService writes against another writer", () => {
  it("retries a write whose base version went stale, and loses nothing", async () => {
    const sqlite = openSqlite();
    const wrapped = new WrappedStore(sqlite, false);
    const service = new RagService(wrapped);
    const other = new RagService(sqlite);
    await service.build({
      key: KEY,
      documents: [doc("seed")],
      chunkSize: 1000,
      overlap: 0,
      scorer: "bm25",
      mode: "create",
    });
    // The other replica appends right before each of our next three writes reaches the store.
    let injected = 0;
    wrapped.beforeWrite = async () => {
      if (injected >= 3) return;
      injected++;
      await other.upsertDocuments(KEY, [doc(`other-${injected}`)]);
    };
    const written = await service.upsertDocuments(KEY, [doc("mine")]);
    assert.equal(injected, 3);
    assert.equal(written.meta.documentsCount, 5);
    assert.deepEqual(await documentIds(sqlite), ["mine", "other-1", "other-2", "other-3", "seed"]);
    assert.equal((await service.stats()).write_retries, 3);
    // What it serves afterwards is the version it wrote, with every document.
    const found = await service.query({ key: KEY, query: "tokenother2", topK: 5, minScore: 0 });
    assert.equal(found.results[0]?.document_id, "other-2");
    await sqlite.close();
  });

  it(`gives up with a 409 and Retry-After after ${MAX_WRITE_ATTEMPTS} stale attempts, changing nothing of its own`, async () => {
    const sqlite = openSqlite();
    const wrapped = new WrappedStore(sqlite, false);
    const service = new RagService(wrapped);
    const other = new RagService(sqlite);
    await other.build({
      key: KEY,
      documents: [doc("seed")],
      chunkSize: 1000,
      overlap: 0,
      scorer: "tfidf",
      mode: "create",
    });
    let injected = 0;
    wrapped.beforeWrite = async () => {
      injected++;
      await other.upsertDocuments(KEY, [doc(`other-${injected}`)]);
    };
    await assert.rejects(
      service.upsertDocuments(KEY, [doc("mine")]),
      (e: unknown) =>
        toApiError(e).statusCode === 409 &&
        toApiError(e).headers["retry-after"] === "1" &&
        /kept being changed/.test((e as Error).message),
    );
    assert.equal(injected, MAX_WRITE_ATTEMPTS);
    assert.ok(!(await documentIds(sqlite)).includes("mine"));
    // "already exists" is not a stale version: no retry.
    wrapped.beforeWrite = null;
    await assert.rejects(
      service.build({
        key: KEY,
        documents: [doc("x")],
        chunkSize: 1000,
        overlap: 0,
        scorer: "tfidf",
        mode: "create",
      }),
      (e: unknown) => toApiError(e).statusCode === 409 && /already exists/.test((e as Error).message),
    );
    await sqlite.close();
  });
});

describe("RagService cache with a change feed", () => {
  const query = (service: RagService, text = "tokenseed") =>
    service.query({ key: KEY, query: text, topK: 5, minScore: 0 });

  it("serves from cache without asking the store while the feed is live, and drops what it is told", async () => {
    const sqlite = openSqlite();
    const wrapped = new WrappedStore(sqlite, true);
    const service = new RagService(wrapped);
    const other = new RagService(sqlite);
    await other.build({
      key: KEY,
      documents: [doc("seed")],
      chunkSize: 1000,
      overlap: 0,
      scorer: "bm25",
      mode: "create",
    });

    // Feed down: every query checks the version.
    await query(service);
    await query(service);
    assert.equal(wrapped.getMetaCalls, 2);

    // Feed live: one check to validate in this epoch, then none.
    wrapped.feedState.live = true;
    wrapped.feedState.epoch = 1;
    await query(service);
    assert.equal(wrapped.getMetaCalls, 3);
    for (let i = 0; i < 5; i++) await query(service);
    assert.equal(wrapped.getMetaCalls, 3);
    assert.equal((await service.stats()).cache?.validation, "change_feed");

    // Another replica writes; until it is announced the cache is served (the feed's lag), then it
    // catches up with what changed (not a whole reload).
    assert.equal(wrapped.loadIndexCalls, 1);
    const newer = await other.upsertDocuments(KEY, [doc("late")]);
    assert.equal((await query(service, "tokenlate")).results.length, 0);
    wrapped.listener!({ tenantId: KEY.tenantId, name: KEY.name, version: newer.meta.version });
    assert.equal((await query(service, "tokenlate")).results[0]?.document_id, "late");
    assert.equal(wrapped.getMetaCalls, 4);
    assert.equal(wrapped.loadIndexCalls, 1);
    assert.equal(wrapped.loadChangesCalls, 1);
    await query(service);
    assert.equal(wrapped.getMetaCalls, 4);

    // An announcement of a version it already has (its own write, or an old one) keeps the cache.
    wrapped.listener!({ tenantId: KEY.tenantId, name: KEY.name, version: newer.meta.version });
    await query(service);
    assert.equal(wrapped.getMetaCalls, 4);

    // After a gap in the feed (new epoch) it checks once more.
    wrapped.feedState.epoch = 2;
    await query(service);
    await query(service);
    assert.equal(wrapped.getMetaCalls, 5);

    // A delete announced: the next query asks the store and gets a 404.
    await other.deleteIndex(KEY);
    wrapped.listener!({ tenantId: KEY.tenantId, name: KEY.name, version: null });
    await assert.rejects(query(service), (e: unknown) => toApiError(e).statusCode === 404);
    await service.close();
    assert.equal(wrapped.listener, null);
    await sqlite.close();
  });

  it("does not trust a snapshot whose load raced with an announcement", async () => {
    const sqlite = openSqlite();
    const wrapped = new WrappedStore(sqlite, true);
    wrapped.feedState.live = true;
    wrapped.feedState.epoch = 1;
    const service = new RagService(wrapped);
    const other = new RagService(sqlite);
    const first = await other.build({
      key: KEY,
      documents: [doc("seed")],
      chunkSize: 1000,
      overlap: 0,
      scorer: "bm25",
      mode: "create",
    });
    // The announcement of a newer version arrives while this replica is reading the old one.
    const load = wrapped.loadIndex.bind(wrapped);
    let raced = false;
    wrapped.loadIndex = async (key: IndexKey) => {
      const snapshot = await load(key);
      if (!raced) {
        raced = true;
        const newer = await other.upsertDocuments(KEY, [doc("late")]);
        wrapped.listener!({ tenantId: KEY.tenantId, name: KEY.name, version: newer.meta.version });
      }
      return snapshot;
    };
    const stale = await query(service, "tokenlate");
    assert.equal(stale.loaded.meta.version, first.meta.version);
    const fresh = await query(service, "tokenlate");
    assert.equal(fresh.results[0]?.document_id, "late");
    await sqlite.close();
  });
});
