/**
 * Issue #37: the MCP server at /mcp over Streamable HTTP, driven by the MCP SDK's own client: tools,
 * resources, `search` equal to POST /rag/query, tool errors, and keys and tenants as on every route.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { makeTempDir, openRagApp, removeTempDirs, type RagApp } from "../../helpers/rag-http.js";
import { startScriptedApp, type ScriptedApp } from "../../helpers/scripted-app.js";
import { BUILD, callOk, callTool, checks } from "./corpus.js";

const KEY_A = "key-tenant-a-writer-0001";
const KEY_A_READ = "key-tenant-a-reader-0002";
const KEY_B = "key-tenant-b-writer-0003";
const KEY_ADMIN = "key-admin-000000000004";

function keysFile(): string {
  const file = path.join(makeTempDir("mcp-keys"), "keys.txt");
  writeFileSync(
    file,
    [`${KEY_A} a write`, `${KEY_A_READ} a`, `${KEY_B} b write`, `${KEY_ADMIN} ops admin`].join("\n"),
  );
  return file;
}

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

async function startApp(env: Record<string, string> = {}) {
  const { app } = await openRagApp({ API_KEYS_FILE: keysFile(), ...env });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const url = new URL(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/mcp`);
  for (const [key, build] of [
    [KEY_A, BUILD],
    [
      KEY_B,
      { index_name: "secret", documents: [{ id: "plans", text: "Tenant B keeps lantern plans here." }] },
    ],
  ] as const) {
    const res = await app.inject({ method: "POST", url: "/rag/build", headers: auth(key), payload: build });
    assert.equal(res.statusCode, 201, res.body);
  }
  return { app, url };
}

async function connect(url: URL, key?: string): Promise<Client> {
  const client = new Client({ name: "lectern-test", version: "1.0.0" });
  const headers = key === undefined ? {} : auth(key);
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
  return client;
}

after(() => removeTempDirs());

describe("MCP over Streamable HTTP (stateless, the default)", () => {
  let app: RagApp;
  let url: URL;
  const clients: Client[] = [];
  const client = async (key: string) => {
    const made = await connect(url, key);
    clients.push(made);
    return made;
  };

  before(async () => ({ app, url } = await startApp()));
  after(async () => {
    for (const made of clients) await made.close();
    await app.close();
  });

  it("initializes and lists its tools, resource templates and resources", async () => {
    await checks.listsEverything(await client(KEY_A));
  });

  it("search gives exactly the results of POST /rag/query for the same question", async () => {
    const a = await client(KEY_A);
    for (const [question, extra] of [
      ["how does the keeper trim the wick", {}],
      ["lantern storm", { top_k: 2 }],
      ["lantern", { filter: { kind: "note" } }],
      ["pears ripen", { retrieval: "lexical", min_score: 0.01 }],
    ] as const) {
      const searched = await callOk(a, "search", { index: "docs", query: question, ...extra });
      const res = await app.inject({
        method: "POST",
        url: "/rag/query",
        headers: auth(KEY_A),
        payload: { index_name: "docs", query: question, ...extra },
      });
      assert.equal(res.statusCode, 200, res.body);
      const queried = res.json();
      assert.ok(queried.results.length > 0, question);
      assert.deepEqual(searched.results, queried.results, question);
      assert.equal(searched.count, queried.count);
      assert.equal(searched.query, question);
      assert.equal(searched.answer, undefined, "search answers nothing");
    }
  });

  it("answers, reads documents and passage windows, and reads resources", async () => {
    const a = await client(KEY_A);
    await checks.answers(a);
    await checks.fetchesDocuments(a);
    await checks.readsResources(a);
  });

  it("add_document needs the write scope; what it adds is searchable at once", async () => {
    const reader = await client(KEY_A_READ);
    const refused = await callTool(reader, "add_document", {
      index: "docs",
      id: "new",
      text: "Quinces need frost.",
    });
    assert.equal(refused.isError, true);
    assert.match(refused.text, /^forbidden: .*write/);
    const writer = await client(KEY_A);
    const added = await callOk(writer, "add_document", {
      index: "docs",
      id: "quince",
      title: "Quinces",
      text: "Quinces need a frost before they sweeten.",
      metadata: { kind: "note" },
    });
    assert.equal(added.success, true);
    assert.equal(added.tenant_id, "a");
    const found = await callOk(reader, "search", { index: "docs", query: "quinces frost" });
    assert.equal((found.results as Array<{ document_id: string }>)[0]?.document_id, "quince");
  });

  it("errors are tool errors, and the client goes on", async () => {
    await checks.reportsToolErrors(await client(KEY_A));
  });

  it("a key sees its own tenant's indices only", async () => {
    const a = await client(KEY_A);
    const listed = await callOk(a, "list_indices", {});
    assert.deepEqual(
      (listed.indices as Array<{ name: string; tenant_id: string }>).map((i) => [i.tenant_id, i.name]),
      [["a", "docs"]],
    );
    const other = await callTool(a, "search", { index: "secret", query: "lantern plans" });
    assert.equal(other.isError, true);
    assert.match(other.text, /^not_found/);
    const named = await callTool(a, "search", { index: "secret", query: "lantern plans", tenant_id: "b" });
    assert.equal(named.isError, true);
    assert.match(named.text, /^forbidden: .*"a"/);
    assert.equal((await callTool(a, "list_indices", { tenant_id: "b" })).isError, true);
    assert.equal(
      (await callTool(a, "fetch_document", { index: "secret", document_id: "plans" })).isError,
      true,
    );
    await assert.rejects(
      a.readResource({ uri: "lectern://secret/plans" }),
      /-32002: Index "secret" does not exist/,
    );
    const uris = (await a.listResources()).resources.map((resource) => resource.uri);
    assert.ok(!uris.some((uri) => uri.startsWith("lectern://secret")), uris.join(", "));

    const b = await client(KEY_B);
    const bListed = await callOk(b, "list_indices", {});
    assert.deepEqual(
      (bListed.indices as Array<{ name: string }>).map((i) => i.name),
      ["secret"],
    );
    const bFound = await callOk(b, "search", { index: "secret", query: "lantern plans" });
    assert.equal((bFound.results as unknown[]).length, 1);

    // An admin key lists every tenant's indices and may act for one.
    const admin = await client(KEY_ADMIN);
    const all = await callOk(admin, "list_indices", {});
    assert.deepEqual((all.indices as Array<{ name: string }>).map((i) => i.name).sort(), ["docs", "secret"]);
    assert.equal(
      (await callTool(admin, "search", { index: "secret", query: "plans", tenant_id: "b" })).isError,
      false,
    );
  });

  it("without a key, or with a wrong one, /mcp is a 401", async () => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    for (const headers of [{}, auth("not-a-key-at-all")]) {
      const res = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body,
      });
      assert.equal(res.status, 401);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, "unauthorized");
    }
    await assert.rejects(connect(url), /401|nauthorized/);
  });

  it("GET and DELETE are 405: a stateless server has no stream or session", async () => {
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(url, { method, headers: { ...auth(KEY_A), accept: "text/event-stream" } });
      assert.equal(res.status, 405, method);
      assert.equal(res.headers.get("allow"), "POST");
    }
  });
});

describe("MCP over Streamable HTTP with MCP_SESSIONS=on", () => {
  let app: RagApp;
  let url: URL;

  before(
    async () => ({ app, url } = await startApp({ MCP_SESSIONS: "on", CORS_ORIGINS: "http://app.example" })),
  );
  after(async () => app.close());

  it("keeps a session per client, for the key that opened it only", async () => {
    const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: auth(KEY_A) } });
    const a = new Client({ name: "lectern-test", version: "1.0.0" });
    await a.connect(transport);
    const sessionId = transport.sessionId;
    assert.ok(sessionId, "a session id");
    await checks.listsEverything(a);
    const searched = await callOk(a, "search", { index: "docs", query: "lantern" });
    assert.ok((searched.results as unknown[]).length > 0);

    const list = JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list" });
    const post = (headers: Record<string, string>) =>
      fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body: list,
      });
    // Another tenant's key presenting the session's id is told there is no such session.
    assert.equal((await post({ ...auth(KEY_B), "mcp-session-id": sessionId })).status, 404);
    // Without a session, only initialize opens one.
    assert.equal((await post(auth(KEY_A))).status, 400);

    // A browser page of an allowed origin may read the session id it is given.
    const initialize = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "page", version: "1" } },
    };
    const fromPage = await fetch(url, {
      method: "POST",
      headers: {
        ...auth(KEY_A),
        origin: "http://app.example",
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify(initialize),
    });
    assert.equal(fromPage.status, 200);
    assert.ok(fromPage.headers.get("mcp-session-id"));
    assert.equal(fromPage.headers.get("access-control-allow-origin"), "http://app.example");
    assert.match(fromPage.headers.get("access-control-expose-headers") ?? "", /mcp-session-id/);
    await fromPage.body?.cancel();

    await transport.terminateSession();
    assert.equal((await post({ ...auth(KEY_A), "mcp-session-id": sessionId })).status, 404);
    await a.close();
  });
});

describe("MCP ask with a generator (GENERATION_URL)", () => {
  let textgen: ScriptedApp;
  let app: RagApp;
  let client: Client;

  before(async () => {
    textgen = await startScriptedApp({
      text: { steps: [{ text: "The keeper trims each wick before storms [1]." }] },
    });
    ({ app } = await openRagApp({ GENERATION_URL: `${textgen.url}/v1`, GENERATION_MODEL: "scripted" }));
    await app.listen({ host: "127.0.0.1", port: 0 });
    assert.equal((await app.inject({ method: "POST", url: "/rag/build", payload: BUILD })).statusCode, 201);
    client = await connect(new URL(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/mcp`));
  });
  after(async () => {
    await client?.close();
    await app?.close();
    await textgen?.close();
  });

  it("answers generatively, with citations, as /rag/query does; search still answers nothing", async () => {
    const question = "When does the keeper trim the wick?";
    const asked = await callOk(client, "ask", { index: "docs", question });
    assert.equal(asked.answer_mode, "generative");
    assert.equal(asked.answer, "The keeper trims each wick before storms [1].");
    assert.deepEqual(asked.citations, [1]);
    const res = await app.inject({
      method: "POST",
      url: "/rag/query",
      payload: { index_name: "docs", query: question },
    });
    const queried = res.json();
    assert.equal(queried.answer, asked.answer);
    assert.deepEqual(queried.results, asked.results);
    const searched = await callOk(client, "search", { index: "docs", query: question });
    assert.deepEqual(searched.results, queried.results);
    assert.equal(searched.answer, undefined);
  });
});
