/**
 * The RAG service: what the routes call. It turns documents into chunks, chunks into an engine index,
 * and writes both through the IndexStore in one atomic change; it answers queries from a cache of
 * loaded indices, checked against the store's version so it never serves a stale or mixed index.
 * No HTTP here: routes translate requests to these calls.
 *
 * Cache validity. With a store that has no change feed (SQLite), every query asks the store for the
 * index's version (a microsecond there) and reloads the snapshot when it changed. With a change feed
 * (PostgreSQL LISTEN/NOTIFY, shared by replicas), a cached index is served with no round trip while
 * the feed is live and nothing was announced for it since it was validated; an announcement drops it,
 * and while the feed is down (or after it reconnects, for what was validated before) the per-query
 * version check is back.
 *
 * Writers. Writes of one index are serialised in this process (KeyedMutex) and, when the store offers
 * it, across processes (`withWriteLock`). A write that still finds its base version stale (another
 * replica committed in between: a 409 StaleVersionError from the store) is retried here: the index is
 * reloaded from the store and the change recomputed, up to MAX_WRITE_ATTEMPTS times with a short
 * jittered backoff, then the 409 reaches the client.
 */
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { ApiError, badRequest, notFound } from "../core/errors.js";
import { KeyedMutex } from "../core/keyed-mutex.js";
import { extractiveAnswer } from "./answer.js";
import { chunkDocument } from "./ingest/chunker.js";
import { pageAt } from "./ingest/loaders.js";
import { IndexBuilder, SearchIndex, type ScorerName } from "./search/index.js";
import { StaleVersionError } from "./store/common.js";
import type {
  ChangeFeed,
  ChunkRecord,
  DocumentRecord,
  IndexChange,
  IndexKey,
  IndexMeta,
  IndexSettings,
  IndexSnapshot,
  IndexStore,
  Metadata,
} from "./store/types.js";

export interface DocumentInput {
  id?: string;
  text: string;
  title?: string | null;
  metadata?: Metadata;
  source?: string | null;
  /** For paged sources (PDF): where each page starts in `text`, so chunks can carry their page. */
  pageStarts?: number[];
}

export interface BuildInput {
  key: IndexKey;
  documents: DocumentInput[];
  chunkSize: number;
  overlap: number;
  scorer: ScorerName;
  mode: "create" | "replace" | "append";
}

export interface BuildOutput {
  meta: IndexMeta;
  documentsCount: number;
  chunksCount: number;
  buildMs: number;
}

export type AnswerMode = "none" | "extractive" | "generative";

export interface QueryInput {
  key: IndexKey;
  query: string;
  topK: number;
  minScore: number;
  filter?: Metadata;
}

export interface QueryResult {
  text: string;
  score: number;
  document_id: string;
  file: string;
  chunk_id: string;
  title: string | null;
  metadata: Metadata;
}

export interface QueryOutput {
  results: QueryResult[];
  elapsedMs: number;
  /** For answer composition. */
  loaded: LoadedIndex;
}

/** One index version as served: the engine index and, per ordinal, its chunk. */
export interface LoadedIndex {
  meta: IndexMeta;
  engine: SearchIndex;
  chunks: ChunkRecord[];
  documents: IndexSnapshot["documents"];
}

/** A bounded record of recent latencies, for mean and p95 in /rag/stats. */
class LatencyWindow {
  private readonly values: number[] = [];
  private next = 0;
  constructor(private readonly size = 1000) {}
  add(ms: number): void {
    if (this.values.length < this.size) this.values.push(ms);
    else this.values[this.next] = ms;
    this.next = (this.next + 1) % this.size;
  }
  summary(): { mean_ms: number; p95_ms: number; samples: number } {
    if (this.values.length === 0) return { mean_ms: 0, p95_ms: 0, samples: 0 };
    const sorted = [...this.values].sort((a, b) => a - b);
    const mean = sorted.reduce((sum, v) => sum + v, 0) / sorted.length;
    const p95 = sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.95) - 1)] ?? 0;
    return { mean_ms: round(mean), p95_ms: round(p95), samples: sorted.length };
  }
}

const round = (ms: number) => Math.round(ms * 1000) / 1000;
const cacheKey = (key: IndexKey) => `${key.tenantId}\u0000${key.name}`;

/** Attempts of one write that keeps meeting a stale version before its 409 reaches the client. */
export const MAX_WRITE_ATTEMPTS = 5;

/** Before retry n (1, 2, …): a few ms at first, doubling, capped at 200 ms; ±50% jitter. */
function retryDelayMs(retry: number): number {
  return Math.min(200, 5 * 2 ** (retry - 1)) * (0.5 + Math.random());
}

/** A loaded index and what it was validated against (see "Cache validity" above). */
interface CacheEntry {
  loaded: LoadedIndex;
  /** Feed epoch the version was validated in; null when the feed was not live. */
  epoch: number | null;
  /** The index's change stamp when validated. */
  stamp: number;
}

export class RagService {
  private readonly cache = new Map<string, CacheEntry>();
  /** Per index: bumped by each announced change that invalidates the cached version. */
  private readonly stamps = new Map<string, number>();
  private changeCount = 0;
  private readonly feed: ChangeFeed | null;
  private readonly writers = new KeyedMutex();
  private readonly startedAt = Date.now();
  private readonly latencies = new LatencyWindow();
  private readonly counters = { queries: 0, builds: 0, documentWrites: 0, writeRetries: 0 };

  constructor(readonly store: IndexStore) {
    this.feed = store.subscribe ? store.subscribe((change) => this.changed(change)) : null;
  }

  /** Stops listening to the store's changes (the store itself is closed by its owner). */
  close(): void {
    this.feed?.close();
  }

  /** True when cached indices are invalidated by the store's change feed rather than checked per query. */
  get changeFeedLive(): boolean {
    return this.feed?.live ?? false;
  }

  async build(input: BuildInput): Promise<BuildOutput> {
    const started = performance.now();
    const documents = normaliseDocuments(input.documents);
    const settings: IndexSettings = {
      scorer: input.scorer,
      chunkSize: input.chunkSize,
      overlap: input.overlap,
    };
    const output = await this.exclusive(input.key, async () => {
      const existing = await this.store.getMeta(input.key);
      if (input.mode === "create" && existing) {
        throw new ApiError(
          409,
          "conflict",
          `Index "${input.key.name}" already exists; use mode "replace" or "append"`,
        );
      }
      if (input.mode === "append" && !existing) {
        throw notFound(`Index "${input.key.name}" does not exist; build it with mode "create" first`);
      }
      // An append keeps the index's own chunking and scorer, so old and new chunks rank alike.
      const effective = input.mode === "append" && existing ? settingsOf(existing) : settings;
      return this.commit(
        input.key,
        input.mode === "append" ? "update" : input.mode,
        effective,
        existing,
        documents,
        [],
      );
    });
    this.counters.builds++;
    return { ...output, buildMs: round(performance.now() - started) };
  }

  /** Adds documents to an existing index, replacing those whose id is already there. */
  async upsertDocuments(key: IndexKey, inputs: DocumentInput[]): Promise<BuildOutput> {
    const started = performance.now();
    const documents = normaliseDocuments(inputs);
    const output = await this.exclusive(key, async () => {
      const existing = await this.requireMeta(key);
      return this.commit(key, "update", settingsOf(existing), existing, documents, []);
    });
    this.counters.documentWrites++;
    return { ...output, buildMs: round(performance.now() - started) };
  }

  async deleteDocument(key: IndexKey, documentId: string): Promise<IndexMeta> {
    const output = await this.exclusive(key, async () => {
      const existing = await this.requireMeta(key);
      const loaded = await this.loadVersion(key, existing);
      if (!loaded.documents.has(documentId)) {
        throw notFound(`Document "${documentId}" is not in index "${key.name}"`);
      }
      return this.commit(key, "update", settingsOf(existing), existing, [], [documentId]);
    });
    this.counters.documentWrites++;
    return output.meta;
  }

  async deleteIndex(key: IndexKey): Promise<void> {
    await this.exclusive(key, async () => {
      this.cache.delete(cacheKey(key));
      if (!(await this.store.deleteIndex(key))) throw notFound(`Index "${key.name}" does not exist`);
    });
  }

  async listIndices(tenantId: string | null): Promise<IndexMeta[]> {
    return this.store.listIndices(tenantId);
  }

  async requireMeta(key: IndexKey): Promise<IndexMeta> {
    const meta = await this.store.getMeta(key);
    if (!meta) throw notFound(`Index "${key.name}" does not exist for tenant "${key.tenantId}"`);
    return meta;
  }

  async query(input: QueryInput): Promise<QueryOutput> {
    const started = performance.now();
    const loaded = await this.load(input.key);
    const accept =
      input.filter && Object.keys(input.filter).length > 0 ? metadataFilter(loaded, input.filter) : undefined;
    const hits = loaded.engine.search(input.query, { topK: input.topK, minScore: input.minScore, accept });
    const results = hits.map(({ ordinal, score }): QueryResult => {
      const chunk = loaded.chunks[ordinal]!;
      const document = loaded.documents.get(chunk.documentId);
      return {
        text: chunk.text,
        score: Math.round(score * 1e6) / 1e6,
        document_id: chunk.documentId,
        file: document?.source ?? chunk.documentId,
        chunk_id: chunk.chunkId,
        title: document?.title ?? null,
        metadata: chunk.metadata,
      };
    });
    const elapsedMs = round(performance.now() - started);
    this.counters.queries++;
    this.latencies.add(elapsedMs);
    return { results, elapsedMs, loaded };
  }

  extractive(query: string, results: QueryResult[], loaded: LoadedIndex): string | null {
    return extractiveAnswer(query, results, (text) => loaded.engine.analyze(text));
  }

  async stats(tenantId: string | null = null) {
    const indices = await this.store.listIndices(tenantId);
    const memory = process.memoryUsage();
    return {
      indices_count: indices.length,
      documents_count: indices.reduce((sum, m) => sum + m.documentsCount, 0),
      chunks_count: indices.reduce((sum, m) => sum + m.chunksCount, 0),
      tenants_count: new Set(indices.map((m) => m.tenantId)).size,
      queries_served: this.counters.queries,
      builds_served: this.counters.builds,
      document_writes_served: this.counters.documentWrites,
      write_retries: this.counters.writeRetries,
      query_latency: this.latencies.summary(),
      storage: { backend: this.store.kind, size_bytes: await this.store.sizeBytes() },
      cache: {
        loaded_indices: this.cache.size,
        validation: this.feed === null ? "per_query" : this.feed.live ? "change_feed" : "per_query_feed_down",
      },
      uptime_s: Math.round((Date.now() - this.startedAt) / 1000),
      memory: { rss_bytes: memory.rss, heap_used_bytes: memory.heapUsed },
    };
  }

  /**
   * The served version of an index: from the cache while it is known current (announced changes, or
   * the store's version unchanged), else a snapshot loaded from the store.
   */
  async load(key: IndexKey): Promise<LoadedIndex> {
    const k = cacheKey(key);
    const cached = this.cache.get(k);
    if (cached && this.trusted(k, cached)) return cached.loaded;
    // Captured before reading the store: an announcement arriving meanwhile makes the entry untrusted.
    const validity = this.validity(k);
    const meta = await this.store.getMeta(key);
    if (!meta) {
      this.cache.delete(k);
      throw notFound(`Index "${key.name}" does not exist for tenant "${key.tenantId}"`);
    }
    if (cached && cached.loaded.meta.version === meta.version) {
      this.remember(k, cached.loaded, validity);
      return cached.loaded;
    }
    return this.loadSnapshot(key, validity);
  }

  /** Whether a cached entry may be served without asking the store. */
  private trusted(k: string, entry: CacheEntry): boolean {
    const feed = this.feed;
    return (
      feed !== null && feed.live && entry.epoch === feed.epoch && entry.stamp === (this.stamps.get(k) ?? 0)
    );
  }

  private validity(k: string): Omit<CacheEntry, "loaded"> {
    return { epoch: this.feed?.live ? this.feed.epoch : null, stamp: this.stamps.get(k) ?? 0 };
  }

  private remember(k: string, loaded: LoadedIndex, validity: Omit<CacheEntry, "loaded">): void {
    this.cache.set(k, { loaded, ...validity });
  }

  private async loadSnapshot(key: IndexKey, validity: Omit<CacheEntry, "loaded">): Promise<LoadedIndex> {
    const snapshot = await this.store.loadSnapshot(key);
    if (!snapshot) {
      this.cache.delete(cacheKey(key));
      throw notFound(`Index "${key.name}" does not exist for tenant "${key.tenantId}"`);
    }
    const loaded: LoadedIndex = {
      meta: snapshot.meta,
      engine: SearchIndex.deserialize(snapshot.engineIndex),
      chunks: snapshot.chunks,
      documents: snapshot.documents,
    };
    this.remember(cacheKey(key), loaded, validity);
    return loaded;
  }

  /**
   * Exactly version `meta.version` of an index, the base of a write: from the cache when it holds that
   * version, else from the store; a newer version there means another writer got in first (stale).
   */
  private async loadVersion(key: IndexKey, meta: IndexMeta): Promise<LoadedIndex> {
    const k = cacheKey(key);
    const cached = this.cache.get(k);
    if (cached && cached.loaded.meta.version === meta.version) return cached.loaded;
    const loaded = await this.loadSnapshot(key, this.validity(k));
    if (loaded.meta.version !== meta.version) {
      throw new StaleVersionError(key, loaded.meta.version, meta.version);
    }
    return loaded;
  }

  /** An announced change: drop the cached index unless it already is that version or newer. */
  private changed(change: IndexChange): void {
    const k = cacheKey(change);
    const cached = this.cache.get(k);
    if (cached && change.version !== null && cached.loaded.meta.version >= change.version) return;
    this.cache.delete(k);
    this.stamps.set(k, ++this.changeCount);
  }

  /**
   * Runs one write of an index: alone in this process, under the store's cross-process writer lock
   * when it has one, and again (reloading the index from the store) when its base version was stale.
   */
  private async exclusive<T>(key: IndexKey, work: () => Promise<T>): Promise<T> {
    const k = cacheKey(key);
    const attempts = async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await work();
        } catch (error) {
          if (!(error instanceof StaleVersionError)) throw error;
          this.cache.delete(k);
          if (attempt >= MAX_WRITE_ATTEMPTS) {
            throw new ApiError(
              409,
              "conflict",
              `Index "${key.name}" kept being changed by other writers (${attempt} attempts); retry the request`,
              [],
              { "Retry-After": "1" },
            );
          }
          this.counters.writeRetries++;
          await sleep(retryDelayMs(attempt));
        }
      }
    };
    return this.writers.run(k, () =>
      this.store.withWriteLock ? this.store.withWriteLock(key, attempts) : attempts(),
    );
  }

  /**
   * Chunks the new documents, rebuilds the engine index over every chunk the index will hold, and
   * writes it all as one store change; the freshly built engine index goes straight into the cache.
   */
  private async commit(
    key: IndexKey,
    mode: "create" | "replace" | "update",
    settings: IndexSettings,
    existing: IndexMeta | undefined,
    documents: DocumentRecord[],
    deleteDocumentIds: string[],
  ) {
    const upsert = documents.map((document) => ({
      document,
      chunks: withPages(
        chunkDocument(document, { chunkSize: settings.chunkSize, overlap: settings.overlap }),
        pageStartsOf.get(document),
      ),
    }));
    const newChunks = upsert.flatMap((u) => u.chunks);
    const validity = this.validity(cacheKey(key));

    let kept: ChunkRecord[] = [];
    const keptDocuments = new Map<string, Pick<DocumentRecord, "id" | "title" | "source" | "metadata">>();
    if (mode === "update" && existing) {
      const current = await this.loadVersion(key, existing);
      const dropped = new Set([...deleteDocumentIds, ...documents.map((d) => d.id)]);
      kept = current.chunks.filter((chunk) => !dropped.has(chunk.documentId));
      for (const [id, doc] of current.documents) if (!dropped.has(id)) keptDocuments.set(id, doc);
    }
    const chunks = [...kept, ...newChunks];
    if (mode !== "update" && chunks.length === 0) {
      throw badRequest("The documents contain no text to index");
    }

    const titles = new Map<string, string | null>();
    for (const [id, doc] of keptDocuments) titles.set(id, doc.title);
    for (const doc of documents) titles.set(doc.id, doc.title);
    const builder = new IndexBuilder();
    for (const chunk of chunks) {
      // The title is indexed with every chunk: it is often the best summary of what a chunk is about.
      const title = titles.get(chunk.documentId);
      builder.add(title ? `${title}\n${chunk.text}` : chunk.text);
    }
    const engine = builder.build({ scorer: settings.scorer });

    const meta = await this.store.write({
      key,
      mode,
      settings,
      upsert,
      deleteDocumentIds,
      engineIndex: engine.serialize(),
      chunkOrder: chunks.map((chunk) => chunk.chunkId),
      vocabularySize: engine.vocabularySize,
      expectedVersion: existing && mode !== "create" ? existing.version : null,
    });

    for (const doc of documents) keptDocuments.set(doc.id, doc);
    this.remember(cacheKey(key), { meta, engine, chunks, documents: keptDocuments }, validity);
    return { meta, documentsCount: documents.length, chunksCount: newChunks.length };
  }
}

function settingsOf(meta: IndexMeta): IndexSettings {
  return { scorer: meta.scorer, chunkSize: meta.chunkSize, overlap: meta.overlap };
}

/**
 * Fills in ids (a content hash when none is given, so re-sending a document does not duplicate it)
 * and rejects two different documents claiming one id in the same request.
 */
const LONE_SURROGATES = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const toWellFormed = (text: string) => text.replace(LONE_SURROGATES, "\uFFFD");

/** Page offsets of paged documents (PDF), beside the record so the store never sees them. */
const pageStartsOf = new WeakMap<DocumentRecord, number[]>();

/**
 * Gives each chunk of a paged document its page: the (1-based) page holding most of its text, and,
 * when it spans several, all of them in `pages`.
 */
function withPages(chunks: ChunkRecord[], pageStarts: number[] | undefined): ChunkRecord[] {
  if (!pageStarts) return chunks;
  for (const chunk of chunks) {
    const first = pageAt(pageStarts, chunk.start);
    const last = pageAt(pageStarts, Math.max(chunk.start, chunk.end - 1));
    let page = first;
    let most = 0;
    for (let p = first; p <= last; p++) {
      const from = Math.max(chunk.start, pageStarts[p - 1]!);
      const to = Math.min(chunk.end, pageStarts[p] ?? Infinity);
      if (to - from > most) [page, most] = [p, to - from];
    }
    const pages = Array.from({ length: last - first + 1 }, (_, i) => first + i);
    chunk.metadata = { ...chunk.metadata, page, ...(pages.length > 1 ? { pages } : {}) };
  }
  return chunks;
}

export function normaliseDocuments(inputs: DocumentInput[]): DocumentRecord[] {
  const byId = new Map<string, DocumentRecord>();
  inputs.forEach((input, position) => {
    // Whitespace-only text would be stored as a document with no chunks that no query can find.
    if (input.text.trim() === "") {
      const which = input.source ? `File "${input.source}"` : `documents[${position}]`;
      throw badRequest(`${which} has no text to index (empty or only whitespace)`, [
        { path: `/documents/${position}/text`, message: "empty or only whitespace" },
      ]);
    }
    const id = input.id ?? createHash("sha256").update(input.text).digest("hex").slice(0, 16);
    const record: DocumentRecord = {
      id,
      // Lone UTF-16 surrogates cannot be stored as UTF-8: replace them now, so what is served from
      // memory is what is served after a restart.
      title: input.title == null ? null : toWellFormed(input.title),
      text: toWellFormed(input.text),
      metadata: input.metadata ?? {},
      source: input.source ?? null,
    };
    if (input.pageStarts) pageStartsOf.set(record, input.pageStarts);
    const previous = byId.get(id);
    if (previous && (previous.text !== record.text || input.id !== undefined)) {
      throw badRequest(
        `Document id "${id}" appears more than once in this request (documents[${position}])`,
        [{ path: `/documents/${position}/id`, message: "duplicate id" }],
      );
    }
    byId.set(id, record);
  });
  return [...byId.values()];
}

/** Equality on every filter key; values compared as JSON so arrays and objects work too. */
function metadataFilter(loaded: LoadedIndex, filter: Metadata): (ordinal: number) => boolean {
  const expected = Object.entries(filter).map(([key, value]) => [key, JSON.stringify(value)] as const);
  return (ordinal) => {
    const metadata = loaded.chunks[ordinal]?.metadata ?? {};
    return expected.every(
      ([key, value]) =>
        Object.prototype.hasOwnProperty.call(metadata, key) && JSON.stringify(metadata[key]) === value,
    );
  };
}
