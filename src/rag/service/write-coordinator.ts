/**
 * The write coordinator: each write of an index (build, append, upsert, delete) is chunked, prepared
 * against the index's current version, committed as one store change that costs what it adds (one new
 * segment, the tombstones of the chunks it replaces or deletes, their rows, the index's statistics)
 * and applied to the cached engine index; then the merge scheduler is asked whether to merge. Writes
 * run under the writer exclusion (write-exclusion.ts), retried when their base was stale.
 */
import { badRequest, conflict, notFound } from "../../core/errors.js";
import { embedFor } from "../retrieval/embedder.js";
import { retrieverUnavailable } from "../retrieval/upstream.js";
import {
  buildsGraph,
  encodeVectorsOffThread,
  IndexWriter,
  SegmentedIndex,
  type Directory,
} from "../search/index.js";
import type {
  IndexKey,
  IndexMeta,
  IndexSettings,
  IndexStore,
  StoredChunk,
  VectorSpace,
} from "../store/types.js";
import { engineOptionsOf, engineStateOf, indexNotFound, round, settingsOf, writtenState } from "./common.js";
import { engineText } from "./documents.js";
import type { MergeScheduler } from "./merge-scheduler.js";
import type { ReaderCache } from "./reader-cache.js";
import { resolveIndexSettings } from "./settings.js";
import type { ServiceStats } from "./stats.js";
import type { BuildInput, BuildOutput, DocumentChange, DocumentInput, WriteEmbedding } from "./types.js";
import type { WriteExclusion } from "./write-exclusion.js";
import { analysisOf, prepareDocuments, type PreparedDocuments } from "./write-prep.js";

type CommitMode = "create" | "replace" | "update";

/** The documents of a write that only deletes. */
const NO_DOCUMENTS: PreparedDocuments = {
  documents: [],
  chunked: [],
  chunkCount: 0,
  engineTexts: [],
  built: null,
};

/** One write's change, before it is prepared against the index's current version. */
interface WriteRequest {
  key: IndexKey;
  mode: CommitMode;
  settings: IndexSettings;
  existing: IndexMeta | undefined;
  /** Its documents, normalised, chunked and analysed (prepareDocuments). */
  documents: PreparedDocuments;
  deleteDocumentIds: string[];
  allowEmpty?: boolean;
  embedding?: WriteEmbedding;
  /** Vectors already computed for engine texts (kept across a write's retries: embedding is slow). */
  embedded: Map<string, Float32Array>;
}

/**
 * A write's documents prepared once for each chunking they are asked with (a retry of an append after
 * another writer changed the index's settings prepares them again): preparing a large write is
 * seconds of a worker thread, kept across the write's retries as its embeddings are.
 */
class PreparedOnce {
  private readonly done = new Map<string, Promise<PreparedDocuments>>();

  constructor(
    private readonly inputs: DocumentInput[],
    private readonly wantTexts: boolean,
  ) {}

  get(settings: IndexSettings): Promise<PreparedDocuments> {
    const key = `${settings.scorer}/${settings.chunkSize}/${settings.overlap}`;
    let prepared = this.done.get(key);
    if (prepared === undefined) {
      // Analysis depends on the scorer only through its block bounds, which any index of it may use.
      prepared = prepareDocuments(this.inputs, settings, analysisOf(settings, null), this.wantTexts);
      this.done.set(key, prepared);
    }
    return prepared;
  }
}

export interface WriteCoordinatorOptions {
  store: IndexStore;
  readers: ReaderCache;
  exclusion: WriteExclusion;
  merges: MergeScheduler;
  stats: ServiceStats;
  /** Where new indices keep vector codes (RagServiceOptions.vectorDirectory); none: memory. */
  directory?: Directory;
}

export class WriteCoordinator {
  private readonly store: IndexStore;

  constructor(private readonly options: WriteCoordinatorOptions) {
    this.store = options.store;
  }

  async requireMeta(key: IndexKey): Promise<IndexMeta> {
    const meta = await this.store.getMeta(key);
    if (!meta) throw indexNotFound(key);
    return meta;
  }

  async build(input: BuildInput): Promise<BuildOutput> {
    const started = performance.now();
    const documents = new PreparedOnce(input.documents, input.embedding !== undefined);
    const settings: IndexSettings = resolveIndexSettings(input);
    const embedded = new Map<string, Float32Array>();
    const output = await this.options.exclusion.withRetries(input.key, async () => {
      const existing = await this.store.getMeta(input.key);
      if (input.mode === "create" && existing) {
        throw conflict(`Index "${input.key.name}" already exists; use mode "replace" or "append"`);
      }
      if (input.mode === "append" && !existing) {
        throw notFound(`Index "${input.key.name}" does not exist; build it with mode "create" first`);
      }
      // An append keeps the index's own chunking and scorer, so old and new chunks rank alike.
      const append = input.mode === "append";
      const written = append && existing ? settingsOf(existing) : settings;
      return this.commit({
        key: input.key,
        mode: input.mode === "append" ? "update" : input.mode,
        settings: written,
        existing,
        documents: await documents.get(written),
        deleteDocumentIds: [],
        allowEmpty: input.allowEmpty,
        embedding: input.embedding,
        embedded,
      });
    });
    this.options.stats.countActivity(input.key.tenantId, "builds");
    return { ...output, buildMs: round(performance.now() - started) };
  }

  /**
   * Upserts and deletes documents of an existing index in one atomic write (folder sync). Deleting an
   * id the index does not hold is a no-op; an id both upserted and deleted is upserted.
   */
  async applyDocumentChanges(key: IndexKey, change: DocumentChange): Promise<BuildOutput> {
    const started = performance.now();
    const prepared = new PreparedOnce(change.upsert, change.embedding !== undefined);
    const embedded = new Map<string, Float32Array>();
    const output = await this.options.exclusion.withRetries(key, async () => {
      const existing = await this.requireMeta(key);
      const documents = await prepared.get(settingsOf(existing));
      const upserted = new Set(documents.documents.map((document) => document.id));
      const deleteIds = [...new Set(change.deleteIds)].filter((id) => !upserted.has(id));
      if (documents.documents.length === 0 && deleteIds.length === 0) {
        return { meta: existing, documentsCount: 0, chunksCount: 0 };
      }
      return this.commit({
        ...this.update(key, existing, documents, deleteIds),
        embedding: change.embedding,
        embedded,
      });
    });
    this.options.stats.countActivity(key.tenantId, "documentWrites");
    return { ...output, buildMs: round(performance.now() - started) };
  }

  async deleteDocument(key: IndexKey, documentId: string): Promise<IndexMeta> {
    const output = await this.options.exclusion.withRetries(key, async () => {
      const existing = await this.requireMeta(key);
      if (!(await this.store.hasDocument(key, documentId))) {
        throw notFound(`Document "${documentId}" is not in index "${key.name}"`);
      }
      return this.commit(this.update(key, existing, NO_DOCUMENTS, [documentId]));
    });
    this.options.stats.countActivity(key.tenantId, "documentWrites");
    return output.meta;
  }

  async deleteIndex(key: IndexKey): Promise<void> {
    await this.options.exclusion.withRetries(key, async () => {
      this.options.readers.forget(key);
      if (!(await this.store.deleteIndex(key))) throw notFound(`Index "${key.name}" does not exist`);
      this.options.stats.forgetIndex(key);
    });
  }

  private update(
    key: IndexKey,
    existing: IndexMeta,
    documents: PreparedDocuments,
    deleteDocumentIds: string[],
  ): WriteRequest {
    return {
      key,
      mode: "update",
      settings: settingsOf(existing),
      existing,
      documents,
      deleteDocumentIds,
      embedded: new Map(),
    };
  }

  /**
   * Prepares the engine change (the new documents' chunks added as one segment, built on a worker
   * thread for a large write; the chunks of replaced and deleted documents, read back from the store,
   * subtracted), commits it as one store write and applies it to the cached index. Its cost grows with
   * the change, not the index.
   */
  private async commit(request: WriteRequest): Promise<Omit<BuildOutput, "buildMs">> {
    const { key, mode, settings, deleteDocumentIds } = request;
    const { documents, chunked, chunkCount, engineTexts, built } = request.documents;
    if (mode !== "update" && chunkCount === 0 && !request.allowEmpty) {
      throw badRequest("The documents contain no text to index");
    }
    // Embedded before anything is locked or written: an embedder error leaves the index as it was.
    const { space, vectors } = await this.embed(request, engineTexts ?? [], chunkCount);
    const { readers } = this.options;
    const output = await readers.mutate(key, async () => {
      const validity = readers.validity(key);
      const base = await this.baseLocked(request, space);
      const vectorOptions = base.engine.options.vectors;
      // A write large enough for an HNSW graph builds it on a worker thread: seconds the loop keeps.
      const offThread =
        space !== null && vectorOptions !== null && buildsGraph(vectorOptions, vectors.length);
      const prepared = new IndexWriter(base.engine).prepare({
        ...(built ? { built } : { add: engineTexts ?? [] }),
        delete: base.deleted,
        ...(offThread
          ? { encodedVectors: await encodeVectorsOffThread(vectorOptions, vectors) }
          : { vectors: space === null ? undefined : vectors }),
      });
      let next = 0;
      const upsert = chunked.map(({ document, chunks }) => ({
        document,
        chunks: chunks.map((chunk): StoredChunk => ({ ...chunk, engineKey: prepared.keys[next++]! })),
      }));
      let meta: IndexMeta;
      try {
        meta = await this.store.write({
          key,
          mode,
          settings,
          upsert,
          deleteDocumentIds,
          segment: prepared.segment,
          tombstones: [...prepared.tombstones],
          engine: writtenState(prepared),
          vocabularySize: prepared.vocabularySize,
          vectors: space,
          expectedVersion: base.expectedVersion,
        });
      } catch (error) {
        // Not written: what the prepared write holds in the vector directory goes.
        prepared.discard();
        throw error;
      }
      readers.applyCommitted(key, base.engine, prepared, meta, validity);
      return { meta, documentsCount: documents.length, chunksCount: chunkCount };
    });
    this.options.merges.schedule(key);
    return output;
  }

  /**
   * What a write is prepared against (under the mutation lock): for an update, the cached index at the
   * store's current version and the chunks it subtracts; for a create or replace, a new engine index.
   */
  private async baseLocked(
    request: WriteRequest,
    space: VectorSpace | null,
  ): Promise<{
    engine: SegmentedIndex;
    expectedVersion: number | null;
    deleted: Array<{ key: number; text: string }>;
  }> {
    const { key, mode, settings, existing, deleteDocumentIds } = request;
    if (mode === "update" && existing) {
      const base = await this.options.readers.baseLocked(key, existing);
      const upserted = request.documents.documents.map((d) => d.id);
      const replacedIds = [...new Set([...deleteDocumentIds, ...upserted])];
      const replaced = await this.store.getDocumentChunks(key, replacedIds);
      const deleted: Array<{ key: number; text: string }> = [];
      for (const { title, chunks } of replaced.values()) {
        for (const chunk of chunks)
          deleted.push({ key: chunk.engineKey, text: engineText(title, chunk.text) });
      }
      return { engine: base.engine, expectedVersion: base.meta.version, deleted };
    }
    // A replaced index goes on numbering keys and segments where the old one stopped, so that a
    // replica holding the old one can catch up (drop every old segment, add the new one).
    const options = engineOptionsOf({ scorer: settings.scorer, vectors: space }, this.options.directory);
    const engine = existing
      ? SegmentedIndex.load(options, [], engineStateOf(existing))
      : SegmentedIndex.create(options);
    return { engine, expectedVersion: existing && mode !== "create" ? existing.version : null, deleted: [] };
  }

  /**
   * The write's embedding space and its new chunks' vectors (see WriteEmbedding in types.ts): an
   * update keeps the index's space and must embed with its model; a create or replace takes the
   * embedder's (or none). Vectors already embedded by an earlier attempt of this write are reused.
   * `texts`: the `chunkCount` chunks' engine texts (prepared whenever the write has an embedder).
   */
  private async embed(
    request: WriteRequest,
    texts: readonly string[],
    chunkCount: number,
  ): Promise<{ space: VectorSpace | null; vectors: Float32Array[] }> {
    const { mode, existing, embedding, embedded, key } = request;
    const indexSpace = mode === "update" ? (existing?.vectors ?? null) : null;
    if (mode === "update" && indexSpace === null) return { space: null, vectors: [] };
    if (embedding === undefined) {
      if (indexSpace !== null && chunkCount > 0) {
        throw conflict(
          `Index "${key.name}" holds embeddings of model ${indexSpace.model} (${indexSpace.dimension} dimensions): ` +
            "documents added to it must be embedded with that model, and this write has no embedder",
        );
      }
      return { space: indexSpace, vectors: [] };
    }
    const { embedder } = embedding;
    const missing = [...new Set(texts.filter((text) => !embedded.has(text)))];
    // A new index with no text yet still records its space: one probe tells the dimension.
    const probe = indexSpace === null && texts.length === 0 && embedder.dimension === undefined;
    const asked = probe ? ["dimension probe"] : missing;
    let probed: number | undefined;
    if (asked.length > 0) {
      const answered = await embedFor(embedder, asked, indexSpace);
      if (answered.length !== asked.length) {
        throw retrieverUnavailable(
          "embedder",
          `it gave ${answered.length} vectors for ${asked.length} texts`,
        );
      }
      if (probe) probed = answered[0]?.length;
      else missing.forEach((text, i) => embedded.set(text, answered[i]!));
    }
    const vectors = texts.map((text) => embedded.get(text)!);
    if (indexSpace !== null) return { space: indexSpace, vectors };
    const dimension = vectors[0]?.length ?? probed ?? embedder.dimension;
    if (dimension === undefined || dimension < 1) throw retrieverUnavailable("embedder", "it gave no vector");
    const space: VectorSpace = { model: embedder.model, dimension, storage: embedding.storage ?? "f32" };
    return { space, vectors };
  }
}
