/**
 * Listing uploaded files (issue #35), against the RAG app as a child process: `GET /v1/files` parsed
 * every stored file's whole JSON (its text included) to list names and sizes: +537 MB for 8 files of
 * 40 MB. Now each upload is kept as its text and a small record, and listing (and retrieving one)
 * reads records only: /health answers throughout and peak RSS grows by less than 300 MB. A file stored
 * whole by an earlier version is split into the two the first time it is read, and still usable.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { curl, HEALTH_BOUND_MS, RSS_GROWTH_BOUND, whileProbing } from "../helpers/liveness.js";
import { makeTempDir, removeTempDirs } from "../helpers/rag-http.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";

const onLinux = fs.existsSync("/proc/self/status");
const MB = 1_000_000;
const FILES = 8;
const FILE_BYTES = 40 * MB;

interface FileObject {
  id: string;
  bytes: number;
  filename: string;
}

describe("listing uploaded files (#35): records only, never the texts", { skip: !onLinux }, () => {
  let served: ServedProcess;
  let dataDir: string;
  const uploaded: FileObject[] = [];

  before(async () => {
    dataDir = makeTempDir("hostile-listing");
    served = await startServe("rag", { DATA_DIR: dataDir });
    await waitHealthy(served);
    const scratch = makeTempDir("hostile-listing-files");
    const line = "The archive keeps every letter the harbour master wrote about tides and ships.\n";
    const text = line.repeat(Math.ceil(FILE_BYTES / line.length));
    for (let i = 0; i < FILES; i++) {
      const file = path.join(scratch, `letters-${i}.txt`);
      fs.writeFileSync(file, text);
      const reply = await curl(["-F", "purpose=assistants", "-F", `file=@${file}`, `${served.url}/v1/files`]);
      assert.equal(reply.status, 200, reply.body.slice(0, 300));
      uploaded.push(JSON.parse(reply.body) as FileObject);
      fs.rmSync(file);
    }
  });

  after(() => {
    if (served && served.child.exitCode === null) served.child.kill("SIGKILL");
    removeTempDirs();
  });

  it(`GET /v1/files over ${FILES} files of 40 MB reads no text`, async (t) => {
    const list = async () => {
      const res = await fetch(`${served.url}/v1/files`);
      return { status: res.status, body: (await res.json()) as { data: FileObject[] } };
    };
    const { result, slowest, growth } = await whileProbing(served, async () => {
      const first = await list();
      // Retrieving each one reads its record too.
      for (const file of uploaded) {
        const one = await fetch(`${served.url}/v1/files/${file.id}`);
        assert.equal(((await one.json()) as FileObject).bytes, file.bytes);
      }
      return first;
    });
    t.diagnostic(`longest loop stall ${Math.round(slowest)} ms; peak RSS +${Math.round(growth / MB)} MB`);
    assert.equal(result.status, 200);
    assert.deepEqual(result.body.data.map((file) => file.id).sort(), uploaded.map((file) => file.id).sort());
    for (const file of result.body.data) assert.ok(file.bytes >= FILE_BYTES, `${file.bytes} bytes`);
    assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
    assert.ok(growth < RSS_GROWTH_BOUND, `peak RSS grew by ${Math.round(growth / MB)} MB`);
  });

  it("a file stored whole by an earlier version is split on first read, and still usable", async () => {
    const folder = path.join(dataDir, "openai-files", "default");
    const legacy = {
      id: "file-legacy1",
      filename: "old.txt",
      bytes: 42,
      created_at: 1_700_000_000,
      text: "An old upload about lighthouses and their keepers.",
      title: null,
      metadata: {},
    };
    fs.writeFileSync(path.join(folder, "file-legacy1.json"), JSON.stringify(legacy));
    const listed = (await (await fetch(`${served.url}/v1/files`)).json()) as { data: FileObject[] };
    assert.ok(listed.data.some((file) => file.id === "file-legacy1" && file.bytes === 42));
    assert.ok(!fs.existsSync(path.join(folder, "file-legacy1.json")));
    assert.equal(fs.readFileSync(path.join(folder, "file-legacy1.txt"), "utf8"), legacy.text);
    const store = await fetch(`${served.url}/v1/vector_stores`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "old", file_ids: ["file-legacy1"] }),
    });
    assert.equal(store.status, 200, await store.clone().text());
    const { id } = (await store.json()) as { id: string };
    const search = await fetch(`${served.url}/v1/vector_stores/${id}/search`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: "lighthouses" }),
    });
    const found = (await search.json()) as { data: Array<{ file_id: string }> };
    assert.deepEqual(
      found.data.map((hit) => hit.file_id),
      ["file-legacy1"],
    );
    const removed = await fetch(`${served.url}/v1/files/file-legacy1`, { method: "DELETE" });
    assert.equal(removed.status, 200);
    assert.deepEqual(
      fs.readdirSync(folder).filter((name) => name.startsWith("file-legacy1")),
      [],
    );
  });
});
