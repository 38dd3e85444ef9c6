/** The documents the MCP tests index, and reading tool results of the SDK's client. */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";

/** Long enough for several chunks at chunk_size 200, so passage windows have neighbours. */
export const LONG_TEXT = Array.from(
  { length: 12 },
  (_, i) =>
    `Section ${i + 1} explains how the lantern keeper trims wick number ${i + 1} before the storm season.`,
).join(" ");

/** An id with a slash and a space: it must survive resource URIs. */
export const LONG_ID = "guide/lantern keeper.md";

export const DOCUMENTS = [
  { id: LONG_ID, title: "Lantern keeping", text: LONG_TEXT, metadata: { lang: "en", kind: "guide" } },
  {
    id: "pears",
    title: "Pears",
    text: "Green pears ripen on the kitchen shelf in four days.",
    metadata: { lang: "en", kind: "note" },
  },
  {
    id: "storms",
    title: null,
    text: "A storm season brings wind; the lantern must stay lit all night.",
    metadata: { lang: "de", kind: "note" },
  },
];

export const BUILD = { index_name: "docs", chunk_size: 200, overlap: 40, documents: DOCUMENTS };

export const TOOL_NAMES = ["add_document", "ask", "fetch_document", "list_indices", "search"];

export interface ToolReply {
  isError: boolean;
  text: string;
  value: Record<string, unknown>;
}

/** Calls a tool; its text and structured content, which must agree when it did not fail. */
export async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<ToolReply> {
  const result = (await client.callTool({ name, arguments: args })) as {
    isError?: boolean;
    content: Array<{ type: string; text?: string }>;
    structuredContent?: Record<string, unknown>;
  };
  const text = result.content.map((part) => part.text ?? "").join("");
  const isError = result.isError === true;
  if (!isError)
    assert.deepEqual(JSON.parse(text), result.structuredContent, "text and structured content agree");
  return { isError, text, value: result.structuredContent ?? {} };
}

/** A tool call that must succeed. */
export async function callOk(client: Client, name: string, args: Record<string, unknown>) {
  const reply = await callTool(client, name, args);
  assert.equal(reply.isError, false, `${name}: ${reply.text}`);
  return reply.value;
}

type Result = { document_id: string; chunk_id: string; text: string; metadata: Record<string, unknown> };

/** The checks both transports pass: what one client of the "docs" index sees. */
export const checks = {
  async listsEverything(client: Client) {
    assert.equal(client.getServerVersion()?.name, "lectern-rag");
    assert.match(client.getInstructions() ?? "", /list_indices/);
    const tools = (await client.listTools()).tools;
    assert.deepEqual(tools.map((tool) => tool.name).sort(), TOOL_NAMES);
    for (const tool of tools) {
      assert.ok((tool.description ?? "").length > 40, `${tool.name} is described for a model`);
      assert.equal(tool.inputSchema.type, "object");
    }
    const search = tools.find((tool) => tool.name === "search")!;
    assert.deepEqual(search.inputSchema.required?.slice().sort(), ["index", "query"]);
    assert.equal((search.inputSchema as { additionalProperties?: unknown }).additionalProperties, false);
    const templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
    assert.deepEqual(templates.sort(), ["lectern://{index}", "lectern://{index}/{document}"]);
    const uris = (await client.listResources()).resources.map((resource) => resource.uri);
    assert.ok(uris.includes("lectern://docs"), uris.join(", "));
    assert.ok(uris.includes(`lectern://docs/${encodeURIComponent(LONG_ID)}`), uris.join(", "));
  },

  async readsResources(client: Client) {
    const uri = `lectern://docs/${encodeURIComponent(LONG_ID)}`;
    const document = (await client.readResource({ uri })).contents[0] as { text: string; mimeType: string };
    assert.equal(document.mimeType, "text/plain");
    assert.equal(document.text, LONG_TEXT);
    const index = JSON.parse(
      ((await client.readResource({ uri: "lectern://docs" })).contents[0] as { text: string }).text,
    );
    assert.equal(index.name, "docs");
    assert.deepEqual(
      index.documents.map((doc: { id: string }) => doc.id).sort(),
      DOCUMENTS.map((doc) => doc.id).sort(),
    );
    await assert.rejects(
      client.readResource({ uri: "lectern://docs/nothing-here" }),
      /-32002: Document "nothing-here" not found/,
    );
  },

  async fetchesDocuments(client: Client) {
    const whole = await callOk(client, "fetch_document", { index: "docs", document_id: LONG_ID });
    assert.equal(whole.text, LONG_TEXT);
    assert.equal(whole.title, "Lantern keeping");
    assert.deepEqual(whole.metadata, { lang: "en", kind: "guide" });
    assert.equal(whole.truncated, false);
    const chunks = whole.chunks_count as number;
    assert.ok(chunks >= 4, `${chunks} chunks`);
    const page = await callOk(client, "fetch_document", {
      index: "docs",
      document_id: LONG_ID,
      offset: 100,
      max_chars: 50,
    });
    assert.equal(page.text, LONG_TEXT.slice(100, 150));
    assert.equal(page.next_offset, 150);
    const window = await callOk(client, "fetch_document", {
      index: "docs",
      document_id: LONG_ID,
      chunk_id: `${LONG_ID}#2`,
      window: 1,
    });
    const passages = window.passages as Array<{ chunk_id: string }>;
    assert.deepEqual(
      passages.map((p) => p.chunk_id),
      [1, 2, 3].map((n) => `${LONG_ID}#${n}`),
    );
    assert.equal(window.text, LONG_TEXT.slice(window.start as number, window.end as number));
  },

  async answers(client: Client) {
    const asked = await callOk(client, "ask", {
      index: "docs",
      question: "How does the keeper trim wick number 7?",
    });
    assert.equal(typeof asked.answer, "string");
    assert.ok((asked.answer as string).length > 0);
    const results = asked.results as Result[];
    assert.ok(results.length > 0);
    assert.equal(results[0]!.document_id, LONG_ID);
  },

  async reportsToolErrors(client: Client) {
    const unknown = await callTool(client, "search", { index: "nope", query: "lantern" });
    assert.equal(unknown.isError, true);
    assert.match(unknown.text, /not_found: .*nope/);
    const badArgs = await callTool(client, "search", { index: "docs", query: "lantern", top_k: 0 });
    assert.equal(badArgs.isError, true);
    assert.match(badArgs.text, /top_k/);
    // Arguments are strict, as the /rag routes' bodies: a misspelt one is named, not ignored.
    const unknownArg = await callTool(client, "search", { index: "docs", query: "lantern", topk: 3 });
    assert.equal(unknownArg.isError, true);
    assert.match(unknownArg.text, /topk/);
    const missing = await callTool(client, "fetch_document", { index: "docs" });
    assert.equal(missing.isError, true);
    assert.match(missing.text, /document_id/);
    const badChunk = await callTool(client, "fetch_document", {
      index: "docs",
      document_id: "pears",
      chunk_id: "x#9",
    });
    assert.equal(badChunk.isError, true);
    assert.match(badChunk.text, /invalid_request|not a chunk/);
    // The session goes on after its errors.
    const listed = await callOk(client, "list_indices", {});
    assert.ok((listed.count as number) >= 1);
  },
};
