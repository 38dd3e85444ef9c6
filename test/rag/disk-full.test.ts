/**
 * A full disk (#23), for real: the SQLite store on a small tmpfs. Writes that no longer fit are a 507
 * with a clear message (not a 500), what was committed stays whole and searchable, deletes still go
 * through (the DISK_RESERVE_BYTES slack is released for them), and once they freed room, writes work
 * again. Mounting a tmpfs needs root: elsewhere the test is skipped and says so.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import Database from "better-sqlite3";
import pg from "pg";
import { SQLITE_FILE_NAME } from "../../src/rag/store/sqlite-store.js";
import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../helpers/pg.js";
import { makeTempDir, openRagApp, ragClient, removeTempDirs, type RagApp } from "../helpers/rag-http.js";

const mountPoint = makeTempDir("disk-full");
let mounted = false;
try {
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=12m", "tmpfs", mountPoint], { stdio: "ignore" });
  mounted = true;
} catch {
  // Not root, or no mount here: the describe below is skipped.
}

after(() => {
  if (mounted) execFileSync("umount", [mountPoint]);
  removeTempDirs();
});

/** Text that does not compress and does not repeat: unique words of random hex. */
const noise = (words: number) =>
  Array.from({ length: words }, () => `w${randomBytes(6).toString("hex")}`).join(" ");

describe(
  "a full disk under the SQLite store",
  { skip: mounted ? false : "mounting a tmpfs needs root" },
  () => {
    let app: RagApp;
    before(async () => {
      ({ app } = await openRagApp({ DATA_DIR: mountPoint, DISK_RESERVE_BYTES: String(2 * 1024 * 1024) }));
    });
    after(() => app.close());

    it("answers 507 to writes, keeps what was committed, lets deletes through, then writes again", async (t) => {
      const rag = ragClient(app);
      const kept = await rag.build({
        index_name: "kept",
        documents: ["The lighthouse keeper logs every storm."],
      });
      assert.equal(kept.statusCode, 201, kept.body);
      assert.equal((await rag.build({ index_name: "fill", documents: ["seed"] })).statusCode, 201);

      let full: { statusCode: number; json(): { error: { code: string; message: string } } } | undefined;
      let appended = 0;
      for (let i = 0; i < 1000 && full === undefined; i++) {
        const res = await rag.addDocuments("fill", { documents: [{ id: `doc-${i}`, text: noise(1000) }] });
        if (res.statusCode === 200) appended++;
        else full = res;
      }
      t.diagnostic(`${appended} documents appended before the disk was full: ${full?.json().error.message}`);
      assert.ok(full, "the disk never filled");
      assert.equal(full.statusCode, 507, JSON.stringify(full.json()));
      assert.equal(full.json().error.code, "insufficient_storage");
      assert.match(full.json().error.message, /storage is full.*Deletes still work/);
      // Any write that adds data is refused the same way; a new index too.
      const another = await rag.build({ index_name: "late", documents: [noise(4000)] });
      assert.equal(another.statusCode, 507);

      // Nothing lost: the committed indices answer as before.
      const found = await rag.query({ index_name: "kept", query: "lighthouse storm" });
      assert.equal(found.statusCode, 200);
      assert.equal(found.json().count, 1);
      const fill = (await rag.indices()).json().indices.find((i: { name: string }) => i.name === "fill");
      assert.equal(fill.documents_count, appended + 1);

      // Something else fills the disk to the last byte: deletes still go through (the slack is
      // released for them), writes stay refused until there is room again.
      const filler = path.join(mountPoint, "filler.bin");
      const fd = fs.openSync(filler, "w");
      try {
        for (;;) fs.writeSync(fd, Buffer.alloc(64 * 1024));
      } catch (error) {
        assert.equal((error as NodeJS.ErrnoException).code, "ENOSPC");
      } finally {
        fs.closeSync(fd);
      }
      assert.equal((await rag.addDocuments("kept", { documents: [{ id: "x", text: "x" }] })).statusCode, 507);
      const deletedDoc = await rag.deleteDocument("fill", "doc-0");
      assert.equal(deletedDoc.statusCode, 200, deletedDoc.body);
      const deletedIndex = await rag.deleteIndex("fill");
      assert.equal(deletedIndex.statusCode, 200, deletedIndex.body);
      fs.rmSync(filler);

      // The room they freed is usable again (and the slack is back before any write is taken).
      const again = await rag.addDocuments("kept", {
        documents: [{ id: "after", text: "Calm seas after." }],
      });
      assert.equal(again.statusCode, 200, again.body);
      assert.ok(fs.existsSync(path.join(mountPoint, `${SQLITE_FILE_NAME}.reserve`)));
      assert.equal((await rag.query({ index_name: "kept", query: "calm seas" })).json().count, 1);
    });

    it("leaves a database whose integrity check is ok", async () => {
      await app.close();
      const db = new Database(path.join(mountPoint, SQLITE_FILE_NAME), { readonly: true });
      try {
        assert.equal(db.pragma("integrity_check", { simple: true }), "ok");
        // New databases are made so that freed pages can be given back (incremental auto-vacuum).
        assert.equal(db.pragma("auto_vacuum", { simple: true }), 2);
      } finally {
        db.close();
      }
    });
  },
);

const pgUnavailable = await postgresUnavailable();

/**
 * PostgreSQL's disk is not ours to fill: the server itself raises its real disk_full error (SQLSTATE
 * 53100) from a trigger on inserts, so writes meet exactly what a full disk gives the store.
 */
describe("PostgreSQL reporting a full disk (53100)", { skip: pgUnavailable ?? false }, () => {
  let db: TestDatabase;
  let app: RagApp;
  before(async () => {
    db = await createTestDatabase();
    ({ app } = await openRagApp({ DATABASE_URL: db.url }));
  });
  after(async () => {
    await app.close();
    await db.drop();
  });

  it("answers 507 to writes, keeps what was committed and still deletes", async () => {
    const rag = ragClient(app);
    const built = await rag.build({
      index_name: "kept",
      documents: ["The lighthouse keeper logs storms.", "Gulls."],
    });
    assert.equal(built.statusCode, 201, built.body);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(`CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`);
      await client.query(
        "CREATE TRIGGER full_disk BEFORE INSERT ON lectern_documents FOR EACH ROW EXECUTE FUNCTION full_disk()",
      );
    } finally {
      await client.end();
    }
    const added = await rag.addDocuments("kept", { documents: [{ id: "late", text: "More storms." }] });
    assert.equal(added.statusCode, 507, added.body);
    assert.equal(added.json().error.code, "insufficient_storage");
    assert.equal((await rag.build({ index_name: "new", documents: ["x"] })).statusCode, 507);
    assert.equal((await rag.query({ index_name: "kept", query: "lighthouse" })).json().count, 1);
    const ids = (await rag.query({ index_name: "kept", query: "gulls", answer: "none" })).json().results;
    assert.equal(ids.length, 1);
    const deleted = await rag.deleteDocument("kept", ids[0].document_id);
    assert.equal(deleted.statusCode, 200, deleted.body);
    assert.equal((await rag.query({ index_name: "kept", query: "gulls" })).json().count, 0);
  });
});
