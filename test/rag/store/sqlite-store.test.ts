import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import Database from "better-sqlite3";

import { MIGRATIONS, SQLITE_FILE_NAME, SqliteIndexStore } from "../../../src/rag/store/sqlite-store.js";
import type { IndexKey } from "../../../src/rag/store/types.js";
import { makeEntries, makeWrite } from "../../helpers/store-fixtures.js";
import { storeContract } from "./store-contract.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const CRASH_WRITER = path.join(ROOT, "test/helpers/sqlite-crash-writer.ts");

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
    assert.equal(db.pragma("user_version", { simple: true }), MIGRATIONS.length);
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
      .pluck()
      .all();
    assert.deepEqual(tables, ["chunks", "documents", "indices", "store_state"]);
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
    db.pragma(`user_version = ${MIGRATIONS.length + 1}`);
    db.close();
    assert.throws(() => SqliteIndexStore.open(dir), /newer than this program/);
  });

  it("writes 5,183 documents and ~10,000 chunks in one fast transaction", async (t) => {
    const dir = tempDir();
    const store = SqliteIndexStore.open(dir);
    const settings = { scorer: "bm25" as const, chunkSize: 1000, overlap: 128 };
    const entries = makeEntries(5183, { length: 1500, settings, seed: 3 });
    const change = makeWrite({ tenantId: "default", name: "big" }, "create", entries, { settings });
    // A realistic engine index size.
    change.engineIndex = new Uint8Array(4 * 1024 * 1024).fill(7);
    const started = performance.now();
    const meta = await store.write(change);
    const writeMs = performance.now() - started;
    assert.equal(meta.documentsCount, 5183);
    assert.ok(meta.chunksCount >= 10_000, `${meta.chunksCount} chunks`);

    const loadStarted = performance.now();
    const snapshot = await store.loadSnapshot({ tenantId: "default", name: "big" });
    const loadMs = performance.now() - loadStarted;
    assert.equal(snapshot!.chunks.length, meta.chunksCount);

    const deleteStarted = performance.now();
    assert.equal(await store.deleteIndex({ tenantId: "default", name: "big" }), true);
    const deleteMs = performance.now() - deleteStarted;
    await store.close();

    t.diagnostic(
      `wrote 5183 docs / ${meta.chunksCount} chunks in ${writeMs.toFixed(0)} ms, ` +
        `snapshot in ${loadMs.toFixed(0)} ms, delete in ${deleteMs.toFixed(0)} ms`,
    );
    assert.ok(writeMs < 3000, `write took ${writeMs.toFixed(0)} ms`);
  });

  it("survives a writer killed with SIGKILL mid-write: the index is exactly the earlier version", async (t) => {
    const dir = tempDir();
    const key: IndexKey = { tenantId: "default", name: "crash" };
    let store = SqliteIndexStore.open(dir);
    await store.write(makeWrite(key, "create", makeEntries(50)));
    const observe = async (s: SqliteIndexStore) => {
      const snapshot = await s.loadSnapshot(key);
      return {
        meta: snapshot!.meta,
        chunks: snapshot!.chunks,
        documents: [...snapshot!.documents.keys()].sort(),
      };
    };
    let expected = await observe(store);
    await store.close();

    const DOCUMENTS = 4000;
    let interrupted = 0;
    // The last writer gets time to commit, so the committed path is checked too.
    const delays = [0, 10, 30, 80, 10_000];
    for (const [round, delay] of delays.entries()) {
      const { done } = await runAndKill(dir, key, DOCUMENTS, round, delay);
      store = SqliteIndexStore.open(dir);
      assert.equal(store.integrityCheck(), "ok", `round ${round}`);
      const state = await observe(store);
      if (done !== null) {
        // Committed before the kill: the new version, whole.
        assert.equal(state.meta.version, done, `round ${round}`);
        assert.equal(state.meta.documentsCount, DOCUMENTS);
        assert.equal(state.chunks.length, state.meta.chunksCount);
        assert.ok(state.documents.every((id) => id.startsWith(`crash-${round}-`)));
        expected = state;
      } else if (state.meta.version === expected.meta.version) {
        assert.deepEqual(state, expected, `round ${round}`);
        interrupted++;
      } else {
        // Killed between COMMIT and printing "done": still a whole new version.
        assert.equal(state.meta.documentsCount, DOCUMENTS);
        assert.equal(state.chunks.length, state.meta.chunksCount);
        expected = state;
      }
      await store.close();
    }
    t.diagnostic(`${interrupted} of ${delays.length} writers were killed before their commit`);
    assert.ok(interrupted >= 1, "no writer was interrupted; make the write bigger");
    assert.ok(interrupted < delays.length, "no writer committed; is the crash writer broken?");

    // The store still takes writes after all that.
    store = SqliteIndexStore.open(dir);
    const meta = await store.write(
      makeWrite(key, "replace", makeEntries(3), { expectedVersion: expected.meta.version }),
    );
    assert.equal(meta.documentsCount, 3);
    assert.equal(store.integrityCheck(), "ok");
    await store.close();
  });
});

/** Runs the crash writer, SIGKILLs it `delayMs` after it reported "ready"; returns the version it reported committed, if any. */
function runAndKill(
  dataDir: string,
  key: IndexKey,
  documents: number,
  seed: number,
  delayMs: number,
): Promise<{ done: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", CRASH_WRITER, dataDir, key.tenantId, key.name, String(documents), String(seed)],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    let err = "";
    let timer: NodeJS.Timeout | undefined;
    child.stdout.setEncoding("utf8").on("data", (data: string) => {
      out += data;
      if (timer === undefined && out.includes("ready\n")) {
        timer = setTimeout(() => child.kill("SIGKILL"), delayMs);
      }
    });
    child.stderr.setEncoding("utf8").on("data", (data: string) => (err += data));
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const done = /done (\d+)/.exec(out);
      if (signal !== "SIGKILL" && code !== 0) reject(new Error(`crash writer failed (${code}): ${err}`));
      else resolve({ done: done ? Number(done[1]) : null });
    });
  });
}
