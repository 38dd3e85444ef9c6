import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { repoRoot, testModelPath } from "../helpers/env.js";
import { makePdf } from "../helpers/doc-fixtures.js";

const dataDir = mkdtempSync(path.join(os.tmpdir(), "lectern-cli-"));
const folder = mkdtempSync(path.join(os.tmpdir(), "lectern-cli-docs-"));
mkdirSync(path.join(folder, "sub"));
writeFileSync(path.join(folder, "alpha.md"), "# Alpha\n\nAlpha particles are helium nuclei.\n");
writeFileSync(path.join(folder, "sub", "beta.txt"), "Beta decay emits electrons from the nucleus.\n");
writeFileSync(
  path.join(folder, "sub", "gamma.pdf"),
  makePdf([["Cover page."], ["Gamma rays are photons of high energy."]]),
);
writeFileSync(path.join(folder, "skip.bin"), "not indexed");

function lectern(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [path.join(repoRoot, "bin/lectern.mjs"), ...args], {
    cwd: repoRoot,
    env: { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: "silent", ...env },
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("lectern CLI", () => {
  it("index build shows progress as plain lines off a terminal and builds the folder", () => {
    const run = lectern(["index", "build", "docs", folder]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /index docs: 3\/3 files read \(.* files\/s/);
    assert.match(run.stdout, /Built "docs": 3 documents, 3 chunks/);
  });

  it("ask prints the answer with its sources, pages included", () => {
    const run = lectern(["ask", "docs", "what does beta decay emit"]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /Beta decay emits electrons from the nucleus\. \[1\]/);
    assert.match(run.stdout, /Sources:\n {2}\[1\] .*beta\.txt {2}\(score/);
    const pdf = lectern(["ask", "docs", "gamma photons"]);
    // The whole PDF is one chunk: it starts on the cover page and goes on to page 2.
    assert.match(pdf.stdout, /\[1\] .*gamma\.pdf, pages 1–2 /);
  });

  it("--json output for scripts", () => {
    const list = lectern(["index", "list", "--json"]);
    assert.equal(list.code, 0);
    const indices = JSON.parse(list.stdout) as Array<{ name: string; documentsCount: number }>;
    assert.deepEqual(
      indices.map((i) => [i.name, i.documentsCount]),
      [["docs", 3]],
    );
    const answer = JSON.parse(lectern(["ask", "docs", "helium", "--json"]).stdout);
    assert.equal(answer.results[0].title, "Alpha");
  });

  it("exit codes mean something", () => {
    assert.equal(lectern(["index", "build", "docs", folder]).code, 4, "exists");
    assert.equal(lectern(["ask", "missing", "anything"]).code, 3, "unknown index");
    assert.equal(lectern(["index", "build", "x"]).code, 2, "usage");
    assert.equal(lectern(["bogus"]).code, 2);
    assert.equal(lectern(["index", "build", "x", "/no/such/folder"]).code, 3);
    assert.equal(lectern(["index", "list"], { TEXTGEN_PORT: "nope" }).code, 78, "bad configuration");
  });

  it("--help for each command", () => {
    for (const args of [
      ["--help"],
      ["serve", "--help"],
      ["index", "build", "--help"],
      ["ask", "--help"],
      ["generate", "--help"],
      ["model", "pull", "--help"],
    ]) {
      const run = lectern(args);
      assert.equal(run.code, 0);
      assert.match(run.stdout, /Usage: lectern/);
    }
  });

  it("index rm deletes", () => {
    assert.equal(lectern(["index", "rm", "docs"]).code, 0);
    assert.equal(lectern(["index", "rm", "docs"]).code, 3);
  });

  it("generate runs the local model", () => {
    const run = lectern(
      ["generate", "Once upon a time", "--max-length", "8", "--temperature", "0", "--json"],
      {
        MODEL_PATH: testModelPath,
        LLAMA_THREADS: "1",
        LLAMA_GPU: "false",
      },
    );
    assert.equal(run.code, 0, run.stderr);
    const body = JSON.parse(run.stdout);
    assert.equal(body.tokens_generated, 8);
    assert.equal(body.model_name, "llama");
  });
});
