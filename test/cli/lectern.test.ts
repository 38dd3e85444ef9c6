import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { NO_APP, repoRoot, testModelName, testModelPath } from "../helpers/env.js";
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
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      LOG_LEVEL: "silent",
      LECTERN_URL: NO_APP,
      LECTERN_RAG_URL: NO_APP,
      ...env,
    },
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

  it("an unknown command points at the commands, not at its own --help", () => {
    const run = lectern(["frobnicate"]);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /unknown command "frobnicate"/);
    assert.match(run.stderr, /Run "lectern --help" for the commands/);
    assert.doesNotMatch(run.stderr, /frobnicate --help/);
  });

  it("index build on an existing index says to use --mode replace before reading any file", () => {
    const run = lectern(["index", "build", "docs", folder]);
    assert.equal(run.code, 4);
    assert.match(run.stderr, /already exists; use --mode replace/);
    assert.doesNotMatch(run.stderr, /files read/, "no file was read");
  });

  it("--help for each command", () => {
    for (const args of [
      ["--help"],
      ["serve", "--help"],
      ["index", "build", "--help"],
      ["ask", "--help"],
      ["generate", "--help"],
      ["model", "pull", "--help"],
      ["mcp", "--help"],
    ]) {
      const run = lectern(args);
      assert.equal(run.code, 0);
      assert.match(run.stdout, /Usage: lectern/);
    }
  });

  it("index build skips the files it cannot read, lists each with its reason, and exits 0", () => {
    const mixed = mkdtempSync(path.join(os.tmpdir(), "lectern-cli-mixed-"));
    writeFileSync(path.join(mixed, "good.md"), "# Good\n\nGood files are indexed.\n");
    writeFileSync(path.join(mixed, "fake.pdf"), "this is not a PDF at all");
    writeFileSync(path.join(mixed, "empty.txt"), "");
    writeFileSync(path.join(mixed, "also-good.txt"), "Another readable file.\n");
    const run = lectern(["index", "build", "mixed", mixed]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /Built "mixed": 2 documents, .*; 2 files skipped/);
    assert.match(run.stderr, /lectern: skipped fake\.pdf: .+/);
    assert.match(run.stderr, /lectern: skipped empty\.txt: .+/);
    const json = JSON.parse(
      lectern(["index", "build", "mixed", mixed, "--mode", "replace", "--json"]).stdout,
    );
    assert.deepEqual((json.skipped as Array<{ file: string }>).map((skip) => skip.file).sort(), [
      "empty.txt",
      "fake.pdf",
    ]);
    // --strict: the old behaviour, the first bad file stops the build and nothing is written.
    const strict = lectern(["index", "build", "strict", mixed, "--strict"]);
    assert.equal(strict.code, 4, strict.stderr);
    assert.equal(lectern(["index", "rm", "strict"]).code, 3, "nothing was written");
    assert.equal(lectern(["index", "rm", "mixed"]).code, 0);
  });

  it("index sync shows a live count of the files it looks at", () => {
    const run = lectern(["index", "sync", "synced", folder]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /sync synced: 3\/3 files read/);
    assert.equal(lectern(["index", "rm", "synced"]).code, 0);
  });

  it("index rm deletes", () => {
    assert.equal(lectern(["index", "rm", "docs"]).code, 0);
    assert.equal(lectern(["index", "rm", "docs"]).code, 3);
  });

  it("generate runs the model in process when no app answers", () => {
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
    assert.equal(body.model_name, testModelName);
  });
});
