/**
 * Walks of RAG_FILES_DIR that did not end (issue #35), made for real on disk against the RAG app as a
 * child process: a symlink loop (`loop/self -> .`) made a `files` build walk for ever (RSS +40 MB every
 * 30 s, after its client left); a depth-14 DAG of symlinks (two links from each level to the next) made
 * a sync walk 2^14 paths, past 120 s; a hard link to a file outside the root was indexed. Now each
 * folder is entered once by (device, inode), a walk looks at RAG_FILES_MAX_ENTRIES entries at most
 * (413 past it), and a file with more than one link is refused (RAG_FILES_HARD_LINKS=refuse). Each
 * walk finishes (or is refused) with /health answering throughout and peak RSS under +300 MB.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { HEALTH_BOUND_MS, RSS_GROWTH_BOUND, whileProbing } from "../helpers/liveness.js";
import { makeTempDir, removeTempDirs } from "../helpers/rag-http.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";

const onLinux = fs.existsSync("/proc/self/status");
const MB = 1_000_000;
const DAG_DEPTH = 14;
/** Low for the test: the DAG and the loop walk far fewer entries, the wide folder more. */
const MAX_ENTRIES = 120;

interface Reply {
  status: number;
  body: Record<string, unknown> & { error?: { message: string } };
}

/**
 * root/loop: a.txt and self -> . ; root/dag/d0 … d14: f<i>.txt, and a, b -> ../d<i+1>; root/wide:
 * more files than a walk may look at; root/links: ok.txt and linked.txt, a hard link to
 * outside/secret.txt.
 */
function makeTree(): { root: string; outside: string } {
  const base = makeTempDir("hostile-walks");
  const root = path.join(base, "files");
  const outside = path.join(base, "outside");
  fs.mkdirSync(path.join(root, "loop"), { recursive: true });
  fs.writeFileSync(path.join(root, "loop", "a.txt"), "A file in a folder that links to itself: lagoon.");
  fs.symlinkSync(".", path.join(root, "loop", "self"));
  for (let i = 0; i <= DAG_DEPTH; i++) {
    const dir = path.join(root, "dag", `d${i}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, `f${i}.txt`), `Level ${i} of the graph holds the word estuary${i}.`);
    if (i < DAG_DEPTH) for (const name of ["a", "b"]) fs.symlinkSync(`../d${i + 1}`, path.join(dir, name));
  }
  fs.mkdirSync(path.join(root, "wide"));
  for (let i = 0; i < MAX_ENTRIES + 30; i++)
    fs.writeFileSync(path.join(root, "wide", `n${i}.txt`), `Note ${i} about a delta.`);
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, "secret.txt"), "The outside secret is kumquat.");
  fs.mkdirSync(path.join(root, "links"));
  fs.writeFileSync(path.join(root, "links", "ok.txt"), "An ordinary file about a fjord.");
  fs.linkSync(path.join(outside, "secret.txt"), path.join(root, "links", "linked.txt"));
  return { root, outside };
}

describe("hostile walks (#35): each folder once, bounded, hard links refused", { skip: !onLinux }, () => {
  let served: ServedProcess;

  const post = async (url: string, body: unknown): Promise<Reply> => {
    const res = await fetch(`${served.url}${url}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Reply["body"] };
  };
  const statsStatus = async (name: string) => (await fetch(`${served.url}/rag/stats/${name}`)).status;

  /** Runs a walk while probing; asserts the liveness and memory bounds. */
  async function bounded(t: { diagnostic(message: string): void }, work: () => Promise<Reply>) {
    const { result, slowest, growth } = await whileProbing(served, work);
    t.diagnostic(
      `${result.status}; longest loop stall ${Math.round(slowest)} ms; peak RSS +${Math.round(growth / MB)} MB`,
    );
    assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
    assert.ok(growth < RSS_GROWTH_BOUND, `peak RSS grew by ${Math.round(growth / MB)} MB`);
    return result;
  }

  before(async () => {
    const { root } = makeTree();
    served = await startServe("rag", {
      DATA_DIR: makeTempDir("hostile-walks-data"),
      RAG_FILES_DIR: root,
      RAG_FILES_MAX_ENTRIES: String(MAX_ENTRIES),
    });
    await waitHealthy(served);
  });

  after(() => {
    if (served && served.child.exitCode === null) served.child.kill("SIGKILL");
    removeTempDirs();
  });

  it("a symlink loop: the `files` build and the sync finish, its file read once", async (t) => {
    const built = await bounded(t, () => post("/rag/build", { index_name: "loop", files: ["loop"] }));
    assert.equal(built.status, 201, JSON.stringify(built.body));
    assert.equal(built.body.documents_count, 1);
    const synced = await bounded(t, () => post("/rag/indices/loop-sync/sync", { folder: "loop" }));
    assert.equal(synced.status, 200, JSON.stringify(synced.body));
    assert.equal(synced.body.added, 1);
  });

  it("a depth-14 DAG of symlinks: the sync enters each folder once and finishes", async (t) => {
    const started = performance.now();
    const synced = await bounded(t, () => post("/rag/indices/dag/sync", { folder: "dag/d0" }));
    t.diagnostic(`sync took ${Math.round(performance.now() - started)} ms`);
    assert.equal(synced.status, 200, JSON.stringify(synced.body));
    // One file per level, each under the first path that reaches it (a/a/…).
    assert.equal(synced.body.added, DAG_DEPTH + 1);
    assert.deepEqual(synced.body.failed, []);
    const built = await bounded(t, () => post("/rag/build", { index_name: "dag-build", files: ["dag"] }));
    assert.equal(built.status, 201, JSON.stringify(built.body));
    assert.equal(built.body.documents_count, DAG_DEPTH + 1);
  });

  it("a folder past RAG_FILES_MAX_ENTRIES: 413 naming the limit, nothing written", async (t) => {
    const built = await bounded(t, () => post("/rag/build", { index_name: "wide", files: ["wide"] }));
    assert.equal(built.status, 413, JSON.stringify(built.body));
    assert.match(built.body.error!.message, /RAG_FILES_MAX_ENTRIES/);
    assert.equal(await statsStatus("wide"), 404);
    const synced = await bounded(t, () => post("/rag/indices/wide/sync", { folder: "wide" }));
    assert.equal(synced.status, 413, JSON.stringify(synced.body));
    assert.equal(await statsStatus("wide"), 404);
  });

  it("a hard link to a file outside the root: refused by name; its text never indexed", async (t) => {
    const built = await bounded(t, () =>
      post("/rag/build", { index_name: "linked", files: ["links/linked.txt"] }),
    );
    assert.equal(built.status, 400, JSON.stringify(built.body));
    assert.match(built.body.error!.message, /"links\/linked\.txt" has 2 hard links/);
    assert.match(built.body.error!.message, /RAG_FILES_HARD_LINKS/);
    assert.equal(await statsStatus("linked"), 404);
    // A folder build holding it is refused whole; a sync indexes the rest and lists it as failed.
    const folder = await post("/rag/build", { index_name: "links", files: ["links"] });
    assert.equal(folder.status, 400, JSON.stringify(folder.body));
    assert.equal(await statsStatus("links"), 404);
    const synced = await bounded(t, () => post("/rag/indices/links/sync", { folder: "links" }));
    assert.equal(synced.status, 200, JSON.stringify(synced.body));
    assert.equal(synced.body.added, 1);
    const failed = synced.body.failed as Array<{ file: string; message: string }>;
    assert.deepEqual(
      failed.map((f) => f.file),
      ["links/linked.txt"],
    );
    const secret = await post("/rag/query", { index_name: "links", query: "kumquat secret", answer: "none" });
    assert.deepEqual(secret.body.results, []);
    const ordinary = await post("/rag/query", { index_name: "links", query: "fjord", answer: "none" });
    assert.equal((ordinary.body.results as unknown[]).length, 1);
  });
});
