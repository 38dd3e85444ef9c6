/**
 * Request guards of issue #23 on the real apps: CSRF (a browser Origin that is neither the app's own
 * nor allowed may not change state, auth on or off), access decided on the normalised path, wrong
 * keys counted against RATE_LIMIT_PER_MINUTE, /rag/stats per tenant, and `?tenant_id=` on POSTs.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { buildRagApp } from "../../src/rag/app.js";
import { testConfig } from "../helpers/env.js";
import { startTextgen, type RunningTextgen } from "../helpers/servers.js";

type App = Awaited<ReturnType<typeof buildRagApp>>;

const KEY_A = "key-for-tenant-a-0001";
const KEY_B = "key-for-tenant-b-0002";
const KEY_ADMIN = "key-admin-0003";
const EVIL = "https://evil.example";

function keysFile(): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), "lectern-guard-keys-")), "keys.txt");
  writeFileSync(file, `${KEY_A} tenant-a\n${KEY_B} tenant-b\n${KEY_ADMIN} ops admin\n`);
  return file;
}

async function ragApp(env: Record<string, string> = {}): Promise<App> {
  return buildRagApp({
    config: testConfig({ DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-guard-")), ...env }),
  });
}

const json = (body: unknown, headers: Record<string, string> = {}) => ({
  payload: JSON.stringify(body),
  headers: { "content-type": "application/json", ...headers },
});

/** A multipart body made by the platform's own FormData encoder, as a browser form would send it. */
async function multipart(fields: Record<string, string>, files: Array<[string, string]>) {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  for (const [name, text] of files) form.append("files", new Blob([text]), name);
  const response = new Response(form);
  return {
    payload: Buffer.from(await response.arrayBuffer()),
    headers: { "content-type": response.headers.get("content-type")! },
  };
}

describe("CSRF: state-changing routes refuse a foreign Origin", () => {
  let app: App;
  before(async () => {
    app = await ragApp({ CORS_ORIGINS: "https://app.example" });
  });
  after(() => app.close());

  it("refuses a cross-site form POST with auth off, and changes nothing", async () => {
    const form = await multipart({ index_name: "csrf" }, [["a.txt", "planted text"]]);
    const res = await app.inject({
      method: "POST",
      url: "/rag/build",
      payload: form.payload,
      headers: { ...form.headers, origin: EVIL, host: "127.0.0.1:8001" },
    });
    assert.equal(res.statusCode, 403);
    assert.equal(res.json().error.code, "forbidden");
    assert.match(res.json().error.message, /evil\.example.*CORS_ORIGINS/);
    assert.equal((await app.inject({ method: "GET", url: "/rag/indices" })).json().count, 0);
    const urlencoded = await app.inject({
      method: "POST",
      url: "/rag/build",
      payload: "index_name=csrf",
      headers: { "content-type": "text/plain", origin: "null" },
    });
    assert.equal(urlencoded.statusCode, 403);
  });

  it("lets the app's own origin, CORS_ORIGINS and Origin-less clients write; reads stay open", async () => {
    const build = (name: string, headers: Record<string, string>) =>
      app.inject({
        method: "POST",
        url: "/rag/build",
        ...json({ index_name: name, documents: ["x y"] }, headers),
      });
    assert.equal(
      (await build("own", { host: "127.0.0.1:8001", origin: "http://127.0.0.1:8001" })).statusCode,
      201,
    );
    assert.equal((await build("listed", { origin: "https://app.example" })).statusCode, 201);
    assert.equal((await build("curl", {})).statusCode, 201);
    // Same host, another port is another origin.
    assert.equal(
      (await build("port", { host: "127.0.0.1:8001", origin: "http://127.0.0.1:9999" })).statusCode,
      403,
    );
    const deleted = await app.inject({
      method: "DELETE",
      url: "/rag/indices/curl",
      headers: { origin: EVIL },
    });
    assert.equal(deleted.statusCode, 403);
    const read = await app.inject({ method: "GET", url: "/rag/indices", headers: { origin: EVIL } });
    assert.equal(read.statusCode, 200);
    assert.equal(read.json().count, 3);
  });

  it("refuses a foreign Origin with auth on, even with a valid key", async () => {
    const keyed = await ragApp({ API_KEYS_FILE: keysFile() });
    try {
      const res = await keyed.inject({
        method: "POST",
        url: "/rag/build",
        ...json({ index_name: "k", documents: ["x"] }, { authorization: `Bearer ${KEY_A}`, origin: EVIL }),
      });
      assert.equal(res.statusCode, 403);
    } finally {
      await keyed.close();
    }
  });

  describe("on the text generation app", () => {
    let textgen: RunningTextgen;
    before(async () => {
      textgen = await startTextgen();
    });
    after(() => textgen.close());

    it("refuses a foreign Origin on POST, serves one without Origin", async () => {
      const body = JSON.stringify({ prompt: "Once", max_tokens: 2 });
      const headers = { "content-type": "application/json" };
      const foreign = await fetch(`${textgen.url}/v1/completions`, {
        method: "POST",
        body,
        headers: { ...headers, origin: EVIL },
      });
      assert.equal(foreign.status, 403);
      const plain = await fetch(`${textgen.url}/v1/completions`, { method: "POST", body, headers });
      assert.equal(plain.status, 200);
    });
  });
});

describe("auth: normalised paths, wrong keys rate limited, stats per tenant", () => {
  let app: App;
  before(async () => {
    app = await ragApp({ API_KEYS_FILE: keysFile() });
  });
  after(() => app.close());
  const as = (key: string) => ({ authorization: `Bearer ${key}` });

  it("checks the /metrics scope however the path is written", async () => {
    for (const url of [
      "/%6detrics",
      "/%6D%65trics",
      "//metrics",
      "/./metrics",
      "/rag/../metrics",
      "/metrics/",
    ]) {
      const res = await app.inject({ method: "GET", url, headers: as(KEY_A) });
      assert.notEqual(res.statusCode, 200, `${url} answered ${res.statusCode}: ${res.body.slice(0, 80)}`);
      assert.doesNotMatch(res.body, /# HELP/);
    }
    assert.equal(
      (await app.inject({ method: "GET", url: "/%6detrics", headers: as(KEY_A) })).statusCode,
      403,
    );
    assert.equal(
      (await app.inject({ method: "GET", url: "/%6detrics", headers: as(KEY_ADMIN) })).statusCode,
      200,
    );
    // A public prefix does not make a protected path public.
    const dotted = await app.inject({ method: "GET", url: "/ui/../rag/indices" });
    assert.notEqual(dotted.statusCode, 200);
    assert.equal(
      (await app.inject({ method: "GET", url: "/ui/%2e%2e/rag/indices" })).statusCode !== 200,
      true,
    );
  });

  it("counts wrong keys against RATE_LIMIT_PER_MINUTE: 200 from one address get 429s", async () => {
    const limited = await ragApp({ API_KEYS_FILE: keysFile(), RATE_LIMIT_PER_MINUTE: "5" });
    try {
      const statuses = new Map<number, number>();
      for (let i = 0; i < 200; i++) {
        const res = await limited.inject({
          method: "GET",
          url: "/rag/indices",
          headers: as(`wrong-key-${i}`),
        });
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        if (res.statusCode === 429) assert.ok(Number(res.headers["retry-after"]) >= 1);
      }
      assert.deepEqual([...statuses].sort(), [
        [401, 5],
        [429, 195],
      ]);
      // Another address is not held back; health checks never are.
      const other = await limited.inject({
        method: "GET",
        url: "/rag/indices",
        headers: as(KEY_A),
        remoteAddress: "10.0.0.2",
      });
      assert.equal(other.statusCode, 200);
      assert.equal((await limited.inject({ method: "GET", url: "/health" })).statusCode, 200);
    } finally {
      await limited.close();
    }
  });

  it("/rag/stats shows a tenant key its own counts and latencies only; process figures to admin", async () => {
    const build = (key: string) =>
      app.inject({
        method: "POST",
        url: "/rag/build",
        ...json({ index_name: "s", documents: ["alpha beta"] }, as(key)),
      });
    assert.equal((await build(KEY_A)).statusCode, 201);
    assert.equal((await build(KEY_B)).statusCode, 201);
    const query = (key: string) =>
      app.inject({
        method: "POST",
        url: "/rag/query",
        ...json({ index_name: "s", query: "alpha" }, as(key)),
      });
    for (let i = 0; i < 3; i++) assert.equal((await query(KEY_A)).statusCode, 200);
    for (let i = 0; i < 5; i++) assert.equal((await query(KEY_B)).statusCode, 200);
    const stats = async (key: string) =>
      (await app.inject({ method: "GET", url: "/rag/stats", headers: as(key) })).json();
    const [a, b, admin] = [await stats(KEY_A), await stats(KEY_B), await stats(KEY_ADMIN)];
    assert.deepEqual([a.queries_served, a.query_latency.samples, a.builds_served], [3, 3, 1]);
    assert.deepEqual([b.queries_served, b.query_latency.samples, b.builds_served], [5, 5, 1]);
    assert.equal(a.indices_count, 1);
    assert.equal(a.memory, undefined);
    assert.equal(a.cache, undefined);
    assert.deepEqual([admin.queries_served, admin.builds_served, admin.indices_count], [8, 2, 2]);
    assert.ok(admin.memory.rss_bytes > 0);
  });
});

describe("?tenant_id= on POSTs", () => {
  let app: App;
  before(async () => {
    app = await ragApp();
  });
  after(() => app.close());

  it("is taken by a multipart build, and a body naming another tenant is a 400", async () => {
    const form = await multipart({ index_name: "q" }, [["a.txt", "query string tenant"]]);
    const built = await app.inject({ method: "POST", url: "/rag/build?tenant_id=acme", ...form });
    assert.equal(built.statusCode, 201, built.body);
    assert.equal(built.json().tenant_id, "acme");
    const listed = await app.inject({ method: "GET", url: "/rag/indices?tenant_id=acme" });
    assert.equal(listed.json().count, 1);
    const clash = await app.inject({
      method: "POST",
      url: "/rag/build?tenant_id=acme",
      ...json({ index_name: "q2", tenant_id: "other", documents: ["x"] }),
    });
    assert.equal(clash.statusCode, 400);
    assert.match(clash.json().error.message, /differ/);
    const bad = await app.inject({
      method: "POST",
      url: "/rag/build?tenant_id=..",
      ...json({ index_name: "q3", documents: ["x"] }),
    });
    assert.equal(bad.statusCode, 400);
  });
});
