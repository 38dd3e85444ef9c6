/**
 * Files swapped while a folder sync runs (#23), against the real server process: a helper process
 * keeps replacing files of the folder with a symlink to a file outside RAG_FILES_DIR, a FIFO with no
 * writer, or a symlink to /dev/zero, and back, while syncs run. Nothing outside the root may be read
 * (its secret word never reaches the index), no sync may hang, the server's memory stays bounded, and
 * SIGTERM still ends it. Also: a sparse 1.9 GB file is refused from its size, by sync and by build.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { makeTempDir, removeTempDirs } from "../helpers/rag-http.js";
import { request, startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";
import { rssOf } from "../helpers/process-memory.js";

after(() => removeTempDirs());

const MIB = 1024 * 1024;
const SECRET = "zanzibarsecretword";
const SWAP_FILES = 24;
/** Bounds of the swap storm: whichever comes first. */
const STORM_SYNCS = 25;
const STORM_MS = 20_000;

/** A generous bound on one request: a read stuck on a FIFO never ends, and this says so. */
const HANG_MS = 90_000;

async function post(served: ServedProcess, url: string, body: unknown) {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${url} did not answer in ${HANG_MS} ms (hung)`)), HANG_MS);
  });
  const res = await Promise.race([request(served.port, { method: "POST", path: url, body }), hung]).finally(
    () => clearTimeout(timer),
  );
  return { status: res.status, json: JSON.parse(res.body) as Record<string, unknown> };
}

/**
 * A process that flips root/swap-N.txt between a hostile entry and its regular text by atomic
 * renames, every file at once, a millisecond or two in each state, until `ms` passed or root/.stop
 * appears; it leaves every file regular. Hostile entries: N % 3 = 0 a symlink out of the root, 1 a
 * FIFO, 2 a symlink to /dev/zero. The parts it renames in wait in root/.hold (hidden: never listed).
 */
function startSwapper(root: string, outsideFile: string, ms: number) {
  const script = `
    const fs = require("node:fs"), path = require("node:path");
    const [root, outsideFile, files, ms] = [process.argv[1], process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
    const hold = path.join(root, ".hold");
    const end = Date.now() + ms;
    const pause = new Int32Array(new SharedArrayBuffer(4));
    const put = (n, hostile) => {
      const tmp = path.join(hold, "tmp-" + n);
      fs.rmSync(tmp, { force: true });
      if (!hostile) fs.linkSync(path.join(hold, "regular-" + n), tmp);
      else if (n % 3 === 0) fs.symlinkSync(outsideFile, tmp);
      else if (n % 3 === 1) fs.linkSync(path.join(hold, "fifo-" + n), tmp);
      else fs.symlinkSync("/dev/zero", tmp);
      fs.renameSync(tmp, path.join(root, "swap-" + n + ".txt"));
    };
    let rounds = 0;
    while (Date.now() < end && !fs.existsSync(path.join(root, ".stop"))) {
      for (let n = 0; n < files; n++) put(n, true);
      Atomics.wait(pause, 0, 0, 1 + (rounds % 3));
      for (let n = 0; n < files; n++) put(n, false);
      Atomics.wait(pause, 0, 0, 1 + (rounds % 2));
      if (rounds++ === 0) process.stdout.write("started ");
    }
    process.stdout.write(String(rounds));
  `;
  const child = spawn(process.execPath, ["-e", script, root, outsideFile, String(SWAP_FILES), String(ms)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  let markStarted: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
    if (out.startsWith("started")) markStarted();
  });
  const done = new Promise<number>((resolve) =>
    child.on("exit", () => {
      markStarted();
      resolve(Number(out.replace("started ", "")) || 0);
    }),
  );
  return { child, started, done };
}

function makeFolder(): { root: string; outsideFile: string } {
  const root = fs.realpathSync(makeTempDir("swap-root"));
  const outside = fs.realpathSync(makeTempDir("swap-outside"));
  const outsideFile = path.join(outside, "secret.txt");
  fs.writeFileSync(outsideFile, `The outside file holds ${SECRET} and must never be indexed.`);
  const hold = path.join(root, ".hold");
  fs.mkdirSync(hold);
  for (let n = 0; n < SWAP_FILES; n++) {
    const regular = path.join(hold, `regular-${n}`);
    fs.writeFileSync(regular, `Swap file ${n} holds harmless regular text about lighthouses.`);
    fs.linkSync(regular, path.join(root, `swap-${n}.txt`));
    if (n % 3 === 1) execFileSync("mkfifo", [path.join(hold, `fifo-${n}`)]);
  }
  for (let n = 0; n < 20; n++) {
    fs.writeFileSync(path.join(root, `note-${n}.md`), `# Note ${n}\n\nA steady note about harbours ${n}.`);
  }
  return { root, outsideFile };
}

describe("files swapped during a sync", () => {
  it("reads nothing outside the root, never hangs, stays bounded and stops on SIGTERM", async (t) => {
    const { root, outsideFile } = makeFolder();
    const served = await startServe("rag", {
      RAG_FILES_DIR: root,
      DATA_DIR: makeTempDir("swap-data"),
      MAX_BODY_BYTES: String(8 * MIB),
      // The swapper puts regular files back as hard links to the copies it holds (an atomic swap);
      // files with several links are refused by default (test/reliability/hostile-walks.test.ts).
      RAG_FILES_HARD_LINKS: "allow",
    });
    try {
      await waitHealthy(served);
      const first = await post(served, "/rag/indices/harbour/sync", { folder: "." });
      assert.equal(first.status, 200, JSON.stringify(first.json));
      const baseline = rssOf(served.child.pid!);
      let peak = baseline;

      const swapper = startSwapper(root, outsideFile, STORM_MS);
      await swapper.started;
      const refusals = new Map<string, number>();
      let syncs = 0;
      let stormOver = false;
      void swapper.done.then(() => (stormOver = true));
      while (!stormOver && syncs < STORM_SYNCS) {
        const res = await post(served, "/rag/indices/harbour/sync", { folder: "." });
        syncs++;
        assert.equal(res.status, 200, JSON.stringify(res.json));
        for (const failure of res.json.failed as Array<{ message: string }>) {
          const kind = /symbolic link|FIFO|device|not a regular file|does not exist/.exec(
            failure.message,
          )?.[0];
          assert.ok(kind, `unexpected failure: ${failure.message}`);
          refusals.set(kind, (refusals.get(kind) ?? 0) + 1);
        }
        peak = Math.max(peak, rssOf(served.child.pid!));
        // Checked after every sync: the next one would overwrite what a followed link had indexed.
        const leaked = await post(served, "/rag/query", {
          index_name: "harbour",
          query: SECRET,
          answer: "none",
        });
        assert.equal(leaked.json.count, 0, "the outside file's text reached the index");
      }
      fs.writeFileSync(path.join(root, ".stop"), "");
      const rounds = await swapper.done;
      t.diagnostic(
        `${syncs} syncs during ${rounds} swap rounds; refused: ${JSON.stringify([...refusals])}; ` +
          `RSS ${Math.round(baseline / MIB)} → peak ${Math.round(peak / MIB)} MiB`,
      );

      // The folder as it is now (every file regular again), then what the index holds.
      const last = await post(served, "/rag/indices/harbour/sync", { folder: "." });
      assert.equal(last.status, 200);
      assert.deepEqual(last.json.failed, [], JSON.stringify(last.json));
      const secret = await post(served, "/rag/query", { index_name: "harbour", query: SECRET, top_k: 100 });
      assert.equal(secret.status, 200);
      assert.equal(secret.json.count, 0, "the outside file's text reached the index");
      const all = await post(served, "/rag/query", {
        index_name: "harbour",
        query: "harmless regular text lighthouses steady note harbours",
        top_k: 100,
        answer: "none",
      });
      const texts = (all.json.results as Array<{ text: string }>).map((result) => result.text).join("\n");
      assert.ok(!texts.includes(SECRET));
      assert.ok(!texts.includes("\u0000"), "bytes of /dev/zero reached the index");
      assert.equal(all.json.count, SWAP_FILES + 20, JSON.stringify(last.json));
      // Bounded: a /dev/zero read would grow without limit; a generous bound, not a speed figure.
      assert.ok(peak - baseline < 300 * MIB, `RSS grew by ${Math.round((peak - baseline) / MIB)} MiB`);

      served.child.kill("SIGTERM");
      // Generous: a loaded CI machine may take a while, but a thread stuck on a FIFO never ends.
      const exit = await Promise.race([
        served.exited,
        new Promise<null>((resolve) => setTimeout(() => resolve(null), 60_000).unref()),
      ]);
      assert.ok(exit !== null, "the server did not exit on SIGTERM");
      assert.equal(exit.code, 0, served.stderr());
    } finally {
      served.child.kill("SIGKILL");
    }
  });

  it("refuses a sparse 1.9 GB file by its size, in a sync and in a files build, without reading it", async () => {
    const root = fs.realpathSync(makeTempDir("sparse-root"));
    fs.writeFileSync(path.join(root, "small.txt"), "A small file about anchors.");
    const fd = fs.openSync(path.join(root, "huge.txt"), "w");
    fs.ftruncateSync(fd, 1900 * MIB);
    fs.closeSync(fd);
    const served = await startServe("rag", {
      RAG_FILES_DIR: root,
      DATA_DIR: makeTempDir("sparse-data"),
      MAX_BODY_BYTES: String(64 * MIB),
    });
    try {
      await waitHealthy(served);
      const baseline = rssOf(served.child.pid!);
      const synced = await post(served, "/rag/indices/anchors/sync", { folder: "." });
      assert.equal(synced.status, 200, JSON.stringify(synced.json));
      assert.equal(synced.json.added, 1);
      const failed = synced.json.failed as Array<{ file: string; message: string }>;
      assert.equal(failed.length, 1);
      assert.equal(failed[0]!.file, "huge.txt");
      assert.match(failed[0]!.message, /1992294400 bytes; the limit is 67108864 \(MAX_BODY_BYTES\)/);

      const built = await post(served, "/rag/build", { index_name: "huge", files: ["huge.txt"] });
      assert.equal(built.status, 413, JSON.stringify(built.json));
      assert.match(String((built.json.error as { message: string }).message), /MAX_BODY_BYTES/);
      assert.ok(rssOf(served.child.pid!) - baseline < 300 * MIB);
    } finally {
      served.child.kill("SIGKILL");
      await served.exited;
    }
  });
});
