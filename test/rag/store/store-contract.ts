/**
 * The behaviour every IndexStore must have, as a reusable suite: `storeContract("sqlite", …)`
 * registers it for SQLite, and the PostgreSQL store registers the same suite with its own harness.
 *
 * Writes come from an IndexModel (test/helpers/store-fixtures.ts), which plays the engine's part:
 * engine keys, segment ids, tombstones, and opaque fake segment bytes (the store never parses them).
 * What the store returns is compared with what the model says the index holds.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";

import { DomainError } from "../../../src/core/errors.js";
import type {
  IndexKey,
  IndexMeta,
  IndexStore,
  IndexWrite,
  LoadedSegment,
  MergeWrite,
} from "../../../src/rag/store/types.js";
import {
  IndexModel,
  SETTINGS,
  fakeVectorBytes,
  entry,
  makeDocument,
  makeEntries,
  makeWrite,
  observe,
  type Entry,
  type WriteOptions,
} from "../../helpers/store-fixtures.js";
import { toApiError } from "../../../src/core/http.js";
import type { ObjectKind, StoredObject } from "../../../src/rag/store/openai-objects.js";

export interface StoreHarness {
  /** Opens the store under test; after `close()`, opening again must see the same data. */
  open(): Promise<IndexStore>;
  /** Removes everything the harness created. */
  cleanup(): Promise<void>;
}

const KEY: IndexKey = { tenantId: "default", name: "handbook" };

function isApiError(status: number, code: string) {
  return (error: unknown) => {
    assert.ok(error instanceof DomainError, `expected a DomainError, got ${String(error)}`);
    // As a client sees it: the edge's one mapping of domain errors to HTTP.
    const apiError = toApiError(error);
    assert.equal(apiError.statusCode, status);
    assert.equal(apiError.code, code);
    return true;
  };
}

const utf8 = (s: string) => Buffer.byteLength(s, "utf8");
const bytesOf = (entries: readonly Entry[]) =>
  entries.reduce(
    (sum, { document, chunks }) =>
      sum +
      utf8(document.text) +
      utf8(JSON.stringify(document.metadata)) +
      chunks.reduce((s, c) => s + utf8(c.text) + utf8(JSON.stringify(c.metadata)), 0),
    0,
  );

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

    /** Prepares a write with `model`, commits it and lets the model take it. */
    const write = async (
      model: IndexModel,
      mode: IndexWrite["mode"],
      upsert: Entry[],
      options: WriteOptions = {},
      key = KEY,
    ): Promise<IndexMeta> => {
      const prepared = model.prepare(key, mode, upsert, options);
      const meta = await store.write(prepared.change);
      prepared.apply();
      return meta;
    };
    const merge = async (model: IndexModel, segmentIds: number[], key = KEY): Promise<IndexMeta> => {
      const version = (await store.getMeta(key))!.version;
      const prepared = model.merge(key, segmentIds, version);
      const meta = await store.commitMerge(prepared.change);
      prepared.apply();
      return meta;
    };

    /** The store holds exactly what the model says: segments, tombstones, chunks, counters. */
    const assertMatches = async (model: IndexModel, key = KEY) => {
      const stored = await store.loadIndex(key);
      assert.ok(stored, "the index exists");
      const expected = model.expectedSegments();
      const comparable = (s: LoadedSegment) => ({
        ...s,
        bytes: Buffer.from(s.bytes),
        ...(s.vectors == null ? {} : { vectors: Buffer.from(s.vectors) }),
      });
      assert.deepEqual(stored.segments.map(comparable), expected.map(comparable));
      assert.equal(stored.meta.segmentsCount, expected.length);
      assert.equal(stored.meta.deletedChunksCount, model.deletedCount);
      assert.equal(stored.meta.chunksCount, model.chunks.size);
      assert.equal(stored.meta.documentsCount, model.keysByDocument.size);
      assert.deepEqual(stored.meta.engine, model.engine);
      const keys = [...model.chunks.keys()];
      const hits = await store.getChunks(key, keys);
      assert.deepEqual(
        hits.map(({ title: _title, source: _source, ...chunk }) => chunk),
        keys.map((k) => model.chunks.get(k)),
      );
      return stored;
    };

    beforeEach(async () => {
      harness = await makeHarness();
      store = await open();
    });
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
      await harness.cleanup();
    });

    it("creates an index of one segment and returns it whole", async () => {
      const model = new IndexModel();
      const entries = [
        entry(
          makeDocument(
            "a",
            "Alpha text. ".repeat(40),
            { lang: "en", tags: ["x"] },
            { title: "A", source: "a.txt", contentHash: "ab".repeat(32) },
          ),
        ),
        entry(makeDocument("b", "Beta text is short.", { lang: "de" })),
      ];
      const before = Date.now();
      const prepared = model.prepare(KEY, "create", entries, { vocabularySize: 7 });
      const meta = await store.write(prepared.change);
      prepared.apply();

      assert.equal(meta.tenantId, "default");
      assert.equal(meta.name, "handbook");
      assert.equal(meta.scorer, SETTINGS.scorer);
      assert.equal(meta.chunkSize, SETTINGS.chunkSize);
      assert.equal(meta.overlap, SETTINGS.overlap);
      assert.equal(meta.documentsCount, 2);
      assert.ok(meta.chunksCount >= 3);
      assert.equal(meta.vocabularySize, 7);
      assert.equal(meta.segmentsCount, 1);
      assert.equal(meta.deletedChunksCount, 0);
      assert.deepEqual(meta.engine, prepared.change.engine);
      assert.ok(meta.engine.totalLength > 0);
      assert.ok(meta.version > 0);
      assert.equal(meta.createdAt, meta.updatedAt);
      assert.ok(
        Date.parse(meta.createdAt) >= before - 1000 && Date.parse(meta.createdAt) <= Date.now() + 1000,
      );
      assert.equal(meta.sizeBytes, bytesOf(entries) + prepared.change.segment!.bytes.byteLength);

      assert.deepEqual(await store.getMeta(KEY), meta);
      assert.deepEqual(await store.listIndices("default"), [meta]);
      const stored = await assertMatches(model);
      assert.deepEqual(stored.meta, meta);

      const hits = await store.getChunks(KEY, [...model.chunks.keys()]);
      for (const hit of hits) {
        const a = hit.documentId === "a";
        assert.equal(hit.title, a ? "A" : null);
        assert.equal(hit.source, a ? "a.txt" : null);
        assert.deepEqual(hit.metadata, a ? { lang: "en", tags: ["x"] } : { lang: "de" });
      }
      assert.deepEqual(await store.listDocuments(KEY), [
        { id: "a", source: "a.txt", contentHash: "ab".repeat(32) },
        { id: "b", source: null, contentHash: null },
      ]);
      assert.equal(await store.hasDocument(KEY, "a"), true);
      assert.equal(await store.hasDocument(KEY, "c"), false);

      const byDocument = await store.getDocumentChunks(KEY, ["b", "a", "missing"]);
      assert.deepEqual([...byDocument.keys()].sort(), ["a", "b"]);
      for (const e of prepared.change.upsert) {
        assert.deepEqual(byDocument.get(e.document.id), {
          title: e.document.title,
          chunks: e.chunks.map((c) => ({ engineKey: c.engineKey, text: c.text })),
        });
      }
    });

    it("answers undefined, [] or 404 for an unknown index", async () => {
      assert.equal(await store.getMeta(KEY), undefined);
      assert.equal(await store.loadIndex(KEY), undefined);
      assert.equal(await store.loadChanges(KEY, 0), undefined);
      assert.deepEqual(await store.getChunks(KEY, [0, 1]), []);
      assert.equal((await store.getDocumentChunks(KEY, ["a"])).size, 0);
      assert.deepEqual(await store.listDocuments(KEY), []);
      assert.equal(await store.hasDocument(KEY, "a"), false);
      assert.deepEqual(await store.listIndices(null), []);
      assert.equal(await store.deleteIndex(KEY), false);
      const model = new IndexModel();
      model.prepare(KEY, "create", makeEntries(2)).apply();
      model.prepare(KEY, "update", makeEntries(1, { prefix: "x-" })).apply();
      await assert.rejects(
        store.commitMerge(model.merge(KEY, [0, 1], 1).change),
        isApiError(404, "not_found"),
      );
    });

    it("refuses to create an existing index with a 409 and keeps it", async () => {
      await write(new IndexModel(), "create", makeEntries(3));
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

    it("replace creates a missing index and drops every segment, tombstone and chunk of an existing one", async () => {
      const model = new IndexModel();
      const first = await write(model, "replace", makeEntries(4));
      await write(model, "update", makeEntries(2, { prefix: "more-" }), { deleteDocumentIds: ["doc-0"] });
      const oldKeys = [...model.chunks.keys()];
      assert.equal(first.documentsCount, 4);

      const replacement = makeEntries(2, { prefix: "new-", seed: 5 });
      const settings = { scorer: "tfidf" as const, chunkSize: 300, overlap: 0 };
      const second = await write(model, "replace", replacement, { settings, vocabularySize: 3 });
      assert.equal(second.documentsCount, 2);
      assert.equal(second.scorer, "tfidf");
      assert.equal(second.chunkSize, 300);
      assert.equal(second.vocabularySize, 3);
      assert.equal(second.segmentsCount, 1);
      assert.equal(second.deletedChunksCount, 0);
      assert.ok(second.version > first.version);
      assert.equal(second.createdAt, first.createdAt);
      assert.ok(second.updatedAt >= first.updatedAt);
      assert.equal(second.sizeBytes, bytesOf(replacement) + model.expectedSegments()[0]!.bytes.byteLength);
      await assertMatches(model);
      assert.deepEqual(await store.getChunks(KEY, oldKeys), []);
      assert.deepEqual(
        (await store.listDocuments(KEY)).map((d) => d.id),
        ["new-0", "new-1"],
      );
    });

    it("update adds one segment, tombstones the old chunks of upserted and deleted documents", async () => {
      const model = new IndexModel();
      await write(model, "create", makeEntries(5, { length: 900 }));
      const oldDoc1 = model.keysByDocument.get("doc-1")!;
      const oldDoc3 = model.keysByDocument.get("doc-3")!;
      assert.ok(oldDoc1.length > 1);

      // doc-1 comes back much shorter: its old chunks must all go.
      const upsert = [
        entry(makeDocument("doc-1", "Now a single short chunk.")),
        ...makeEntries(2, { prefix: "add-" }),
      ];
      const prepared = model.prepare(KEY, "update", upsert, { deleteDocumentIds: ["doc-3"] });
      assert.equal(prepared.change.tombstones.length, oldDoc1.length + oldDoc3.length);
      const meta = await store.write(prepared.change);
      prepared.apply();

      assert.equal(meta.documentsCount, 5 - 1 + 2);
      assert.equal(meta.segmentsCount, 2);
      assert.equal(meta.deletedChunksCount, oldDoc1.length + oldDoc3.length);
      await assertMatches(model);
      assert.deepEqual(await store.getChunks(KEY, [...oldDoc1, ...oldDoc3]), []);
      assert.deepEqual(
        (await store.getDocumentChunks(KEY, ["doc-1"])).get("doc-1")!.chunks.map((c) => c.text),
        ["Now a single short chunk."],
      );
      assert.deepEqual(
        (await store.listDocuments(KEY)).map((d) => d.id),
        ["add-0", "add-1", "doc-0", "doc-1", "doc-2", "doc-4"],
      );
    });

    it("upserting the same documents again never duplicates them", async () => {
      const model = new IndexModel();
      await write(model, "create", makeEntries(2));
      for (let round = 0; round < 3; round++) {
        const upsert = makeEntries(2, { seed: 10 + round });
        const meta = await write(model, "update", upsert);
        assert.equal(meta.documentsCount, 2);
        assert.equal(
          meta.chunksCount,
          upsert.reduce((s, e) => s + e.chunks.length, 0),
        );
        assert.equal(meta.segmentsCount, round + 2);
      }
      await assertMatches(model);
    });

    it("a write without chunks adds no segment; deleting an unknown document id is a no-op", async () => {
      const model = new IndexModel();
      const first = await write(model, "create", makeEntries(2));
      const meta = await write(model, "update", [], { deleteDocumentIds: ["nope"] });
      assert.equal(meta.documentsCount, 2);
      assert.equal(meta.segmentsCount, 1);
      assert.ok(meta.version > first.version);
      await assertMatches(model);
      // A delete only: tombstones, no segment.
      const deleted = await write(model, "update", [], { deleteDocumentIds: ["doc-0"] });
      assert.equal(deleted.documentsCount, 1);
      assert.equal(deleted.segmentsCount, 1);
      assert.ok(deleted.deletedChunksCount > 0);
      assert.equal(
        deleted.sizeBytes,
        bytesOf(makeEntries(2).slice(1)) + model.expectedSegments()[0]!.bytes.byteLength,
      );
      await assertMatches(model);
    });

    it("keeps tenants apart", async () => {
      const a: IndexKey = { tenantId: "acme", name: "docs" };
      const b: IndexKey = { tenantId: "globex", name: "docs" };
      const modelB = new IndexModel();
      await store.write(makeWrite(a, "create", makeEntries(2, { prefix: "acme-" })));
      await write(modelB, "create", makeEntries(3, { prefix: "globex-" }), {}, b);
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
      // Both indices have engine key 0: each answers with its own chunk.
      assert.equal((await store.getChunks(a, [0]))[0]!.documentId, "acme-0");
      assert.equal((await store.getChunks(b, [0]))[0]!.documentId, "globex-0");
      assert.equal(await store.hasDocument(a, "globex-0"), false);

      assert.equal(await store.deleteIndex(a), true);
      assert.equal(await store.getMeta(a), undefined);
      await assertMatches(modelB, b);
    });

    it("bumps the version on every write and merge and rejects a stale expectedVersion with a 409", async () => {
      const model = new IndexModel();
      const v1 = (await write(model, "create", makeEntries(2), { expectedVersion: 0 })).version;
      const v2 = (await write(model, "update", makeEntries(1, { prefix: "x-" }), { expectedVersion: v1 }))
        .version;
      assert.ok(v2 > v1);

      const before = await observe(store, KEY);
      const stale = model.prepare(KEY, "update", makeEntries(1, { prefix: "y-" }), { expectedVersion: v1 });
      await assert.rejects(
        store.write(stale.change),
        (e: unknown) => isApiError(409, "conflict")(e) && /another write/.test((e as Error).message),
      );
      await assert.rejects(
        store.write(makeWrite(KEY, "replace", makeEntries(1), { expectedVersion: 0 })),
        isApiError(409, "conflict"),
      );
      await assert.rejects(
        store.commitMerge(model.merge(KEY, [0, 1], v1).change),
        (e: unknown) => isApiError(409, "conflict")(e) && /another write/.test((e as Error).message),
      );
      assert.deepEqual(await observe(store, KEY), before);

      const v3 = (await write(model, "update", makeEntries(1, { prefix: "z-" }))).version;
      assert.ok(v3 > v2);
      const v4 = (await merge(model, [0, 1, 2])).version;
      assert.ok(v4 > v3);
    });

    it("never reuses a version after delete and re-create", async () => {
      const first = await store.write(makeWrite(KEY, "create", makeEntries(1)));
      assert.equal(await store.deleteIndex(KEY), true);
      const again = await store.write(makeWrite(KEY, "create", makeEntries(1)));
      assert.ok(again.version > first.version);
    });

    it("returns chunks by engine key in the order asked, leaving out unknown and deleted keys", async () => {
      const model = new IndexModel();
      await write(model, "create", makeEntries(60, { length: 300 }));
      await write(model, "update", [], { deleteDocumentIds: ["doc-7"] });
      const live = [...model.chunks.keys()];
      assert.ok(live.length >= 100);
      // A fixed permutation of 100 keys, a deleted key and keys no chunk ever had.
      const asked = live.slice(0, 100).map((_, i) => live[(i * 37) % 100]!);
      assert.equal(new Set(asked).size, 100);
      const deletedKey = [...Array(model.engine.nextKey).keys()].find((k) => !model.chunks.has(k))!;
      const hits = await store.getChunks(KEY, [model.engine.nextKey + 5, ...asked, deletedKey, 1_000_000]);
      assert.deepEqual(
        hits.map((h) => h.engineKey),
        asked,
      );
      for (const hit of hits) assert.equal(hit.chunkId, model.chunks.get(hit.engineKey)!.chunkId);
      assert.deepEqual(await store.getChunks(KEY, []), []);
    });

    it("merges segments: one segment replaces them, their tombstones go, chunks stay", async () => {
      const model = new IndexModel();
      await write(model, "create", makeEntries(4, { prefix: "a-" }));
      await write(model, "update", makeEntries(4, { prefix: "b-" }), { deleteDocumentIds: ["a-1"] });
      await write(model, "update", makeEntries(4, { prefix: "c-" }), { deleteDocumentIds: ["b-2"] });
      const before = await store.getMeta(KEY);
      const segmentBytes = (m: IndexModel) =>
        m.expectedSegments().reduce((s, x) => s + x.bytes.byteLength, 0);
      const documentBytes = before!.sizeBytes - segmentBytes(model);
      assert.equal(before!.segmentsCount, 3);
      assert.ok(before!.deletedChunksCount > 0);

      const meta = await merge(model, [0, 1]);
      assert.equal(meta.segmentsCount, 2);
      // a-1's tombstones went with segment 0; b-2's with segment 1 (the merge dropped its documents).
      assert.equal(meta.deletedChunksCount, 0);
      assert.equal(meta.chunksCount, before!.chunksCount);
      assert.equal(meta.documentsCount, before!.documentsCount);
      assert.equal(meta.createdAt, before!.createdAt);
      const stored = await assertMatches(model);
      assert.deepEqual(
        stored.segments.map((s) => s.id),
        [2, 3],
      );
      assert.equal(meta.sizeBytes, documentBytes + segmentBytes(model));

      // A merge during which a document was deleted: the delete becomes a tombstone of the new segment.
      const running = model.startMerge(KEY, [2, 3]);
      await write(model, "update", [], { deleteDocumentIds: ["c-0"] });
      const version = (await store.getMeta(KEY))!.version;
      const carried = running.commit(version);
      assert.ok(carried.change.tombstones.length > 0);
      const merged = await store.commitMerge(carried.change);
      carried.apply();
      assert.equal(merged.segmentsCount, 1);
      assert.equal(merged.deletedChunksCount, carried.change.tombstones.length);
      await assertMatches(model);
    });

    it("refuses an inconsistent merge and keeps the index", async () => {
      const model = new IndexModel();
      await write(model, "create", makeEntries(3, { prefix: "a-" }));
      await write(model, "update", makeEntries(3, { prefix: "b-" }));
      const version = (await store.getMeta(KEY))!.version;
      const before = await observe(store, KEY);
      const good = model.merge(KEY, [0, 1], version).change;
      const failing: Array<[string, MergeWrite]> = [
        ["an unknown segment", { ...good, removedSegmentIds: [0, 1, 9] }],
        ["fewer documents than the merged segments hold", { ...good, removedSegmentIds: [0] }],
        [
          "a tombstone beyond the new segment",
          { ...good, tombstones: [{ segmentId: good.segment.id, ordinal: good.segment.documentCount }] },
        ],
        ["the new segment's id among the removed", { ...good, removedSegmentIds: [0, 1, good.segment.id] }],
      ];
      for (const [label, change] of failing) {
        await assert.rejects(store.commitMerge(change), isApiError(500, "internal_error"), label);
        assert.deepEqual(await observe(store, KEY), before, label);
      }
      await store.commitMerge(good);
    });

    it("loadChanges returns only what changed since a version", async () => {
      const model = new IndexModel();
      const v1 = await write(model, "create", makeEntries(5, { prefix: "a-" }));
      const all = await store.loadChanges(KEY, 0);
      assert.deepEqual(all!.meta, v1);
      assert.deepEqual(
        all!.addedSegments.map((s) => s.id),
        [0],
      );
      assert.equal(all!.bytesLoaded, all!.addedSegments[0]!.bytes.byteLength);

      // Nothing since the current version.
      const none = await store.loadChanges(KEY, v1.version);
      assert.deepEqual(none, {
        meta: v1,
        addedSegments: [],
        liveSegmentIds: [0],
        tombstones: [],
        bytesLoaded: 0,
      });

      // An append: exactly one new segment, its size the bytes loaded.
      const prepared = model.prepare(KEY, "update", makeEntries(3, { prefix: "b-" }));
      const v2 = await store.write(prepared.change);
      prepared.apply();
      const append = await store.loadChanges(KEY, v1.version);
      assert.equal(append!.addedSegments.length, 1);
      assert.deepEqual(
        Buffer.from(append!.addedSegments[0]!.bytes),
        Buffer.from(prepared.change.segment!.bytes),
      );
      assert.equal(append!.addedSegments[0]!.id, prepared.change.segment!.id);
      assert.deepEqual(append!.addedSegments[0]!.deleted, []);
      assert.equal(append!.bytesLoaded, prepared.change.segment!.bytes.byteLength);
      assert.deepEqual(append!.liveSegmentIds, [0, 1]);
      assert.deepEqual(append!.tombstones, []);
      assert.deepEqual(append!.meta, v2);

      // A delete: its tombstones, no segment.
      const deletion = model.prepare(KEY, "update", [], { deleteDocumentIds: ["a-2", "b-0"] });
      const v3 = await store.write(deletion.change);
      deletion.apply();
      const deletes = await store.loadChanges(KEY, v2.version);
      assert.deepEqual(deletes!.addedSegments, []);
      assert.equal(deletes!.bytesLoaded, 0);
      const sortTombstones = (t: Array<{ segmentId: number; ordinal: number }>) =>
        [...t].sort((x, y) => x.segmentId - y.segmentId || x.ordinal - y.ordinal);
      assert.deepEqual(deletes!.tombstones, sortTombstones(deletion.change.tombstones));
      // Since v1: the new segment comes with its tombstone inside it, not in `tombstones`.
      const sinceV1 = await store.loadChanges(KEY, v1.version);
      assert.deepEqual(
        sinceV1!.addedSegments.map((s) => s.id),
        [1],
      );
      assert.deepEqual(sinceV1!.addedSegments[0]!.deleted, model.expectedSegments()[1]!.deleted);
      assert.ok(sinceV1!.tombstones.every((t) => t.segmentId === 0));
      assert.ok(sinceV1!.tombstones.length > 0);

      // A merge: the merged segment with its tombstones; the removed ids are gone from liveSegmentIds.
      const deleteMeanwhile = model.startMerge(KEY, [0, 1]);
      await write(model, "update", [], { deleteDocumentIds: ["a-0"] });
      const merged = deleteMeanwhile.commit((await store.getMeta(KEY))!.version);
      await store.commitMerge(merged.change);
      merged.apply();
      const afterMerge = await store.loadChanges(KEY, v3.version);
      assert.deepEqual(afterMerge!.liveSegmentIds, [2]);
      assert.deepEqual(
        afterMerge!.addedSegments.map((s) => ({ ...s, bytes: Buffer.from(s.bytes) })),
        model.expectedSegments().map((s) => ({ ...s, bytes: Buffer.from(s.bytes) })),
      );
      assert.ok(afterMerge!.addedSegments[0]!.deleted.length > 0);
      assert.deepEqual(afterMerge!.tombstones, []);
      assert.equal(afterMerge!.bytesLoaded, merged.change.segment.bytes.byteLength);
    });

    it("never reuses a version after delete, reopen and re-create (the counter is stored)", async () => {
      const first = await store.write(makeWrite(KEY, "create", makeEntries(1)));
      assert.equal(await store.deleteIndex(KEY), true);
      await reopen();
      const again = await store.write(makeWrite(KEY, "create", makeEntries(1)));
      assert.ok(again.version > first.version, `${again.version} after ${first.version}`);
    });

    it("keeps everything across close and reopen", async () => {
      const model = new IndexModel();
      await write(model, "create", makeEntries(10));
      await write(model, "update", makeEntries(2, { prefix: "x-" }), { deleteDocumentIds: ["doc-3"] });
      await store.write(makeWrite({ tenantId: "t2", name: "other" }, "create", makeEntries(3)));
      const before = await observe(store, KEY);
      const list = await store.listIndices(null);
      await reopen();
      assert.deepEqual(await observe(store, KEY), before);
      assert.deepEqual(await store.listIndices(null), list);
      await assertMatches(model);
    });

    it("leaves the previous state untouched when a write fails", async () => {
      const model = new IndexModel();
      await write(model, "create", makeEntries(4));
      const before = await observe(store, KEY);
      const upsert = makeEntries(3, { prefix: "new-" });
      const good = () => model.prepare(KEY, "update", upsert, { deleteDocumentIds: ["doc-0"] }).change;
      const heldKey = [...model.chunks.keys()][0]!;

      const failing: Array<[string, IndexWrite, number]> = [
        [
          "a chunk with an engine key the index holds",
          (() => {
            const change = good();
            change.upsert[0]!.chunks[0]!.engineKey = model.chunks.get(
              model.keysByDocument.get("doc-2")![0]!,
            )!.engineKey;
            return change;
          })(),
          500,
        ],
        [
          "a tombstone on a segment the index lacks",
          { ...good(), tombstones: [...good().tombstones, { segmentId: 7, ordinal: 0 }] },
          500,
        ],
        [
          "a tombstone beyond its segment",
          { ...good(), tombstones: [...good().tombstones, { segmentId: 0, ordinal: model.chunks.size }] },
          500,
        ],
        ["a deleted document without its tombstones", { ...good(), tombstones: [] }, 500],
        [
          "a tombstone on a chunk that stays",
          {
            ...good(),
            tombstones: [
              ...good().tombstones,
              { segmentId: 0, ordinal: model.keysByDocument.get("doc-1")![0]! },
            ],
          },
          500,
        ],
        ["chunks without their segment", { ...good(), segment: null }, 500],
        ["a segment id the index holds", { ...good(), segment: { ...good().segment!, id: 0 } }, 500],
        ["a key not below nextKey", { ...good(), engine: { ...good().engine, nextKey: heldKey } }, 500],
        ["a duplicate document id", { ...good(), upsert: [good().upsert[0]!, good().upsert[0]!] }, 400],
      ];
      for (const [label, change, status] of failing) {
        await assert.rejects(
          store.write(change),
          (e: unknown) => e instanceof DomainError && toApiError(e).statusCode === status,
          label,
        );
        assert.deepEqual(await observe(store, KEY), before, label);
      }
      // A tombstone given twice across writes: the second is refused.
      const deletion = model.prepare(KEY, "update", [], { deleteDocumentIds: ["doc-3"] });
      await store.write(deletion.change);
      deletion.apply();
      const afterDelete = await observe(store, KEY);
      await assert.rejects(
        store.write({ ...model.prepare(KEY, "update", []).change, tombstones: deletion.change.tombstones }),
        isApiError(500, "internal_error"),
      );
      assert.deepEqual(await observe(store, KEY), afterDelete);

      // A failed create leaves no index behind.
      const other: IndexKey = { tenantId: "default", name: "never" };
      await assert.rejects(
        store.write({
          ...makeWrite(other, "create", makeEntries(2)),
          tombstones: [{ segmentId: 0, ordinal: 0 }],
        }),
        DomainError,
      );
      assert.equal(await store.getMeta(other), undefined);

      // And the store still accepts a correct write afterwards.
      const meta = await write(model, "update", upsert, { deleteDocumentIds: ["doc-0"] });
      assert.equal(meta.documentsCount, 4 - 2 + 3);
      await assertMatches(model);
    });

    it("deletes an index with all its segments, tombstones, documents and chunks", async () => {
      const model = new IndexModel();
      await write(model, "create", makeEntries(5));
      await write(model, "update", makeEntries(2, { prefix: "x-" }), { deleteDocumentIds: ["doc-1"] });
      assert.equal(await store.deleteIndex(KEY), true);
      assert.equal(await store.deleteIndex(KEY), false);
      assert.equal(await store.loadIndex(KEY), undefined);
      // The same name can be created again, empty of the old documents, segments and chunks.
      const fresh = new IndexModel();
      await write(fresh, "create", makeEntries(1, { prefix: "fresh-" }));
      assert.deepEqual(
        (await store.listDocuments(KEY)).map((d) => d.id),
        ["fresh-0"],
      );
      await assertMatches(fresh);
      const oldOnly = [...model.chunks.keys()].filter((k) => !fresh.chunks.has(k));
      assert.deepEqual(await store.getChunks(KEY, oldOnly), []);
      const changes = await store.loadChanges(KEY, 0);
      assert.deepEqual(changes!.liveSegmentIds, [0]);
    });

    it("stores an index without documents", async () => {
      const meta = await store.write(makeWrite(KEY, "create", []));
      assert.equal(meta.documentsCount, 0);
      assert.equal(meta.chunksCount, 0);
      assert.equal(meta.segmentsCount, 0);
      assert.equal(meta.sizeBytes, 0);
      assert.deepEqual((await store.loadIndex(KEY))!.segments, []);
    });

    it("round-trips unicode text, titles and metadata", async () => {
      const text = "Grüße aus Köln 😀. 这是中文。 𠀀 Ελληνικά.";
      const document = makeDocument(
        "ünï-😀",
        text,
        { emoji: "👍🏽", nested: { a: [1, null, true] } },
        { title: "Tïtle", source: "dïr/😀.txt" },
      );
      await store.write(makeWrite(KEY, "create", [entry(document)]));
      const [hit] = await store.getChunks(KEY, [0]);
      assert.equal(hit!.text, text);
      assert.equal(hit!.chunkId, "ünï-😀#0");
      assert.equal(hit!.title, "Tïtle");
      assert.equal(hit!.source, "dïr/😀.txt");
      assert.deepEqual(hit!.metadata, document.metadata);
      assert.equal((await store.getDocumentChunks(KEY, ["ünï-😀"])).get("ünï-😀")!.title, "Tïtle");
      assert.equal(await store.hasDocument(KEY, "ünï-😀"), true);
    });

    it("keeps a segment's vectors and the index's space: written, loaded, caught up, merged, dropped with it", async () => {
      const space = { model: "m-1", dimension: 384, storage: "i8" } as const;
      const model = new IndexModel();
      model.withVectors = true;
      const vectorBytes = (m: IndexModel) =>
        m.expectedSegments().reduce((sum, x) => sum + x.bytes.byteLength + (x.vectors?.byteLength ?? 0), 0);
      const created = await write(model, "create", makeEntries(3, { prefix: "a-" }), { vectors: space });
      assert.deepEqual(created.vectors, space);
      await assertMatches(model);
      // An update keeps the space without naming it; its segment's vectors come with it to a replica.
      const appended = await write(model, "update", makeEntries(2, { prefix: "b-" }), {
        deleteDocumentIds: ["a-0"],
      });
      assert.deepEqual(appended.vectors, space);
      const delta = await store.loadChanges(KEY, created.version);
      assert.equal(delta!.addedSegments.length, 1);
      const added = delta!.addedSegments[0]!;
      assert.ok(
        Buffer.from(added.vectors!).equals(Buffer.from(fakeVectorBytes(1, model.segments.get(1)!.keys))),
      );
      assert.equal(delta!.bytesLoaded, added.bytes.byteLength + added.vectors!.byteLength);
      const documentBytes = appended.sizeBytes - vectorBytes(model);
      // A merge: the merged segment's vectors replace theirs, and the size follows.
      const merged = await merge(model, [0, 1]);
      assert.deepEqual(merged.vectors, space);
      assert.equal(merged.sizeBytes, documentBytes + vectorBytes(model));
      await assertMatches(model);
      await reopen();
      assert.deepEqual((await store.getMeta(KEY))!.vectors, space);
      await assertMatches(model);
      // A replace without vectors makes the index lexical; its old vectors go with their segments.
      const lexical = new IndexModel();
      lexical.engine = { ...model.engine };
      const replaced = await write(lexical, "replace", makeEntries(1, { prefix: "c-" }), {
        expectedVersion: merged.version,
      });
      assert.equal(replaced.vectors, null);
      await assertMatches(lexical);
    });

    it("refuses a segment whose vectors do not match the index's space, changing nothing", async () => {
      const space = { model: "m-1", dimension: 8, storage: "f32" } as const;
      const model = new IndexModel();
      model.withVectors = true;
      await write(model, "create", makeEntries(2), { vectors: space });
      const before = await observe(store, KEY);
      // A segment without vectors in an index that keeps them.
      const bare = new IndexModel();
      bare.engine = { ...model.engine };
      const change = bare.prepare(KEY, "update", makeEntries(1, { prefix: "x-" })).change;
      await assert.rejects(store.write(change), isApiError(500, "internal_error"));
      // Vectors in a lexical index.
      const other: IndexKey = { tenantId: KEY.tenantId, name: "lexical" };
      const withVectors = model.prepare(other, "create", makeEntries(1, { prefix: "y-" }), { vectors: null });
      await assert.rejects(store.write(withVectors.change), isApiError(500, "internal_error"));
      assert.equal(await store.getMeta(other), undefined);
      // A merge whose segment lacks them.
      const version = (await store.getMeta(KEY))!.version;
      const mergeChange = model.merge(KEY, [0], version).change;
      delete mergeChange.segment.vectors;
      await assert.rejects(store.commitMerge(mergeChange), isApiError(500, "internal_error"));
      assert.deepEqual(await observe(store, KEY), before);
    });

    it("round-trips segment bytes of any value exactly", async () => {
      // Every byte value, at sizes around typical chunk boundaries of drivers and pages.
      for (const size of [1, 255, 256, 8191, 65_537, 3 * 1024 * 1024 + 7]) {
        const key: IndexKey = { tenantId: "bytes", name: `size-${size}` };
        const change = makeWrite(key, "create", makeEntries(2));
        const bytes = new Uint8Array(size);
        for (let i = 0; i < size; i++) bytes[i] = (i * 131 + (i >> 8)) & 0xff;
        change.segment = { ...change.segment!, bytes };
        const meta = await store.write(change);
        assert.equal(meta.sizeBytes, bytesOf(makeEntries(2)) + size);
        const loaded = await store.loadIndex(key);
        assert.ok(Buffer.from(loaded!.segments[0]!.bytes).equals(Buffer.from(bytes)), `size ${size}`);
      }
    });

    it("keeps OpenAI object records per tenant, ordered, replaced by id, across a reopen", async () => {
      const record = (
        tenantId: string,
        kind: ObjectKind,
        parentId: string,
        id: string,
        createdAt: number,
      ) => ({
        tenantId,
        kind,
        parentId,
        id,
        createdAt,
        body: JSON.stringify({ id, note: "é ✓" }),
      });
      await store.objects.put(record("a", "vector_store", "", "vs_2", 2_000));
      await store.objects.put(record("a", "vector_store", "", "vs_1", 1_000));
      await store.objects.put(record("b", "vector_store", "", "vs_1", 3_000));
      await store.objects.put(record("a", "vector_store.file", "vs_1", "file-x", 5_000));
      await store.objects.put(record("a", "vector_store.files_batch", "vs_1", "vsfb_1", 5_000));
      // Same tenant, kind, parent and id: replaced.
      await store.objects.put({ ...record("a", "vector_store", "", "vs_2", 2_000), body: '{"v":2}' });
      await reopen();
      const ids = (list: readonly StoredObject[]) => list.map((o) => `${o.tenantId}/${o.id}`);
      assert.deepEqual(ids(await store.objects.list("a", "vector_store", "")), ["a/vs_1", "a/vs_2"]);
      assert.deepEqual(ids(await store.objects.list("b", "vector_store", "")), ["b/vs_1"]);
      assert.deepEqual(ids(await store.objects.list(null, "vector_store", "")), [
        "a/vs_1",
        "a/vs_2",
        "b/vs_1",
      ]);
      assert.equal((await store.objects.get("a", "vector_store", "", "vs_2"))!.body, '{"v":2}');
      assert.deepEqual(
        await store.objects.get("a", "vector_store", "", "vs_1"),
        record("a", "vector_store", "", "vs_1", 1_000),
      );
      assert.equal(await store.objects.get("c", "vector_store", "", "vs_1"), undefined);
      assert.equal(await store.objects.remove("b", "vector_store", "", "vs_2"), false);
      assert.equal(await store.objects.remove("b", "vector_store", "", "vs_1"), true);
      assert.deepEqual(ids(await store.objects.list("b", "vector_store", "")), []);
      await store.objects.removeChildren("a", "vs_1");
      assert.deepEqual(await store.objects.list("a", "vector_store.file", "vs_1"), []);
      assert.deepEqual(await store.objects.list("a", "vector_store.files_batch", "vs_1"), []);
      assert.deepEqual(ids(await store.objects.list("a", "vector_store", "")), ["a/vs_1", "a/vs_2"]);
    });

    it("reports a store size that grows with the data", async () => {
      const empty = await store.sizeBytes();
      await store.write(makeWrite(KEY, "create", makeEntries(300, { length: 1500 })));
      const full = await store.sizeBytes();
      assert.ok(full > empty && full > 300 * 1500, `size ${empty} -> ${full}`);
    });
  });
}
