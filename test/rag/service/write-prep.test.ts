/**
 * A large write prepared on a worker thread (src/rag/service/write-prep.ts) makes exactly the records,
 * chunks and index of the inline preparation: ids filled in by content hash, duplicates of one text
 * merged, lone surrogates replaced, titles, metadata and pages kept; the same 400s; and an index built
 * through the service from a write above the size answers every query as one built in small appends.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { DomainError } from "../../../src/core/errors.js";
import { RagService, type DocumentInput } from "../../../src/rag/service.js";
import { chunkDocuments, normaliseDocuments } from "../../../src/rag/service/documents.js";
import {
  analysisOf,
  DocumentsPreparation,
  OFF_THREAD_CHARS,
  prepareDocuments,
  preparesOffThread,
  recordsOf,
  runDocumentsJob,
} from "../../../src/rag/service/write-prep.js";
import { SqliteIndexStore } from "../../../src/rag/store/sqlite-store.js";
import type { IndexSettings } from "../../../src/rag/store/types.js";
import { makeTempDir, removeTempDirs } from "../../helpers/rag-http.js";
import { makeProse, seededRandom } from "../../helpers/text-fixtures.js";

const SETTINGS: IndexSettings = { scorer: "bm25", chunkSize: 300, overlap: 40 };
const ANALYSIS = analysisOf(SETTINGS, null);

/** Every kind of input normalisation handles, and a paged document. */
function mixedInputs(): DocumentInput[] {
  const random = seededRandom(7);
  const prose = (n: number) => makeProse(random, n);
  const repeated = prose(500);
  return [
    { text: prose(2000) },
    { id: "titled", title: "A title", text: prose(900), metadata: { group: "a", n: 1 } },
    { text: repeated, title: "first" },
    { text: repeated, title: "second" },
    { id: "surrogates", title: "bad \uD800 title", text: `${prose(400)} \uDC00 lone ${prose(400)}` },
    {
      id: "paged",
      text: `${prose(700)}\n${prose(700)}\n${prose(700)}`,
      pageStarts: [0, 701, 1402],
      source: "x.pdf",
    },
    { id: "hashed", text: prose(300), contentHash: "abc", metadata: { nested: { deep: [1, 2] } } },
    // Chunked on its own terms (an OpenAI file's static chunking strategy), not the index's.
    { id: "own-chunking", text: prose(1500), chunking: { chunkSize: 120, overlap: 20 } },
  ];
}

describe("write preparation off the event loop", () => {
  it("the thread's result makes the records and chunks the inline preparation makes", () => {
    const inputs = mixedInputs();
    const expected = normaliseDocuments(inputs);
    const { chunked, engineTexts } = chunkDocuments(expected, SETTINGS);
    const result = runDocumentsJob({ inputs, chunking: SETTINGS, analysis: ANALYSIS, wantTexts: true });
    const prepared = recordsOf(inputs, result);
    assert.deepEqual(prepared.documents, expected);
    assert.deepEqual(prepared.chunked, chunked);
    assert.deepEqual(prepared.engineTexts, engineTexts);
    assert.equal(prepared.chunkCount, engineTexts.length);
    const own = chunked.find(({ document }) => document.id === "own-chunking")!.chunks;
    assert.ok(own.length > 1500 / 120 && own.every((chunk) => chunk.end - chunk.start <= 120));
    assert.equal(prepared.built?.documentCount, engineTexts.length);
    assert.ok(chunked.some(({ chunks }) => chunks.some((chunk) => "pages" in chunk.metadata)));
  });

  it("on a worker thread: the same records, the segment handed over, the same 400s", async () => {
    const random = seededRandom(11);
    const inputs = Array.from({ length: 40 }, (_, i) => ({
      id: `doc-${i}`,
      text: makeProse(random, OFF_THREAD_CHARS / 30),
    }));
    assert.ok(preparesOffThread(inputs));
    const prepared = await prepareDocuments(inputs, SETTINGS, ANALYSIS, false);
    const expected = chunkDocuments(normaliseDocuments(inputs), SETTINGS);
    assert.deepEqual(prepared.chunked, expected.chunked);
    assert.equal(prepared.engineTexts, null);
    assert.equal(prepared.built?.documentCount, expected.engineTexts.length);
    const duplicate = [...inputs, { id: "doc-3", text: "another text" }];
    await assert.rejects(prepareDocuments(duplicate, SETTINGS, ANALYSIS, false), (error) => {
      assert.ok(error instanceof DomainError && error.kind === "invalid", String(error));
      assert.match(error.message, /"doc-3" appears more than once/);
      return true;
    });
  });

  it("prepared run by run as the thread receives them (every input with its id): the same result and 400s", async () => {
    const inputs = mixedInputs().map((input, i) => ({ ...input, id: input.id ?? `given-${i}` }));
    const whole = runDocumentsJob({ inputs, chunking: SETTINGS, analysis: ANALYSIS, wantTexts: true });
    const preparation = new DocumentsPreparation({ chunking: SETTINGS, analysis: ANALYSIS, wantTexts: true });
    preparation.addInOrder(inputs.slice(0, 3), 0);
    preparation.addInOrder(inputs.slice(3), 3);
    assert.deepEqual(preparation.finish(), whole);

    // A large write: the first error in the inputs' order is the one inline preparation gives.
    const random = seededRandom(13);
    const big = Array.from({ length: 30 }, (_, i) => ({
      id: `d-${i}`,
      text: makeProse(random, OFF_THREAD_CHARS / 20),
    }));
    for (const bad of [
      [...big.slice(0, 12), { id: "blank", text: " \n " }, ...big.slice(12), { id: "d-2", text: "x" }],
      [...big.slice(0, 20), { id: "d-4", text: "again" }, ...big.slice(20), { id: "blank", text: "" }],
    ]) {
      assert.ok(preparesOffThread(bad));
      const inline = (() => {
        try {
          normaliseDocuments(bad);
        } catch (error) {
          return error as DomainError;
        }
        throw new Error("inline preparation accepted the write");
      })();
      await assert.rejects(prepareDocuments(bad, SETTINGS, ANALYSIS, false), (error) => {
        assert.ok(error instanceof DomainError && error.kind === "invalid", String(error));
        assert.equal(error.message, inline.message);
        assert.deepEqual(error.details, inline.details);
        return true;
      });
    }
  });

  it("an index built from a large write answers as one built in small appends", async (t) => {
    const random = seededRandom(5);
    const inputs = Array.from({ length: 60 }, (_, i) => ({
      id: `doc-${i}`,
      title: i % 3 === 0 ? `Title ${i}` : null,
      text: makeProse(random, OFF_THREAD_CHARS / 40),
      metadata: { group: i % 2 === 0 ? "even" : "odd" },
    }));
    assert.ok(preparesOffThread(inputs));
    const dir = makeTempDir("write-prep");
    t.after(removeTempDirs);
    const answers = async (name: string, write: (service: RagService) => Promise<void>) => {
      const store = SqliteIndexStore.open(`${dir}/${name}`);
      const service = new RagService(store);
      try {
        await write(service);
        const key = { tenantId: "t", name };
        const all = [];
        for (const query of ["river stone", "light cloud forest", "the", "ocean"])
          all.push(
            (await service.query({ key, query, topK: 8, minScore: 0, filter: { group: "odd" } })).results,
          );
        const stats = await service.indexStats(key);
        return {
          all,
          documents: stats.meta.documentsCount,
          chunks: stats.meta.chunksCount,
          vocabulary: stats.meta.vocabularySize,
        };
      } finally {
        await service.close();
        await store.close();
      }
    };
    const chunking = { chunkSize: SETTINGS.chunkSize, overlap: SETTINGS.overlap, scorer: SETTINGS.scorer };
    const large = await answers("large", async (service) => {
      await service.build({
        key: { tenantId: "t", name: "large" },
        documents: inputs,
        ...chunking,
        mode: "create",
      });
    });
    const small = await answers("small", async (service) => {
      const key = { tenantId: "t", name: "small" };
      await service.build({ key, documents: inputs.slice(0, 5), ...chunking, mode: "create" });
      for (let at = 5; at < inputs.length; at += 5)
        await service.build({ key, documents: inputs.slice(at, at + 5), ...chunking, mode: "append" });
    });
    assert.deepEqual(large, small);
  });
});
