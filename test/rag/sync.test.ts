/** Folder sync (#14): POST /rag/indices/{name}/sync applies only what changed in a folder. */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import Database from "better-sqlite3";
import { SQLITE_FILE_NAME } from "../../src/rag/store/sqlite-store.js";
import {
  assertApiError,
  assertStatus,
  makeTempDir,
  openRagApp,
  ragClient,
  removeTempDirs,
  type RagApp,
  type RagClient,
} from "../helpers/rag-http.js";

after(() => removeTempDirs());

const FILE_COUNT = 200;
/** Each file holds a word of its own (`topicNNN`), so a query can find exactly its chunks. */
const token = (n: number) => `topic${String(n).padStart(3, "0")}`;
const fileId = (n: number) => path.join("notes", n % 2 === 0 ? "even" : "odd", `${token(n)}.md`);
const fileText = (n: number, edition = "first") =>
  `# Note ${n}\n\nThis note is about ${token(n)} and nothing else. It is the ${edition} edition. ` +
  "Lectern keeps the notes of this folder searchable. ".repeat(1 + (n % 5));

interface SyncBody {
  created: boolean;
  added: number;
  updated: number;
  deleted: number;
  unchanged: number;
  failed: Array<{ file: string; message: string }>;
  documents_count: number;
  chunks_count: number;
  version: number;
}

const sync = (rag: RagClient, name: string, body: Record<string, unknown>) =>
  rag.send("POST", `/rag/indices/${name}/sync`, body);

async function synced(rag: RagClient, name: string, body: Record<string, unknown>): Promise<SyncBody> {
  const res = await sync(rag, name, body);
  assertStatus(res, 200);
  return res.json() as SyncBody;
}

/**
 * The stored chunk rows of an index, by chunk id: their row ids change when a document is written
 * again, even with the same text, so equal row ids mean the document was not touched.
 */
function storedChunkRows(dataDir: string, index: string): Map<string, number> {
  const db = new Database(path.join(dataDir, SQLITE_FILE_NAME), { readonly: true });
  try {
    const rows = db
      .prepare<[string], { id: number; chunk_id: string }>(
        "SELECT c.id, c.chunk_id FROM chunks c JOIN indices i ON i.id = c.index_id WHERE i.name = ?",
      )
      .all(index);
    return new Map(rows.map((row) => [row.chunk_id, row.id]));
  } finally {
    db.close();
  }
}

/** What the index holds of one file: its chunks (ids, texts, metadata) as a query returns them. */
async function chunksOf(rag: RagClient, index: string, n: number) {
  const res = await rag.query({
    index_name: index,
    query: token(n),
    filter: { file: fileId(n) },
    top_k: 100,
    answer: "none",
  });
  assertStatus(res, 200);
  const results = res.json().results as Array<Record<string, unknown>>;
  return results
    .map(({ chunk_id, text, document_id, file, title, metadata }) => ({
      chunk_id,
      text,
      document_id,
      file,
      title,
      metadata,
    }))
    .sort((a, b) => String(a.chunk_id).localeCompare(String(b.chunk_id)));
}

describe("folder sync over HTTP", () => {
  let app: RagApp;
  let rag: RagClient;
  let dataDir: string;
  let root: string;
  let outside: string;

  before(async () => {
    const base = makeTempDir("rag-sync");
    root = path.join(base, "files");
    outside = path.join(base, "outside");
    fs.mkdirSync(path.join(outside, "secret"), { recursive: true });
    fs.writeFileSync(path.join(outside, "secret", "s.txt"), "Secret text outside the root.");
    for (let n = 0; n < FILE_COUNT; n++) {
      fs.mkdirSync(path.dirname(path.join(root, fileId(n))), { recursive: true });
      fs.writeFileSync(path.join(root, fileId(n)), fileText(n));
    }
    ({ app, dataDir } = await openRagApp({ RAG_FILES_DIR: root }));
    rag = ragClient(app);
  });
  after(async () => app.close());

  it("200 files; one edited, one removed, one added: exactly those three changes", async () => {
    const first = await synced(rag, "notes", { folder: "notes" });
    assert.equal(first.created, true);
    assert.deepEqual(
      [first.added, first.updated, first.deleted, first.unchanged, first.failed.length],
      [FILE_COUNT, 0, 0, 0, 0],
    );
    assert.equal(first.documents_count, FILE_COUNT);

    const edited = 17;
    const removed = 42;
    const addedN = FILE_COUNT;
    const before = new Map<number, unknown>();
    for (let n = 0; n < FILE_COUNT; n++) before.set(n, await chunksOf(rag, "notes", n));
    const rowsBefore = storedChunkRows(dataDir, "notes");
    assert.equal((before.get(edited) as unknown[]).length, 1);

    fs.writeFileSync(path.join(root, fileId(edited)), fileText(edited, "second"));
    fs.rmSync(path.join(root, fileId(removed)));
    fs.writeFileSync(path.join(root, fileId(addedN)), fileText(addedN));

    const second = await synced(rag, "notes", { folder: "notes" });
    assert.equal(second.created, false);
    assert.deepEqual(
      [second.added, second.updated, second.deleted, second.unchanged, second.failed],
      // 200 files before: all but the edited and the removed one are unchanged (198, not 197: the
      // added file is the 201st seen, not one of the 200).
      [1, 1, 1, FILE_COUNT - 2, []],
    );
    assert.equal(second.documents_count, FILE_COUNT);
    assert.ok(second.version > first.version);

    const rowsAfter = storedChunkRows(dataDir, "notes");
    let untouched = 0;
    for (let n = 0; n < FILE_COUNT; n++) {
      if (n === edited || n === removed) continue;
      const chunks = await chunksOf(rag, "notes", n);
      assert.deepEqual(chunks, before.get(n), `${fileId(n)}: same chunks`);
      for (const { chunk_id } of chunks) {
        const id = String(chunk_id);
        assert.equal(rowsAfter.get(id), rowsBefore.get(id), `${id}: same stored row, not rewritten`);
      }
      untouched++;
    }
    assert.equal(untouched, FILE_COUNT - 2);
    const [editedChunk] = await chunksOf(rag, "notes", edited);
    assert.match(String(editedChunk!.text), /second edition/);
    assert.equal(editedChunk!.document_id, fileId(edited));
    assert.deepEqual(await chunksOf(rag, "notes", removed), []);
    const [addedChunk] = await chunksOf(rag, "notes", addedN);
    assert.equal(addedChunk!.text, fileText(addedN).trim());
    assert.equal(addedChunk!.file, fileId(addedN));
  });

  it("is idempotent: a second sync with nothing changed writes nothing", async () => {
    const versionBefore = (await rag.indexStats("notes")).json().version;
    const again = await synced(rag, "notes", { folder: path.join(root, "notes") });
    assert.deepEqual(
      [again.added, again.updated, again.deleted, again.unchanged, again.failed],
      [0, 0, 0, FILE_COUNT, []],
    );
    assert.equal(again.version, versionBefore);
    assert.equal((await rag.indexStats("notes")).json().version, versionBefore);
  });

  it("a subfolder sync touches only the documents under it", async () => {
    fs.rmSync(path.join(root, fileId(1)));
    const odd = await synced(rag, "notes", { folder: "notes/odd" });
    assert.deepEqual([odd.added, odd.updated, odd.deleted], [0, 0, 1]);
    assert.equal(odd.unchanged, FILE_COUNT / 2 - 1, "the other odd files (the edited 17 included)");
    assert.equal(odd.documents_count, FILE_COUNT - 1);
  });

  it("a bad file is reported by name, the others sync, and its indexed version stays", async () => {
    const dir = path.join(root, "mixed");
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, "good.txt"), "Good text about glaciers and fjords.");
    fs.writeFileSync(path.join(dir, "later-bad.txt"), "Readable text about volcanoes.");
    fs.writeFileSync(path.join(dir, "broken.pdf"), "not a pdf at all");
    fs.writeFileSync(path.join(dir, ".hidden.txt"), "Hidden text about planets.");
    fs.writeFileSync(path.join(dir, "skipped.exe"), "MZ");
    fs.symlinkSync(path.join(outside, "secret", "s.txt"), path.join(dir, "link-out.txt"));
    fs.symlinkSync(path.join(outside, "secret"), path.join(dir, "linkdir-out"));

    const first = await synced(rag, "mixed", { folder: "mixed" });
    assert.deepEqual([first.added, first.updated, first.deleted, first.unchanged], [2, 0, 0, 0]);
    assert.deepEqual(
      first.failed.map((f) => f.file),
      [path.join("mixed", "broken.pdf")],
    );
    assert.match(first.failed[0]!.message, /not a PDF/);
    assert.equal(
      first.documents_count,
      2,
      "hidden files, other types and links leaving the root are skipped",
    );

    // Now a file that was indexed becomes unreadable (binary): it fails and its old version stays.
    fs.writeFileSync(path.join(dir, "later-bad.txt"), Buffer.from([0x63, 0x61, 0x00, 0xe9, 0xff]));
    fs.writeFileSync(path.join(dir, "new.md"), "# New\n\nNew text about deserts.");
    const second = await synced(rag, "mixed", { folder: "mixed" });
    assert.deepEqual([second.added, second.updated, second.deleted, second.unchanged], [1, 0, 0, 1]);
    assert.deepEqual(second.failed.map((f) => f.file).sort(), [
      path.join("mixed", "broken.pdf"),
      path.join("mixed", "later-bad.txt"),
    ]);
    const volcano = (await rag.query({ index_name: "mixed", query: "volcanoes", answer: "none" })).json();
    assert.equal(volcano.results[0].text, "Readable text about volcanoes.");
    assert.equal(second.documents_count, 3);
  });

  it("a sync into a missing index creates it with the settings given", async () => {
    const created = await synced(rag, "created", {
      folder: "mixed",
      scorer: "bm25",
      chunk_size: 200,
      overlap: 20,
      tenant_id: "team",
    });
    assert.equal(created.created, true);
    const stats = (await rag.indexStats("created", "team")).json();
    assert.deepEqual([stats.scorer, stats.chunk_size, stats.overlap], ["bm25", 200, 20]);
    assertApiError(await rag.indexStats("created"), 404);
    // An existing index keeps its own settings.
    await synced(rag, "created", { folder: "mixed", scorer: "tfidf", tenant_id: "team" });
    assert.equal((await rag.indexStats("created", "team")).json().scorer, "bm25");
  });

  it("folders outside RAG_FILES_DIR are a 400; a missing folder a 404; a file a 400", async () => {
    fs.symlinkSync(outside, path.join(root, "link-to-outside"));
    for (const folder of ["..", "../outside", outside, "/etc", "link-to-outside", "notes/../../outside"]) {
      const res = await sync(rag, "refused", { folder });
      const { message } = assertApiError(res, 400);
      assert.match(message, /outside RAG_FILES_DIR/, folder);
    }
    assertApiError(await sync(rag, "refused", { folder: "no-such-folder" }), 404);
    assertApiError(await sync(rag, "refused", { folder: fileId(3) }), 400);
    assertApiError(await sync(rag, "refused", { folder: "notes", overlap: 900 }), 400);
    assertApiError(await sync(rag, "refused", {}), 400);
    assertApiError(await rag.indexStats("refused"), 404);
  });
});

describe("folder sync without RAG_FILES_DIR", () => {
  it("is a 400 that names RAG_FILES_DIR; the route is in openapi.json", async () => {
    const { app } = await openRagApp();
    try {
      const res = await ragClient(app).send("POST", "/rag/indices/x/sync", { folder: "notes" });
      const { message } = assertApiError(res, 400);
      assert.match(message, /RAG_FILES_DIR/);
      const doc = (await ragClient(app).send("GET", "/openapi.json")).json();
      const route = doc.paths["/rag/indices/{index_name}/sync"]?.post;
      assert.ok(route, "the sync route is in openapi.json");
      const body = route.requestBody.content["application/json"].schema;
      assert.deepEqual(body.required, ["folder"]);
    } finally {
      await app.close();
    }
  });
});

describe("folder sync with MAX_BUILD_DOCUMENTS", () => {
  it("more new or changed files than the limit is a 413 and writes nothing", async () => {
    const root = makeTempDir("rag-sync-limit");
    for (const n of [1, 2, 3]) fs.writeFileSync(path.join(root, `${n}.txt`), `Note number ${n}.`);
    const { app } = await openRagApp({ RAG_FILES_DIR: root, MAX_BUILD_DOCUMENTS: "2" });
    const rag = ragClient(app);
    try {
      assertApiError(await sync(rag, "limited", { folder: "." }), 413);
      assertApiError(await rag.indexStats("limited"), 404);
      fs.rmSync(path.join(root, "3.txt"));
      assert.equal((await synced(rag, "limited", { folder: "." })).added, 2);
    } finally {
      await app.close();
    }
  });
});

describe("folder sync with API keys", () => {
  it("acts for the key's tenant, from its own folder: no key is a 401, another tenant a 403", async () => {
    const root = makeTempDir("rag-sync-keys");
    // A tenant key reads RAG_FILES_DIR/<tenant> only (#23).
    fs.mkdirSync(path.join(root, "tenant-a"));
    fs.mkdirSync(path.join(root, "tenant-b"));
    fs.writeFileSync(path.join(root, "tenant-a", "a.txt"), "Apples and pears.");
    fs.writeFileSync(path.join(root, "tenant-b", "b.txt"), "Tenant b's plums.");
    const keysFile = path.join(makeTempDir("rag-sync-keyfile"), "keys.txt");
    fs.writeFileSync(keysFile, "key-for-tenant-a-0001 tenant-a\n");
    const { app } = await openRagApp({ RAG_FILES_DIR: root, API_KEYS_FILE: keysFile });
    const post = (body: unknown, headers: Record<string, string> = {}) =>
      app.inject({
        method: "POST",
        url: "/rag/indices/fruit/sync",
        payload: JSON.stringify(body),
        headers: { "content-type": "application/json", ...headers },
      });
    const key = { authorization: "Bearer key-for-tenant-a-0001" };
    try {
      assertApiError(await post({ folder: "." }), 401);
      assertApiError(await post({ folder: ".", tenant_id: "tenant-b" }, key), 403);
      const res = await post({ folder: "." }, key);
      assertStatus(res, 200);
      assert.deepEqual([res.json().tenant_id, res.json().added], ["tenant-a", 1]);
      const found = await app.inject({
        method: "POST",
        url: "/rag/query",
        payload: JSON.stringify({ index_name: "fruit", query: "apples", answer: "none" }),
        headers: { "content-type": "application/json", ...key },
      });
      // Ids are relative to the tenant's own folder.
      assert.deepEqual(
        found.json().results.map((r: { document_id: string }) => r.document_id),
        ["a.txt"],
      );
      // Another tenant's folder is outside this key's root.
      assertApiError(await post({ folder: "../tenant-b" }, key), 400);
      assertApiError(await post({ folder: path.join(root, "tenant-b") }, key), 400);
    } finally {
      await app.close();
    }
  });
});
