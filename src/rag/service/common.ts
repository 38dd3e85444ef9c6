/** Small facts the service's parts share: how an index is named in maps, its settings and state. */
import { notFound } from "../../core/errors.js";
import type { Directory, IndexState, PreparedWrite, SearchIndexOptions } from "../search/index.js";
import type { IndexKey, IndexMeta, IndexSettings } from "../store/types.js";
import type { ServiceLog } from "./types.js";

/** An index's key in the service's maps: tenant and name. */
export const cacheKey = (key: IndexKey) => `${key.tenantId}\u0000${key.name}`;

/** The one message of a query, stats or write on an index the tenant does not have. */
export const indexNotFound = (key: IndexKey) =>
  notFound(`Index "${key.name}" does not exist for tenant "${key.tenantId}"`);

/** Milliseconds to the microsecond, as the API reports them. */
export const round = (ms: number) => Math.round(ms * 1000) / 1000;

export const engineStateOf = (meta: IndexMeta): IndexState => ({
  nextKey: meta.engine.nextKey,
  nextSegmentId: meta.engine.nextSegmentId,
});

/** The engine state a write stores: the engine's counters after it, and the live length total. */
export function writtenState(prepared: PreparedWrite) {
  return { ...prepared.state, totalLength: prepared.totalLength };
}

/**
 * The engine options of an index: its scorer and, where it has an embedding space, its vectors (their
 * codes kept in `directory` where given: RagServiceOptions.vectorDirectory).
 */
export function engineOptionsOf(
  meta: Pick<IndexMeta, "scorer" | "vectors">,
  directory: Directory | undefined,
): SearchIndexOptions {
  if (meta.vectors === null) return { scorer: meta.scorer };
  const vectors = { dimension: meta.vectors.dimension, storage: meta.vectors.storage };
  return directory === undefined
    ? { scorer: meta.scorer, vectors }
    : { scorer: meta.scorer, vectors, directory };
}

export function settingsOf(meta: IndexMeta): IndexSettings {
  return { scorer: meta.scorer, chunkSize: meta.chunkSize, overlap: meta.overlap };
}

export const defaultLog: ServiceLog = { warn: (details, message) => console.warn(message, details) };
