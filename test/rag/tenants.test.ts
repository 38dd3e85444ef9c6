/** Tenants are kept apart: one index name in two tenants holds two independent indices. */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import {
  assertApiError,
  assertStatus,
  openRagApp,
  ragClient,
  removeTempDirs,
  withoutElapsed,
  type RagApp,
  type RagClient,
} from "../helpers/rag-http.js";

const DOCS_A = [
  { id: "a1", text: "Tenant A writes about red apples from the orchard.", metadata: { owner: "a" } },
  { id: "a2", text: "Tenant A also keeps notes on green pears.", metadata: { owner: "a" } },
];
const DOCS_B = [
  { id: "b1", text: "Tenant B writes about red bricks for the wall.", metadata: { owner: "b" } },
  { id: "b2", text: "Tenant B also keeps notes on grey cement.", metadata: { owner: "b" } },
  { id: "b3", text: "Tenant B stores red roof tiles.", metadata: { owner: "b" } },
];

after(() => removeTempDirs());

describe("tenants", () => {
  let app: RagApp;
  let rag: RagClient;
  const query = (tenant: string, text = "red notes tenant") =>
    rag.query({ index_name: "shared", tenant_id: tenant, query: text, top_k: 100 });
  const snapshotB = async () => ({
    query: withoutElapsed((await query("b")).json()),
    stats: (await rag.indexStats("shared", "b")).json(),
    list: (await rag.indices("b")).json(),
  });

  before(async () => {
    ({ app } = await openRagApp());
    rag = ragClient(app);
  });
  after(async () => app.close());

  beforeEach(async () => {
    for (const [tenant, documents] of [
      ["a", DOCS_A],
      ["b", DOCS_B],
    ] as const) {
      const res = await rag.build({ index_name: "shared", tenant_id: tenant, mode: "replace", documents });
      assertStatus(res, 201);
      assert.equal(res.json().tenant_id, tenant);
    }
  });

  it("the same index name holds each tenant's own documents", async () => {
    const a = (await query("a")).json();
    const b = (await query("b")).json();
    assert.deepEqual(a.results.map((r: { document_id: string }) => r.document_id).sort(), ["a1", "a2"]);
    assert.deepEqual(b.results.map((r: { document_id: string }) => r.document_id).sort(), ["b1", "b2", "b3"]);
    assert.ok(a.results.every((r: { metadata: { owner: string } }) => r.metadata.owner === "a"));
    assertApiError(await query("default"), 404);
    assertApiError(await rag.query({ index_name: "shared", query: "red" }), 404);
  });

  it("a filter cannot reach another tenant's documents", async () => {
    const res = await rag.query({
      index_name: "shared",
      tenant_id: "a",
      query: "red",
      filter: { owner: "b" },
    });
    assertStatus(res, 200);
    assert.equal(res.json().count, 0);
  });

  it("list and per-index stats show only the asked tenant", async () => {
    const listA = (await rag.indices("a")).json();
    assert.equal(listA.count, 1);
    assert.equal(listA.indices[0].tenant_id, "a");
    assert.equal(listA.indices[0].documents_count, 2);
    const listB = (await rag.indices("b")).json();
    assert.equal(listB.indices[0].documents_count, 3);
    assert.equal((await rag.indexStats("shared", "a")).json().documents_count, 2);
    assert.equal((await rag.indexStats("shared", "b")).json().documents_count, 3);
    assertApiError(await rag.indexStats("shared"), 404);
    assert.equal((await rag.indices()).json().count, 0);
    const stats = (await rag.stats()).json();
    assert.equal(stats.tenants_count, 2);
    assert.equal(stats.documents_count, 5);
  });

  it("create in tenant a does not conflict with b; replace and append in a leave b as it was", async () => {
    const b = await snapshotB();
    assertStatus(await rag.build({ index_name: "also-b", tenant_id: "a", documents: ["x y z"] }), 201);
    assertStatus(await rag.build({ index_name: "also-b", tenant_id: "b", documents: ["x y z"] }), 201);
    assertApiError(await rag.build({ index_name: "also-b", tenant_id: "b", documents: ["x y z"] }), 409);
    await rag.deleteIndex("also-b", "?tenant_id=b");
    await rag.deleteIndex("also-b", "?tenant_id=a");
    assertStatus(
      await rag.build({
        index_name: "shared",
        tenant_id: "a",
        mode: "replace",
        documents: ["Red everything."],
      }),
      201,
    );
    assertStatus(
      await rag.build({
        index_name: "shared",
        tenant_id: "a",
        mode: "append",
        documents: ["More red notes."],
      }),
      201,
    );
    assert.deepEqual(await snapshotB(), b);
  });

  it("adding and deleting documents in a never touches b", async () => {
    const b = await snapshotB();
    const added = await rag.addDocuments("shared", {
      tenant_id: "a",
      documents: [{ id: "b1", text: "Tenant A reuses the id b1 for red wine." }],
    });
    assertStatus(added, 200);
    assert.equal(added.json().index_documents_count, 3);
    assertStatus(await rag.deleteDocument("shared", "a1", "?tenant_id=a"), 200);
    // b2 exists only in tenant b: tenant a cannot delete it.
    assertApiError(await rag.deleteDocument("shared", "b2", "?tenant_id=a"), 404);
    assertApiError(await rag.deleteDocument("shared", "b2"), 404);
    assert.deepEqual(await snapshotB(), b);
    const a = (await query("a", "red wine")).json();
    assert.equal(a.results[0].text, "Tenant A reuses the id b1 for red wine.");
  });

  it("deleting the index in a leaves b's", async () => {
    const b = await snapshotB();
    assertApiError(await rag.deleteIndex("shared"), 404);
    assertStatus(await rag.deleteIndex("shared", "?tenant_id=a"), 200);
    assertApiError(await query("a"), 404);
    assertApiError(await rag.indexStats("shared", "a"), 404);
    assert.deepEqual(await snapshotB(), b);
    assertApiError(await rag.deleteIndex("shared", "?tenant_id=a&force=true"), 404);
    assert.deepEqual(await snapshotB(), b);
  });
});
