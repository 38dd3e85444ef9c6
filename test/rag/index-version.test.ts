/**
 * Each index's `version` (#33): GET /rag/indices and GET /rag/stats/{name} report it; every committed
 * write (build, append, add, update, delete; a background merge too) raises it, nothing else does
 * (reads, refused writes, another index's writes), and it survives a restart, with SQLite and with
 * PostgreSQL.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { buildRagApp } from "../../src/rag/app.js";
import { testConfig } from "../helpers/env.js";
import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../helpers/pg.js";
import {
  SMALL_CORPUS,
  assertStatus,
  makeTempDir,
  ragClient,
  removeTempDirs,
  type RagApp,
} from "../helpers/rag-http.js";

const NAME = "versioned";
const OTHER = "neighbour";

/** The version GET /rag/indices lists for `name`, checked equal to what /rag/stats/{name} says. */
async function versionOf(app: RagApp, name: string): Promise<number> {
  const rag = ragClient(app);
  const list = await rag.indices();
  assertStatus(list, 200);
  const listed = (list.json() as { indices: Array<{ name: string; version: number }> }).indices.find(
    (index) => index.name === name,
  );
  assert.ok(listed, `${name} is not listed`);
  const stats = await rag.indexStats(name);
  assertStatus(stats, 200);
  assert.equal((stats.json() as { version: number }).version, listed.version);
  assert.ok(Number.isSafeInteger(listed.version) && listed.version > 0, `version ${listed.version}`);
  return listed.version;
}

const unavailable = await postgresUnavailable();

const stores: Array<{ store: string; skip: string | false; env: () => Promise<Record<string, string>> }> = [
  { store: "SQLite", skip: false, env: async () => ({ DATA_DIR: makeTempDir("rag-version") }) },
  {
    store: "PostgreSQL",
    skip: unavailable ?? false,
    env: async () => {
      databases.push(await createTestDatabase());
      return { DATA_DIR: makeTempDir("rag-version-pg"), DATABASE_URL: databases.at(-1)!.url };
    },
  },
];
const databases: TestDatabase[] = [];

after(async () => {
  for (const db of databases) await db.drop();
  removeTempDirs();
});

for (const { store, skip, env } of stores) {
  describe(`index version (${store})`, { skip }, () => {
    it("rises with every committed write, stays with reads and refused writes, survives a restart", async () => {
      const config = testConfig(await env());
      let app = await buildRagApp({ config });
      try {
        // The app of the moment (a restart makes a new one).
        const rag = () => ragClient(app);
        const seen: number[] = [];
        const expectRise = async (what: string) => {
          const version = await versionOf(app, NAME);
          assert.ok(version > seen.at(-1)!, `${what}: ${version} is not above ${seen.at(-1)}`);
          seen.push(version);
        };
        const expectSame = async (what: string) =>
          assert.equal(await versionOf(app, NAME), seen.at(-1), `${what} changed the version`);

        assertStatus(await rag().build({ index_name: NAME, documents: SMALL_CORPUS }), 201);
        seen.push(await versionOf(app, NAME));

        // Reads and refused writes first, while the index is one segment: a background merge of
        // segments (which changes no content) is a committed write too, and raises the version.
        assertStatus(await rag().query({ index_name: NAME, query: "planet" }), 200);
        await expectSame("a query");
        assert.equal((await rag().deleteDocument(NAME, "never-there")).statusCode, 404);
        await expectSame("deleting a missing document");
        assert.equal((await rag().build({ index_name: NAME, documents: ["x"] })).statusCode, 409);
        await expectSame("a refused create");
        assertStatus(await rag().build({ index_name: OTHER, documents: ["another index"] }), 201);
        await expectSame("another index's write");

        await app.close();
        app = await buildRagApp({ config });
        await expectSame("a restart");
        const docs = (text: string) => ({ documents: [{ id: "extra", text }] });
        assertStatus(
          await rag().build({ index_name: NAME, mode: "append", documents: [{ id: "more", text: "moons" }] }),
          201,
        );
        await expectRise("an append");
        assertStatus(await rag().addDocuments(NAME, docs("a new document about tides")), 200);
        await expectRise("an added document");
        assertStatus(await rag().addDocuments(NAME, docs("the same document, updated")), 200);
        await expectRise("an updated document");
        assertStatus(await rag().deleteDocument(NAME, "extra"), 200);
        await expectRise("a deleted document");

        assertStatus(await rag().build({ index_name: NAME, mode: "replace", documents: SMALL_CORPUS }), 201);
        await expectRise("a replace");
        // Deleted and built again, an index never shows a version it had before.
        assertStatus(await rag().deleteIndex(NAME), 200);
        assertStatus(await rag().build({ index_name: NAME, documents: ["again"] }), 201);
        await expectRise("a re-created index");
      } finally {
        await app.close();
      }
    });
  });
}
