/** `lectern index sync` (#14): one-shot and --watch, on the store directly. */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { after, describe, it } from "node:test";
import { repoRoot } from "../helpers/env.js";

const made: string[] = [];
const tempDir = (label: string) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), `lectern-cli-sync-${label}-`));
  made.push(dir);
  return dir;
};
after(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

const LECTERN = path.join(repoRoot, "bin/lectern.mjs");

interface SyncLine {
  added: number;
  updated: number;
  deleted: number;
  documents_count: number;
}
const childEnv = (dataDir: string, env: Record<string, string> = {}) => {
  const base: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: "silent", ...env };
  if (!("RAG_FILES_DIR" in env)) delete base.RAG_FILES_DIR;
  return base;
};

function lectern(dataDir: string, args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [LECTERN, ...args], {
    cwd: repoRoot,
    env: childEnv(dataDir, env),
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("lectern index sync", () => {
  it("build then sync of the same folder reports 0 changes, the folder given relative or absolute", () => {
    const folder = tempDir("same");
    mkdirSync(path.join(folder, "sub"));
    writeFileSync(path.join(folder, "alpha.md"), "# Alpha\n\nAlpha particles are helium nuclei.\n");
    writeFileSync(path.join(folder, "sub", "beta.txt"), "Beta decay emits electrons.\n");
    const relative = path.relative(repoRoot, folder);
    for (const [build, sync] of [
      [relative, folder],
      [folder, relative],
      [relative, relative],
    ]) {
      const dataDir = tempDir("data");
      const built = lectern(dataDir, ["index", "build", "docs", build!, "--json"]);
      assert.equal(built.code, 0, built.stderr);
      const synced = lectern(dataDir, ["index", "sync", "docs", sync!]);
      assert.equal(synced.code, 0, synced.stderr);
      assert.match(
        synced.stdout,
        /^synced "docs": 0 added, 0 updated, 0 deleted, 2 unchanged, 0 failed; 2 documents/,
        `build ${build}, sync ${sync}`,
      );
    }
  });

  it("applies only what changed; a bad file is named and the exit code says so", () => {
    const dataDir = tempDir("data");
    const folder = tempDir("docs");
    mkdirSync(path.join(folder, "sub"));
    writeFileSync(path.join(folder, "alpha.md"), "# Alpha\n\nAlpha particles are helium nuclei.\n");
    writeFileSync(path.join(folder, "sub", "beta.txt"), "Beta decay emits electrons.\n");

    const first = lectern(dataDir, ["index", "sync", "docs", folder]);
    assert.equal(first.code, 0, first.stderr);
    assert.match(
      first.stdout,
      /^synced "docs": 2 added, 0 updated, 0 deleted, 0 unchanged, 0 failed; 2 documents/,
    );

    writeFileSync(path.join(folder, "sub", "beta.txt"), "Beta decay emits electrons or positrons.\n");
    writeFileSync(path.join(folder, "broken.txt"), Buffer.from([0x63, 0x00, 0xe9, 0xff]));
    const second = lectern(dataDir, ["index", "sync", "docs", folder, "--json"]);
    assert.equal(second.code, 4, "some file failed");
    const result = JSON.parse(second.stdout);
    assert.deepEqual(
      [result.added, result.updated, result.deleted, result.unchanged, result.created],
      [0, 1, 0, 1, false],
    );
    assert.deepEqual(result.failed, [{ file: "broken.txt", message: "looks binary, not text" }]);

    rmSync(path.join(folder, "broken.txt"));
    rmSync(path.join(folder, "alpha.md"));
    const third = lectern(dataDir, ["index", "sync", "docs", folder]);
    assert.equal(third.code, 0, third.stderr);
    assert.match(third.stdout, /0 added, 0 updated, 1 deleted, 1 unchanged, 0 failed; 1 documents/);
    const answer = JSON.parse(lectern(dataDir, ["ask", "docs", "positrons", "--json"]).stdout);
    assert.equal(answer.results[0].file, path.join("sub", "beta.txt"));
  });

  it("with RAG_FILES_DIR set, the folder must lie inside it and ids are relative to it", () => {
    const dataDir = tempDir("data");
    const root = tempDir("root");
    mkdirSync(path.join(root, "team"));
    writeFileSync(path.join(root, "team", "notes.txt"), "Team notes about rockets.");
    const env = { RAG_FILES_DIR: root };
    const inside = lectern(dataDir, ["index", "sync", "team", path.join(root, "team"), "--json"], env);
    assert.equal(inside.code, 0, inside.stderr);
    assert.equal(JSON.parse(inside.stdout).added, 1);
    const answer = JSON.parse(lectern(dataDir, ["ask", "team", "rockets", "--json"], env).stdout);
    assert.equal(answer.results[0].file, path.join("team", "notes.txt"));

    const outside = lectern(dataDir, ["index", "sync", "team", tempDir("elsewhere")], env);
    assert.equal(outside.code, 4, outside.stderr);
    assert.match(outside.stderr, /outside RAG_FILES_DIR/);
    assert.equal(lectern(dataDir, ["index", "sync", "team", path.join(root, "missing")], env).code, 3);
    assert.equal(lectern(dataDir, ["index", "sync", "team"]).code, 2, "usage");
    const usage = lectern(dataDir, ["index", "sync", "--help"]);
    assert.equal(usage.code, 0);
    assert.match(usage.stdout, /Usage: lectern index sync <name> <dir>/);
  });

  it(
    "--watch syncs on every change, one line each, until SIGTERM (exit 0)",
    { timeout: 120_000 },
    async () => {
      const dataDir = tempDir("data");
      const folder = tempDir("watched");
      writeFileSync(path.join(folder, "one.txt"), "The first watched note, about comets.");
      const child = spawn(process.execPath, [LECTERN, "index", "sync", "live", folder, "--watch", "--json"], {
        cwd: repoRoot,
        env: childEnv(dataDir),
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stderr = "";
      child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
      const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      /** The next sync line that satisfies `wanted` (a burst of events may add lines with no change). */
      const syncLine = async (wanted: (result: SyncLine) => boolean) => {
        for (;;) {
          const next = await lines.next();
          assert.ok(!next.done, `watch ended early: ${stderr}`);
          const result = JSON.parse(next.value) as SyncLine;
          if (wanted(result)) return result;
        }
      };
      try {
        const initial = await syncLine(() => true);
        assert.equal(initial.added, 1);

        writeFileSync(path.join(folder, "two.md"), "# Two\n\nThe second watched note, about meteors.");
        const added = await syncLine((result) => result.added > 0);
        assert.deepEqual([added.added, added.updated, added.deleted, added.documents_count], [1, 0, 0, 2]);

        rmSync(path.join(folder, "one.txt"));
        const deleted = await syncLine((result) => result.deleted > 0);
        assert.deepEqual([deleted.added, deleted.deleted, deleted.documents_count], [0, 1, 1]);

        child.kill("SIGTERM");
        assert.equal(await exited, 0, stderr);
      } finally {
        child.kill("SIGKILL");
      }
    },
  );
});
