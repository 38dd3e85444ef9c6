/**
 * The old format (chunks, no segments: an index written before segments existed): re-indexed once, on
 * first load. Its chunks, read in engine key order (the migration gave each chunk its old ordinal as
 * key), become one segment, committed as a write that changes no chunk.
 */
import { internal } from "../store/common.js";
import { IndexWriter, SegmentedIndex, type PreparedWrite } from "../search/index.js";
import type { IndexKey, IndexMeta, IndexStore, StoredIndex } from "../store/types.js";
import { settingsOf, writtenState } from "./common.js";
import { engineText } from "./documents.js";

/** Chunks read per store call when re-indexing an index of the old format. */
const LEGACY_BATCH = 2000;

/** Whether a stored index is of the old format (chunks but no segment). */
export const isLegacy = (stored: StoredIndex) => stored.segments.length === 0 && stored.meta.chunksCount > 0;

/**
 * Indexes the chunks of an old-format index as one segment and commits it against the stored version;
 * the caller applies the prepared write to its cache. Under the writers' exclusion.
 */
export async function commitLegacyReindex(
  store: IndexStore,
  key: IndexKey,
  stored: StoredIndex,
): Promise<{ engine: SegmentedIndex; prepared: PreparedWrite; meta: IndexMeta }> {
  const chunks: Array<{ engineKey: number; text: string }> = [];
  const documentIds = (await store.listDocuments(key)).map((document) => document.id);
  for (let from = 0; from < documentIds.length; from += LEGACY_BATCH) {
    const batch = await store.getDocumentChunks(key, documentIds.slice(from, from + LEGACY_BATCH));
    for (const { title, chunks: ofDocument } of batch.values()) {
      for (const chunk of ofDocument)
        chunks.push({ engineKey: chunk.engineKey, text: engineText(title, chunk.text) });
    }
  }
  chunks.sort((a, b) => a.engineKey - b.engineKey);
  const engine = SegmentedIndex.create({ scorer: stored.meta.scorer });
  const prepared = new IndexWriter(engine).prepare({ add: chunks.map((chunk) => chunk.text) });
  // The engine numbers documents from 0 in the order given: the stored keys must be just that.
  if (prepared.keys.some((engineKey, i) => engineKey !== chunks[i]!.engineKey)) {
    throw internal(`index "${key.name}" of the old format has chunk keys that are not 0 … n-1`);
  }
  const meta = await store.write({
    key,
    mode: "update",
    settings: settingsOf(stored.meta),
    upsert: [],
    deleteDocumentIds: [],
    segment: prepared.segment,
    tombstones: [],
    engine: writtenState(prepared),
    vocabularySize: prepared.vocabularySize,
    expectedVersion: stored.meta.version,
  });
  return { engine, prepared, meta };
}
