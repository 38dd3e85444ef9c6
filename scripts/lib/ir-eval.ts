/**
 * IR evaluation shared by bench/ and the tests: a judged BEIR collection, trec_eval style nDCG@k and
 * Recall@k, and a runner that indexes a collection with the search engine and times it.
 */

import path from "node:path";

import {
  IndexWriter,
  SegmentedIndex,
  type ResolvedSearchIndexOptions,
  type SearchIndexOptions,
} from "../../src/rag/search/index.js";
import { resolveRm3, searchExpanded, type Rm3Parameters } from "../../src/rag/search/rm3.js";
import { documentText, loadCollection, type Qrels } from "./beir.js";

export { parseQrels, type Qrels } from "./beir.js";

export interface BeirDocument {
  id: string;
  /** title + " " + text, as BEIR/Anserini index it in one field. */
  text: string;
}

export interface BeirQuery {
  id: string;
  text: string;
}

export interface BeirCollection {
  documents: BeirDocument[];
  queries: BeirQuery[];
  qrels: Qrels;
}

/** A judged BEIR folder (scripts/lib/beir.ts reads it) as documents of one text each. */
export function loadBeir(dir: string): BeirCollection {
  const collection = loadCollection(path.basename(dir), dir);
  if (collection.qrels === null) throw new Error(`${dir}: no qrels.tsv (or qrels/test.tsv)`);
  return {
    documents: collection.ids.map((id, i) => ({ id, text: documentText(collection, i) })),
    queries: collection.queries,
    qrels: collection.qrels,
  };
}

export interface RankedDocument {
  docId: string;
  score: number;
}

/**
 * trec_eval's order: score descending, ties by document id descending (it ignores the rank column).
 * Applied before computing metrics so that results match trec_eval even with tied scores.
 */
export function trecOrder(ranking: readonly RankedDocument[]): RankedDocument[] {
  return [...ranking].sort((a, b) =>
    a.score !== b.score ? b.score - a.score : a.docId < b.docId ? 1 : a.docId > b.docId ? -1 : 0,
  );
}

/**
 * nDCG@k as trec_eval's `ndcg_cut.k`: gain = the qrel's relevance (negative counts as 0), discount
 * 1/log2(rank + 1), ideal DCG from the query's judged gains sorted descending. 0 when nothing is relevant.
 */
export function ndcgAt(
  ranking: readonly RankedDocument[],
  judgments: ReadonlyMap<string, number>,
  k: number,
): number {
  let dcg = 0;
  const ordered = trecOrder(ranking);
  for (let i = 0; i < Math.min(k, ordered.length); i++) {
    const gain = Math.max(0, judgments.get(ordered[i]?.docId ?? "") ?? 0);
    if (gain > 0) dcg += gain / Math.log2(i + 2);
  }
  const ideal = [...judgments.values()].filter((gain) => gain > 0).sort((a, b) => b - a);
  let idcg = 0;
  for (let i = 0; i < Math.min(k, ideal.length); i++) idcg += (ideal[i] ?? 0) / Math.log2(i + 2);
  return idcg > 0 ? dcg / idcg : 0;
}

/** Recall@k: relevant (score > 0) documents in the top k over all relevant documents. */
export function recallAt(
  ranking: readonly RankedDocument[],
  judgments: ReadonlyMap<string, number>,
  k: number,
): number {
  let relevant = 0;
  for (const gain of judgments.values()) if (gain > 0) relevant++;
  if (relevant === 0) return 0;
  let found = 0;
  for (const hit of trecOrder(ranking).slice(0, k)) if ((judgments.get(hit.docId) ?? 0) > 0) found++;
  return found / relevant;
}

export interface RunMetrics {
  /** Mean nDCG@10 over every query in the qrels (a query with no results counts 0, like `trec_eval -c`). */
  ndcg10: number;
  /** Mean Recall@100 over the same queries. */
  recall100: number;
  /** Number of queries averaged. */
  queryCount: number;
}

/** Scores a run (query id → ranking) against qrels. */
export function evaluateRun(run: ReadonlyMap<string, readonly RankedDocument[]>, qrels: Qrels): RunMetrics {
  let ndcg = 0;
  let recall = 0;
  for (const [queryId, judgments] of qrels) {
    const ranking = run.get(queryId) ?? [];
    ndcg += ndcgAt(ranking, judgments, 10);
    recall += recallAt(ranking, judgments, 100);
  }
  const queryCount = qrels.size;
  return {
    ndcg10: queryCount > 0 ? ndcg / queryCount : 0,
    recall100: queryCount > 0 ? recall / queryCount : 0,
    queryCount,
  };
}

export interface EngineRun extends RunMetrics {
  scorer: string;
  /** RM3's parameters when the queries were expanded (pseudo-relevance feedback), else null. */
  expansion: Rm3Parameters | null;
  /** The index's resolved options (defaults filled in). */
  options: ResolvedSearchIndexOptions;
  /** Wall time to analyse every document and build the index. */
  buildMs: number;
  /** Mean in-process time per query (after one warm-up pass over all queries). */
  meanQueryMs: number;
  p95QueryMs: number;
  serializedBytes: number;
  deserializeMs: number;
  /** True when the deserialised index returned exactly the same hits for every query. */
  roundTripIdentical: boolean;
  documentCount: number;
  vocabularySize: number;
}

/**
 * Indexes `collection` with the engine, runs its queries (topK 100) and evaluates them; with
 * `expansion`, each query is expanded with RM3 (its feedback documents' texts read from the collection).
 */
export function runEngine(
  collection: BeirCollection,
  options: SearchIndexOptions,
  topK = 100,
  expansion: Partial<Rm3Parameters> | null = null,
): EngineRun {
  const { documents, queries, qrels } = collection;
  const evaluated = queries.filter((query) => qrels.has(query.id));

  const buildStart = performance.now();
  const index = SegmentedIndex.create(options);
  const write = new IndexWriter(index).prepare({ add: documents.map((document) => document.text) });
  write.apply();
  const buildMs = performance.now() - buildStart;

  const rm3 = expansion === null ? null : resolveRm3(expansion);
  const textOf = (key: number) => documents[key]?.text ?? "";
  const search = (target: SegmentedIndex, text: string) =>
    rm3 === null ? target.search(text, { topK }) : searchExpanded(target, text, textOf, { topK }, rm3);
  for (const query of evaluated) search(index, query.text); // warm-up
  const times: number[] = [];
  const run = new Map<string, RankedDocument[]>();
  for (const query of evaluated) {
    const start = performance.now();
    const hits = search(index, query.text);
    times.push(performance.now() - start);
    run.set(
      query.id,
      hits.map((hit) => ({ docId: documents[hit.key]?.id ?? "", score: hit.score })),
    );
  }
  times.sort((a, b) => a - b);
  const meanQueryMs = times.reduce((sum, t) => sum + t, 0) / Math.max(1, times.length);
  const p95QueryMs = times[Math.min(times.length - 1, Math.floor(times.length * 0.95))] ?? 0;

  const bytes = write.segment?.bytes ?? new Uint8Array(0);
  const loadStart = performance.now();
  const loaded = SegmentedIndex.load(
    options,
    write.segment === null ? [] : [{ bytes, deleted: [] }],
    write.state,
  );
  const deserializeMs = performance.now() - loadStart;
  let roundTripIdentical = true;
  for (const query of evaluated) {
    const a = search(index, query.text);
    const b = search(loaded, query.text);
    if (a.length !== b.length || a.some((hit, i) => hit.key !== b[i]?.key || hit.score !== b[i]?.score)) {
      roundTripIdentical = false;
      break;
    }
  }

  return {
    scorer: index.scorer,
    expansion: rm3,
    options: index.options,
    ...evaluateRun(run, qrels),
    buildMs,
    meanQueryMs,
    p95QueryMs,
    serializedBytes: bytes.byteLength,
    deserializeMs,
    roundTripIdentical,
    documentCount: index.liveDocumentCount,
    vocabularySize: index.vocabularySize,
  };
}
