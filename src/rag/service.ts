/**
 * The RAG service: what the routes call. It turns documents into chunks, chunks into an engine index,
 * and writes both through the IndexStore in one atomic change; it answers queries from a cache of
 * loaded indices, checked against the store's version so it never serves a stale or mixed index.
 * No HTTP here: routes translate requests to these calls.
 */
import { createHash } from "node:crypto";
import { ApiError, badRequest, notFound } from "../core/errors.js";
import { KeyedMutex } from "../core/keyed-mutex.js";
import { extractiveAnswer } from "./answer.js";
import { chunkDocument } from "./ingest/chunker.js";
import { IndexBuilder, SearchIndex, type ScorerName } from "./search/index.js";
import type {
  ChunkRecord,
  DocumentRecord,
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

export class RagService {
  private readonly cache = new Map<string, LoadedIndex>();
  private readonly writers = new KeyedMutex();
  private readonly startedAt = Date.now();
  private readonly latencies = new LatencyWindow();
  private readonly counters = { queries: 0, builds: 0, documentWrites: 0 };

  constructor(readonly store: IndexStore) {}

  async build(input: BuildInput): Promise<BuildOutput> {
    const started = performance.now();
    const documents = normaliseDocuments(input.documents);
    const settings: IndexSettings = {
      scorer: input.scorer,
      chunkSize: input.chunkSize,
      overlap: input.overlap,
    };
    const output = await this.writers.run(cacheKey(input.key), async () => {
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
    const output = await this.writers.run(cacheKey(key), async () => {
      const existing = await this.requireMeta(key);
      return this.commit(key, "update", settingsOf(existing), existing, documents, []);
    });
    this.counters.documentWrites++;
    return { ...output, buildMs: round(performance.now() - started) };
  }

  async deleteDocument(key: IndexKey, documentId: string): Promise<IndexMeta> {
    const output = await this.writers.run(cacheKey(key), async () => {
      const existing = await this.requireMeta(key);
      const loaded = await this.load(key);
      if (!loaded.documents.has(documentId)) {
        throw notFound(`Document "${documentId}" is not in index "${key.name}"`);
      }
      return this.commit(key, "update", settingsOf(existing), existing, [], [documentId]);
    });
    this.counters.documentWrites++;
    return output.meta;
  }

  async deleteIndex(key: IndexKey): Promise<void> {
    await this.writers.run(cacheKey(key), async () => {
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
      query_latency: this.latencies.summary(),
      storage: { backend: this.store.kind, size_bytes: await this.store.sizeBytes() },
      cache: { loaded_indices: this.cache.size },
      uptime_s: Math.round((Date.now() - this.startedAt) / 1000),
      memory: { rss_bytes: memory.rss, heap_used_bytes: memory.heapUsed },
    };
  }

  /** The served version of an index: from the cache while the store's version is unchanged. */
  async load(key: IndexKey): Promise<LoadedIndex> {
    const cached = this.cache.get(cacheKey(key));
    const meta = await this.store.getMeta(key);
    if (!meta) {
      this.cache.delete(cacheKey(key));
      throw notFound(`Index "${key.name}" does not exist for tenant "${key.tenantId}"`);
    }
    if (cached && cached.meta.version === meta.version) return cached;
    const snapshot = await this.store.loadSnapshot(key);
    if (!snapshot) throw notFound(`Index "${key.name}" does not exist for tenant "${key.tenantId}"`);
    const loaded: LoadedIndex = {
      meta: snapshot.meta,
      engine: SearchIndex.deserialize(snapshot.engineIndex),
      chunks: snapshot.chunks,
      documents: snapshot.documents,
    };
    this.cache.set(cacheKey(key), loaded);
    return loaded;
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
      chunks: chunkDocument(document, { chunkSize: settings.chunkSize, overlap: settings.overlap }),
    }));
    const newChunks = upsert.flatMap((u) => u.chunks);

    let kept: ChunkRecord[] = [];
    const keptDocuments = new Map<string, Pick<DocumentRecord, "id" | "title" | "source" | "metadata">>();
    if (mode === "update" && existing) {
      const current = await this.load(key);
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
    this.cache.set(cacheKey(key), { meta, engine, chunks, documents: keptDocuments });
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
      title: input.title ?? null,
      text: input.text,
      metadata: input.metadata ?? {},
      source: input.source ?? null,
    };
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
