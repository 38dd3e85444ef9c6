/**
 * The Responses store's backends against one contract: SQLite on its worker thread and PostgreSQL
 * (LECTERN_TEST_DATABASE_URL; skipped with the reason when it does not answer). The clock is an
 * argument of every call, so TTLs are seen by moving it, never by sleeping.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { postgresBackend } from "../../../src/textgen/store/postgres-backend.js";
import type {
  ItemRow,
  NewResponse,
  ResponsesBackend,
  StoreLimits,
} from "../../../src/textgen/store/types.js";
import { sqliteWorkerBackend } from "../../../src/textgen/store/worker-backend.js";
import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../../helpers/pg.js";

const DAY = 86_400_000;
const T0 = 1_800_000_000_000;
const LIMITS: StoreLimits = { ttlMs: 30 * DAY, maxBytes: 1 << 30 };

const item = (id: string, text = id): ItemRow => ({
  id,
  json: JSON.stringify({ id, type: "message", role: "user", content: [{ type: "input_text", text }] }),
});
const ids = (json: string[] | undefined) => json?.map((text) => (JSON.parse(text) as { id: string }).id);

function response(
  id: string,
  input: ItemRow[],
  output: ItemRow[],
  extra: Partial<NewResponse> = {},
): NewResponse {
  return {
    id,
    previousId: null,
    conversationId: null,
    keep: true,
    body: JSON.stringify({ id, object: "response", output: [] }),
    input,
    output,
    ...extra,
  };
}

/** Everything drained: each call deletes one bounded batch. */
async function evictAll(backend: ResponsesBackend, now: number): Promise<number> {
  let total = 0;
  for (let removed; (removed = await backend.evict(now)) > 0;) total += removed;
  return total;
}

const pgUnavailable = await postgresUnavailable();
const folders: string[] = [];
const databases: TestDatabase[] = [];
const opened: ResponsesBackend[] = [];
after(async () => {
  for (const backend of opened) await backend.close();
  for (const db of databases) await db.drop();
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

const kinds: Array<{
  name: string;
  skip: string | false;
  open: (limits: StoreLimits) => Promise<ResponsesBackend>;
}> = [
  {
    name: "SQLite (worker thread)",
    skip: false,
    open: async (limits) => {
      const folder = mkdtempSync(path.join(os.tmpdir(), "lectern-responses-"));
      folders.push(folder);
      return sqliteWorkerBackend(folder, limits);
    },
  },
  {
    name: "PostgreSQL",
    skip: pgUnavailable ?? false,
    open: async (limits) => {
      const db = await createTestDatabase("lectern_responses_test");
      databases.push(db);
      return postgresBackend(db.url, limits);
    },
  },
];

for (const kind of kinds) {
  describe(`Responses store backend: ${kind.name}`, { skip: kind.skip }, () => {
    const open = async (limits: StoreLimits = LIMITS) => {
      const backend = await kind.open(limits);
      opened.push(backend);
      return backend;
    };

    it("a chain of three: each response's own items, the history oldest first, items by id, delete", async () => {
      const store = await open();
      await store.saveResponse("t", response("r1", [item("u1")], [item("a1")]), T0);
      await store.saveResponse("t", response("r2", [item("u2")], [item("a2")], { previousId: "r1" }), T0 + 1);
      await store.saveResponse("t", response("r3", [item("u3")], [item("a3")], { previousId: "r2" }), T0 + 2);
      const history = await store.history("t", "r3", T0 + 3);
      assert.ok(history && "items" in history);
      assert.deepEqual(ids(history.items), ["u1", "a1", "u2", "a2", "u3", "a3"]);
      const stored = await store.response("t", "r2", T0 + 3);
      assert.equal(JSON.parse(stored!.body).id, "r2");
      assert.deepEqual(ids(stored!.output), ["a2"]);
      assert.equal(ids([(await store.item("t", "a2", T0 + 3))!])![0], "a2");
      assert.equal(await store.history("t", "nope", T0 + 3), undefined);

      // A response gone from the middle breaks the chain: the history names it rather than skipping it.
      assert.equal(await store.deleteObject("t", "response", "r2", T0 + 3), true);
      assert.equal(await store.deleteObject("t", "response", "r2", T0 + 3), false);
      assert.deepEqual(await store.history("t", "r3", T0 + 3), { missing: "r2" });
      assert.equal(await store.item("t", "a2", T0 + 3), undefined);
      assert.equal(await store.response("t", "r2", T0 + 3), undefined);
    });

    it("another tenant sees, continues and deletes nothing of this one's", async () => {
      const store = await open();
      await store.saveResponse("alice", response("ra", [item("ua")], [item("aa")]), T0);
      const conversation = JSON.stringify({ id: "ca", object: "conversation" });
      await store.createConversation("alice", "ca", conversation, [item("ca1")], T0);
      assert.equal(await store.response("bob", "ra", T0), undefined);
      assert.equal(await store.history("bob", "ra", T0), undefined);
      assert.equal(await store.item("bob", "aa", T0), undefined);
      assert.equal(await store.page("bob", "response", "ra", { limit: 20, order: "asc" }, T0), undefined);
      assert.equal(await store.conversation("bob", "ca", T0), undefined);
      assert.equal(await store.conversationItems("bob", "ca", T0), undefined);
      assert.equal(await store.addConversationItems("bob", "ca", [item("x")], T0), false);
      assert.equal(await store.deleteConversationItem("bob", "ca", "ca1", T0), "no_conversation");
      assert.equal(await store.deleteObject("bob", "response", "ra", T0), false);
      assert.equal(await store.deleteObject("bob", "conversation", "ca", T0), false);
      assert.equal(
        await store.saveResponse("bob", response("rb", [], [], { conversationId: "ca", keep: false }), T0),
        "no_conversation",
      );
      assert.ok(await store.response("alice", "ra", T0));
      assert.deepEqual(ids(await store.conversationItems("alice", "ca", T0)), ["ca1"]);
    });

    it("past RESPONSES_TTL nothing is read, continued or listed, and the sweep deletes it", async () => {
      const ttlMs = DAY;
      const store = await open({ ttlMs, maxBytes: LIMITS.maxBytes });
      await store.saveResponse("t", response("old", [item("u1")], [item("a1")]), T0);
      await store.saveResponse(
        "t",
        response("new", [item("u2")], [item("a2")], { previousId: "old" }),
        T0 + ttlMs / 2,
      );
      await store.createConversation("t", "c", JSON.stringify({ id: "c" }), [item("c1")], T0);
      // A change keeps a conversation alive: its TTL counts from the last one.
      await store.addConversationItems("t", "c", [item("c2")], T0 + ttlMs / 2);
      const later = T0 + ttlMs + 1;
      assert.equal(await store.response("t", "old", later), undefined);
      assert.equal(await store.item("t", "a1", later), undefined);
      assert.deepEqual(await store.history("t", "new", later), { missing: "old" });
      assert.ok(await store.response("t", "new", later));
      assert.deepEqual(ids(await store.conversationItems("t", "c", later)), ["c1", "c2"]);
      const before = await store.sizeBytes();
      assert.equal(await evictAll(store, later), 1);
      assert.ok((await store.sizeBytes()) < before);
      // Everything past its TTL: the store is empty, and its byte count says so.
      assert.equal(await evictAll(store, T0 + 2 * ttlMs), 2);
      assert.equal(await store.sizeBytes(), 0);
    });

    it("past RESPONSES_MAX_BYTES the oldest go first, until the rest fits", async () => {
      const padding = "x".repeat(4000);
      const store = await open({ ttlMs: LIMITS.ttlMs, maxBytes: 20_000 });
      for (let i = 0; i < 10; i++)
        await store.saveResponse("t", response(`r${i}`, [item(`u${i}`, padding)], [item(`a${i}`)]), T0 + i);
      assert.ok((await store.sizeBytes()) > 40_000);
      const removed = await evictAll(store, T0 + 10);
      const size = await store.sizeBytes();
      assert.ok(size <= 20_000 && size > 10_000, `${size} bytes left`);
      const kept: string[] = [];
      for (let i = 0; i < 10; i++) if (await store.response("t", `r${i}`, T0 + 10)) kept.push(`r${i}`);
      assert.equal(kept.length, 10 - removed);
      assert.deepEqual(
        kept,
        Array.from({ length: kept.length }, (_, i) => `r${10 - kept.length + i}`),
        "the newest are the ones kept",
      );
    });

    it("pages: newest first by default, asc, after, before, has_more; an unknown cursor says so", async () => {
      const store = await open();
      const input = Array.from({ length: 7 }, (_, i) => item(`i${i}`));
      await store.saveResponse("t", response("r", input, [item("out")]), T0);
      const page = async (query: Partial<Parameters<ResponsesBackend["page"]>[3]>) => {
        const result = await store.page("t", "response", "r", { limit: 3, order: "desc", ...query }, T0);
        assert.ok(result && result !== "no_cursor");
        return [result.items.map((row) => row.id), result.hasMore];
      };
      assert.deepEqual(await page({}), [["i6", "i5", "i4"], true]);
      assert.deepEqual(await page({ after: "i4" }), [["i3", "i2", "i1"], true]);
      assert.deepEqual(await page({ after: "i1" }), [["i0"], false]);
      assert.deepEqual(await page({ order: "asc" }), [["i0", "i1", "i2"], true]);
      assert.deepEqual(await page({ order: "asc", after: "i2" }), [["i3", "i4", "i5"], true]);
      assert.deepEqual(await page({ order: "asc", before: "i5" }), [["i2", "i3", "i4"], true]);
      assert.deepEqual(await page({ order: "asc", before: "i2" }), [["i0", "i1"], false]);
      assert.deepEqual(await page({ before: "i2" }), [["i5", "i4", "i3"], true]);
      assert.deepEqual(await page({ order: "asc", after: "i1", before: "i4" }), [["i2", "i3"], false]);
      assert.deepEqual(await page({ limit: 100, order: "asc" }), [input.map((row) => row.id), false]);
      assert.equal(
        await store.page("t", "response", "r", { limit: 3, order: "asc", after: "zz" }, T0),
        "no_cursor",
      );
    });

    it("conversations: items in the order they came, a response's input and output join, delete an item", async () => {
      const store = await open();
      const body = JSON.stringify({ id: "c", object: "conversation", metadata: {} });
      await store.createConversation("t", "c", body, [item("c1"), item("c2")], T0);
      assert.equal(await store.addConversationItems("t", "c", [item("c3")], T0 + 1), true);
      assert.equal(
        await store.saveResponse(
          "t",
          response("r", [item("u")], [item("a")], { conversationId: "c" }),
          T0 + 2,
        ),
        "saved",
      );
      // store: false with a conversation: the items join it, the response is not kept.
      await store.saveResponse(
        "t",
        response("r2", [item("u2")], [item("a2")], { conversationId: "c", keep: false }),
        T0 + 3,
      );
      assert.deepEqual(ids(await store.conversationItems("t", "c", T0 + 4)), [
        "c1",
        "c2",
        "c3",
        "u",
        "a",
        "u2",
        "a2",
      ]);
      assert.ok(await store.response("t", "r", T0 + 4));
      assert.equal(await store.response("t", "r2", T0 + 4), undefined);
      assert.equal(await store.deleteConversationItem("t", "c", "c2", T0 + 5), "deleted");
      assert.equal(await store.deleteConversationItem("t", "c", "c2", T0 + 5), "no_item");
      assert.equal(await store.conversationItem("t", "c", "c2", T0 + 5), undefined);
      assert.ok(await store.conversationItem("t", "c", "c3", T0 + 5));
      const updated = JSON.stringify({ id: "c", object: "conversation", metadata: { topic: "weather" } });
      assert.equal(await store.updateConversation("t", "c", updated, T0 + 6), true);
      assert.equal(await store.conversation("t", "c", T0 + 6), updated);
      // Deleting the conversation leaves the response that joined it, and the byte count adds up.
      assert.equal(await store.deleteObject("t", "conversation", "c", T0 + 7), true);
      assert.equal(await store.conversationItems("t", "c", T0 + 7), undefined);
      assert.ok(await store.response("t", "r", T0 + 7));
      assert.equal(await store.deleteObject("t", "response", "r", T0 + 7), true);
      assert.equal(await store.sizeBytes(), 0);
    });
    it("batch tables: a line recorded once, results in line order, pages newest first, per tenant", async () => {
      const store = await open();
      for (const id of ["f1", "f2", "f3"]) await store.saveFile("t", id, JSON.stringify({ id }), T0);
      await store.saveFile("other", "f4", JSON.stringify({ id: "f4" }), T0);
      const first = await store.listFiles("t", undefined, 2);
      assert.ok(first !== "no_cursor");
      assert.deepEqual(ids(first.rows), ["f3", "f2"]);
      assert.equal(first.hasMore, true);
      const rest = await store.listFiles("t", "f2", 2);
      assert.ok(rest !== "no_cursor");
      assert.deepEqual([ids(rest.rows), rest.hasMore], [["f1"], false]);
      assert.equal(await store.listFiles("t", "f4", 2), "no_cursor");
      assert.equal(await store.file("other", "f1"), undefined);
      assert.equal(await store.deleteFile("other", "f1"), false);
      assert.equal(await store.deleteFile("t", "f1"), true);

      await store.saveBatch("t", "b1", JSON.stringify({ id: "b1", status: "in_progress" }), true, T0);
      await store.saveBatch("t", "b2", JSON.stringify({ id: "b2", status: "validating" }), true, T0);
      assert.deepEqual(await store.activeBatches(), [
        { tenant: "t", id: "b1" },
        { tenant: "t", id: "b2" },
      ]);
      assert.equal(await store.recordLine("t", "b1", 3, true, '{"line":3}'), true);
      assert.equal(await store.recordLine("t", "b1", 1, true, '{"line":1}'), true);
      assert.equal(await store.recordLine("t", "b1", 2, false, '{"line":2}'), true);
      // A line run again after a crash keeps its first result.
      assert.equal(await store.recordLine("t", "b1", 3, false, '{"line":"again"}'), false);
      assert.deepEqual(await store.recordedLines("t", "b1"), [1, 2, 3]);
      assert.deepEqual(await store.lineResults("t", "b1", true), ['{"line":1}', '{"line":3}']);
      assert.deepEqual(await store.lineResults("t", "b1", false), ['{"line":2}']);
      const batch = await store.batch("t", "b1");
      assert.deepEqual([batch?.completed, batch?.failed], [2, 1]);
      assert.equal(await store.batch("other", "b1"), undefined);
      await store.saveBatch("t", "b1", JSON.stringify({ id: "b1", status: "completed" }), false, T0 + 1);
      assert.deepEqual(await store.activeBatches(), [{ tenant: "t", id: "b2" }]);
      const batches = await store.listBatches("t", undefined, 10);
      assert.ok(batches !== "no_cursor");
      assert.deepEqual(ids(batches.rows), ["b2", "b1"]);
      assert.equal(JSON.parse((await store.batch("t", "b1"))!.body).status, "completed");
    });
  });
}
