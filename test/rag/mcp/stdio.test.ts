/**
 * Issue #37: `lectern mcp`, the MCP server over stdio as a desktop client starts it (a child process,
 * bin/lectern.mjs), driven by the MCP SDK's own client over the store an app wrote (DATA_DIR).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { repoRoot } from "../../helpers/env.js";
import { makeTempDir, openRagApp, removeTempDirs } from "../../helpers/rag-http.js";
import { BUILD, callOk, callTool, checks } from "./corpus.js";

const QUESTIONS = ["how does the keeper trim the wick", "storm lantern"];

after(() => removeTempDirs());

describe("lectern mcp (stdio)", () => {
  let client: Client;
  let stderr = "";
  /** What POST /rag/query answered for QUESTIONS, on the same store. */
  const queried: unknown[] = [];

  before(async () => {
    const dataDir = makeTempDir("mcp-stdio");
    const { app } = await openRagApp({ DATA_DIR: dataDir });
    try {
      assert.equal((await app.inject({ method: "POST", url: "/rag/build", payload: BUILD })).statusCode, 201);
      for (const query of QUESTIONS) {
        const res = await app.inject({
          method: "POST",
          url: "/rag/query",
          payload: { index_name: "docs", query },
        });
        assert.equal(res.statusCode, 200, res.body);
        queried.push(res.json().results);
      }
    } finally {
      await app.close();
    }
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [path.join(repoRoot, "bin/lectern.mjs"), "mcp"],
      cwd: repoRoot,
      env: { ...(process.env as Record<string, string>), DATA_DIR: dataDir, LOG_LEVEL: "silent" },
      stderr: "pipe",
    });
    transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    client = new Client({ name: "lectern-test", version: "1.0.0" });
    await client.connect(transport);
  });
  after(async () => client?.close());

  it("initializes and lists its tools, resource templates and resources", async () => {
    await checks.listsEverything(client);
  });

  it("search gives the results POST /rag/query gave for the same question", async () => {
    for (const [i, query] of QUESTIONS.entries()) {
      const searched = await callOk(client, "search", { index: "docs", query });
      assert.deepEqual(searched.results, queried[i], query);
    }
  });

  it("answers, reads documents and passage windows, and reads resources", async () => {
    await checks.answers(client);
    await checks.fetchesDocuments(client);
    await checks.readsResources(client);
  });

  it("errors are tool errors, and the server goes on", async () => {
    await checks.reportsToolErrors(client);
  });

  it("add_document writes to the store (no key over stdio)", async () => {
    const added = await callOk(client, "add_document", {
      index: "docs",
      id: "fig",
      text: "Figs split in the rain.",
    });
    assert.equal(added.tenant_id, "default");
    const found = await callOk(client, "search", { index: "docs", query: "figs rain" });
    assert.equal((found.results as Array<{ document_id: string }>)[0]?.document_id, "fig");
    const refused = await callTool(client, "add_document", { index: "absent", text: "x" });
    assert.equal(refused.isError, true);
    assert.match(refused.text, /^not_found/);
    assert.equal(stderr, "", "nothing on stderr");
  });

  it("a bad --tenant is a usage error (exit 2), before anything is served", () => {
    const run = spawnSync(
      process.execPath,
      [path.join(repoRoot, "bin/lectern.mjs"), "mcp", "--tenant", "../x"],
      {
        cwd: repoRoot,
        input: "",
        encoding: "utf8",
      },
    );
    assert.equal(run.status, 2, run.stderr);
    assert.match(run.stderr, /"\.\.\/x" is not a valid tenant id/);
    assert.equal(run.stdout, "");
  });
});
