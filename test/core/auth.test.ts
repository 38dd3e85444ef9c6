import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ConfigError } from "../../src/core/config.js";
import { KeyRing } from "../../src/core/auth.js";
import { buildRagApp } from "../../src/rag/app.js";
import { repoRoot, testConfig } from "../helpers/env.js";

const KEY_A = "key-for-tenant-a-0001";
const KEY_B = "key-for-tenant-b-0002";
const KEY_ADMIN = "key-admin-0003";
const KEY_METRICS = "key-metrics-0004";

function keysFile(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-keys-"));
  const file = path.join(dir, "keys.txt");
  const hashedB = createHash("sha256").update(KEY_B).digest("hex");
  writeFileSync(
    file,
    [
      "# key tenant scopes",
      `${KEY_A} tenant-a`,
      `sha256:${hashedB} tenant-b`,
      `${KEY_ADMIN} ops admin`,
      `${KEY_METRICS} monitoring metrics`,
      "",
    ].join("\n"),
  );
  return file;
}

describe("KeyRing", () => {
  it("reads lines with plain and sha256: keys, and JSON", () => {
    const ring = KeyRing.parse(
      `${KEY_A} a\nsha256:${createHash("sha256").update(KEY_B).digest("hex")} b read,metrics\n`,
    );
    assert.equal(ring.authenticate(KEY_A)?.tenant, "a");
    assert.equal(ring.authenticate(KEY_B)?.tenant, "b");
    assert.deepEqual([...ring.authenticate(KEY_B)!.scopes], ["read", "metrics"]);
    assert.equal(ring.authenticate("nope-nope-nope"), null);
    const json = KeyRing.parse(JSON.stringify([{ key: KEY_A, tenant: "a", scopes: ["admin"] }]));
    assert.equal(json.authenticate(KEY_A)?.admin, true);
  });

  it("refuses bad files with a message", () => {
    for (const bad of ["", "short a", `${KEY_A}`, `${KEY_A} ../x`, "sha256:abc t", "[{}]", "[not json"]) {
      assert.throws(() => KeyRing.parse(bad), ConfigError, bad);
    }
  });
});

describe("keys and tenants over HTTP", () => {
  let app: Awaited<ReturnType<typeof buildRagApp>>;
  const auth = (key: string) => ({ authorization: `Bearer ${key}` });

  before(async () => {
    app = await buildRagApp({
      config: testConfig({
        API_KEYS_FILE: keysFile(),
        DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-auth-")),
      }),
    });
    for (const [key, text] of [
      [KEY_A, "Alpha tenant secret plans about apples."],
      [KEY_B, "Beta tenant secret plans about bananas."],
    ] as const) {
      const res = await app.inject({
        method: "POST",
        url: "/rag/build",
        headers: auth(key),
        payload: { index_name: "notes", documents: [{ id: "d1", text }] },
      });
      assert.equal(res.statusCode, 201, res.body);
      assert.equal(res.json().tenant_id, key === KEY_A ? "tenant-a" : "tenant-b");
    }
  });
  after(async () => app.close());

  it("public routes need no key", async () => {
    for (const url of ["/health", "/", "/livez", "/openapi.json", "/docs/"]) {
      const res = await app.inject({ method: "GET", url });
      assert.equal(res.statusCode, 200, url);
    }
  });

  it("every other route is 401 without a key or with a bad one", async () => {
    const routes: Array<[string, string, object?]> = [
      ["POST", "/rag/build", { index_name: "x", documents: ["x"] }],
      ["POST", "/rag/query", { index_name: "notes", query: "plans" }],
      ["GET", "/rag/indices"],
      ["GET", "/rag/stats"],
      ["GET", "/rag/stats/notes"],
      ["DELETE", "/rag/indices/notes"],
      ["POST", "/rag/indices/notes/documents", { documents: ["x"] }],
      ["DELETE", "/rag/indices/notes/documents/d1"],
      ["GET", "/metrics"],
    ];
    for (const [method, url, payload] of routes) {
      for (const headers of [{}, auth("wrong-key-wrong-key"), { authorization: "Basic abc" }]) {
        const res = await app.inject({ method: method as "GET", url, payload, headers });
        assert.equal(res.statusCode, 401, `${method} ${url}`);
        assert.equal(res.json().error.code, "unauthorized");
        assert.match(res.headers["www-authenticate"] as string, /Bearer/);
      }
    }
  });

  it("a key for tenant A gets 403 on every route touching tenant B's index", async () => {
    const asA = (method: string, url: string, payload?: object) =>
      app.inject({ method: method as "GET", url, payload, headers: auth(KEY_A) });
    const cases = [
      await asA("POST", "/rag/query", { index_name: "notes", tenant_id: "tenant-b", query: "plans" }),
      await asA("POST", "/rag/build", {
        index_name: "notes",
        tenant_id: "tenant-b",
        mode: "replace",
        documents: ["x"],
      }),
      await asA("POST", "/rag/build", {
        index_name: "notes",
        tenant_id: "tenant-b",
        mode: "append",
        documents: ["x"],
      }),
      await asA("GET", "/rag/indices?tenant_id=tenant-b"),
      await asA("GET", "/rag/stats/notes?tenant_id=tenant-b"),
      await asA("DELETE", "/rag/indices/notes?tenant_id=tenant-b"),
      await asA("POST", "/rag/indices/notes/documents", { tenant_id: "tenant-b", documents: ["x"] }),
      await asA("DELETE", "/rag/indices/notes/documents/d1?tenant_id=tenant-b"),
    ];
    for (const res of cases) {
      assert.equal(res.statusCode, 403, res.body);
      assert.equal(res.json().error.code, "forbidden");
    }
    // Nothing of B's changed.
    const b = await app.inject({
      method: "POST",
      url: "/rag/query",
      headers: auth(KEY_B),
      payload: { index_name: "notes", query: "plans" },
    });
    assert.equal(b.statusCode, 200);
    assert.match(b.json().results[0].text, /bananas/);
    assert.equal(b.json().count, 1);
  });

  it("an omitted tenant_id means the key's own tenant; listings show only its own indices", async () => {
    const a = await app.inject({
      method: "POST",
      url: "/rag/query",
      headers: auth(KEY_A),
      payload: { index_name: "notes", query: "plans" },
    });
    assert.match(a.json().results[0].text, /apples/);
    const list = await app.inject({ method: "GET", url: "/rag/indices", headers: auth(KEY_A) });
    assert.deepEqual(
      list.json().indices.map((i: { tenant_id: string }) => i.tenant_id),
      ["tenant-a"],
    );
    const stats = await app.inject({ method: "GET", url: "/rag/stats", headers: auth(KEY_A) });
    assert.equal(stats.json().indices_count, 1);
  });

  it("an admin key acts for every tenant and lists all", async () => {
    const list = await app.inject({ method: "GET", url: "/rag/indices", headers: auth(KEY_ADMIN) });
    assert.deepEqual(
      list
        .json()
        .indices.map((i: { tenant_id: string }) => i.tenant_id)
        .sort(),
      ["tenant-a", "tenant-b"],
    );
    const b = await app.inject({
      method: "POST",
      url: "/rag/query",
      headers: auth(KEY_ADMIN),
      payload: { index_name: "notes", tenant_id: "tenant-b", query: "plans" },
    });
    assert.match(b.json().results[0].text, /bananas/);
    assert.equal(
      (await app.inject({ method: "GET", url: "/metrics", headers: auth(KEY_ADMIN) })).statusCode,
      200,
    );
  });

  it("/metrics needs the metrics (or admin) scope", async () => {
    assert.equal(
      (await app.inject({ method: "GET", url: "/metrics", headers: auth(KEY_A) })).statusCode,
      403,
    );
    const res = await app.inject({ method: "GET", url: "/metrics", headers: auth(KEY_METRICS) });
    assert.equal(res.statusCode, 200);
    assert.match(res.body, /lectern_rag_indices/);
  });

  it("/docs offers the Authorize button (a bearer security scheme applied to the API)", async () => {
    const doc = (await app.inject({ method: "GET", url: "/openapi.json" })).json();
    assert.equal(doc.components.securitySchemes.bearer.scheme, "bearer");
    assert.deepEqual(doc.security, [{ bearer: [] }]);
  });
});

describe("no key or secret in the logs", () => {
  it("a running app logs requests without the Authorization header or key", async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "lectern-authlog-"));
    const child = spawn(process.execPath, ["--import", "tsx", "src/cli/serve.ts", "rag"], {
      cwd: repoRoot,
      env: {
        ...process.env,
        API_KEYS_FILE: keysFile(),
        DATA_DIR: dataDir,
        RAG_PORT: "0",
        LOG_LEVEL: "trace",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    try {
      const port = await new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no listen line: ${output}`)), 20_000);
        child.stdout.on("data", () => {
          const match = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(output);
          if (match) {
            clearTimeout(timer);
            resolve(Number(match[1]));
          }
        });
      });
      const base = `http://127.0.0.1:${port}`;
      await fetch(`${base}/rag/indices`, { headers: { authorization: `Bearer ${KEY_A}` } });
      await fetch(`${base}/rag/indices`, { headers: { authorization: "Bearer not-a-real-key-123" } });
      await fetch(`${base}/rag/build`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY_ADMIN}`, "content-type": "application/json" },
        body: JSON.stringify({ index_name: "x", documents: ["hello"] }),
      });
    } finally {
      child.kill("SIGTERM");
      await new Promise((resolve) => child.once("exit", resolve));
    }
    // One access line per request (and, at debug and below, its arrival).
    assert.match(output, /"statusCode":401,[^\n]*"msg":"request completed"/);
    assert.match(output, /incoming request/);
    for (const secret of [KEY_A, KEY_ADMIN, "not-a-real-key-123", "Bearer"]) {
      assert.ok(!output.includes(secret), `log contains ${secret}`);
    }
  });
});
