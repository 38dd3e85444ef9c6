/**
 * FolderWalk (src/rag/ingest/files.ts), the budget of a walk of RAG_FILES_DIR: a folder is entered
 * once by (device, inode); past the entry cap a 413, past the deadline a 422, once the client left a
 * 499 — each naming its setting; and a `files` build whose client left stops walking.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { DomainError } from "../../../src/core/errors.js";
import { FolderWalk, resolveFiles } from "../../../src/rag/ingest/files.js";
import { makeTempDir, removeTempDirs } from "../../helpers/rag-http.js";

after(removeTempDirs);

const kindOf = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof DomainError, String(error));
    return { kind: error.kind, message: error.message };
  }
  assert.fail("expected a DomainError");
};

describe("FolderWalk", () => {
  it("enters a folder once, whatever path reaches it", () => {
    const walk = new FolderWalk();
    assert.equal(walk.enter({ dev: 1, ino: 7 }), true);
    assert.equal(walk.enter({ dev: 1, ino: 7 }), false);
    assert.equal(walk.enter({ dev: 2, ino: 7 }), true);
  });

  it("refuses past its entries (413), its deadline (422), and once its client left (499)", async () => {
    const few = new FolderWalk({ maxEntries: 2, timeoutMs: 60_000, allowHardLinks: false });
    few.tick();
    few.tick();
    const tooMany = kindOf(() => few.tick());
    assert.equal(tooMany.kind, "too_large");
    assert.match(tooMany.message, /more than 2 entries \(RAG_FILES_MAX_ENTRIES\)/);
    const brief = new FolderWalk({ maxEntries: 100, timeoutMs: 1, allowHardLinks: false });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const late = kindOf(() => brief.tick());
    assert.equal(late.kind, "unprocessable");
    assert.match(late.message, /longer than 1 ms \(RAG_FILES_WALK_MS\)/);
    const controller = new AbortController();
    const left = new FolderWalk(undefined, controller.signal);
    left.tick();
    controller.abort();
    assert.equal(kindOf(() => left.tick()).kind, "cancelled");
  });

  it("a build's walk stops when its client has left", async () => {
    const root = makeTempDir("walk");
    fs.mkdirSync(path.join(root, "docs"));
    fs.writeFileSync(path.join(root, "docs", "a.txt"), "text");
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(
      resolveFiles(root, ["docs"], undefined, { signal: controller.signal }),
      (error) => error instanceof DomainError && error.kind === "cancelled",
    );
    const found = await resolveFiles(root, ["docs"]);
    assert.deepEqual(
      found.files.map((file) => path.basename(file)),
      ["a.txt"],
    );
  });
});
