/** Indices survive a restart: a new app on the same DATA_DIR answers exactly as the old one did. */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import {
  SMALL_CORPUS,
  assertStatus,
  makeTempDir,
  openRagApp,
  ragClient,
  removeTempDirs,
  withoutElapsed,
  type RagClient,
} from "../helpers/rag-http.js";
import { makeProse, seededRandom } from "../helpers/text-fixtures.js";

const random = seededRandom(11);
const PROSE = Array.from({ length: 40 }, (_, i) => ({
  id: `prose-${i}`,
  title: i % 4 === 0 ? `Prose number ${i}` : null,
  text: makeProse(random, 300 + ((i * 97) % 900)),
  metadata: { n: i, group: i % 3 === 0 ? "a" : "b" },
}));

const QUERIES: Array<Record<string, unknown>> = [
  { query: "largest planet orbit" },
  { query: "whale ocean coral", top_k: 3 },
  { query: "the index of the search engine", top_k: 20 },
  { question: "which chunk holds the tenant snapshot version?", top_k: 10, answer: "none" },
  { query: "crash write storage overlap", top_k: 100, filter: { group: "a" } },
  { query: "query answer model", top_k: 50, min_score: 0.1 },
  { query: "volcano lava bread", filter: { topic: "nature" } },
];

/** Everything a client can observe of the tenant's indices, timings left out. */
async function observe(rag: RagClient, tenant: string, names: string[]) {
  const answers: unknown[] = [];
  for (const name of names) {
    for (const q of QUERIES) {
      const res = await rag.query({ index_name: name, tenant_id: tenant, ...q });
      assertStatus(res, 200);
      answers.push(withoutElapsed(res.json()));
    }
  }
  const list = (await rag.indices(tenant)).json();
  const stats = [];
  for (const name of names) {
    // What this process loaded and merged is its own history, not the index's state.
    const { loaded: _loaded, merges: _merges, ...state } = (await rag.indexStats(name, tenant)).json();
    stats.push(state);
  }
  return { answers, list, stats };
}

after(() => removeTempDirs());

describe("persistence across a restart", () => {
  const dataDir = makeTempDir("rag-persist");
  const names = ["mixed", "prose"];
  const tenant = "persist";

  it("build, query, restart: the same answers, counts and dates", async () => {
    const first = await openRagApp({ DATA_DIR: dataDir });
    const rag = ragClient(first.app);
    assertStatus(
      await rag.build({
        index_name: "mixed",
        tenant_id: tenant,
        documents: [...SMALL_CORPUS, ...PROSE.slice(0, 10)],
      }),
      201,
    );
    assertStatus(
      await rag.build({
        index_name: "prose",
        tenant_id: tenant,
        scorer: "bm25",
        chunk_size: 250,
        overlap: 40,
        documents: PROSE,
      }),
      201,
    );
    const before = await observe(rag, tenant, names);
    assert.ok((before.answers as Array<{ count: number }>).some((a) => a.count > 5));
    await first.app.close();

    const second = await openRagApp({ DATA_DIR: dataDir });
    try {
      assert.deepEqual(await observe(ragClient(second.app), tenant, names), before);
    } finally {
      await second.app.close();
    }
  });

  it("after an append, a document replace and a document delete: the same again", async () => {
    const first = await openRagApp({ DATA_DIR: dataDir });
    const rag = ragClient(first.app);
    assertStatus(
      await rag.build({
        index_name: "prose",
        tenant_id: tenant,
        mode: "append",
        documents: PROSE.slice(0, 5).map((d) => ({ ...d, id: `${d.id}-copy` })),
      }),
      201,
    );
    assertStatus(
      await rag.addDocuments("mixed", {
        tenant_id: tenant,
        documents: [
          {
            id: "solar",
            text: "The solar system now has a ninth planet again.",
            metadata: { topic: "space" },
          },
        ],
      }),
      200,
    );
    assertStatus(await rag.deleteDocument("prose", "prose-3", `?tenant_id=${tenant}`), 200);
    assertStatus(await rag.deleteDocument("mixed", "bread", `?tenant_id=${tenant}`), 200);
    const before = await observe(rag, tenant, names);
    const prose = (before.stats as Array<{ documents_count: number; segments_count: number }>)[1]!;
    assert.equal(prose.documents_count, 40 + 5 - 1);
    // The build's segment and the append's; the delete added tombstones, no segment.
    assert.equal(prose.segments_count, 2);
    await first.app.close();

    const second = await openRagApp({ DATA_DIR: dataDir });
    const again = ragClient(second.app);
    try {
      assert.deepEqual(await observe(again, tenant, names), before);
      const solar = (
        await again.query({ index_name: "mixed", tenant_id: tenant, query: "ninth planet" })
      ).json();
      assert.equal(solar.results[0].text, "The solar system now has a ninth planet again.");
      const bread = (
        await again.query({ index_name: "mixed", tenant_id: tenant, query: "bread dough yeast" })
      ).json();
      assert.equal(bread.count, 0);
    } finally {
      await second.app.close();
    }
  });

  it("a deleted index stays deleted after a restart", async () => {
    const first = await openRagApp({ DATA_DIR: dataDir });
    assertStatus(await ragClient(first.app).deleteIndex("mixed", `?tenant_id=${tenant}`), 200);
    await first.app.close();
    const second = await openRagApp({ DATA_DIR: dataDir });
    try {
      const rag = ragClient(second.app);
      assert.equal((await rag.indexStats("mixed", tenant)).statusCode, 404);
      assert.deepEqual(
        (await rag.indices(tenant)).json().indices.map((i: { name: string }) => i.name),
        ["prose"],
      );
    } finally {
      await second.app.close();
    }
  });
});
