/**
 * The embedder and reranker of one RAG app, made once at start-up (embedderFor / rerankerFor:
 * EMBEDDING_URL / RERANK_URL, else the models of this process through their ports), and those a request names by
 * model, made on first use and kept (each HTTP client holds a connection pool).
 *
 * Which model embeds: EMBEDDING_MODEL, when set, pins it: an index or request naming another model is a
 * 409 naming both. Unpinned, a query is embedded by asking for the index's own recorded model, so an
 * index built with `"embeddings": {"model": "m"}` is queried with m.
 */
import type { Config } from "../../core/config.js";
import { busy, conflict } from "../../core/errors.js";
import { embedderFor, type Embedder } from "./embedder.js";
import type { LocalModelPorts } from "./ports.js";
import { rerankerFor, type Reranker } from "./reranker.js";
import { retrieverUnavailable } from "./upstream.js";

/** Models named by requests that keep a client: more is a request naming models at random. */
const MAX_NAMED_CLIENTS = 16;

export class Retrievers {
  private readonly embedders = new Map<string, Embedder | null>();
  private readonly rerankers = new Map<string, Reranker | null>();
  /** This app's embedder with the configured (or the server's default) model; null without one. */
  readonly embedder: Embedder | null;
  readonly reranker: Reranker | null;
  /**
   * Whether builds store embeddings when the request does not say: when an embedder was configured —
   * EMBEDDING_URL, or an embedding model in this process (EMBEDDING_MODEL_PATH or EMBEDDING_MODEL).
   * The chat model of this process can embed too, but only when asked: its vectors are a poor default.
   */
  readonly embeddingsByDefault: boolean;

  constructor(
    private readonly config: Config["rag"],
    private readonly local: LocalModelPorts = {},
    embeddingModelPath: string | null = null,
  ) {
    this.embedder = embedderFor(config, local.embedding);
    this.reranker = rerankerFor(config, local.rerank);
    this.embeddingsByDefault =
      config.embeddingUrl !== null ||
      (local.embedding !== undefined && (embeddingModelPath !== null || config.embeddingModel !== null));
  }

  /** The lines the start-up log says about retrieval. */
  get descriptions(): string[] {
    return [
      this.embedder?.description ?? "RAG: no embedder (EMBEDDING_URL is not set): lexical retrieval only",
      this.reranker?.description ?? "RAG: no reranker (RERANK_URL is not set)",
    ];
  }

  /**
   * The embedder for `model` (null: the configured one); 503 when there is none, 409 when EMBEDDING_MODEL
   * pins another model.
   */
  embedderFor(model: string | null): Embedder {
    const pinned = this.config.embeddingModel;
    if (model !== null && pinned !== null && model !== pinned)
      throw conflict(
        `The index's embedding model is ${model}, but this server embeds with ${pinned} (EMBEDDING_MODEL): ` +
          "vectors of different models cannot be compared. Use the index's model, or rebuild the index with this one.",
      );
    if (this.embedder === null)
      throw retrieverUnavailable(
        "embedder",
        "none is configured: set EMBEDDING_URL, or run both apps in one process",
      );
    if (model === null || model === pinned || model === this.embedder.model) return this.embedder;
    return this.named(this.embedders, model, () => embedderFor(this.config, this.local.embedding, model))!;
  }

  /** The reranker for `model` (null: the configured one); 503 when there is none. */
  rerankerFor(model: string | null): Reranker {
    if (this.reranker === null)
      throw retrieverUnavailable(
        "reranker",
        "none is configured: set RERANK_URL, or run both apps in one process",
      );
    if (model === null || model === this.reranker.model) return this.reranker;
    return this.named(this.rerankers, model, () => rerankerFor(this.config, this.local.rerank, model))!;
  }

  private named<T>(clients: Map<string, T | null>, model: string, make: () => T | null): T | null {
    let client = clients.get(model);
    if (client === undefined) {
      if (clients.size >= MAX_NAMED_CLIENTS)
        throw busy(`more than ${MAX_NAMED_CLIENTS} retrieval models named; try again later`, 5);
      client = make();
      clients.set(model, client);
    }
    return client;
  }

  async close(): Promise<void> {
    const all = [this.embedder, this.reranker, ...this.embedders.values(), ...this.rerankers.values()];
    await Promise.allSettled(all.map((client) => client?.close()));
  }
}
