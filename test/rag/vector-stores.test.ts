/**
 * OpenAI's vector stores and files APIs on the RAG app, driven by the official openai client: stores
 * with `vs_` ids apart from their free-form names, update, file batches (uploadAndPoll, createAndPoll,
 * cancel, list files), vector store files (attributes, static chunking, update, content, status
 * filter), cursor pagination, search in OpenAI's exact shape with chunk positions in `lectern_`
 * attributes, tenants, and records that outlive a restart. On SQLite, and on PostgreSQL where one
 * answers (skipped otherwise).
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import OpenAI, { toFile } from "openai";
import { buildRagApp } from "../../src/rag/app.js";
import { testConfig } from "../helpers/env.js";
import { HANDBOOK } from "../helpers/handbook.js";
import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../helpers/pg.js";

type RagApp = Awaited<ReturnType<typeof buildRagApp>>;

async function serve(env: Record<string, string>): Promise<{ app: RagApp; baseURL: string }> {
  const app = await buildRagApp({ config: testConfig(env) });
  await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, baseURL: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1` };
}

const clientFor = (baseURL: string, apiKey = "unused") => new OpenAI({ baseURL, apiKey, maxRetries: 0 });

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

const upload = async (client: OpenAI, name: string, text: string) =>
  client.files.create({ file: await toFile(Buffer.from(text), name), purpose: "assistants" });

/** A Markdown guide long enough for several 400-character chunks, with headings. */
const GUIDE =
  "# Lighthouse guide\n\n## Lamps\n\n" +
  Array.from(
    { length: 12 },
    (_, i) => `The keeper trims lamp wick number ${i} before dusk every evening.`,
  ).join(" ") +
  "\n\n## Fog horns\n\nThe fog horn sounds twice a minute when the harbour is hidden.";

/** Every behaviour, against one app; `reopen` restarts it on the same data (SQLite folder, or database). */
function vectorStoreSuite(
  label: string,
  env: () => Promise<Record<string, string>> | Record<string, string>,
) {
  describe(`vector stores through the openai client (${label})`, () => {
    let served: { app: RagApp; baseURL: string };
    let client: OpenAI;
    let config: Record<string, string>;
    let storeId = "";
    const fileIds: Record<string, string> = {};

    before(async () => {
      config = await env();
      served = await serve(config);
      client = clientFor(served.baseURL);
    });
    after(() => served.app.close());

    it("creates stores with vs_ ids, free-form names (or none), metadata and expiry", async () => {
      const store = await client.vectorStores.create({
        name: "Support FAQ",
        metadata: { team: "support" },
        expires_after: { anchor: "last_active_at", days: 7 },
      });
      assert.match(store.id, /^vs_[A-Za-z0-9]+$/);
      assert.equal(store.name, "Support FAQ");
      assert.deepEqual(store.metadata, { team: "support" });
      assert.deepEqual(store.expires_after, { anchor: "last_active_at", days: 7 });
      assert.equal(store.expires_at, store.last_active_at! + 7 * 86_400);
      assert.equal(store.status, "completed");
      assert.deepEqual(store.file_counts, {
        in_progress: 0,
        completed: 0,
        failed: 0,
        cancelled: 0,
        total: 0,
      });
      storeId = store.id;
      const unnamed = await client.vectorStores.create({});
      assert.match(unnamed.id, /^vs_/);
      assert.notEqual(unnamed.id, storeId);
      assert.equal(unnamed.name, "");
      assert.equal((await client.vectorStores.delete(unnamed.id)).deleted, true);
    });

    it("adds a file with attributes and static chunking; retrieve, content, search by attribute", async () => {
      const guide = await upload(client, "guide.md", GUIDE);
      const added = await client.vectorStores.files.createAndPoll(storeId, {
        file_id: guide.id,
        attributes: { team: "harbour", priority: 2, public: true },
        chunking_strategy: {
          type: "static",
          static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 0 },
        },
      });
      fileIds.guide = guide.id;
      assert.equal(added.status, "completed");
      assert.equal(added.vector_store_id, storeId);
      assert.deepEqual(added.attributes, { team: "harbour", priority: 2, public: true });
      assert.deepEqual(added.chunking_strategy, {
        type: "static",
        static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 0 },
      });
      assert.ok(added.usage_bytes > 0);
      const retrieved = await client.vectorStores.files.retrieve(guide.id, { vector_store_id: storeId });
      assert.deepEqual(retrieved.attributes, added.attributes);
      const content = await collect(
        client.vectorStores.files.content(guide.id, { vector_store_id: storeId }),
      );
      assert.deepEqual(content, [{ type: "text", text: GUIDE }]);

      const hits = await collect(
        client.vectorStores.search(storeId, {
          query: "fog horn harbour keeper lamp wick",
          filters: { type: "eq", key: "team", value: "harbour" },
        }),
      );
      assert.ok(hits.length > 1, "a 400-character chunking cuts the guide in several chunks");
      // 100 tokens are taken as 400 characters.
      for (const hit of hits) assert.ok(hit.content[0]!.text.length <= 400, hit.content[0]!.text);
      const fog = hits.find((hit) => /fog horn/.test(hit.content[0]!.text))!;
      assert.equal(fog.file_id, guide.id);
      assert.equal(fog.filename, "guide.md");
      const attributes = fog.attributes!;
      assert.equal(attributes.team, "harbour");
      assert.equal(attributes.priority, 2);
      assert.equal(attributes.public, true);
      assert.equal(typeof attributes.lectern_start, "number");
      // The heading path where the chunk starts.
      const section =
        (attributes.lectern_start as number) < GUIDE.indexOf("## Fog horns") ? "Lamps" : "Fog horns";
      assert.equal(attributes.lectern_headings, `Lighthouse guide > ${section}`);
      assert.equal(
        GUIDE.slice(attributes.lectern_start as number, attributes.lectern_end as number),
        fog.content[0]!.text,
      );
    });

    it("search answers OpenAI's page with no other keys", async () => {
      const response = await fetch(`${served.baseURL}/vector_stores/${storeId}/search`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          query: ["lamp wick", "dusk"],
          max_num_results: 2,
          ranking_options: { ranker: "auto", score_threshold: 0 },
          rewrite_query: false,
        }),
      });
      assert.equal(response.status, 200);
      const page = (await response.json()) as Record<string, unknown> & {
        data: Array<Record<string, unknown>>;
      };
      assert.deepEqual(Object.keys(page).sort(), ["data", "has_more", "next_page", "object", "search_query"]);
      assert.equal(page.object, "vector_store.search_results.page");
      assert.deepEqual(page.search_query, ["lamp wick", "dusk"]);
      assert.equal(page.data.length, 2);
      for (const hit of page.data) {
        assert.deepEqual(Object.keys(hit).sort(), ["attributes", "content", "file_id", "filename", "score"]);
        assert.deepEqual(Object.keys((hit.content as object[])[0]!).sort(), ["text", "type"]);
        for (const value of Object.values(hit.attributes as object))
          assert.ok(["string", "number", "boolean"].includes(typeof value), String(value));
      }
    });

    it("file batches: uploadAndPoll, createAndPoll with per-file attributes, a missing file, cancel, list files", async () => {
      const uploaded = await client.vectorStores.fileBatches.uploadAndPoll(storeId, {
        files: await Promise.all(HANDBOOK.map((doc) => toFile(Buffer.from(doc.text), `${doc.id}.md`))),
      });
      assert.match(uploaded.id, /^vsfb_/);
      assert.equal(uploaded.object, "vector_store.files_batch");
      assert.equal(uploaded.status, "completed");
      assert.deepEqual(uploaded.file_counts, {
        in_progress: 0,
        completed: 3,
        failed: 0,
        cancelled: 0,
        total: 3,
      });
      const inBatch = await collect(
        client.vectorStores.fileBatches.listFiles(uploaded.id, { vector_store_id: storeId, limit: 1 }),
      );
      assert.equal(inBatch.length, 3);

      const extra = await upload(
        client,
        "tides.txt",
        "High tide comes twice a day; the harbour master posts the tide table.",
      );
      fileIds.tides = extra.id;
      const batch = await client.vectorStores.fileBatches.createAndPoll(storeId, {
        files: [
          { file_id: extra.id, attributes: { team: "harbour", priority: 5 } },
          { file_id: "file-doesnotexist" },
        ],
      });
      assert.equal(batch.status, "completed");
      assert.deepEqual(batch.file_counts, {
        in_progress: 0,
        completed: 1,
        failed: 1,
        cancelled: 0,
        total: 2,
      });
      const failed = await collect(
        client.vectorStores.fileBatches.listFiles(batch.id, { vector_store_id: storeId, filter: "failed" }),
      );
      assert.deepEqual(
        failed.map((file) => [file.id, file.status, file.last_error?.code]),
        [["file-doesnotexist", "failed", "invalid_file"]],
      );
      const tides = await client.vectorStores.files.retrieve(extra.id, { vector_store_id: storeId });
      assert.deepEqual(tides.attributes, { team: "harbour", priority: 5 });
      const retrieved = await client.vectorStores.fileBatches.retrieve(batch.id, {
        vector_store_id: storeId,
      });
      assert.deepEqual(retrieved, batch);
      // Done when created: nothing left to cancel, and it is returned as it is.
      const cancelled = await client.vectorStores.fileBatches.cancel(batch.id, { vector_store_id: storeId });
      assert.equal(cancelled.status, "completed");
      await assert.rejects(
        client.vectorStores.fileBatches.retrieve("vsfb_nope", { vector_store_id: storeId }),
        OpenAI.NotFoundError,
      );
    });

    it("files: list with a status filter and auto-pagination, update attributes, delete", async () => {
      const all = await collect(client.vectorStores.files.list(storeId, { limit: 2 }));
      assert.equal(all.length, 6);
      assert.equal(new Set(all.map((file) => file.id)).size, 6);
      const completed = await collect(
        client.vectorStores.files.list(storeId, { filter: "completed", limit: 2 }),
      );
      assert.equal(completed.length, 5);
      const asc = await collect(client.vectorStores.files.list(storeId, { order: "asc" }));
      assert.deepEqual(
        asc.map((file) => file.id),
        all.map((file) => file.id).reverse(),
      );

      const updated = await client.vectorStores.files.update(fileIds.tides!, {
        vector_store_id: storeId,
        attributes: { team: "tides", priority: 9 },
      });
      assert.deepEqual(updated.attributes, { team: "tides", priority: 9 });
      const hits = await collect(
        client.vectorStores.search(storeId, {
          query: "tide",
          filters: { type: "eq", key: "team", value: "tides" },
        }),
      );
      assert.deepEqual(
        hits.map((hit) => hit.file_id),
        [fileIds.tides],
      );

      const store = await client.vectorStores.retrieve(storeId);
      assert.deepEqual(store.file_counts, {
        in_progress: 0,
        completed: 5,
        failed: 1,
        cancelled: 0,
        total: 6,
      });
      assert.ok(store.usage_bytes > 0);
      const removed = await client.vectorStores.files.delete(fileIds.tides!, { vector_store_id: storeId });
      assert.deepEqual(removed, { id: fileIds.tides, object: "vector_store.file.deleted", deleted: true });
      await assert.rejects(
        client.vectorStores.files.retrieve(fileIds.tides!, { vector_store_id: storeId }),
        OpenAI.NotFoundError,
      );
      assert.equal((await client.vectorStores.retrieve(storeId)).file_counts.completed, 4);
    });

    it("updates a store's name, metadata and expiry", async () => {
      const updated = await client.vectorStores.update(storeId, {
        name: "Harbour FAQ (2026)",
        metadata: { team: "harbour", tier: "gold" },
        expires_after: null,
      });
      assert.equal(updated.id, storeId);
      assert.equal(updated.name, "Harbour FAQ (2026)");
      assert.deepEqual(updated.metadata, { team: "harbour", tier: "gold" });
      assert.equal(updated.expires_after, null);
      assert.equal(updated.expires_at, null);
      const kept = await client.vectorStores.update(storeId, { name: "Harbour FAQ" });
      assert.deepEqual(kept.metadata, { team: "harbour", tier: "gold" });
      assert.equal(kept.name, "Harbour FAQ");
    });

    it("lists stores by cursor: after (auto-pagination), before, order", async () => {
      const created = [storeId];
      for (let i = 0; i < 4; i++) created.push((await client.vectorStores.create({ name: `Store ${i}` })).id);
      const desc = await collect(client.vectorStores.list({ limit: 2 }));
      assert.deepEqual(
        desc.map((store) => store.id),
        [...created].reverse(),
      );
      const asc = await collect(client.vectorStores.list({ limit: 3, order: "asc" }));
      assert.deepEqual(
        asc.map((store) => store.id),
        created,
      );
      const first = await client.vectorStores.list({ limit: 2, order: "asc" });
      assert.deepEqual([first.data.map((store) => store.id), first.has_more], [created.slice(0, 2), true]);
      const raw = (await (
        await fetch(`${served.baseURL}/vector_stores?order=asc&limit=2&before=${created[3]}`)
      ).json()) as {
        data: Array<{ id: string }>;
        first_id: string;
        last_id: string;
        has_more: boolean;
      };
      assert.deepEqual(
        raw.data.map((store) => store.id),
        created.slice(1, 3),
      );
      assert.deepEqual([raw.first_id, raw.last_id, raw.has_more], [created[1], created[2], true]);
      for (const id of created.slice(1)) await client.vectorStores.delete(id);
    });

    it("keeps its records across a restart; delete removes the store and its files' records", async () => {
      await served.app.close();
      served = await serve(config);
      client = clientFor(served.baseURL);
      const store = await client.vectorStores.retrieve(storeId);
      assert.equal(store.name, "Harbour FAQ");
      assert.deepEqual(store.metadata, { team: "harbour", tier: "gold" });
      assert.equal(store.file_counts.total, 5);
      const guide = await client.vectorStores.files.retrieve(fileIds.guide!, { vector_store_id: storeId });
      assert.deepEqual(guide.attributes, { team: "harbour", priority: 2, public: true });

      // With the upload deleted, the store still has the text (from its chunks) and takes new attributes.
      await client.files.delete(fileIds.guide!);
      const [content] = await collect(
        client.vectorStores.files.content(fileIds.guide!, { vector_store_id: storeId }),
      );
      const words = (text: string) => text.split(/\s+/).join(" ");
      assert.equal(words(content!.text!), words(GUIDE));
      await client.vectorStores.files.update(fileIds.guide!, {
        vector_store_id: storeId,
        attributes: { team: "lamps" },
      });
      const hits = await collect(
        client.vectorStores.search(storeId, {
          query: "wick",
          filters: { type: "eq", key: "team", value: "lamps" },
        }),
      );
      assert.ok(hits.length > 0 && hits.every((hit) => hit.file_id === fileIds.guide));
      assert.deepEqual(hits[0]!.attributes!.team, "lamps");
      assert.equal(hits[0]!.attributes!.priority, undefined);

      assert.deepEqual(await client.vectorStores.delete(storeId), {
        id: storeId,
        object: "vector_store.deleted",
        deleted: true,
      });
      await assert.rejects(client.vectorStores.retrieve(storeId), OpenAI.NotFoundError);
      await assert.rejects(
        client.vectorStores.files.retrieve(fileIds.guide!, { vector_store_id: storeId }),
        OpenAI.NotFoundError,
      );
      assert.deepEqual(await collect(client.vectorStores.list()), []);
    });
  });
}

vectorStoreSuite("SQLite", () => ({ DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-vstores-")) }));

const pgUnavailable = await postgresUnavailable();
describe("on PostgreSQL", { skip: pgUnavailable ?? false }, () => {
  let db: TestDatabase | null = null;
  after(() => db?.drop());
  vectorStoreSuite("PostgreSQL", async () => {
    db = await createTestDatabase();
    return { DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-vstores-pg-")), DATABASE_URL: db.url };
  });
});

describe("vector stores and tenants", () => {
  let served: { app: RagApp; baseURL: string };

  before(async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-vstores-keys-"));
    writeFileSync(path.join(dir, "keys"), "team-a-secret team-a\nteam-b-secret team-b\n");
    served = await serve({ DATA_DIR: dir, API_KEYS_FILE: path.join(dir, "keys") });
  });
  after(() => served.app.close());

  it("a key sees, searches, updates and deletes its own tenant's stores only", async () => {
    const teamA = clientFor(served.baseURL, "team-a-secret");
    const teamB = clientFor(served.baseURL, "team-b-secret");
    const store = await teamA.vectorStores.create({ name: "Notes" });
    const file = await upload(teamA, "notes.txt", "The quarterly review is on Friday.");
    await teamA.vectorStores.fileBatches.createAndPoll(store.id, { file_ids: [file.id] });
    assert.deepEqual(
      (await collect(teamA.vectorStores.list())).map((s) => s.id),
      [store.id],
    );
    assert.deepEqual(await collect(teamB.vectorStores.list()), []);
    await assert.rejects(teamB.vectorStores.retrieve(store.id), OpenAI.NotFoundError);
    await assert.rejects(
      collect(teamB.vectorStores.search(store.id, { query: "review" })),
      OpenAI.NotFoundError,
    );
    await assert.rejects(teamB.vectorStores.update(store.id, { name: "mine" }), OpenAI.NotFoundError);
    await assert.rejects(teamB.vectorStores.delete(store.id), OpenAI.NotFoundError);
    // B's batch cannot take A's upload.
    const theirs = await (await teamB.vectorStores.create({ name: "B" })).id;
    const batch = await teamB.vectorStores.fileBatches.createAndPoll(theirs, { file_ids: [file.id] });
    assert.equal(batch.file_counts.failed, 1);
    assert.equal((await teamA.vectorStores.retrieve(store.id)).name, "Notes");
  });
});
