/**
 * Dense, hybrid and reranked runs of a BEIR collection for `npm run eval:ir` (#26), in-process on the
 * engine as /rag/query composes them: the corpus and the queries embedded by an OpenAI-compatible
 * `/embeddings` (HttpEmbedder), the vectors searched by the vector engine (one segment, exact or through
 * its graph as its size decides), lexical and dense lists fused by weighted RRF, and the fused top n
 * rescored by a `/rerank` server (HttpReranker). The numbers are only as good as the models behind the
 * URLs: no embedding model ships with the project.
 */
import { IndexWriter, SegmentedIndex, type SearchIndexOptions } from "../../src/rag/search/index.js";
import { searchSegments } from "../../src/rag/search/vectors/search-segments.js";
import { SegmentVectors } from "../../src/rag/search/vectors/segment-vectors.js";
import type { VectorStorage } from "../../src/rag/search/vectors/quantize.js";
import type { Embedder } from "../../src/rag/retrieval/embedder.js";
import { reciprocalRankFusion, type FusionOptions, type RankedHit } from "../../src/rag/retrieval/fusion.js";
import { rerankText, type Reranker } from "../../src/rag/retrieval/reranker.js";
import { evaluateRun, type BeirCollection, type RankedDocument, type RunMetrics } from "./ir-eval.js";

export type Retrieval = "lexical" | "dense" | "hybrid";

export interface RetrievalRunOptions {
  retrieval: Retrieval;
  /** The lexical side (hybrid, or lexical with a reranker). */
  lexical: SearchIndexOptions;
  /** Needed for dense and hybrid. */
  embedder?: Embedder;
  storage?: VectorStorage;
  fusion?: Partial<FusionOptions>;
  reranker?: Reranker;
  /** Candidates the reranker rescores per query (default 100). */
  rerankTopN?: number;
  /** Results kept per query (default 100, for Recall@100). */
  topK?: number;
  /**
   * Characters of a document embedded (default 2000, at a word boundary): embedding models read 512
   * tokens or so and servers refuse longer inputs (ours, TEI) or cut them (Ollama). /rag/query never
   * meets this, since it embeds chunks of at most chunk_size characters.
   */
  embedMaxChars?: number;
}

export interface RetrievalRun extends RunMetrics {
  retrieval: Retrieval;
  embeddingModel: string | null;
  dimension: number | null;
  rerankModel: string | null;
  /** Wall time embedding the corpus (remote calls included). */
  embedCorpusMs: number;
  /** Mean time per query: its embedding, the searches, the fusion and the rerank call. */
  meanQueryMs: number;
  documentCount: number;
  /** Each query's ranking (document ids, best first) as evaluated. */
  rankings: Map<string, RankedDocument[]>;
}

export const DEFAULT_EMBED_MAX_CHARS = 2000;

/** The first `limit` characters of `text`, cut at a word boundary when one is in the second half. */
export function cutAtWord(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const cut = text.slice(0, limit);
  const space = cut.lastIndexOf(" ");
  return space > limit / 2 ? cut.slice(0, space) : cut;
}

/** Runs every judged query of `collection` the way `options` says, and evaluates the run. */
export async function runRetrieval(
  collection: BeirCollection,
  options: RetrievalRunOptions,
): Promise<RetrievalRun> {
  const { documents, queries, qrels } = collection;
  const topK = options.topK ?? 100;
  const evaluated = queries.filter((query) => qrels.has(query.id));
  const needsLexical = options.retrieval !== "dense";
  const needsDense = options.retrieval !== "lexical";

  let index: SegmentedIndex | null = null;
  if (needsLexical) {
    index = SegmentedIndex.create(options.lexical);
    new IndexWriter(index).prepare({ add: documents.map((document) => document.text) }).apply();
  }
  let vectors: SegmentVectors | null = null;
  let embedCorpusMs = 0;
  if (needsDense) {
    if (!options.embedder) throw new Error(`${options.retrieval} retrieval needs --embedding-url`);
    const started = performance.now();
    const limit = options.embedMaxChars ?? DEFAULT_EMBED_MAX_CHARS;
    const embedded = await options.embedder.embed(
      documents.map((document) => cutAtWord(document.text, limit)),
    );
    embedCorpusMs = performance.now() - started;
    const dimension = embedded[0]?.length ?? 0;
    vectors = SegmentVectors.build(dimension, embedded, { storage: options.storage ?? "f32" });
  }

  // Each list as deep as the results kept (RRF needs depth on both sides; see candidatePool).
  const pool = Math.max(topK, options.rerankTopN ?? 0);
  const run = new Map<string, RankedDocument[]>();
  let totalMs = 0;
  for (const query of evaluated) {
    const started = performance.now();
    const lexical: RankedHit[] = index ? index.search(query.text, { topK: pool }) : [];
    let dense: RankedHit[] = [];
    if (vectors) {
      const [vector] = await options.embedder!.embed([query.text]);
      dense = searchSegments([{ id: 0, vectors, live: null }], vector!, pool).map(({ doc, score }) => ({
        key: doc,
        score,
      }));
    }
    let ranking: RankedHit[] =
      options.retrieval === "lexical"
        ? lexical
        : options.retrieval === "dense"
          ? dense
          : reciprocalRankFusion({ lexical, dense }, options.fusion, pool);
    if (options.reranker) ranking = await rerank(options.reranker, query.text, ranking, documents, options);
    totalMs += performance.now() - started;
    run.set(
      query.id,
      ranking.slice(0, topK).map((hit) => ({ docId: documents[hit.key]?.id ?? "", score: hit.score })),
    );
  }
  return {
    retrieval: options.retrieval,
    ...evaluateRun(run, qrels),
    embeddingModel: options.embedder && needsDense ? options.embedder.model : null,
    dimension: vectors?.dimension ?? null,
    rerankModel: options.reranker?.model ?? null,
    embedCorpusMs,
    meanQueryMs: totalMs / Math.max(1, evaluated.length),
    documentCount: documents.length,
    rankings: run,
  };
}

/** The first top n hits reordered by the reranker's scores (ties keep their order), the rest after them. */
async function rerank(
  reranker: Reranker,
  query: string,
  ranking: RankedHit[],
  documents: BeirCollection["documents"],
  options: RetrievalRunOptions,
): Promise<RankedHit[]> {
  const head = ranking.slice(0, options.rerankTopN ?? 100);
  const texts = head.map((hit) => rerankText(null, documents[hit.key]?.text ?? ""));
  const scores = await reranker.rerank(query, texts);
  const reranked = head
    .map((hit, order) => ({ key: hit.key, score: scores[order]!, order }))
    .sort((a, b) => b.score - a.score || a.order - b.order);
  // Below the reranked head, the rest keep their order under the head's lowest score.
  const floor = reranked.at(-1)?.score ?? 0;
  const rest = ranking.slice(head.length).map((hit, i) => ({ key: hit.key, score: floor - 1 - i }));
  return [...reranked.map(({ key, score }) => ({ key, score })), ...rest];
}
