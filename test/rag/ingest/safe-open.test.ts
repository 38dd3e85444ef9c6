/**
 * readRegularFileInside (#23): what a server-side file read refuses, each made for real on disk —
 * symlinks (out of the root, to /dev/zero), FIFOs (without blocking), a folder swapped for a link,
 * and files over the limit (a sparse 1.9 GB file refused from fstat, without reading it).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { DomainError } from "../../../src/core/errors.js";
import { toApiError } from "../../../src/core/http.js";
import { readRegularFileInside } from "../../../src/rag/ingest/safe-open.js";
import { makeTempDir, removeTempDirs } from "../../helpers/rag-http.js";

after(() => removeTempDirs());

const MIB = 1024 * 1024;

async function refused(promise: Promise<unknown>, status: number, pattern: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof DomainError, `expected a DomainError, got ${String(error)}`);
    assert.equal(toApiError(error).statusCode, status, error.message);
    assert.match(error.message, pattern);
    return true;
  });
}

describe("readRegularFileInside", () => {
  const root = fs.realpathSync(makeTempDir("safe-open-root"));
  const outside = fs.realpathSync(makeTempDir("safe-open-outside"));
  fs.writeFileSync(path.join(outside, "secret.txt"), "outside secret text");
  fs.writeFileSync(path.join(root, "plain.txt"), "plain text inside");
  const read = (name: string, maxBytes = MIB) =>
    readRegularFileInside(root, path.join(root, name), { name, maxBytes });

  it("reads a regular file inside the root", async () => {
    assert.equal((await read("plain.txt")).toString("utf8"), "plain text inside");
  });

  it("refuses a symlink, whether it leads outside, inside or to /dev/zero", async () => {
    fs.symlinkSync(path.join(outside, "secret.txt"), path.join(root, "out.txt"));
    fs.symlinkSync(path.join(root, "plain.txt"), path.join(root, "in.txt"));
    fs.symlinkSync("/dev/zero", path.join(root, "zero.txt"));
    await refused(read("out.txt"), 400, /symbolic link/);
    await refused(read("in.txt"), 400, /symbolic link/);
    await refused(read("zero.txt"), 400, /symbolic link/);
  });

  it("refuses a FIFO at once, with no writer on its other end, and a device node", async () => {
    execFileSync("mkfifo", [path.join(root, "pipe.txt")]);
    // Without O_NONBLOCK this open would wait for a writer forever (the test would time out).
    await refused(read("pipe.txt"), 400, /FIFO/);
    await refused(
      readRegularFileInside("/dev", "/dev/null", { name: "null.txt", maxBytes: MIB }),
      400,
      /device/,
    );
  });

  it("refuses a file reached through a folder swapped for a link out of the root", async () => {
    // The path was checked as root/sub/file; sub is now a link to the outside folder.
    fs.symlinkSync(outside, path.join(root, "sub"));
    await refused(read(path.join("sub", "secret.txt")), 400, /outside RAG_FILES_DIR/);
  });

  it("refuses a sparse 1.9 GB file from its size, before reading a byte", async () => {
    const big = path.join(root, "sparse.txt");
    const fd = fs.openSync(big, "w");
    fs.ftruncateSync(fd, 1900 * MIB);
    fs.closeSync(fd);
    const rssBefore = process.memoryUsage().rss;
    await refused(read("sparse.txt", 64 * MIB), 413, /1992294400 bytes.*MAX_BODY_BYTES/);
    // Nothing was read: far less than the file's size was allocated (generous bound, not a speed).
    assert.ok(process.memoryUsage().rss - rssBefore < 100 * MIB);
  });

  it("refuses a file over the limit by one byte, and takes one at the limit", async () => {
    fs.writeFileSync(path.join(root, "at.txt"), Buffer.alloc(1000, 97));
    fs.writeFileSync(path.join(root, "over.txt"), Buffer.alloc(1001, 97));
    assert.equal((await read("at.txt", 1000)).length, 1000);
    await refused(read("over.txt", 1000), 413, /1001 bytes/);
  });
});
