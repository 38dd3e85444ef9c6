/**
 * Vectors through the service, on both stores, as a property: fast-check runs random sequences of
 * build / upsert (new or replacing) / delete / replace / merge / reload against a RagService whose index
 * keeps vectors (hash embedder); after every step exact dense search and hybrid RRF fusion over the
 * served index equal those of a fresh build over the live documents (a new store, one write), hit for
 * hit (chunk ids) and score for score.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";

import fc from "fast-check";

import { reciprocalRankFusion } from "../../src/rag/retrieval/fusion.js";
import { RagService, type DocumentInput } from "../../src/rag/service.js";
import { TieredMergePolicy, type SearchHit } from "../../src/rag/search/index.js";
import { PostgresIndexStore } from "../../src/rag/store/postgres-store.js";
import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import type { IndexKey, IndexStore } from "../../src/rag/store/types.js";
import { HashEmbedder, hashVector } from "../helpers/hash-embedder.js";
import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../helpers/pg.js";

const KEY: IndexKey = { tenantId: "default", name: "prop" };
const DIMENSION = 8;
// The smallest chunk size an index allows; texts of up to 30 words still span several chunks.
const CHUNKING = { chunkSize: 100, overlap: 0 };
const WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "the", "of"];
const QUERIES = ["apple", "banana cherry", "fig grape", "unknown"];

const dirs: string[] = [];
const databases: TestDatabase[] = [];
after(async () => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  for (const db of databases) await db.drop();
});
function openSqlite(): SqliteIndexStore {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-vector-prop-"));
  dirs.push(dir);
  return SqliteIndexStore.open(dir);
}

const textArbitrary = fc
  .array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 30 })
  .map((words) => words.join(" "));
const documentsArbitrary = fc.array(fc.tuple(fc.nat({ max: 7 }), textArbitrary), {
  minLength: 1,
  maxLength: 3,
});

type Step =
  | { kind: "upsert"; documents: Array<[number, string]> }
  | { kind: "delete"; pick: number }
  | { kind: "replace"; documents: Array<[number, string]> }
  | { kind: "merge" }
  | { kind: "reload" };

const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: documentsArbitrary.map((documents) => ({ kind: "upsert" as const, documents })), weight: 4 },
  { arbitrary: fc.nat().map((pick) => ({ kind: "delete" as const, pick })), weight: 2 },
  { arbitrary: documentsArbitrary.map((documents) => ({ kind: "replace" as const, documents })), weight: 1 },
  { arbitrary: fc.constant({ kind: "merge" as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: "reload" as const }), weight: 1 },
);

const toInputs = (documents: Array<[number, string]>): DocumentInput[] => {
  const byId = new Map(documents.map(([n, text]) => [`d${n}`, text]));
  return [...byId].map(([id, text]) => ({ id, text }));
};

/** Dense and hybrid rankings of the served index, by chunk id, for every query. */
async function rankings(service: RagService, store: IndexStore) {
  const { engine } = await service.load(KEY);
  const out = [];
  for (const query of QUERIES) {
    const vector = hashVector(query, DIMENSION);
    for (const topK of [1, 3, 100]) {
      const dense = engine.searchDense(vector, { topK, exact: true });
      const lexical = engine.search(query, { topK });
      const fused = reciprocalRankFusion({ lexical, dense });
      const ids = async (hits: readonly SearchHit[]) => {
        const chunks = await store.getChunks(
          KEY,
          hits.map((hit) => hit.key),
        );
        assert.equal(chunks.length, hits.length, "every hit is a live chunk");
        return chunks.map((chunk, i) => [chunk.chunkId, hits[i]!.score]);
      };
      out.push({ query, topK, dense: await ids(dense), hybrid: await ids(fused) });
    }
  }
  return out;
}

/** The rankings of a fresh build over `live` (documents in the order of their first key). */
async function freshRankings(live: DocumentInput[]) {
  const store = openSqlite();
  const service = new RagService(store);
  try {
    if (live.length === 0) return undefined;
    await service.build({
      key: KEY,
      documents: live,
      ...CHUNKING,
      scorer: "bm25",
      mode: "create",
      embedding: { embedder: new HashEmbedder("hash", DIMENSION), storage: "f16" },
    });
    return await rankings(service, store);
  } finally {
    await service.close();
    await store.close();
  }
}

/** Merges the scenarios ran (so that the test knows it tested some). */
let mergesSeen = 0;

async function runScenario(openStore: () => Promise<IndexStore>, steps: readonly Step[]): Promise<void> {
  const store = await openStore();
  const embedding = { embedder: new HashEmbedder("hash", DIMENSION), storage: "f16" as const };
  const policy = () =>
    new TieredMergePolicy({ segmentsPerTier: 2, maxMergeAtOnce: 2, floorSegmentDocuments: 1 });
  let service = new RagService(store, { mergePolicy: new TieredMergePolicy({ segmentsPerTier: 1000 }) });
  /** Live documents in the order of their chunks' keys. */
  let live: DocumentInput[] = [];
  try {
    for (const step of steps) {
      switch (step.kind) {
        case "upsert":
        case "replace": {
          const inputs = toInputs(step.documents);
          if (live.length === 0 || step.kind === "replace") {
            const mode = live.length === 0 && !(await store.getMeta(KEY)) ? "create" : "replace";
            await service.build({
              key: KEY,
              documents: inputs,
              ...CHUNKING,
              scorer: "bm25",
              mode,
              embedding,
            });
            live = inputs;
          } else {
            await service.upsertDocuments(KEY, inputs, { embedder: embedding.embedder });
            const ids = new Set(inputs.map((d) => d.id));
            live = [...live.filter((d) => !ids.has(d.id)), ...inputs];
          }
          break;
        }
        case "delete": {
          if (live.length <= 1) break;
          const id = live[step.pick % live.length]!.id!;
          await service.deleteDocument(KEY, id);
          live = live.filter((d) => d.id !== id);
          break;
        }
        case "merge": {
          if (live.length === 0) break;
          await service.close();
          service = new RagService(store, { mergePolicy: policy() });
          // A write with nothing in it is no write: delete-and-restore one document to trigger merges.
          const last = live[live.length - 1]!;
          await service.upsertDocuments(KEY, [last], { embedder: embedding.embedder });
          await service.mergesSettled();
          mergesSeen += (await service.indexStats(KEY)).merges.completed;
          break;
        }
        case "reload":
          await service.close();
          service = new RagService(store, { mergePolicy: new TieredMergePolicy({ segmentsPerTier: 1000 }) });
          break;
      }
      if (live.length === 0) continue;
      assert.deepStrictEqual(
        await rankings(service, store),
        await freshRankings(live),
        String(JSON.stringify(step)),
      );
    }
  } finally {
    await service.close();
    await store.close();
  }
}

const seed = process.env["FC_SEED"] === undefined ? 20261126 : Number(process.env["FC_SEED"]);
const unavailable = await postgresUnavailable();

describe("vectors through the service equal a fresh build over the live documents", () => {
  it("sqlite: after every build / upsert / delete / replace / merge / reload step", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stepArbitrary, { minLength: 1, maxLength: 10 }), (steps) =>
        runScenario(async () => openSqlite(), steps),
      ),
      { numRuns: 40, seed },
    );
    assert.ok(mergesSeen > 0, "some scenarios merged");
  });

  it(
    "postgres: after every build / upsert / delete / replace / merge / reload step",
    { skip: unavailable ?? false },
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(stepArbitrary, { minLength: 1, maxLength: 10 }), async (steps) => {
          const db = await createTestDatabase();
          databases.push(db);
          await runScenario(() => PostgresIndexStore.open(db.url), steps);
        }),
        { numRuns: 10, seed },
      );
    },
  );
});
