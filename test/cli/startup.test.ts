/**
 * Start-up that says what is wrong, through the real CLI as a child process: a MODEL_PATH that is no
 * GGUF file and a RAG_FILES_DIR that does not exist exit 78 naming the variable; a busy port exits 1
 * with one line naming the port's variable and the address; a good start logs which model, llama.cpp
 * binary, device and store are in use; a /predict refused while no model is ready logs one warning;
 * `lectern serve` drains and exits 0 on SIGTERM like `npm start`.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { repoRoot } from "../helpers/env.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";

const started: ServedProcess[] = [];
after(() => {
  for (const served of started)
    if (served.child.exitCode === null && served.child.signalCode === null) served.child.kill("SIGKILL");
});

const scratch = mkdtempSync(path.join(os.tmpdir(), "lectern-startup-"));

async function run(which: "textgen" | "rag", env: Record<string, string>, entry?: string[]) {
  const served = await startServe(which, env, entry);
  started.push(served);
  return served;
}

/** The process's exit, and its stderr, which must be one line without a stack trace. */
async function exitLine(served: ServedProcess): Promise<{ code: number | null; line: string }> {
  const { code } = await served.exited;
  const stderr = served.stderr();
  const lines = stderr.trimEnd().split("\n");
  assert.equal(lines.length, 1, `more than one line on stderr:\n${stderr}`);
  assert.doesNotMatch(stderr, /^\s+at /m, "a stack trace");
  return { code, line: lines[0]! };
}

/** Resolves with the first stdout line that matches (the app's JSON log lines). */
function logLine(served: ServedProcess, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const line = served
        .stdout()
        .split("\n")
        .find((candidate) => pattern.test(candidate));
      if (line === undefined) return;
      served.child.stdout!.off("data", check);
      resolve(line);
    };
    served.child.stdout!.on("data", check);
    void served.exited.then(() => reject(new Error(`exited without a line matching ${pattern}`)));
    check();
  });
}

describe("configuration errors at start-up exit 78 and name the variable", () => {
  it("MODEL_PATH naming a missing file", async () => {
    const missing = path.join(scratch, "nowhere.gguf");
    const { code, line } = await exitLine(await run("textgen", { MODEL_PATH: missing }));
    assert.equal(code, 78);
    assert.match(line, /MODEL_PATH/);
    assert.ok(line.includes(missing), line);
  });

  it("MODEL_PATH naming a file that is not GGUF", async () => {
    const notGguf = path.join(scratch, "notes.gguf");
    writeFileSync(notGguf, "plain text, not a model");
    const { code, line } = await exitLine(await run("textgen", { MODEL_PATH: notGguf }));
    assert.equal(code, 78);
    assert.match(line, /MODEL_PATH.*not.*GGUF|MODEL_PATH.*GGUF/);
  });

  it("RAG_FILES_DIR naming a folder that does not exist", async () => {
    const missing = path.join(scratch, "no-such-folder");
    const { code, line } = await exitLine(
      await run("rag", { RAG_FILES_DIR: missing, DATA_DIR: path.join(scratch, "data-1") }),
    );
    assert.equal(code, 78);
    assert.match(line, /RAG_FILES_DIR/);
  });

  it(
    "a hub reference (MODEL_PATH=hf:…) is not checked at start-up: the app starts",
    { timeout: 120_000 },
    async () => {
      // Offline the download fails later and /health says why; the process keeps running.
      const served = await run("textgen", {
        MODEL_PATH: "hf:nobody/nothing/none.gguf",
        MODELS_DIR: path.join(scratch, "models"),
        LOG_LEVEL: "warn",
      });
      const line = await logLine(served, /no model loaded/);
      assert.match(line, /MODEL_PATH=hf:nobody/);
      assert.equal(served.child.exitCode, null, "the process keeps running");
      // /predict is refused 503 while no model is ready: one warning line, no error with a stack.
      const predict = await fetch(`${served.url}/predict`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ text: "Once upon a time" }),
      });
      assert.equal(predict.status, 503);
      assert.equal(((await predict.json()) as { error: { code: string } }).error.code, "model_not_ready");
      const refused = JSON.parse(await logLine(served, /request refused/)) as { level: number };
      assert.equal(refused.level, 40, "logged as a warning");
      assert.doesNotMatch(served.stdout(), /"level":50/, "an error line was logged");
      assert.doesNotMatch(served.stdout(), /"stack"/, "a stack trace was logged");
      served.child.kill("SIGTERM");
      assert.equal((await served.exited).code, 0);
    },
  );
});

describe("a busy port is one line naming the variable and the address, exit 1", () => {
  for (const which of ["rag", "textgen"] as const) {
    it(`${which}`, async () => {
      const blocker = net.createServer();
      await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
      const { port } = blocker.address() as net.AddressInfo;
      try {
        const variable = which === "rag" ? "RAG_PORT" : "TEXTGEN_PORT";
        const { code, line } = await exitLine(
          await run(which, { [variable]: String(port), DATA_DIR: path.join(scratch, `data-${which}`) }),
        );
        assert.equal(code, 1);
        assert.ok(line.includes(variable), line);
        assert.ok(line.includes(`127.0.0.1:${port}`), line);
        assert.match(line, /in use/);
      } finally {
        blocker.close();
      }
    });
  }
});

describe("a good start says what it runs with", () => {
  it("textgen logs the model, the llama.cpp binary and the device; rag logs the store", async () => {
    const textgen = await run("textgen", { LOG_LEVEL: "info" });
    const loaded = await logLine(textgen, /text generation: model/);
    assert.match(loaded, /loaded from .*\.gguf/);
    assert.match(loaded, /llama\.cpp \S+ \(\S+\): (the prebuilt binary|the build for this CPU)/);
    assert.match(loaded, /device (CPU|\w+)/);
    const dataDir = path.join(scratch, "data-log");
    const rag = await run("rag", { LOG_LEVEL: "info", DATA_DIR: dataDir });
    const store = await logLine(rag, /RAG: store/);
    assert.ok(store.includes(`SQLite at ${path.join(dataDir, "lectern.db")}`), store);
    textgen.child.kill("SIGTERM");
    rag.child.kill("SIGTERM");
    assert.equal((await textgen.exited).code, 0);
    assert.equal((await rag.exited).code, 0);
  });
});

describe("start-up output", () => {
  it("is readable lines with LOG_FORMAT=pretty (as on a terminal), JSON lines otherwise", async () => {
    const pretty = await run("rag", {
      LOG_LEVEL: "info",
      LOG_FORMAT: "pretty",
      DATA_DIR: path.join(scratch, "data-pretty"),
    });
    const store = await logLine(pretty, /RAG: store/);
    assert.match(store, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: RAG: store SQLite at /);
    assert.doesNotMatch(pretty.stdout(), /"level":/);
    // Off a terminal, with LOG_FORMAT unset: one JSON object per line, for log collectors.
    const json = await run("rag", { LOG_LEVEL: "info", DATA_DIR: path.join(scratch, "data-json") });
    const line = JSON.parse(await logLine(json, /RAG: store/)) as { level: number; msg: string };
    assert.equal(line.level, 30);
    // Keys on: the start-up says so, and names the file.
    const keys = path.join(scratch, "keys.txt");
    writeFileSync(keys, "secret-key-0001 team\n");
    const withKeys = await run("rag", {
      LOG_LEVEL: "info",
      API_KEYS_FILE: keys,
      DATA_DIR: path.join(scratch, "data-keys"),
    });
    assert.ok((await logLine(withKeys, /auth on/)).includes(keys));
    for (const served of [pretty, json, withKeys]) {
      served.child.kill("SIGTERM");
      assert.equal((await served.exited).code, 0);
    }
  });
});

describe("lectern serve", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`drains and exits 0 on ${signal}, like npm start`, async () => {
      const served = await run("rag", { DATA_DIR: path.join(scratch, `data-serve-${signal}`) }, [
        path.join(repoRoot, "bin", "lectern.mjs"),
        "serve",
        "rag",
      ]);
      await waitHealthy(served);
      served.child.kill(signal);
      const { code } = await served.exited;
      assert.equal(code, 0, served.stderr());
      assert.match(served.stderr(), new RegExp(`${signal} received`));
    });
  }
});
