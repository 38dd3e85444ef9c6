/**
 * The segmented index must rank exactly like a fresh build over its live documents, at every moment.
 * fast-check runs random sequences of build / append / replace / delete / merge (with and without deletes
 * racing the merge) / persist-and-load / replica catch-up on both scorers; after every step every query's
 * hits and scores (compared with ===) must equal those of a fresh one-segment index built from the live
 * texts in key order, pruned and exhaustive alike, for several topK and minScore values.
 * The index also keeps a vector per document (made from its text by a hash embedder, in f32, f16 or i8):
 * exact dense search and hybrid RRF fusion of the two rankings must equal the fresh build's too, and
 * the RRF scores a reference sum written out here.
 *
 * The run is deterministic (fixed seed, override with FC_SEED=…); fast-check prints the seed and the
 * shrunk counterexample on failure.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import fc from "fast-check";

import { reciprocalRankFusion } from "../../../src/rag/retrieval/fusion.js";
import {
  IndexWriter,
  mergeNow,
  SegmentedIndex,
  TieredMergePolicy,
  type IndexState,
  type PreparedMerge,
  type PreparedWrite,
  type ScorerName,
  type SearchHit,
  type StoredSegment,
  type Tombstone,
  type VectorIndexOptions,
} from "../../../src/rag/search/index.js";
import { hashVector } from "../../helpers/hash-embedder.js";

const DIMENSION = 8;
const embed = (texts: readonly string[]) => texts.map((text) => hashVector(text, DIMENSION));
/** Dense queries: some words' vectors, so that ties and near ties happen. */
const DENSE_QUERIES = ["apple", "banana cherry", "fig fig grape", "unknown", "the"].map((text) =>
  hashVector(text, DIMENSION),
);

/** A small vocabulary, so that terms repeat and ties happen; stop words make some texts empty. */
const WORDS = ["apple", "apples", "banana", "cherry", "date", "elder", "fig", "grape", "the", "and", "of"];

const textArbitrary = fc.array(fc.constantFrom(...WORDS), { maxLength: 7 }).map((words) => words.join(" "));
/** Texts with duplicates: drawn from a few distinct ones. */
const batchArbitrary = fc
  .tuple(
    fc.array(textArbitrary, { minLength: 1, maxLength: 4 }),
    fc.array(fc.nat(), { minLength: 1, maxLength: 6 }),
  )
  .map(([distinct, picks]) => picks.map((p) => distinct[p % distinct.length] ?? ""));

type Step =
  | { kind: "append"; texts: string[] }
  | { kind: "replace"; texts: string[] }
  | { kind: "delete"; picks: number[] }
  | { kind: "appendAndDelete"; texts: string[]; picks: number[] }
  | { kind: "merge"; policy: boolean; picks: number[]; racingDeletes: number[] }
  | { kind: "reload" };

const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  { arbitrary: batchArbitrary.map((texts) => ({ kind: "append" as const, texts })), weight: 4 },
  { arbitrary: batchArbitrary.map((texts) => ({ kind: "replace" as const, texts })), weight: 1 },
  {
    arbitrary: fc
      .array(fc.nat(), { minLength: 1, maxLength: 3 })
      .map((picks) => ({ kind: "delete" as const, picks })),
    weight: 3,
  },
  {
    arbitrary: fc
      .tuple(batchArbitrary, fc.array(fc.nat(), { minLength: 1, maxLength: 2 }))
      .map(([texts, picks]) => ({ kind: "appendAndDelete" as const, texts, picks })),
    weight: 1,
  },
  {
    arbitrary: fc
      .record({
        policy: fc.boolean(),
        picks: fc.array(fc.nat(), { minLength: 1, maxLength: 4 }),
        racingDeletes: fc.array(fc.nat(), { maxLength: 3 }),
      })
      .map((merge) => ({ kind: "merge" as const, ...merge })),
    weight: 2,
  },
  { arbitrary: fc.constant({ kind: "reload" as const }), weight: 1 },
);

const queryArbitrary = fc
  .array(fc.constantFrom(...WORDS, "unknown"), { minLength: 1, maxLength: 4 })
  .map((w) => w.join(" "));

/** What a store would hold: segment bytes by id and tombstones; persisted on every apply. */
class Store {
  segments = new Map<number, Uint8Array>();
  vectors = new Map<number, Uint8Array>();
  tombstones = new Map<number, Set<number>>();
  state: IndexState = { nextKey: 0, nextSegmentId: 0 };

  commitWrite(write: PreparedWrite): void {
    if (write.segment !== null) {
      this.segments.set(write.segment.id, write.segment.bytes);
      if (write.segment.vectors != null) this.vectors.set(write.segment.id, write.segment.vectors);
      this.tombstones.set(write.segment.id, new Set());
    }
    this.addTombstones(write.tombstones);
    this.state = write.state;
  }

  commitMerge(merge: PreparedMerge): void {
    for (const id of merge.removedSegmentIds) {
      this.segments.delete(id);
      this.vectors.delete(id);
      this.tombstones.delete(id);
    }
    this.segments.set(merge.segment.id, merge.segment.bytes);
    if (merge.segment.vectors != null) this.vectors.set(merge.segment.id, merge.segment.vectors);
    this.tombstones.set(merge.segment.id, new Set());
    this.addTombstones(merge.tombstones);
    this.state = merge.state;
  }

  private addTombstones(tombstones: readonly Tombstone[]): void {
    for (const { segmentId, ordinal } of tombstones) {
      const set = this.tombstones.get(segmentId);
      assert.ok(set !== undefined, `tombstone for unknown segment ${segmentId}`);
      assert.ok(!set.has(ordinal), "a document is tombstoned twice");
      set.add(ordinal);
    }
  }

  stored(order: readonly number[]): StoredSegment[] {
    return order.map((id) => ({
      bytes: this.segments.get(id) as Uint8Array,
      deleted: this.tombstones.get(id) ?? [],
      vectors: this.vectors.get(id) ?? null,
    }));
  }
}

/** A replica that catches up from the store with `applyChanges` after every step. */
class Replica {
  index: SegmentedIndex;
  private known = new Map<number, Set<number>>();

  constructor(private readonly options: IndexOptions) {
    this.index = SegmentedIndex.create(options);
  }

  catchUp(store: Store, order: readonly number[]): void {
    const removeSegmentIds = [...this.known.keys()].filter((id) => !store.segments.has(id));
    const added = order.filter((id) => !this.known.has(id));
    const tombstones: Tombstone[] = [];
    for (const [id, seen] of this.known) {
      const current = store.tombstones.get(id);
      if (current === undefined) continue;
      for (const ordinal of current) if (!seen.has(ordinal)) tombstones.push({ segmentId: id, ordinal });
    }
    this.index.applyChanges({
      addSegments: store.stored(added),
      removeSegmentIds,
      tombstones,
      state: store.state,
    });
    this.known = new Map(order.map((id) => [id, new Set(store.tombstones.get(id) ?? [])]));
  }

  reset(): void {
    this.index = SegmentedIndex.create(this.options);
    this.known.clear();
  }
}

interface IndexOptions {
  scorer: ScorerName;
  vectors: VectorIndexOptions;
}

function freshIndex(options: IndexOptions, texts: readonly string[]): SegmentedIndex {
  const index = SegmentedIndex.create(options);
  if (texts.length > 0) new IndexWriter(index).prepare({ add: texts, vectors: embed(texts) }).apply();
  return index;
}

/** RRF written out (k = 60, weights 1): Σ 1 / (60 + rank) over the lists holding the key. */
function referenceRrf(lexical: readonly SearchHit[], dense: readonly SearchHit[]): SearchHit[] {
  const sums = new Map<number, number>();
  for (const list of [lexical, dense]) {
    list.forEach(({ key }, i) => sums.set(key, (sums.get(key) ?? 0) + 1 / (60 + i + 1)));
  }
  return [...sums].map(([key, score]) => ({ key, score })).sort((a, b) => b.score - a.score || a.key - b.key);
}

/** Exact dense search and hybrid RRF fusion equal the fresh build's (keys mapped back), at several k. */
function checkDense(
  index: SegmentedIndex,
  fresh: SegmentedIndex,
  toOriginal: (hits: SearchHit[]) => SearchHit[],
  queries: readonly string[],
): void {
  const stats = index.vectorStats();
  assert.equal(stats?.count, fresh.vectorStats()?.count, "live vectors");
  assert.equal(stats?.dimension, DIMENSION);
  for (const [q, vector] of DENSE_QUERIES.entries()) {
    for (const topK of [1, 3, 10, 1000]) {
      const expected = toOriginal(fresh.searchDense(vector, { topK, exact: true }));
      assert.deepStrictEqual(
        index.searchDense(vector, { topK, exact: true }),
        expected,
        `dense ${q} topK ${topK}`,
      );
      // What the graph would answer is the exact answer here (segments are below its threshold).
      assert.deepStrictEqual(
        index.searchDense(vector, { topK }),
        expected,
        `dense ${q} topK ${topK} (default)`,
      );
      const query = queries[(q + topK) % queries.length] ?? "";
      const lexical = index.search(query, { topK });
      const dense = index.searchDense(vector, { topK });
      const fused = reciprocalRankFusion({ lexical, dense });
      const freshFused = reciprocalRankFusion({
        lexical: toOriginal(fresh.search(query, { topK })),
        dense: expected,
      });
      assert.deepStrictEqual(fused, freshFused, `hybrid ${JSON.stringify(query)} / ${q} topK ${topK}`);
      assert.deepStrictEqual(
        fused.map(({ key, score }) => ({ key, score })),
        referenceRrf(lexical, dense),
        "rrf scores",
      );
    }
  }
}

function checkAgainstFresh(
  index: SegmentedIndex,
  live: ReadonlyMap<number, string>,
  queries: readonly string[],
): void {
  const keys = [...live.keys()].sort((a, b) => a - b);
  const fresh = freshIndex(
    { scorer: index.scorer, vectors: index.options.vectors as VectorIndexOptions },
    keys.map((key) => live.get(key) ?? ""),
  );
  assert.equal(index.liveDocumentCount, fresh.liveDocumentCount, "live document count");
  assert.equal(index.totalLength, fresh.totalLength, "total length");
  assert.equal(index.vocabularySize, fresh.vocabularySize, "vocabulary size");
  for (const word of WORDS) {
    for (const term of index.analyze(word)) {
      assert.equal(index.documentFrequency(term), fresh.documentFrequency(term), `df of ${term}`);
    }
  }
  for (const key of keys) assert.ok(index.locate(key) !== undefined, `key ${key} is live`);
  const toOriginal = (hits: SearchHit[]): SearchHit[] =>
    hits.map(({ key, score }) => ({ key: keys[key] as number, score }));
  for (const query of queries) {
    for (const topK of [1, 3, 10, 1000]) {
      for (const minScore of [0, 0.4]) {
        const expected = toOriginal(fresh.search(query, { topK, minScore, exhaustive: true }));
        for (const exhaustive of [true, false]) {
          const actual = index.search(query, { topK, minScore, exhaustive });
          assert.deepStrictEqual(
            actual,
            expected,
            `query ${JSON.stringify(query)} topK ${topK} minScore ${minScore} exhaustive ${exhaustive}`,
          );
        }
      }
    }
  }
  checkDense(index, fresh, toOriginal, queries);
}

function pickKeys(live: ReadonlyMap<number, string>, picks: readonly number[]): number[] {
  const keys = [...live.keys()];
  if (keys.length === 0) return [];
  return [...new Set(picks.map((p) => keys[p % keys.length] as number))];
}

function runScenario(options: IndexOptions, steps: readonly Step[], randomQueries: readonly string[]): void {
  const queries = [...WORDS, ...randomQueries];
  let index = SegmentedIndex.create(options);
  let writer = new IndexWriter(index);
  let store = new Store();
  const replica = new Replica(options);
  const live = new Map<number, string>();
  const policy = new TieredMergePolicy({ segmentsPerTier: 2, maxMergeAtOnce: 3, floorSegmentDocuments: 1 });

  const write = (add: string[], deleteKeys: number[]): void => {
    const prepared = writer.prepare({
      add,
      delete: deleteKeys.map((key) => ({ key, text: live.get(key) ?? "" })),
      vectors: embed(add),
    });
    assert.equal(prepared.keys.length, add.length);
    store.commitWrite(prepared);
    prepared.apply();
    assert.throws(() => prepared.apply(), /already applied/);
    for (const key of deleteKeys) live.delete(key);
    prepared.keys.forEach((key, i) => live.set(key, add[i] ?? ""));
    assert.equal(index.liveDocumentCount, prepared.liveDocumentCount);
    assert.equal(index.totalLength, prepared.totalLength);
    assert.equal(index.vocabularySize, prepared.vocabularySize);
  };

  for (const step of steps) {
    switch (step.kind) {
      case "append":
        write(step.texts, []);
        break;
      case "replace":
        index = SegmentedIndex.create(options);
        writer = new IndexWriter(index);
        store = new Store();
        replica.reset();
        live.clear();
        write(step.texts, []);
        break;
      case "delete":
        write([], pickKeys(live, step.picks));
        break;
      case "appendAndDelete":
        write(step.texts, pickKeys(live, step.picks));
        break;
      case "merge": {
        const segments = index.segments();
        if (segments.length === 0) break;
        const ids = step.policy
          ? (policy.findMerges(segments)[0] ?? [])
          : [...new Set(step.picks.map((p) => segments[p % segments.length]?.id as number))];
        if (ids.length === 0) break;
        const result = mergeNow(index, ids);
        // Deletes committed while the merge ran become tombstones of the merged segment.
        const merging = new Set(ids);
        const inMerge = new Map([...live].filter(([key]) => merging.has(index.locate(key)?.segmentId ?? -1)));
        const racing = pickKeys(inMerge, step.racingDeletes);
        if (racing.length > 0) write([], racing);
        const merge = index.prepareMerge(result);
        store.commitMerge(merge);
        merge.apply();
        break;
      }
      case "reload": {
        const order = index.segments().map(({ id }) => id);
        const loaded = SegmentedIndex.load(options, store.stored(order), store.state);
        assert.deepStrictEqual(loaded.segments(), index.segments());
        assert.deepStrictEqual(loaded.state, index.state);
        index = loaded;
        writer = new IndexWriter(index);
        break;
      }
    }
    assert.deepStrictEqual(index.state, store.state);
    checkAgainstFresh(index, live, queries);
    replica.catchUp(
      store,
      index.segments().map(({ id }) => id),
    );
    checkAgainstFresh(replica.index, live, randomQueries);
  }
}

const seed = process.env["FC_SEED"] === undefined ? 20261124 : Number(process.env["FC_SEED"]);

describe("segmented index equals a fresh build over its live documents", () => {
  for (const [scorer, storage] of [
    ["bm25", "f32"],
    ["tfidf", "f16"],
    ["bm25", "i8"],
  ] as const) {
    it(`${scorer}, ${storage} vectors: after every build / append / replace / delete / merge / reload step`, () => {
      const options: IndexOptions = { scorer, vectors: { dimension: DIMENSION, storage } };
      fc.assert(
        fc.property(
          fc.array(stepArbitrary, { minLength: 1, maxLength: 12 }),
          fc.array(queryArbitrary, { minLength: 1, maxLength: 4 }),
          (steps, randomQueries) => runScenario(options, steps, randomQueries),
        ),
        { numRuns: 60, seed },
      );
    });
  }
});
