/**
 * Queries: the engine's top hits over the served version of an index (reader-cache.ts), their texts
 * and metadata read from the store by engine key, metadata filters applied, and the extractive answer.
 */
import { extractiveAnswer } from "../answer.js";
import { expandedQuery, FEEDBACK_CHUNKS } from "../retrieval/expansion.js";
import type { SegmentedIndex } from "../search/index.js";
import type { ChunkHit, IndexStore, Metadata } from "../store/types.js";
import { round } from "./common.js";
import { engineText } from "./documents.js";
import type { ReaderCache } from "./reader-cache.js";
import type { ServiceStats } from "./stats.js";
import type { LoadedIndex, QueryInput, QueryOutput, QueryResult } from "./types.js";

/**
 * A filtered query first asks the engine for this many times top_k candidates, then twice as many
 * each round, until top_k pass the filter or the engine has no more.
 */
const FILTER_OVERFETCH = 4;

type Filter = (metadata: Metadata) => boolean;

export class Queries {
  constructor(
    private readonly store: IndexStore,
    private readonly readers: ReaderCache,
    private readonly stats: ServiceStats,
  ) {}

  async query(input: QueryInput): Promise<QueryOutput> {
    const started = performance.now();
    const loaded = await this.readers.load(input.key);
    const hits = await this.topChunks(input, loaded.engine, filterOf(input));
    const results = hits.map(({ chunk, score }): QueryResult => ({
      text: chunk.text,
      score: Math.round(score * 1e6) / 1e6,
      document_id: chunk.documentId,
      file: chunk.source ?? chunk.documentId,
      chunk_id: chunk.chunkId,
      title: chunk.title,
      metadata: chunk.metadata,
    }));
    const elapsedMs = round(performance.now() - started);
    this.stats.countActivity(input.key.tenantId, "queries", elapsedMs);
    return { results, elapsedMs, loaded };
  }

  extractive(query: string, results: QueryResult[], loaded: LoadedIndex): string | null {
    return extractiveAnswer(query, results, (text) => loaded.engine.analyze(text));
  }

  /**
   * The top k hits whose chunk the store still holds and that pass the filter, best first. The engine
   * is asked for more candidates each round until k are accepted or it has none left: the accepted
   * ones among its top n are then exactly the top k of a search restricted to accepted chunks.
   */
  private async topChunks(
    input: QueryInput,
    engine: SegmentedIndex,
    filter: Filter | undefined,
  ): Promise<Array<{ chunk: ChunkHit; score: number }>> {
    let expanded: Map<string, number> | undefined;
    if (input.expand) {
      const first = { ...input, expand: false, topK: FEEDBACK_CHUNKS, minScore: 0 };
      const feedback = await this.topChunks(first, engine, filter);
      const texts = feedback.map(({ chunk, score }) => ({
        text: engineText(chunk.title, chunk.text),
        score,
      }));
      expanded = expandedQuery(engine, input.query, texts);
    }
    const fetched = new Map<number, ChunkHit | null>();
    let candidates = filter ? input.topK * FILTER_OVERFETCH : input.topK;
    for (;;) {
      const options = { topK: candidates, minScore: input.minScore };
      const hits = expanded ? engine.searchBoosted(expanded, options) : engine.search(input.query, options);
      const unread = hits.filter((hit) => !fetched.has(hit.key)).map((hit) => hit.key);
      if (unread.length > 0) {
        for (const chunk of await this.store.getChunks(input.key, unread))
          fetched.set(chunk.engineKey, chunk);
        // A key the store no longer has was deleted by a write committed since the search.
        for (const key of unread) if (!fetched.has(key)) fetched.set(key, null);
      }
      const accepted: Array<{ chunk: ChunkHit; score: number }> = [];
      for (const hit of hits) {
        const chunk = fetched.get(hit.key);
        if (!chunk || (filter && !filter(chunk.metadata))) continue;
        accepted.push({ chunk, score: hit.score });
        if (accepted.length === input.topK) return accepted;
      }
      if (hits.length < candidates) return accepted;
      candidates *= 2;
    }
  }
}

/** A query's equality filter and compiled predicate as one filter (both must hold), if any. */
function filterOf(input: QueryInput): Filter | undefined {
  const equality =
    input.filter && Object.keys(input.filter).length > 0 ? metadataFilter(input.filter) : undefined;
  const predicate = input.predicate;
  return equality && predicate ? (m: Metadata) => equality(m) && predicate(m) : (equality ?? predicate);
}

/** Equality on every filter key; values compared as JSON so arrays and objects work too. */
function metadataFilter(filter: Metadata): Filter {
  const expected = Object.entries(filter).map(([key, value]) => [key, JSON.stringify(value)] as const);
  return (metadata) =>
    expected.every(
      ([key, value]) =>
        Object.prototype.hasOwnProperty.call(metadata, key) && JSON.stringify(metadata[key]) === value,
    );
}
