/**
 * What bench/retrieval.ts measures on one collection (bench/results/retrieval.json), and the table and
 * notes it is shown as: printed by bench/retrieval.ts, and written into docs/BENCHMARKS.md by
 * bench/run-all.ts, from the same rows.
 */
import type { ScorerName } from "../../src/rag/search/index.js";

export const TOP_K = 10;
const MB = 1024 * 1024;

/** A fixed number of decimals, "–" for a figure that is missing. */
export const f = (value: number | undefined | null, digits = 1): string =>
  value === undefined || value === null || !Number.isFinite(value) ? "–" : value.toFixed(digits);

export interface Latency {
  mean: number;
  p50: number;
  p99: number;
  max: number;
  count: number;
}

export interface EngineResult {
  engine: string;
  collection: string;
  documents: number;
  queries: number;
  buildMs: number;
  query: Latency;
  /** Lectern only: the exhaustive path on the same queries. */
  exhaustiveQuery?: Latency;
  /** Lectern only: per query the median of 3 timed runs (default path / exhaustive). */
  queryMedianOf3?: Latency;
  exhaustiveMedianOf3?: Latency;
  /** Lectern only: postings scored with pruning / postings of the query terms (what exhaustive scores). */
  postingsScoredFraction?: number;
  /** Lectern only: queries whose pruned hits differ from the exhaustive ones (must be 0). */
  prunedMismatches?: number;
  memory: { rssMB: number; heapUsedMB: number; arrayBuffersMB: number; baselineRssMB: number };
  serializedBytes?: number;
  ndcg10?: number;
  recall100?: number;
  note?: string;
}

export interface HttpResult {
  collection: string;
  scorer: ScorerName;
  documents: number;
  chunks: number;
  buildMs: number;
  serverBuildMs: number;
  diskBytes: number;
  serverRssMB: number;
  sequential: Latency;
  /** Engine time inside the server (/rag/stats). */
  serverQueryMeanMs: number;
  concurrent: {
    connections: number;
    seconds: number;
    requestsPerSecond: number;
    latencyP50: number;
    latencyP99: number;
    errors: number;
    non2xx: number;
  };
}

export interface PythonEngine {
  build_ms: number;
  query_ms: { mean: number; p50: number; p99: number };
  vocabulary: number;
  postings: number;
  ndcg10?: number | null;
  recall100?: number | null;
}
export interface PythonResult {
  documents: number;
  queries: number;
  versions: Record<string, string>;
  engines: Record<string, PythonEngine>;
  max_rss_bytes: number;
}

export interface CollectionReport {
  name: string;
  dir: string;
  documents: number;
  corpusMB: number;
  queries: number;
  engines: EngineResult[];
  python?: PythonResult;
  pythonError?: string;
  http?: HttpResult;
  httpError?: string;
  notes: string[];
  /** True when only the first documents were indexed (--quick). */
  subset: boolean;
  targets?: Record<string, { ours: number; reference: number; holds: boolean }>;
}

export function collectionHeading(report: CollectionReport): string {
  return (
    `${report.name}: ${report.documents.toLocaleString("en")} documents, ${f(report.corpusMB, 1)} MB of text, ` +
    `${report.queries} queries, top ${TOP_K}`
  );
}

/** Header row, then one row per engine (Lectern's exhaustive path under each of ours), then Python's. */
export function collectionTable(report: CollectionReport): string[][] {
  const rows: string[][] = [
    ["engine", "build s", "query mean ms", "p50", "p99", "nDCG@10", "R@100", "RSS MB", "index MB"],
  ];
  // null: the figure does not apply to the row (an exhaustive pass builds nothing; Python's index size is not kept).
  const cell = (value: number | null | undefined, digits: number) => (value === null ? "" : f(value, digits));
  const row = (
    name: string,
    buildMs: number | null,
    query: { mean: number; p50: number; p99: number },
    quality: { ndcg10?: number | null; recall100?: number | null } | null,
    rss: string,
    indexBytes: number | null,
  ) =>
    rows.push([
      name,
      cell(buildMs === null ? null : buildMs / 1000, 2),
      f(query.mean, 3),
      f(query.p50, 3),
      f(query.p99, 3),
      quality === null ? "" : f(quality.ndcg10, 4),
      quality === null ? "" : f(quality.recall100, 4),
      rss,
      cell(indexBytes === null ? null : indexBytes / MB, 1),
    ]);
  for (const e of report.engines) {
    row(e.engine, e.buildMs, e.query, e, f(e.memory.rssMB, 0), e.serializedBytes ?? NaN);
    if (e.exhaustiveQuery) row(`  ${e.engine}, exhaustive`, null, e.exhaustiveQuery, null, "", null);
  }
  const pythonRss = `${f((report.python?.max_rss_bytes ?? NaN) / MB, 0)}*`;
  for (const [engine, label] of [
    ["tfidf", "scikit-learn TfidfVectorizer + cosine"],
    ["bm25", "numpy/scipy BM25 (sparse)"],
  ] as const) {
    const py = report.python?.engines[engine];
    if (py) row(label, py.build_ms, py.query_ms, py, pythonRss, null);
  }
  return rows;
}

/** What the table needs said: how memory is read, pruning's effect, subsets, and the HTTP figures. */
export function collectionNotes(report: CollectionReport): string[] {
  const notes = [
    "RSS: after GC with the index loaded and the corpus text released (*python: peak RSS of the process, both models).",
  ];
  for (const e of report.engines) {
    if (e.postingsScoredFraction !== undefined) {
      notes.push(
        `${e.engine}: default path scored ${f(100 * e.postingsScoredFraction, 1)}% of the query terms' postings ` +
          `(exhaustive: 100%); same hits as exhaustive on ${e.queries - (e.prunedMismatches ?? 0)}/${e.queries} queries; ` +
          `median of 3 runs per query: mean ${f(e.queryMedianOf3?.mean, 3)} ms, p99 ${f(e.queryMedianOf3?.p99, 3)} ` +
          `(exhaustive ${f(e.exhaustiveMedianOf3?.mean, 3)}, ${f(e.exhaustiveMedianOf3?.p99, 3)})`,
      );
    }
    if (e.queries !== report.queries) notes.push(`${e.engine}: timed on the first ${e.queries} queries`);
  }
  const h = report.http;
  if (h) {
    notes.push(
      `HTTP (${h.scorer}, SQLite store): POST /rag/build ${f(h.buildMs / 1000, 2)} s for ${h.documents} documents → ` +
        `${h.chunks} chunks; ${f(h.diskBytes / MB, 1)} MB on disk; server RSS ${f(h.serverRssMB, 0)} MB`,
      `HTTP, sequential POST /rag/query: mean ${f(h.sequential.mean, 3)} ms, p50 ${f(h.sequential.p50, 3)}, ` +
        `p99 ${f(h.sequential.p99, 3)} (engine inside the server: ${f(h.serverQueryMeanMs, 3)} ms)`,
      `HTTP, ${h.concurrent.connections} concurrent clients (autocannon, ${h.concurrent.seconds} s): ` +
        `${f(h.concurrent.requestsPerSecond, 0)} queries/s, latency p50 ${h.concurrent.latencyP50} ms, ` +
        `p99 ${h.concurrent.latencyP99} ms, errors ${h.concurrent.errors}, non-2xx ${h.concurrent.non2xx}`,
    );
  }
  if (report.httpError) notes.push(`HTTP: failed: ${report.httpError}`);
  if (report.pythonError) notes.push(`python references: ${report.pythonError}`);
  for (const note of report.notes) notes.push(`note: ${note}`);
  return notes;
}
