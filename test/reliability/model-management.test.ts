/**
 * Model management is an administrator's (issue #35), against the real text generation app (the CLI
 * as a child process, keys on) and HTTPS file servers on loopback whose self-signed certificate
 * (made with openssl at test time) the child trusts through NODE_EXTRA_CA_CERTS:
 *
 * - a tenant key gets 403 on /models/load, /models/unload, /api/pull and /api/delete, and on a
 *   keep_alive of 0; nothing is loaded, unloaded, fetched or deleted;
 * - a tenant's short keep_alive never unloads a model; an admin's 1e10 keeps it (it once unloaded);
 * - an admin key pulls from https://127.0.0.1 only because MODELS_PULL_HOSTS lists it; a host on the
 *   list only by a suffix (`.localhost`) that resolves to loopback is refused, as are redirects to a
 *   host not on the list, to http, and to loopback by name;
 * - a body past MODELS_PULL_MAX_BYTES (declared or not) or that is not GGUF is a 400 and leaves
 *   nothing in MODELS_DIR; a host that resets or stalls is a prompt 502; a client that leaves stops
 *   the download;
 * - /health answers within HEALTH_BOUND_MS throughout.
 */
import assert from "node:assert/strict";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { syntheticModel, type SyntheticShape } from "../../scripts/lib/synthetic-gguf.js";
import { testModelPath } from "../helpers/env.js";
import { HEALTH_BOUND_MS, whileProbing } from "../helpers/health-probe.js";
import { memoryOf, resetPeak } from "../helpers/process-memory.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";
import { makeTestCertificate, startHttpsServer, type TestHttpsServer } from "../helpers/tls.js";

const TINY: SyntheticShape = { embedding: 64, feedForward: 128, layers: 2, heads: 4, kvHeads: 4 };
const ADMIN = "admin-key-0123456789abcdef0123456789";
const TENANT = "tenant-key-0123456789abcdef012345678";
const MAX_PULL_BYTES = 1024 * 1024;
const PULL_TIMEOUT_MS = 1500;
/** A hang bound for answers that must come "promptly": the timeout plus a loaded machine's slack. */
const PROMPT_MS = PULL_TIMEOUT_MS + 8000;

interface Answer {
  status: number;
  body: Record<string, unknown> & { error?: unknown };
}

describe("model management is an administrator's; pulls are bounded (#35)", () => {
  let dir: string;
  let modelsDir: string;
  let served: ServedProcess;
  let files: TestHttpsServer;
  let model: Buffer;
  let base: string;
  const fileUrl = (file: string) => `https://127.0.0.1:${files.port}/${file}`;

  const call = async (method: string, route: string, key: string, body?: unknown): Promise<Answer> => {
    const response = await fetch(`${base}${route}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text === "" ? {} : (JSON.parse(text) as Answer["body"]) };
  };
  const pull = (model: string, key = ADMIN) => call("POST", "/api/pull", key, { model, stream: false });
  const loaded = async () =>
    ((await call("GET", "/api/ps", ADMIN)).body.models as Array<{ name: string; expires_at: string }>) ?? [];
  const onDisk = () => readdirSync(modelsDir).sort();

  /** The file server: each path is one behaviour of a host a pull may meet. */
  function serveFiles(request: IncomingMessage, response: ServerResponse): void {
    const redirect = (location: string): void => {
      response.writeHead(302, { location }).end();
    };
    switch (request.url) {
      case "/pulled.gguf":
      case "/moved.gguf":
        response.writeHead(200, { "content-length": model.length }).end(model);
        return;
      case "/redirect-same-host.gguf":
        return redirect("/moved.gguf");
      case "/redirect-away.gguf":
        return redirect("https://models.attacker.example/x.gguf");
      case "/redirect-http.gguf":
        return redirect(`http://127.0.0.1:${files.port}/moved.gguf`);
      case "/redirect-localhost.gguf":
        return redirect(`https://localhost:${files.port}/moved.gguf`);
      case "/declared-big.gguf":
        response.writeHead(200, { "content-length": 2 * MAX_PULL_BYTES });
        response.end(Buffer.alloc(2 * MAX_PULL_BYTES));
        return;
      case "/chunked-big.gguf": {
        // No length given: the size is only known by counting.
        response.writeHead(200);
        response.write(model.subarray(0, 64));
        response.end(Buffer.alloc(2 * MAX_PULL_BYTES));
        return;
      }
      case "/notes.gguf":
        response.writeHead(200).end("These are notes, not a model.\n".repeat(4000));
        return;
      case "/reset.gguf":
        request.socket.destroy();
        return;
      case "/stall.gguf":
        response.writeHead(200, { "content-length": model.length });
        response.write(model.subarray(0, 16));
        return; // never more
      case "/drip.gguf": {
        response.writeHead(200, { "content-length": MAX_PULL_BYTES });
        response.write(model.subarray(0, 64));
        const timer = setInterval(() => response.write(Buffer.alloc(64)), 100);
        response.on("close", () => clearInterval(timer));
        return;
      }
      default:
        response.writeHead(404).end();
    }
  }

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lectern-model-mgmt-"));
    modelsDir = path.join(dir, "models");
    const chat = await syntheticModel(testModelPath, TINY, {
      dir: path.join(os.tmpdir(), "lectern-test-models"),
      tag: "chat",
    });
    model = readFileSync(chat);
    mkdirSync(modelsDir);
    copyFileSync(chat, path.join(modelsDir, "chat.gguf"));
    const keys = path.join(dir, "keys.txt");
    writeFileSync(keys, `${ADMIN} ops admin\n${TENANT} acme\n`);
    const tls = makeTestCertificate(dir);
    files = await startHttpsServer(tls, serveFiles);
    served = await startServe("textgen", {
      API_KEYS_FILE: keys,
      MODELS_DIR: modelsDir,
      NODE_EXTRA_CA_CERTS: tls.certFile,
      // 127.0.0.1 by exactly its address: meant. localhost only under a suffix: not.
      MODELS_PULL_HOSTS: "127.0.0.1,.localhost",
      MODELS_PULL_MAX_BYTES: String(MAX_PULL_BYTES),
      MODELS_PULL_TIMEOUT_MS: String(PULL_TIMEOUT_MS),
    });
    base = served.url;
    await waitHealthy(served);
  });

  after(async () => {
    if (served && served.child.exitCode === null) served.child.kill("SIGKILL");
    await files?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a tenant key gets 403 on load, unload, pull, delete and keep_alive 0; nothing changes", async () => {
    const before = {
      disk: onDisk(),
      loaded: (await loaded()).map((m) => m.name),
      fetched: files.connections().opened,
    };
    const refusals: Array<[string, string, unknown]> = [
      ["POST", "/models/load", { model: "chat" }],
      ["POST", "/models/unload", { model: "stories260K" }],
      ["POST", "/api/pull", { model: fileUrl("pulled.gguf"), stream: false }],
      ["POST", "/api/pull", { model: fileUrl("pulled.gguf") }],
      ["DELETE", "/api/delete", { model: "chat" }],
      ["POST", "/api/generate", { model: "stories260K", keep_alive: 0 }],
      ["POST", "/api/chat", { model: "stories260K", messages: [], keep_alive: "0s" }],
      [
        "POST",
        "/v1/chat/completions",
        { model: "stories260K", messages: [{ role: "user", content: "Hi" }], max_tokens: 1, keep_alive: 0 },
      ],
    ];
    for (const [method, route, body] of refusals) {
      const answer = await call(method, route, TENANT, body);
      assert.equal(answer.status, 403, `${method} ${route}: ${JSON.stringify(answer.body)}`);
      assert.match(JSON.stringify(answer.body), /admin/);
    }
    assert.deepEqual(onDisk(), before.disk, "nothing deleted or downloaded");
    assert.deepEqual(
      (await loaded()).map((m) => m.name),
      before.loaded,
      "nothing loaded or unloaded",
    );
    assert.equal(files.connections().opened, before.fetched, "the file server was never contacted");
  });

  it("a tenant's keep_alive keeps a model, never unloads it; an admin's 1e10 is for ever, not at once", async () => {
    // The admin loads chat with a keep_alive past what a timer holds (1e10 s): clamped to for ever.
    const load = await call("POST", "/api/generate", ADMIN, { model: "chat", keep_alive: 1e10 });
    assert.equal(load.status, 200, JSON.stringify(load.body));
    assert.equal(load.body.done_reason, "load");
    // A tenant asks for 1 ms after its answer: the model keeps its stay.
    const answer = await call("POST", "/api/generate", TENANT, {
      model: "chat",
      prompt: "Once",
      stream: false,
      keep_alive: "1ms",
      options: { num_predict: 2 },
    });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const chat = (await loaded()).find((m) => m.name === "chat");
    assert.ok(chat, "chat is still loaded");
    assert.equal(new Date(chat.expires_at).getUTCFullYear(), 9999, chat.expires_at);
    // The default model too, after a tenant's short keep_alive on it.
    await call("POST", "/api/generate", TENANT, {
      model: "stories260K",
      prompt: "Once",
      stream: false,
      keep_alive: 1,
      options: { num_predict: 2 },
    });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.ok(
      (await loaded()).some((m) => m.name === "stories260K"),
      "the default model stays loaded",
    );
    // The admin may unload.
    const unload = await call("POST", "/api/generate", ADMIN, { model: "chat", keep_alive: 0 });
    assert.equal(unload.body.done_reason, "unload");
    assert.ok(!(await loaded()).some((m) => m.name === "chat"));
  });

  it("an admin pulls from an explicitly listed loopback host; the model serves at once, then is deleted", async () => {
    const { result, slowest } = await whileProbing(served, pull(fileUrl("pulled.gguf")));
    assert.equal(result.status, 200, JSON.stringify(result.body));
    assert.deepEqual(onDisk(), ["chat.gguf", "pulled.gguf"]);
    const answer = await call("POST", "/api/generate", ADMIN, {
      model: "pulled",
      prompt: "Once",
      stream: false,
      options: { num_predict: 2 },
    });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(
      (await call("DELETE", "/api/delete", ADMIN, { model: "pulled" })).status,
      409,
      "loaded: kept",
    );
    await call("POST", "/api/generate", ADMIN, { model: "pulled", keep_alive: 0 });
    assert.equal((await call("DELETE", "/api/delete", ADMIN, { model: "pulled" })).status, 200);
    assert.deepEqual(onDisk(), ["chat.gguf"]);
    // A redirect to the same listed host is followed; the file keeps the name the client asked for.
    assert.equal((await pull(fileUrl("redirect-same-host.gguf"))).status, 200);
    assert.deepEqual(onDisk(), ["chat.gguf", "redirect-same-host.gguf"]);
    assert.equal((await call("DELETE", "/api/delete", ADMIN, { model: "redirect-same-host" })).status, 200);
    assert.deepEqual(onDisk(), ["chat.gguf"]);
    assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
  });

  it("refuses http, unlisted hosts, loopback reached by a name, and redirects off the list", async () => {
    const cases: Array<[string, RegExp]> = [
      [`http://127.0.0.1:${files.port}/pulled.gguf`, /https only/],
      [`https://127.0.0.2:${files.port}/pulled.gguf`, /not a host models may be pulled from/],
      [`https://localhost:${files.port}/pulled.gguf`, /private or loopback/],
      [fileUrl("redirect-away.gguf"), /models\.attacker\.example is not a host models may be pulled from/],
      [fileUrl("redirect-http.gguf"), /redirected to http/],
      [fileUrl("redirect-localhost.gguf"), /private or loopback/],
    ];
    for (const [reference, message] of cases) {
      const answer = await pull(reference);
      assert.equal(answer.status, 400, `${reference}: ${JSON.stringify(answer.body)}`);
      assert.match(String(answer.body.error), message, reference);
      assert.deepEqual(onDisk(), ["chat.gguf"], `${reference} left something`);
    }
  });

  it("a body past the size cap or not GGUF is a 400 and leaves nothing on disk", async () => {
    const cases: Array<[string, RegExp]> = [
      ["declared-big.gguf", /MODELS_PULL_MAX_BYTES/],
      ["chunked-big.gguf", /MODELS_PULL_MAX_BYTES/],
      ["notes.gguf", /not a model llama\.cpp can load: not a GGUF file/],
    ];
    const pid = served.child.pid!;
    const before = memoryOf(pid).rss;
    resetPeak(pid);
    for (const [file, message] of cases) {
      const { result, slowest } = await whileProbing(served, pull(fileUrl(file)));
      assert.equal(result.status, 400, `${file}: ${JSON.stringify(result.body)}`);
      assert.match(String(result.body.error), message, file);
      assert.deepEqual(onDisk(), ["chat.gguf"], `${file} left something`);
      assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
    }
    const growth = memoryOf(pid).peak - before;
    assert.ok(growth < 300 * 1024 * 1024, `peak RSS grew ${Math.round(growth / 1024 / 1024)} MB`);
  });

  it("a host that resets or stalls is a prompt 502; a client that leaves stops the download", async () => {
    for (const file of ["reset.gguf", "stall.gguf"]) {
      const started = performance.now();
      const answer = await pull(fileUrl(file));
      assert.equal(answer.status, 502, `${file}: ${JSON.stringify(answer.body)}`);
      assert.ok(
        performance.now() - started < PROMPT_MS,
        `${file} answered after ${Math.round(performance.now() - started)} ms`,
      );
      assert.deepEqual(onDisk(), ["chat.gguf"]);
    }
    // A streamed pull of a file that never ends: the client leaves after the first progress line.
    const opened = files.connections().opened;
    const client = new AbortController();
    const response = await fetch(`${base}/api/pull`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify({ model: fileUrl("drip.gguf") }),
      signal: client.signal,
    });
    const reader = response.body!.getReader();
    let text = "";
    while (!text.includes("completed")) text += new TextDecoder().decode((await reader.read()).value);
    assert.equal(files.connections().opened, opened + 1);
    client.abort();
    // The server's download connection closes: nothing fetches for a client that is gone.
    const deadline = performance.now() + PROMPT_MS;
    while (files.connections().open > 0 && performance.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(files.connections().open, 0, "the download was stopped");
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(files.connections().opened, opened + 1, "and not retried");
    assert.deepEqual(onDisk(), ["chat.gguf"]);
  });
});
