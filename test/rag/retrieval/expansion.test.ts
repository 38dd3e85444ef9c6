/** `"expand": true` on /rag/query: RM3 over the store's chunks, through the real app and SQLite store. */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { openRagApp, ragClient, removeTempDirs, type RagApp } from "../../helpers/rag-http.js";

// Three on-topic documents among 30 fillers of unique words: feedback terms pass the 10% df filter.
const DOCUMENTS = [
  { id: "a", text: "cat feline purr", metadata: { group: "x" } },
  { id: "b", text: "cat feline whiskers", metadata: { group: "y" } },
  { id: "c", text: "feline whiskers purr", metadata: { group: "y" } },
  ...Array.from({ length: 30 }, (_, i) => ({ id: `f${i}`, text: `filler${i} other${i}`, metadata: {} })),
];

describe("/rag/query expand (RM3)", () => {
  let app: RagApp;
  let client: ReturnType<typeof ragClient>;
  before(async () => {
    ({ app } = await openRagApp());
    client = ragClient(app);
    const built = await client.build({ index_name: "pets", scorer: "bm25", documents: DOCUMENTS });
    assert.equal(built.statusCode, 201, built.body);
  });
  after(async () => {
    await app.close();
    removeTempDirs();
  });

  const ids = async (body: object): Promise<string[]> => {
    const reply = await client.query({
      index_name: "pets",
      query: "cat",
      top_k: 10,
      answer: "none",
      ...body,
    });
    assert.equal(reply.statusCode, 200, reply.body);
    const results = reply.json().results as { document_id: string; score: number }[];
    for (const result of results) assert.ok(result.score > 0 && result.score <= 1);
    return results.map((result) => result.document_id);
  };

  it("finds a chunk that shares no word with the query; off by default", async () => {
    assert.deepEqual((await ids({})).sort(), ["a", "b"]);
    assert.deepEqual((await ids({ expand: false })).sort(), ["a", "b"]);
    assert.deepEqual((await ids({ expand: true })).sort(), ["a", "b", "c"]);
  });

  it("honours the filter in both passes", async () => {
    assert.deepEqual((await ids({ expand: true, filter: { group: "y" } })).sort(), ["b", "c"]);
  });

  it("refuses a non-boolean expand", async () => {
    const reply = await client.query({ index_name: "pets", query: "cat", expand: "yes" });
    assert.equal(reply.statusCode, 400);
  });
});
