/**
 * Uploads honour DISK_RESERVE_BYTES (issue #35): a multipart upload to /rag/build or /v1/files that
 * would leave less than the reserve free where it is written is a 507 before a byte is spooled, with
 * nothing written; a small one still works; and a spool folder that fills while a file arrives is a
 * 507 too, not a 400 "Malformed multipart". Real disks: a 16 MiB tmpfs as DATA_DIR and a 2 MiB tmpfs
 * as the spool folder (TMPDIR), mounted by the test; skipped, and saying so, where mounting needs a
 * root this run does not have.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { HEALTH_BOUND_MS, whileProbing } from "../helpers/health-probe.js";
import { makeTempDir, openRagApp, removeTempDirs, type RagApp } from "../helpers/rag-http.js";

const MIB = 1024 * 1024;
const dataDir = makeTempDir("reserve-data");
const spoolDir = makeTempDir("reserve-spool");
const mounted: string[] = [];
try {
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=16m", "tmpfs", dataDir], { stdio: "ignore" });
  mounted.push(dataDir);
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", spoolDir], { stdio: "ignore" });
  mounted.push(spoolDir);
} catch {
  // Not root, or no mount here: skipped below.
}

/** A form with one text file of `bytes` bytes (as a browser or the openai client sends it). */
function form(fields: Record<string, string>, name: string, bytes: number): FormData {
  const body = new FormData();
  for (const [key, value] of Object.entries(fields)) body.append(key, value);
  body.append(
    fields.purpose === undefined ? "files" : "file",
    new Blob(["tides and moons. ".repeat(bytes / 17)]),
    name,
  );
  return body;
}

describe(
  "uploads keep DISK_RESERVE_BYTES free; a full spool is a 507 (#35)",
  { skip: mounted.length === 2 ? false : "mounting a tmpfs needs root" },
  () => {
    let app: RagApp;
    let url: string;

    before(async () => {
      ({ app } = await openRagApp({ DATA_DIR: dataDir, DISK_RESERVE_BYTES: String(4 * MIB) }));
      await app.listen({ host: "127.0.0.1", port: 0 });
      url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    });

    after(async () => {
      await app?.close();
      for (const point of mounted.reverse()) execFileSync("umount", [point]);
      removeTempDirs();
    });

    const post = async (route: string, body: FormData) => {
      const response = await fetch(`${url}${route}`, { method: "POST", body });
      return { status: response.status, body: (await response.json()) as { error?: { message?: string } } };
    };

    it("an upload that would eat into the reserve is a 507 before it is spooled; a small one is written", async () => {
      // 16 MiB disk, 4 MiB reserve: 13 MiB would leave less than the reserve.
      const { result, slowest } = await whileProbing(
        url,
        post("/rag/build", form({ index_name: "big" }, "big.txt", 13 * MIB)),
      );
      assert.equal(result.status, 507, JSON.stringify(result.body));
      assert.match(result.body.error?.message ?? "", /DISK_RESERVE_BYTES/);
      const files = await post("/v1/files", form({ purpose: "assistants" }, "big.txt", 13 * MIB));
      assert.equal(files.status, 507, JSON.stringify(files.body));
      const listed = (await fetch(`${url}/rag/indices`).then((response) => response.json())) as {
        indices: unknown[];
      };
      assert.deepEqual(listed.indices, []);
      assert.ok(!readdirSync(dataDir).includes("openai-files"), "no file was stored");
      assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);

      const small = await post("/rag/build", form({ index_name: "small" }, "small.txt", 64 * 1024));
      assert.equal(small.status, 201, JSON.stringify(small.body));
    });

    it("a spool folder that fills while the file arrives is a 507, not a malformed body", async () => {
      // The room check is off (a reserve of 0) so the spool itself runs out: 3 MiB into 2 MiB.
      const { app: unguarded } = await openRagApp({ DISK_RESERVE_BYTES: "0" });
      await unguarded.listen({ host: "127.0.0.1", port: 0 });
      const previous = process.env.TMPDIR;
      process.env.TMPDIR = spoolDir;
      try {
        const port = (unguarded.server.address() as AddressInfo).port;
        const response = await fetch(`http://127.0.0.1:${port}/rag/build`, {
          method: "POST",
          body: form({ index_name: "spool" }, "spool.txt", 3 * MIB),
        });
        const body = (await response.json()) as { error: { code: string; message: string } };
        assert.equal(response.status, 507, JSON.stringify(body));
        assert.equal(body.error.code, "insufficient_storage");
        assert.match(body.error.message, /spool/);
        assert.deepEqual(readdirSync(spoolDir), [], "the spool folder is cleaned up");
      } finally {
        if (previous === undefined) delete process.env.TMPDIR;
        else process.env.TMPDIR = previous;
        await unguarded.close();
      }
    });
  },
);
