/**
 * The behaviour every IndexStore must have, as a reusable suite: `storeContract("sqlite", …)`
 * registers it for SQLite, and a PostgreSQL store can register the same suite with its own harness.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";

import { ApiError } from "../../../src/core/errors.js";
import type { IndexKey, IndexStore, IndexWrite } from "../../../src/rag/store/types.js";
import {
  SETTINGS,
  entry,
  fakeEngineIndex,
  makeDocument,
  makeEntries,
  makeWrite,
  orderAfterUpdate,
} from "../../helpers/store-fixtures.js";

export interface StoreHarness {
  /** Opens the store under test; after `close()`, opening again must see the same data. */
  open(): Promise<IndexStore>;
  /** Removes everything the harness created. */
  cleanup(): Promise<void>;
}

const KEY: IndexKey = { tenantId: "default", name: "handbook" };

function isApiError(status: number, code: string) {
  return (error: unknown) => {
    assert.ok(error instanceof ApiError, `expected an ApiError, got ${String(error)}`);
    assert.equal(error.statusCode, status);
    assert.equal(error.code, code);
    return true;
  };
}

/** Everything observable about one index, for before/after comparisons. */
async function observe(store: IndexStore, key: IndexKey) {
  const snapshot = await store.loadSnapshot(key);
  if (snapshot === undefined) return undefined;
  return {
    meta: snapshot.meta,
    engineIndex: Buffer.from(snapshot.engineIndex).toString("base64"),
    chunks: snapshot.chunks,
    documents: [...snapshot.documents.entries()].sort(([a], [b]) => a.localeCompare(b)),
  };
}

export function storeContract(name: string, makeHarness: () => Promise<StoreHarness>): void {
  describe(`IndexStore contract: ${name}`, () => {
    let harness: StoreHarness;
    let store: IndexStore;
    const opened: IndexStore[] = [];

    const open = async () => {
      const s = await harness.open();
      opened.push(s);
      return s;
    };
    const reopen = async () => {
      await store.close();
      store = await open();
      return store;
    };

    beforeEach(async () => {
      harness = await makeHarness();
      store = await open();
    });
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
      await harness.cleanup();
    });

    it("creates an index and returns it whole", async () => {
      const entries = [
        entry(
          makeDocument(
            "a",
            "Alpha text. ".repeat(40),
            { lang: "en", tags: ["x"] },
            { title: "A", source: "a.txt" },
          ),
        ),
        entry(makeDocument("b", "Beta text is short.", { lang: "de" })),
      ];
      const change = makeWrite(KEY, "create", entries, { vocabularySize: 7 });
      const before = Date.now();
      const meta = await store.write(change);

      assert.equal(meta.tenantId, "default");
      assert.equal(meta.name, "handbook");
      assert.equal(meta.scorer, SETTINGS.scorer);
      assert.equal(meta.chunkSize, SETTINGS.chunkSize);
      assert.equal(meta.overlap, SETTINGS.overlap);
      assert.equal(meta.documentsCount, 2);
      assert.equal(meta.chunksCount, change.chunkOrder.length);
      assert.ok(meta.chunksCount >= 3);
      assert.equal(meta.vocabularySize, 7);
      assert.ok(meta.version > 0);
      assert.equal(meta.createdAt, meta.updatedAt);
      assert.ok(
        Date.parse(meta.createdAt) >= before - 1000 && Date.parse(meta.createdAt) <= Date.now() + 1000,
      );
      const textBytes = entries.reduce((s, e) => s + Buffer.byteLength(e.document.text), 0);
      assert.ok(meta.sizeBytes >= textBytes + change.engineIndex.byteLength);

      assert.deepEqual(await store.getMeta(KEY), meta);
      assert.deepEqual(await store.listIndices("default"), [meta]);

      const snapshot = await store.loadSnapshot(KEY);
      assert.ok(snapshot);
      assert.deepEqual(snapshot.meta, meta);
      assert.deepEqual(Buffer.from(snapshot.engineIndex), Buffer.from(change.engineIndex));
      assert.deepEqual(
        snapshot.chunks.map((c) => c.chunkId),
        change.chunkOrder,
      );
      const allChunks = new Map(entries.flatMap((e) => e.chunks).map((c) => [c.chunkId, c]));
      for (const c of snapshot.chunks) assert.deepEqual(c, allChunks.get(c.chunkId));
      assert.deepEqual(snapshot.documents.get("a"), {
        id: "a",
        title: "A",
        source: "a.txt",
        metadata: { lang: "en", tags: ["x"] },
      });
      assert.deepEqual(snapshot.documents.get("b"), {
        id: "b",
        title: null,
        source: null,
        metadata: { lang: "de" },
      });
      assert.equal(snapshot.documents.size, 2);
      assert.deepEqual(await store.loadChunks(KEY), snapshot.chunks);
    });

    it("answers undefined, [] or 404 for an unknown index", async () => {
      assert.equal(await store.getMeta(KEY), undefined);
      assert.equal(await store.loadSnapshot(KEY), undefined);
      assert.deepEqual(await store.listIndices(null), []);
      await assert.rejects(store.loadChunks(KEY), isApiError(404, "not_found"));
      assert.equal(await store.deleteIndex(KEY), false);
    });

    it("refuses to create an existing index with a 409 and keeps it", async () => {
      await store.write(makeWrite(KEY, "create", makeEntries(3)));
      const before = await observe(store, KEY);
      await assert.rejects(
        store.write(makeWrite(KEY, "create", makeEntries(1, { prefix: "other-" }))),
        (e: unknown) => isApiError(409, "conflict")(e) && /already exists/.test((e as Error).message),
      );
      assert.deepEqual(await observe(store, KEY), before);
    });

    it("refuses to update a missing index with a 404 and creates nothing", async () => {
      await assert.rejects(
        store.write(makeWrite(KEY, "update", makeEntries(2))),
        isApiError(404, "not_found"),
      );
      assert.equal(await store.getMeta(KEY), undefined);
      assert.deepEqual(await store.listIndices(null), []);
    });

    it("replace creates a missing index and overwrites an existing one", async () => {
      const first = await store.write(makeWrite(KEY, "replace", makeEntries(4)));
      assert.equal(first.documentsCount, 4);
      const replacement = makeEntries(2, { prefix: "new-", seed: 5 });
      const settings = { scorer: "tfidf" as const, chunkSize: 300, overlap: 0 };
      const second = await store.write(
        makeWrite(KEY, "replace", replacement, { settings, vocabularySize: 3 }),
      );
      assert.equal(second.documentsCount, 2);
      assert.equal(second.scorer, "tfidf");
      assert.equal(second.chunkSize, 300);
      assert.equal(second.vocabularySize, 3);
      assert.ok(second.version > first.version);
      assert.equal(second.createdAt, first.createdAt);
      assert.ok(second.updatedAt >= first.updatedAt);
      const snapshot = await store.loadSnapshot(KEY);
      assert.deepEqual([...snapshot!.documents.keys()].sort(), ["new-0", "new-1"]);
      assert.ok(snapshot!.chunks.every((c) => c.documentId.startsWith("new-")));
    });

    it("update adds documents, replaces upserted ids whole and deletes", async () => {
      const initial = makeEntries(5, { length: 900 });
      await store.write(makeWrite(KEY, "create", initial));
      const previous = await store.loadChunks(KEY);
      const oldDoc1Chunks = previous.filter((c) => c.documentId === "doc-1").length;
      assert.ok(oldDoc1Chunks > 1);

      // doc-1 comes back much shorter: its old chunks must all go.
      const upsert = [
        entry(makeDocument("doc-1", "Now a single short chunk.")),
        ...makeEntries(2, { prefix: "add-" }),
      ];
      const chunkOrder = orderAfterUpdate(previous, upsert, ["doc-3"]);
      const meta = await store.write(
        makeWrite(KEY, "update", upsert, { deleteDocumentIds: ["doc-3"], chunkOrder }),
      );

      assert.equal(meta.documentsCount, 5 - 1 + 2);
      assert.equal(meta.chunksCount, chunkOrder.length);
      const snapshot = await store.loadSnapshot(KEY);
      assert.deepEqual(
        snapshot!.chunks.map((c) => c.chunkId),
        chunkOrder,
      );
      assert.deepEqual([...snapshot!.documents.keys()].sort(), [
        "add-0",
        "add-1",
        "doc-0",
        "doc-1",
        "doc-2",
        "doc-4",
      ]);
      const doc1 = snapshot!.chunks.filter((c) => c.documentId === "doc-1");
      assert.deepEqual(
        doc1.map((c) => c.text),
        ["Now a single short chunk."],
      );
      assert.equal(new Set(snapshot!.chunks.map((c) => c.chunkId)).size, snapshot!.chunks.length);
    });

    it("upserting the same document again never duplicates it", async () => {
      await store.write(makeWrite(KEY, "create", makeEntries(2)));
      for (let round = 0; round < 3; round++) {
        const previous = await store.loadChunks(KEY);
        const upsert = makeEntries(2, { seed: 10 + round });
        const meta = await store.write(
          makeWrite(KEY, "update", upsert, { chunkOrder: orderAfterUpdate(previous, upsert) }),
        );
        assert.equal(meta.documentsCount, 2);
        assert.equal(
          meta.chunksCount,
          upsert.reduce((s, e) => s + e.chunks.length, 0),
        );
      }
      const chunks = await store.loadChunks(KEY);
      assert.equal(new Set(chunks.map((c) => c.chunkId)).size, chunks.length);
    });

    it("deleting an unknown document id in an update is a no-op", async () => {
      await store.write(makeWrite(KEY, "create", makeEntries(2)));
      const previous = await store.loadChunks(KEY);
      const meta = await store.write(
        makeWrite(KEY, "update", [], {
          deleteDocumentIds: ["nope"],
          chunkOrder: previous.map((c) => c.chunkId),
        }),
      );
      assert.equal(meta.documentsCount, 2);
    });

    it("keeps tenants apart", async () => {
      const a: IndexKey = { tenantId: "acme", name: "docs" };
      const b: IndexKey = { tenantId: "globex", name: "docs" };
      await store.write(makeWrite(a, "create", makeEntries(2, { prefix: "acme-" })));
      await store.write(makeWrite(b, "create", makeEntries(3, { prefix: "globex-" })));
      await store.write(makeWrite({ tenantId: "acme", name: "alpha" }, "create", makeEntries(1)));

      assert.deepEqual(
        (await store.listIndices("acme")).map((m) => m.name),
        ["alpha", "docs"],
      );
      assert.deepEqual(
        (await store.listIndices("globex")).map((m) => m.name),
        ["docs"],
      );
      assert.deepEqual(await store.listIndices("initech"), []);
      assert.deepEqual(
        (await store.listIndices(null)).map((m) => `${m.tenantId}/${m.name}`),
        ["acme/alpha", "acme/docs", "globex/docs"],
      );
      assert.equal((await store.getMeta(a))!.documentsCount, 2);
      assert.equal((await store.getMeta(b))!.documentsCount, 3);
      assert.ok((await store.loadChunks(b)).every((c) => c.documentId.startsWith("globex-")));

      assert.equal(await store.deleteIndex(a), true);
      assert.equal(await store.getMeta(a), undefined);
      assert.equal((await store.getMeta(b))!.documentsCount, 3);
      assert.equal((await store.loadSnapshot(b))!.chunks.length, (await store.getMeta(b))!.chunksCount);
    });

    it("bumps the version on every write and rejects a stale expectedVersion with a 409", async () => {
      const v1 = (await store.write(makeWrite(KEY, "create", makeEntries(2), { expectedVersion: 0 })))
        .version;
      const previous = await store.loadChunks(KEY);
      const upsert = makeEntries(1, { prefix: "x-" });
      const update = (expectedVersion: number | null): IndexWrite =>
        makeWrite(KEY, "update", upsert, { chunkOrder: orderAfterUpdate(previous, upsert), expectedVersion });
      const v2 = (await store.write(update(v1))).version;
      assert.ok(v2 > v1);

      const before = await observe(store, KEY);
      await assert.rejects(
        store.write(update(v1)),
        (e: unknown) => isApiError(409, "conflict")(e) && /another write/.test((e as Error).message),
      );
      await assert.rejects(
        store.write(makeWrite(KEY, "replace", makeEntries(1), { expectedVersion: 0 })),
        isApiError(409, "conflict"),
      );
      assert.deepEqual(await observe(store, KEY), before);

      const v3 = (await store.write(update(null))).version;
      assert.ok(v3 > v2);
    });

    it("never reuses a version after delete and re-create", async () => {
      const first = await store.write(makeWrite(KEY, "create", makeEntries(1)));
      assert.equal(await store.deleteIndex(KEY), true);
      const again = await store.write(makeWrite(KEY, "create", makeEntries(1)));
      assert.ok(again.version > first.version);
    });

    it("returns chunks in chunkOrder order, whatever the insertion order", async () => {
      const entries = makeEntries(20);
      const ids = entries.flatMap((e) => e.chunks.map((c) => c.chunkId));
      // A fixed permutation.
      const chunkOrder = ids.map((_, i) => ids[(i * 7) % ids.length]!);
      assert.equal(new Set(chunkOrder).size, ids.length);
      await store.write(makeWrite(KEY, "create", entries, { chunkOrder }));
      assert.deepEqual(
        (await store.loadSnapshot(KEY))!.chunks.map((c) => c.chunkId),
        chunkOrder,
      );
      assert.deepEqual(
        (await store.loadChunks(KEY)).map((c) => c.chunkId),
        chunkOrder,
      );
    });

    it("keeps everything across close and reopen", async () => {
      await store.write(makeWrite(KEY, "create", makeEntries(10)));
      await store.write(makeWrite({ tenantId: "t2", name: "other" }, "create", makeEntries(3)));
      const before = await observe(store, KEY);
      const list = await store.listIndices(null);
      await reopen();
      assert.deepEqual(await observe(store, KEY), before);
      assert.deepEqual(await store.listIndices(null), list);
    });

    it("leaves the previous state untouched when a write fails", async () => {
      await store.write(makeWrite(KEY, "create", makeEntries(4)));
      const before = await observe(store, KEY);
      const previous = await store.loadChunks(KEY);
      const upsert = makeEntries(3, { prefix: "new-" });
      const good = orderAfterUpdate(previous, upsert, ["doc-0"]);

      const failing: Array<[string, IndexWrite, number]> = [
        [
          "unknown chunk id in chunkOrder",
          makeWrite(KEY, "update", upsert, {
            deleteDocumentIds: ["doc-0"],
            chunkOrder: [...good.slice(1), "ghost#0"],
          }),
          500,
        ],
        [
          "chunkOrder missing a chunk",
          makeWrite(KEY, "update", upsert, { deleteDocumentIds: ["doc-0"], chunkOrder: good.slice(1) }),
          500,
        ],
        [
          "chunkOrder still naming a deleted chunk",
          makeWrite(KEY, "update", upsert, { chunkOrder: [...good, previous[0]!.chunkId] }),
          500,
        ],
        [
          "replace with a chunkOrder of the old chunks",
          makeWrite(KEY, "replace", upsert, { chunkOrder: previous.map((c) => c.chunkId) }),
          500,
        ],
        [
          "duplicate document id",
          makeWrite(KEY, "update", [upsert[0]!, upsert[0]!], { chunkOrder: good }),
          400,
        ],
      ];
      for (const [label, change, status] of failing) {
        await assert.rejects(
          store.write(change),
          (e: unknown) => e instanceof ApiError && e.statusCode === status,
          label,
        );
        assert.deepEqual(await observe(store, KEY), before, label);
      }

      // A failed create leaves no index behind.
      const other: IndexKey = { tenantId: "default", name: "never" };
      await assert.rejects(
        store.write(makeWrite(other, "create", makeEntries(2), { chunkOrder: ["ghost#0"] })),
        ApiError,
      );
      assert.equal(await store.getMeta(other), undefined);

      // And the store still accepts a correct write afterwards.
      const meta = await store.write(
        makeWrite(KEY, "update", upsert, { deleteDocumentIds: ["doc-0"], chunkOrder: good }),
      );
      assert.equal(meta.documentsCount, 4 - 1 + 3);
      assert.ok(meta.version > before!.meta.version);
    });

    it("deletes an index with all its documents and chunks", async () => {
      await store.write(makeWrite(KEY, "create", makeEntries(5)));
      assert.equal(await store.deleteIndex(KEY), true);
      assert.equal(await store.deleteIndex(KEY), false);
      assert.equal(await store.loadSnapshot(KEY), undefined);
      // The same name can be created again, empty of the old documents.
      await store.write(makeWrite(KEY, "create", makeEntries(1, { prefix: "fresh-" })));
      const snapshot = await store.loadSnapshot(KEY);
      assert.deepEqual([...snapshot!.documents.keys()], ["fresh-0"]);
    });

    it("stores an index without documents", async () => {
      const meta = await store.write(makeWrite(KEY, "create", [], { chunkOrder: [] }));
      assert.equal(meta.documentsCount, 0);
      assert.equal(meta.chunksCount, 0);
      const snapshot = await store.loadSnapshot(KEY);
      assert.deepEqual(snapshot!.chunks, []);
      assert.deepEqual(Buffer.from(snapshot!.engineIndex), Buffer.from(fakeEngineIndex([])));
    });

    it("round-trips unicode text, titles and metadata", async () => {
      const text = "Grüße aus Köln 😀. 这是中文。 𠀀 Ελληνικά.";
      const document = makeDocument(
        "ünï-😀",
        text,
        { emoji: "👍🏽", nested: { a: [1, null, true] } },
        { title: "Tïtle" },
      );
      await store.write(makeWrite(KEY, "create", [entry(document)]));
      const snapshot = await store.loadSnapshot(KEY);
      assert.deepEqual(snapshot!.documents.get("ünï-😀"), {
        id: "ünï-😀",
        title: "Tïtle",
        source: null,
        metadata: document.metadata,
      });
      assert.equal(snapshot!.chunks[0]!.text, text);
      assert.equal(snapshot!.chunks[0]!.chunkId, "ünï-😀#0");
    });

    it("round-trips an engine index of arbitrary bytes exactly", async () => {
      // Every byte value, at sizes around typical chunk boundaries of drivers and pages.
      for (const size of [1, 255, 256, 8191, 65_537, 3 * 1024 * 1024 + 7]) {
        const key: IndexKey = { tenantId: "bytes", name: `size-${size}` };
        const change = makeWrite(key, "create", makeEntries(2));
        const bytes = new Uint8Array(size);
        for (let i = 0; i < size; i++) bytes[i] = (i * 131 + (i >> 8)) & 0xff;
        change.engineIndex = bytes;
        await store.write(change);
        const loaded = await store.loadSnapshot(key);
        assert.ok(Buffer.from(loaded!.engineIndex).equals(Buffer.from(bytes)), `size ${size}`);
      }
    });

    it("reports a size that grows with the data", async () => {
      const empty = await store.sizeBytes();
      await store.write(makeWrite(KEY, "create", makeEntries(300, { length: 1500 })));
      const full = await store.sizeBytes();
      assert.ok(full > empty && full > 300 * 1500, `size ${empty} -> ${full}`);
    });
  });
}
