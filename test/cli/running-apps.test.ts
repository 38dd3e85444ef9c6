/**
 * `npm start`'s apps as a newcomer meets them (issue #33), through the real CLI as a child process:
 * one name per model in every place that shows one (/v1/models, /models, /api/tags, /health, the
 * responses, the start-up log, `lectern models` asking the app and checking the files itself), the
 * architecture as a field beside it; start-up lines that say what is on; and `lectern generate`,
 * `ask` and `models` asking the running apps instead of working in process.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { freePort } from "../../scripts/lib/free-port.js";
import { NO_APP, repoRoot, testModelName, testModelPath } from "../helpers/env.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";

let served: ServedProcess;
let ragUrl: string;
const dataDir = mkdtempSync(path.join(os.tmpdir(), "lectern-running-"));

before(async () => {
  const ragPort = await freePort();
  ragUrl = `http://127.0.0.1:${ragPort}`;
  served = await startServe(
    "textgen",
    { RAG_PORT: String(ragPort), DATA_DIR: dataDir, LOG_LEVEL: "info", MODELS_DIR: path.join(dataDir, "m") },
    [path.join(repoRoot, "src", "cli", "serve.ts"), "all"],
  );
  // Generous: the model loads beside other tests on a shared 2-core machine.
  await waitHealthy(served, 180_000);
});
after(async () => {
  served.child.kill("SIGTERM");
  await served.exited;
});

/** The `lectern` command with the apps of this test as its LECTERN_URL / LECTERN_RAG_URL. */
function lectern(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [path.join(repoRoot, "bin/lectern.mjs"), ...args], {
    cwd: repoRoot,
    env: {
      ...process.env,
      LECTERN_URL: served.url,
      LECTERN_RAG_URL: ragUrl,
      LOG_LEVEL: "silent",
      ...env,
    },
    encoding: "utf8",
    timeout: 120_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

const get = async (url: string) => (await fetch(url)).json() as Promise<Record<string, unknown>>;
const post = async (url: string, body: unknown) =>
  (
    await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    })
  ).json() as Promise<Record<string, unknown>>;

/** The JSON log lines the app wrote so far. */
const logMessages = () =>
  served
    .stdout()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => (JSON.parse(line) as { msg: string }).msg);

describe("one name per model", () => {
  it("every place that names the model says its file name, with the architecture as a field", async () => {
    const names = new Map<string, unknown>();
    const architectures = new Map<string, unknown>();
    const v1 = (await get(`${served.url}/v1/models`)).data as Array<Record<string, unknown>>;
    names.set("/v1/models", v1[0]!.id);
    architectures.set("/v1/models", v1[0]!.architecture);
    const router = (await get(`${served.url}/models`)).data as Array<Record<string, unknown>>;
    names.set("/models", router[0]!.id);
    architectures.set("/models", router[0]!.architecture);
    const tags = (await get(`${served.url}/api/tags`)).models as Array<{
      name: string;
      details: { family: string };
    }>;
    names.set("/api/tags", tags[0]!.name);
    architectures.set("/api/tags", tags[0]!.details.family);
    const health = await get(`${served.url}/health`);
    names.set("/health", health.model_name);
    architectures.set("/health", health.model_architecture);
    const predicted = await post(`${served.url}/predict`, { text: "Once", max_length: 2, temperature: 0 });
    names.set("/predict", predicted.model_name);
    const chat = await post(`${served.url}/v1/chat/completions`, {
      model: "anything",
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 2,
    });
    names.set("/v1/chat/completions", chat.model);
    const loaded = logMessages().find((message) => message.startsWith("text generation: model"));
    names.set("start-up log", /model "([^"]+)"/.exec(loaded ?? "")?.[1]);
    const cli = lectern(["models", "--json"]);
    assert.equal(cli.code, 0, cli.stderr);
    const cliRow = (JSON.parse(cli.stdout) as Array<{ id: string; architecture: string }>)[0]!;
    names.set("lectern models", cliRow.id);
    architectures.set("lectern models", cliRow.architecture);
    const local = lectern(["models", "--local", "--json"], { MODEL_PATH: testModelPath });
    assert.equal(local.code, 0, local.stderr);
    const localRow = (JSON.parse(local.stdout) as Array<{ id: string; architecture: string }>)[0]!;
    names.set("lectern models --local", localRow.id);
    architectures.set("lectern models --local", localRow.architecture);

    for (const [where, name] of names) assert.equal(name, testModelName, `${where} says ${String(name)}`);
    for (const [where, architecture] of architectures)
      assert.equal(architecture, "llama", `${where} says ${String(architecture)}`);
  });
});

describe("start-up lines say what is on", () => {
  it("auth, the generator while the model loads or is loaded, no reranker when none is served", () => {
    const messages = logMessages();
    assert.ok(
      messages.some((line) => line.startsWith("auth off (API_KEYS_FILE is not set)")),
      messages.join("\n"),
    );
    assert.ok(
      messages.some((line) =>
        /^RAG: generative answers with the local model "stories260K" of this process \((loading|ready)\)/.test(
          line.replace(testModelName, "stories260K"),
        ),
      ),
      messages.join("\n"),
    );
    assert.ok(
      messages.some((line) => line.startsWith("RAG: no reranker")),
      messages.join("\n"),
    );
    const loaded = messages.find((line) => line.startsWith("text generation: model"))!;
    // The context per request and the parallelism, and the release of the binary that runs.
    assert.match(loaded, /context \d+ tokens per request × \d+ at once/);
    assert.match(loaded, /llama\.cpp v?\S+ \(ggml-org\/llama\.cpp\)/);
  });
});

describe("lectern generate, ask and models ask the running apps", () => {
  it("generate streams from the app, never loading a model itself", () => {
    // A MODEL_PATH the command could not load: only the app's model can answer.
    const env = { MODEL_PATH: path.join(dataDir, "no-such-model.gguf") };
    const run = lectern(["generate", "Once upon a time", "--max-length", "6", "--temperature", "0"], env);
    assert.equal(run.code, 0, run.stderr);
    const json = lectern(
      ["generate", "Once upon a time", "--max-length", "6", "--temperature", "0", "--json"],
      env,
    );
    assert.equal(json.code, 0, json.stderr);
    const body = JSON.parse(json.stdout) as { generated_text: string; model_name: string };
    assert.equal(body.model_name, testModelName);
    assert.equal(run.stdout, `${body.generated_text}\n`, "the streamed text is the whole text");
  });

  it("ask answers from the app's index (its own store), with sources", async () => {
    const built = await post(`${ragUrl}/rag/build`, {
      index_name: "birds",
      documents: [{ id: "birds", text: "Many birds migrate south in winter to find food." }],
    });
    assert.equal(built.documents_count, 1);
    // An empty store of its own: in process the index would not be found.
    const elsewhere = { DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-running-empty-")) };
    const run = lectern(["ask", "birds", "why do birds migrate", "--answer", "extractive"], elsewhere);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /Many birds migrate south in winter to find food\. \[1\]/);
    assert.match(run.stdout, /Sources:\n {2}\[1\] birds {2}\(score/);
    const local = lectern(["ask", "birds", "why", "--local"], elsewhere);
    assert.equal(local.code, 3, "in process, that store has no such index");
  });

  it("with no app answering, models says it checks the files here", () => {
    const run = lectern(["models"], { LECTERN_URL: NO_APP, MODEL_PATH: testModelPath });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /no app answers at http:\/\/127\.0\.0\.1:1/);
    assert.match(run.stdout, new RegExp(`^${testModelName}\\s+generate\\s+llama`, "m"));
  });
});
