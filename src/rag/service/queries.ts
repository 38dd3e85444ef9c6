/**
 * Queries: the engine's top hits over the served version of an index (reader-cache.ts) — lexical,
 * dense, or both fused by RRF, optionally reranked — their texts and metadata read from the store by
 * engine key, and metadata filters applied on every path.
 */
import { badRequest } from "../../core/errors.js";
import { embedFor } from "../retrieval/embedder.js";
import { rerankText } from "../retrieval/reranker.js";
import { maxFusedScore, reciprocalRankFusion, resolveFusion, type RankedHit } from "../retrieval/fusion.js";
import { expandedQuery, FEEDBACK_CHUNKS } from "../retrieval/expansion.js";
import type { SegmentedIndex } from "../search/index.js";
import type { ChunkHit, IndexStore, Metadata } from "../store/types.js";
import { round } from "./common.js";
import { engineText } from "./documents.js";
import { compileEquality, FILTER_MAX_CANDIDATES, type FilterCut } from "./filters.js";
import type { ReaderCache } from "./reader-cache.js";
import type { ServiceStats } from "./stats.js";
import type { LoadedIndex, QueryInput, QueryOutput, QueryResult } from "./types.js";

/**
 * A filtered query first asks the engine for this many times top_k candidates, then twice as many
 * each round, until top_k pass the filter, the engine has no more, or FILTER_MAX_CANDIDATES were
 * examined (filters.ts).
 */
const FILTER_OVERFETCH = 4;
/** Chunks read in one store call: a plain query's all; a filtered query's thousands, in slices. */
const READ_SLICE = 512;

type Filter = (metadata: Metadata) => boolean;

/** A query's filter and what it cost: candidates examined, and whether the limit cut the search. */
class FilterRun {
  examined = 0;
  truncated = false;
  constructor(readonly accept: Filter) {}

  get cut(): FilterCut {
    return { truncated: this.truncated, examined: this.examined, limit: FILTER_MAX_CANDIDATES };
  }
}

/** A search of `n` candidates, best first (the engine's lexical or dense top n). */
type CandidateSearch = (n: number) => ReadonlyArray<{ key: number; score: number }>;

/** A chunk found, its first-stage score, and each retriever's own score. */
interface Candidate {
  chunk: ChunkHit;
  score: number;
  scores: NonNullable<QueryResult["scores"]>;
}

export class Queries {
  constructor(
    private readonly store: IndexStore,
    private readonly readers: ReaderCache,
    private readonly stats: ServiceStats,
  ) {}

  async query(input: QueryInput): Promise<QueryOutput> {
    const started = performance.now();
    // Held until the query is done: the index's files stay open through its awaits (reader-cache.ts).
    const { loaded, lease } = await this.readers.acquire(input.key);
    try {
      return await this.queryLoaded(input, loaded, started);
    } finally {
      lease.release();
    }
  }

  private async queryLoaded(input: QueryInput, loaded: LoadedIndex, started: number): Promise<QueryOutput> {
    const retrieval = retrievalOf(input, loaded.meta);
    const predicate = filterOf(input);
    const filter = predicate && new FilterRun(predicate);
    // With a reranker, the first stage finds the candidates it rescores, top_n of them.
    const wanted = input.rerank
      ? Math.max(input.topK, input.rerank.topN ?? candidatePool(input.topK))
      : input.topK;
    let candidates: Candidate[];
    if (retrieval === "lexical") {
      const hits = await this.topChunks({ ...input, topK: wanted }, loaded.engine, filter);
      candidates = hits.map(({ chunk, score }) => ({ chunk, score, scores: { lexical: score } }));
    } else {
      candidates = await this.denseOrHybrid(input, retrieval, loaded, filter, wanted);
    }
    if (input.rerank)
      candidates = await rerankCandidates(input.query, candidates, input.rerank, input.signal);
    // Lexical without a reranker answers as it always has; the other paths say where scores came from.
    const withScores = retrieval !== "lexical" || input.rerank !== undefined;
    const results = candidates.slice(0, input.topK).map(({ chunk, score, scores }): QueryResult => ({
      text: chunk.text,
      score: round6(score),
      document_id: chunk.documentId,
      file: chunk.source ?? chunk.documentId,
      chunk_id: chunk.chunkId,
      title: chunk.title,
      metadata: chunk.metadata,
      ...(withScores && { scores: roundScores(scores) }),
    }));
    const elapsedMs = round(performance.now() - started);
    this.stats.countActivity(input.key.tenantId, "queries", elapsedMs);
    return { results, elapsedMs, retrieval, loaded, ...(filter && { filter: filter.cut }) };
  }

  /**
   * Dense: the chunks nearest the query's embedding (cosine). Hybrid: the lexical and the dense top
   * `candidatePool` each (filtered alike), fused by weighted RRF, its score divided by the largest
   * fused score possible so that it stays within 0 … 1 as min_score expects.
   */
  private async denseOrHybrid(
    input: QueryInput,
    retrieval: "dense" | "hybrid",
    loaded: LoadedIndex,
    filter: FilterRun | undefined,
    wanted: number,
  ): Promise<Candidate[]> {
    const { engine, meta } = loaded;
    const space = meta.vectors;
    if (!space)
      throw badRequest(`Index "${meta.name}" holds no embeddings: rebuild it with "embeddings": true`);
    if (!input.embedderFor) throw badRequest(`${retrieval} retrieval needs an embedder, and none was given`);
    const embedder = input.embedderFor(space.model);
    const [vector] = await embedFor(embedder, [input.query], space, input.signal);
    const dense: CandidateSearch = (n) => engine.searchDense(vector!, { topK: n });
    if (retrieval === "dense") {
      const hits = await this.acceptedTop(input.key, wanted, dense, filter);
      return (
        hits
          // min_score 0 (the default) keeps every hit, negative cosines included.
          .filter(({ score }) => input.minScore === 0 || score >= input.minScore)
          .map(({ chunk, score }) => ({ chunk, score, scores: { dense: score } }))
      );
    }
    const pool = Math.max(wanted, candidatePool(input.topK));
    const lexical = await this.lexicalSearch({ ...input, minScore: 0 }, engine, filter);
    const chunks = new Map<number, ChunkHit | null>();
    let lists: { lexical: readonly RankedHit[]; dense: readonly RankedHit[] };
    if (filter) {
      // The filter reads each candidate's metadata: both lists are read and filtered, then fused.
      const [lexicalHits, denseHits] = await Promise.all([
        this.acceptedTop(input.key, pool, lexical, filter),
        this.acceptedTop(input.key, pool, dense, filter),
      ]);
      for (const { chunk } of [...lexicalHits, ...denseHits]) chunks.set(chunk.engineKey, chunk);
      const ranked = (hits: typeof lexicalHits) =>
        hits.map(({ chunk, score }) => ({ key: chunk.engineKey, score }));
      lists = { lexical: ranked(lexicalHits), dense: ranked(denseHits) };
    } else {
      // Fused on engine keys: only the chunks that make the answer are read (readFused), not 2 × pool.
      lists = { lexical: lexical(pool), dense: dense(pool) };
    }
    const fusion = input.fusion ?? resolveFusion();
    const scale = maxFusedScore(fusion);
    const fused = reciprocalRankFusion(lists, fusion)
      .map(({ key, score, scores }) => ({ key, score: scale > 0 ? score / scale : 0, scores }))
      .filter(({ score }) => score >= input.minScore);
    return this.readFused(input.key, fused, chunks, wanted);
  }

  /** The first `wanted` fused hits whose chunk the store holds, read a slice at a time (`known`: read). */
  private async readFused(
    key: QueryInput["key"],
    fused: ReadonlyArray<{ key: number; score: number; scores: Candidate["scores"] }>,
    known: Map<number, ChunkHit | null>,
    wanted: number,
  ): Promise<Candidate[]> {
    const candidates: Candidate[] = [];
    for (let at = 0; at < fused.length && candidates.length < wanted;) {
      const slice = fused.slice(at, at + wanted - candidates.length);
      at += slice.length;
      await this.readChunks(key, slice, known);
      for (const { key: engineKey, score, scores } of slice) {
        const chunk = known.get(engineKey);
        if (chunk) candidates.push({ chunk, score, scores });
      }
    }
    return candidates;
  }

  /** The lexical top k (expanded by RM3 when asked) whose chunk the store holds and that pass the filter. */
  private async topChunks(
    input: QueryInput,
    engine: SegmentedIndex,
    filter: FilterRun | undefined,
  ): Promise<Array<{ chunk: ChunkHit; score: number }>> {
    const search = await this.lexicalSearch(input, engine, filter);
    return this.acceptedTop(input.key, input.topK, search, filter);
  }

  /**
   * The engine's lexical search for this query, as a search of n candidates: the query as written, or
   * expanded by RM3 from its first FEEDBACK_CHUNKS chunks (read and filtered) when `expand` is asked.
   */
  private async lexicalSearch(
    input: QueryInput,
    engine: SegmentedIndex,
    filter: FilterRun | undefined,
  ): Promise<CandidateSearch> {
    const options = (n: number) => ({ topK: n, minScore: input.minScore });
    if (!input.expand) return (n) => engine.search(input.query, options(n));
    const first = { ...input, expand: false, topK: FEEDBACK_CHUNKS, minScore: 0 };
    const feedback = await this.topChunks(first, engine, filter);
    const texts = feedback.map(({ chunk, score }) => ({ text: engineText(chunk.title, chunk.text), score }));
    const expanded = expandedQuery(engine, input.query, texts);
    return (n) => engine.searchBoosted(expanded, options(n));
  }

  /**
   * The top k hits of `search` whose chunk the store still holds and that pass the filter, best first.
   * The search is asked for more candidates each round until k are accepted or it has none left: the
   * accepted ones among its top n are then exactly the top k of a search restricted to accepted chunks.
   * A filtered search stops at FILTER_MAX_CANDIDATES candidates (the filter records that it was cut).
   */
  private async acceptedTop(
    key: QueryInput["key"],
    k: number,
    search: CandidateSearch,
    filter: FilterRun | undefined,
  ): Promise<Array<{ chunk: ChunkHit; score: number }>> {
    const fetched = new Map<number, ChunkHit | null>();
    const limit = Math.max(k, FILTER_MAX_CANDIDATES);
    let candidates = filter ? Math.min(limit, k * FILTER_OVERFETCH) : k;
    for (;;) {
      const hits = search(candidates);
      await this.readChunks(key, hits, fetched);
      const accepted: Array<{ chunk: ChunkHit; score: number }> = [];
      let examined = 0;
      for (const hit of hits) {
        examined++;
        const chunk = fetched.get(hit.key);
        if (!chunk || (filter && !filter.accept(chunk.metadata))) continue;
        accepted.push({ chunk, score: hit.score });
        if (accepted.length === k) break;
      }
      const exhausted = hits.length < candidates;
      // Without a filter only chunks deleted since the search are skipped: rarely a second round.
      if (accepted.length === k || exhausted || candidates >= limit) {
        if (filter) {
          filter.examined += examined;
          if (accepted.length < k && !exhausted) filter.truncated = true;
        }
        return accepted;
      }
      candidates = Math.min(limit, candidates * 2);
    }
  }

  /**
   * Reads into `known` the chunks of the hits it does not hold yet, READ_SLICE keys a store call, the
   * event loop free between calls (a filtered query may read thousands); a key the store no longer has
   * (deleted by a write committed since the search) is recorded as null.
   */
  private async readChunks(
    key: QueryInput["key"],
    hits: ReadonlyArray<{ key: number }>,
    known: Map<number, ChunkHit | null>,
  ): Promise<void> {
    const unread = hits.filter((hit) => !known.has(hit.key)).map((hit) => hit.key);
    for (let at = 0; at < unread.length; at += READ_SLICE) {
      if (at > 0) await new Promise((resolve) => setImmediate(resolve));
      const slice = unread.slice(at, at + READ_SLICE);
      for (const chunk of await this.store.getChunks(key, slice)) known.set(chunk.engineKey, chunk);
      for (const missing of slice) if (!known.has(missing)) known.set(missing, null);
    }
  }
}

/**
 * Candidates each retriever gives a hybrid query, and a reranker by default: 4 × top_k, at least 50.
 * RRF only rewards a chunk both lists hold, so each list must reach well below top_k for a chunk ranked
 * moderately by both to meet itself (Azure AI Search fuses 50 per retriever); both are top-n
 * searches, so the depth costs little next to the embedding call.
 */
export function candidatePool(topK: number): number {
  return Math.max(topK * 4, 50);
}

/**
 * The first `topN` candidates rescored by the reranker, best first (equal scores keep their first-stage
 * order); the rest follow in their order. The final score is the reranker's.
 */
async function rerankCandidates(
  query: string,
  candidates: Candidate[],
  rerank: NonNullable<QueryInput["rerank"]>,
  signal?: AbortSignal,
): Promise<Candidate[]> {
  const head = candidates.slice(0, rerank.topN ?? candidates.length);
  if (head.length === 0) return candidates;
  const scores = await rerank.reranker.rerank(
    query,
    head.map(({ chunk }) => rerankText(chunk.title, chunk.text)),
    signal,
  );
  const rescored = head
    .map((candidate, order) => ({ candidate, order, score: scores[order]! }))
    .sort((a, b) => b.score - a.score || a.order - b.order)
    .map(({ candidate, score }) => ({ ...candidate, score, scores: { ...candidate.scores, rerank: score } }));
  return rescored;
}

/** The retrieval a query runs: as asked, else hybrid where the index has vectors, else lexical. */
function retrievalOf(input: QueryInput, meta: LoadedIndex["meta"]): "lexical" | "dense" | "hybrid" {
  if (input.retrieval) return input.retrieval;
  return meta.vectors && input.embedderFor ? "hybrid" : "lexical";
}

const round6 = (score: number) => Math.round(score * 1e6) / 1e6;

function roundScores(scores: Candidate["scores"]): Candidate["scores"] {
  const rounded: Candidate["scores"] = {};
  for (const [source, value] of Object.entries(scores) as Array<[keyof Candidate["scores"], number]>)
    rounded[source] = round6(value);
  return rounded;
}

/** A query's equality filter and compiled predicate as one filter (both must hold), if any. */
function filterOf(input: QueryInput): Filter | undefined {
  const equality =
    input.filter && Object.keys(input.filter).length > 0 ? compileEquality(input.filter) : undefined;
  const predicate = input.predicate;
  return equality && predicate ? (m: Metadata) => equality(m) && predicate(m) : (equality ?? predicate);
}
