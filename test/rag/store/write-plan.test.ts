/**
 * The write plan both stores execute (src/rag/store/write-plan.ts), on its own: preconditions, the
 * rows a write or merge removes, the index row after it, and the checks that keep an index's live
 * engine documents equal to its chunks. The stores' own suites (store-contract.ts) run it through
 * SQLite and PostgreSQL.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { DomainError } from "../../../src/core/errors.js";
import { toApiError } from "../../../src/core/http.js";
import { StaleVersionError } from "../../../src/rag/store/common.js";
import type { IndexWrite, MergeWrite, StoredChunk } from "../../../src/rag/store/types.js";
import {
  checkTombstoneBounds,
  indexAfterMerge,
  indexAfterWrite,
  planMerge,
  planWrite,
  toMeta,
  type IndexRowOf,
} from "../../../src/rag/store/write-plan.js";

const KEY = { tenantId: "acme", name: "handbook" };
const CREATED = "2026-01-02T03:04:05.000Z";
const UPDATED = "2026-01-03T03:04:05.000Z";

/** An index as SQLite gives its row: 3 documents, 5 chunks, 2 segments of 4 documents, 3 tombstones. */
const sqliteRow: IndexRowOf<number, string> = {
  id: 7,
  tenant_id: KEY.tenantId,
  name: KEY.name,
  scorer: "bm25",
  chunk_size: 200,
  overlap: 20,
  documents_count: 3,
  chunks_count: 5,
  vocabulary_size: 40,
  size_bytes: 1000,
  version: 12,
  created_at: CREATED,
  updated_at: UPDATED,
  next_key: 8,
  next_segment_id: 2,
  total_length: 90,
  segments_count: 2,
  deleted_chunks_count: 3,
  vector_model: null,
  vector_dimension: null,
  vector_storage: null,
};

/** The same index as PostgreSQL gives it: bigints as strings, timestamps as Dates. */
const postgresRow: IndexRowOf<string, Date> = {
  ...sqliteRow,
  id: "7",
  size_bytes: "1000",
  version: "12",
  next_key: "8",
  total_length: "90",
  created_at: new Date(CREATED),
  updated_at: new Date(UPDATED),
  vector_model: null,
  vector_dimension: null,
  vector_storage: null,
};

function isDomainError(status: number, code: string, message?: RegExp) {
  return (error: unknown) => {
    assert.ok(error instanceof DomainError, `expected a DomainError, got ${String(error)}`);
    const apiError = toApiError(error);
    assert.equal(apiError.statusCode, status);
    assert.equal(apiError.code, code);
    if (message) assert.match(error.message, message);
    return true;
  };
}

function chunksOf(documentId: string, count: number, firstKey: number): StoredChunk[] {
  return Array.from({ length: count }, (_, seq) => ({
    chunkId: `${documentId}#${seq}`,
    documentId,
    seq,
    text: `chunk ${seq}`,
    start: seq * 10,
    end: seq * 10 + 7,
    metadata: {},
    engineKey: firstKey + seq,
  }));
}

/** An update: "a" (2 chunks) and "d" (1) upserted in a new segment 2, "b" deleted: 3 tombstones. */
function write(overrides: Partial<IndexWrite> = {}): IndexWrite {
  const document = (id: string) => ({
    id,
    title: null,
    text: "t",
    metadata: {},
    source: null,
    contentHash: null,
  });
  return {
    key: KEY,
    mode: "update",
    settings: { scorer: "bm25", chunkSize: 200, overlap: 20 },
    upsert: [
      { document: document("a"), chunks: chunksOf("a", 2, 8) },
      { document: document("d"), chunks: chunksOf("d", 1, 10) },
    ],
    deleteDocumentIds: ["b", "a"],
    segment: { id: 2, documentCount: 3, bytes: new Uint8Array(64) },
    tombstones: [
      { segmentId: 0, ordinal: 1 },
      { segmentId: 1, ordinal: 0 },
      { segmentId: 1, ordinal: 2 },
    ],
    engine: { nextKey: 11, nextSegmentId: 3, totalLength: 120 },
    vocabularySize: 55,
    expectedVersion: 12,
    ...overrides,
  };
}

describe("write plan: index rows", () => {
  it("reads a SQLite row and a PostgreSQL row of the same index as the same meta", () => {
    const meta = toMeta(sqliteRow);
    assert.deepEqual(toMeta(postgresRow), meta);
    assert.deepEqual(meta, {
      tenantId: "acme",
      name: "handbook",
      scorer: "bm25",
      chunkSize: 200,
      overlap: 20,
      documentsCount: 3,
      chunksCount: 5,
      vocabularySize: 40,
      segmentsCount: 2,
      deletedChunksCount: 3,
      engine: { nextKey: 8, nextSegmentId: 2, totalLength: 90 },
      sizeBytes: 1000,
      vectors: null,
      createdAt: CREATED,
      updatedAt: UPDATED,
      version: 12,
    });
  });
});

describe("write plan: planWrite", () => {
  it("refuses a create over an existing index, an update of a missing one, and a stale base", () => {
    assert.throws(
      () => planWrite(write({ mode: "create", expectedVersion: null }), sqliteRow),
      isDomainError(409, "conflict", /already exists/),
    );
    assert.throws(
      () => planWrite(write({ expectedVersion: null }), undefined),
      isDomainError(404, "not_found"),
    );
    assert.throws(
      () => planWrite(write({ expectedVersion: 11 }), sqliteRow),
      (error: unknown) => {
        assert.ok(error instanceof StaleVersionError);
        assert.match(error.message, /version 12, expected 11/);
        return true;
      },
    );
    // An absent index has version 0 for the check; null checks nothing.
    assert.throws(
      () => planWrite(write({ mode: "replace", expectedVersion: 3 }), undefined),
      StaleVersionError,
    );
    assert.doesNotThrow(() => planWrite(write({ mode: "replace", expectedVersion: 0 }), undefined));
    assert.doesNotThrow(() => planWrite(write({ mode: "replace", expectedVersion: null }), postgresRow));
  });

  it("an update removes its deleted and upserted documents once each, from the index's counters", () => {
    const plan = planWrite(write(), postgresRow);
    assert.equal(plan.row, postgresRow);
    assert.equal(plan.clearIndex, false);
    assert.deepEqual(plan.removeDocumentIds, ["b", "a", "d"]);
    assert.deepEqual(plan.base, {
      documentsCount: 3,
      chunksCount: 5,
      sizeBytes: 1000,
      segmentsCount: 2,
      deletedChunksCount: 3,
    });
  });

  it("a replace clears the index and starts from zero; a create has no row to start from", () => {
    const zero = { documentsCount: 0, chunksCount: 0, sizeBytes: 0, segmentsCount: 0, deletedChunksCount: 0 };
    const replace = planWrite(write({ mode: "replace", expectedVersion: null, tombstones: [] }), sqliteRow);
    assert.equal(replace.clearIndex, true);
    assert.deepEqual(replace.removeDocumentIds, []);
    assert.deepEqual(replace.base, zero);
    const create = planWrite(write({ mode: "create", expectedVersion: null, tombstones: [] }), undefined);
    assert.equal(create.row, undefined);
    assert.equal(create.clearIndex, false);
    assert.deepEqual(create.removeDocumentIds, []);
    assert.deepEqual(create.base, zero);
  });
});

describe("write plan: indexAfterWrite", () => {
  it("keeps the counters incrementally and stores the write's settings, engine state and version", () => {
    const plan = planWrite(write(), sqliteRow);
    // "a" held 2 chunks (300 bytes), "b" 1 chunk (100 bytes); "d" was not in the index.
    const removedDocuments = [
      { chunksCount: 2, sizeBytes: 300 },
      { chunksCount: 1, sizeBytes: 100 },
    ];
    // Segments 0 and 1 held 8 documents; segment 2 adds 3: 11. Tombstones 3 + 3 = 6; chunks 5 - 3 + 3 = 5.
    const update = indexAfterWrite(plan, {
      removedDocuments,
      insertedBytes: 250,
      segmentDocuments: 11,
      version: 13,
      now: UPDATED,
    });
    assert.deepEqual(update, {
      scorer: "bm25",
      chunkSize: 200,
      overlap: 20,
      documentsCount: 3 - 2 + 2,
      chunksCount: 5 - 3 + 3,
      sizeBytes: 1000 - 400 + 64 + 250,
      segmentsCount: 3,
      deletedChunksCount: 6,
      vocabularySize: 55,
      vectorModel: null,
      vectorDimension: null,
      vectorStorage: null,
      version: 13,
      now: UPDATED,
      nextKey: 11,
      nextSegmentId: 3,
      totalLength: 120,
    });
  });

  it("refuses a write after which the live engine documents would not be the chunks", () => {
    const plan = planWrite(write(), sqliteRow);
    const outcome = {
      removedDocuments: [
        { chunksCount: 2, sizeBytes: 300 },
        { chunksCount: 1, sizeBytes: 100 },
      ],
      insertedBytes: 250,
      segmentDocuments: 12,
      version: 13,
      now: UPDATED,
    };
    // The segments hold one document more than the chunks and tombstones account for: 12 - 6 ≠ 5.
    assert.throws(
      () => indexAfterWrite(plan, outcome),
      isDomainError(500, "internal_error", /would hold 5 chunks but 6 live engine documents/),
    );
  });
});

describe("write plan: merges", () => {
  /**
   * Segments 0 and 1 (4 documents each, 4 tombstones, one of them made while the merge ran) merged
   * into segment 2, of the 5 documents live when it started, its one tombstone that later delete.
   */
  const row = { ...postgresRow, chunks_count: 4, deleted_chunks_count: 4 };
  const merge: MergeWrite = {
    key: KEY,
    expectedVersion: 12,
    removedSegmentIds: [0, 1],
    segment: { id: 2, documentCount: 5, bytes: new Uint8Array(100) },
    tombstones: [{ segmentId: 2, ordinal: 4 }],
    engine: { nextKey: 8, nextSegmentId: 3, totalLength: 90 },
  };
  const removedSegments = [
    { documentCount: 4, sizeBytes: 150 },
    { documentCount: 4, sizeBytes: 250 },
  ];

  it("refuses a merge of a missing index and one whose base changed", () => {
    assert.throws(() => planMerge(merge, undefined), isDomainError(404, "not_found"));
    assert.throws(() => planMerge({ ...merge, expectedVersion: 11 }, row), StaleVersionError);
  });

  it("replaces the merged segments' bytes, count and tombstones, and keeps the rest of the row", () => {
    const plan = planMerge(merge, row);
    assert.equal(plan.row, row);
    const update = indexAfterMerge(plan, {
      removedSegments,
      removedTombstones: 4,
      version: 13,
      now: UPDATED,
    });
    assert.deepEqual(update, {
      scorer: "bm25",
      chunkSize: 200,
      overlap: 20,
      documentsCount: 3,
      chunksCount: 4,
      vocabularySize: 40,
      sizeBytes: 1000 - 400 + 100,
      vectorModel: null,
      vectorDimension: null,
      vectorStorage: null,
      version: 13,
      now: UPDATED,
      nextKey: 8,
      nextSegmentId: 3,
      totalLength: 90,
      segmentsCount: 1,
      deletedChunksCount: 1,
    });
  });

  it("refuses a merge that misses a segment or does not hold the live documents it replaces", () => {
    const plan = planMerge(merge, row);
    assert.throws(
      () =>
        indexAfterMerge(plan, {
          removedSegments: removedSegments.slice(1),
          removedTombstones: 1,
          version: 13,
          now: UPDATED,
        }),
      isDomainError(500, "internal_error", /lacks a segment of the merge \(0, 1\)/),
    );
    assert.throws(
      () => indexAfterMerge(plan, { removedSegments, removedTombstones: 3, version: 13, now: UPDATED }),
      isDomainError(500, "internal_error", /live engine documents/),
    );
  });
});

describe("write plan: tombstone bounds", () => {
  const counts = new Map([
    [0, 4],
    [1, 2],
  ]);
  it("accepts tombstones within their segments", () => {
    assert.doesNotThrow(() =>
      checkTombstoneBounds(
        new Map([
          [0, [0, 3]],
          [1, [1]],
        ]),
        counts,
      ),
    );
  });
  it("refuses a tombstone on a segment the index lacks, or beyond its documents", () => {
    assert.throws(
      () => checkTombstoneBounds(new Map([[5, [0]]]), counts),
      isDomainError(500, "internal_error", /segment 5, which the index lacks/),
    );
    assert.throws(
      () => checkTombstoneBounds(new Map([[1, [0, 2]]]), counts),
      isDomainError(500, "internal_error", /tombstone 1\/2 is beyond the segment's 2 documents/),
    );
  });
});
