/**
 * Errors a newcomer meets first say what to change (issue #33): a body over its route's limit names
 * the limit in bytes and the setting; an API_KEYS_FILE that cannot be read names the path.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { KeyRing } from "../../src/core/auth.js";
import { ConfigError } from "../../src/core/config.js";
import { buildRagApp } from "../../src/rag/app.js";
import { testConfig } from "../helpers/env.js";

type App = Awaited<ReturnType<typeof buildRagApp>>;

describe("a body over its route's limit", () => {
  let app: App;
  before(async () => {
    app = await buildRagApp({
      // The large limit (/rag/build, documents) at 4 KiB, so a small body crosses it.
      config: testConfig({
        DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-413-")),
        MAX_BODY_BYTES: "4096",
      }),
    });
  });
  after(() => app.close());

  it("is a 413 naming the route's limit in bytes and MAX_BODY_BYTES, and builds nothing", async () => {
    const text = "x".repeat(5000);
    const res = await app.inject({
      method: "POST",
      url: "/rag/build",
      headers: { "content-type": "application/json" },
      payload: JSON.stringify({ index_name: "big", documents: [text] }),
    });
    assert.equal(res.statusCode, 413);
    const { error } = res.json() as { error: { code: string; message: string } };
    assert.equal(error.code, "payload_too_large");
    assert.match(error.message, /at most 4096 bytes/);
    assert.match(error.message, /MAX_BODY_BYTES/);
    const list = await app.inject({ method: "GET", url: "/rag/indices" });
    assert.deepEqual(
      (list.json() as { indices: Array<{ name: string }> }).indices.map((index) => index.name),
      [],
    );
  });

  it("says the same in OpenAI's error shape on the RAG app's /v1 routes", async () => {
    const res = await app.inject({
      method: "POST",
      url: "/v1/chat/completions",
      headers: { "content-type": "application/json" },
      payload: JSON.stringify({ model: "x", messages: [{ role: "user", content: "y".repeat(5000) }] }),
    });
    assert.equal(res.statusCode, 413);
    const body = res.json() as { error: { message: string } };
    assert.match(body.error.message, /at most 4096 bytes/);
  });
});

describe("API_KEYS_FILE that cannot be read", () => {
  it("is a configuration error naming the absolute path and why", () => {
    const missing = path.join(mkdtempSync(path.join(os.tmpdir(), "lectern-keys-")), "nope", "keys.txt");
    assert.throws(
      () => KeyRing.load(path.relative(process.cwd(), missing)),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message.includes(missing) &&
        error.message.includes("does not exist"),
    );
  });

  it("a folder instead of a file says so", () => {
    const folder = mkdtempSync(path.join(os.tmpdir(), "lectern-keys-"));
    assert.throws(
      () => KeyRing.load(folder),
      (error: unknown) => error instanceof ConfigError && /is a folder/.test(error.message),
    );
  });
});
