/**
 * IndexWriter: turns a batch (texts to add, documents to delete) into a {@link PreparedWrite}: the new
 * segment's bytes, the tombstones and the statistics after the write, computed without changing the
 * index. The caller commits them to its store, then `apply()`s them (writes are serialised by the caller).
 */

import { encodeSegment } from "../core/segment-codec.js";
import type { DocumentDeletion, SegmentedIndex } from "../core/segmented-index.js";
import type { IndexState, SegmentRecord, Tombstone } from "../types.js";
import { SegmentWriter } from "./segment-writer.js";
import { buildSegmentVectors, decodeSegmentVectors } from "../core/dense.js";
import type { SegmentVectors } from "../vectors/segment-vectors.js";
import { encodeVectors } from "../vectors/vector-codec.js";

/**
 * The added documents' vectors (checked against the index's options first, before any work): built from
 * `vectors`, or decoded from `encoded` (built elsewhere: vector-build.ts), with their bytes.
 */
function vectorsOf(
  index: SegmentedIndex,
  added: number,
  vectors: ReadonlyArray<ArrayLike<number>> | undefined,
  encoded: Uint8Array | undefined,
): { set: SegmentVectors; bytes: Uint8Array | null } | null {
  const options = index.options.vectors;
  if (vectors !== undefined && encoded !== undefined)
    throw new RangeError("give a write's vectors or their encoded bytes, not both");
  if (options === null) {
    if ((vectors !== undefined && vectors.length > 0) || encoded !== undefined)
      throw new RangeError("the index keeps no vectors");
    return null;
  }
  if (encoded !== undefined) {
    const id = index.state.nextSegmentId;
    return { set: decodeSegmentVectors(index.options, id, added, encoded)!, bytes: encoded };
  }
  if (added === 0 && (vectors === undefined || vectors.length === 0)) return null;
  if (vectors === undefined || vectors.length !== added) {
    throw new RangeError(
      `the index keeps vectors: ${added} texts need ${added} vectors, got ${vectors?.length ?? 0}`,
    );
  }
  return { set: buildSegmentVectors(options, vectors), bytes: null };
}

export interface PreparedWrite {
  /** Keys given to `add`, in order. */
  readonly keys: readonly number[];
  /** The new segment, null when nothing was added. */
  readonly segment: SegmentRecord | null;
  /** Documents this write deletes. */
  readonly tombstones: readonly Tombstone[];
  /** State after the write. */
  readonly state: IndexState;
  readonly liveDocumentCount: number;
  readonly totalLength: number;
  readonly vocabularySize: number;
  /** Makes the write visible; throws if the index changed since `prepare`. */
  apply(): void;
  /**
   * Lets go of a write that will not be applied (its commit failed): its vectors' file, if their codes
   * went to the index's directory (`encodedVectors` with a graph), is released. No-op once applied.
   */
  discard(): void;
}

export class IndexWriter {
  constructor(readonly index: SegmentedIndex) {}

  /**
   * `vectors`: one embedding per text of `add`, in order, of the index's dimension; required when the
   * index keeps vectors (options.vectors), refused when it does not. They are normalised, quantised to
   * the index's storage and encoded with the segment (`segment.vectors`). Or `encodedVectors`: the same
   * already built and encoded (vector-build.ts builds them on a worker thread), checked as a load checks
   * a stored segment's.
   * `delete`: live documents by key, each with the exact text it was added with (re-analysed to subtract
   * its terms; its stored length and term frequencies are checked). Unknown or deleted key: RangeError.
   */
  prepare(batch: {
    add?: readonly string[];
    delete?: ReadonlyArray<{ key: number; text: string }>;
    vectors?: ReadonlyArray<ArrayLike<number>>;
    encodedVectors?: Uint8Array;
  }): PreparedWrite {
    const written = vectorsOf(this.index, batch.add?.length ?? 0, batch.vectors, batch.encodedVectors);
    try {
      return this.prepareWith(batch.add ?? [], batch.delete ?? [], written);
    } catch (error) {
      written?.set.release(); // decoded into the index's directory: nothing will own it
      throw error;
    }
  }

  private prepareWith(
    texts: readonly string[],
    deletes: ReadonlyArray<{ key: number; text: string }>,
    written: ReturnType<typeof vectorsOf>,
  ): PreparedWrite {
    const index = this.index;
    const dictionary = index.dictionary;
    const version = index.version;
    const before = index.state;
    const segmentVectors = written?.set ?? null;

    // Deletions: find and check every document first.
    const deletions: DocumentDeletion[] = [];
    const seen = new Set<number>();
    let liveDocumentCount = index.liveDocumentCount;
    let totalLength = index.totalLength;
    /** Deletions' document-frequency changes, by term id (every deleted term is in the dictionary). */
    const dfDelta = new Map<number, number>();
    for (const { key, text } of deletes) {
      if (seen.has(key)) throw new RangeError(`key ${key} is deleted twice in one batch`);
      seen.add(key);
      const location = index.locate(key);
      if (location === undefined) throw new RangeError(`key ${key} is not a live document`);
      const segment = index.segmentById(location.segmentId);
      if (segment === undefined) throw new Error("index: located segment is missing");
      const { ordinal } = location;
      const counts = new Map<string, number>();
      let length = 0;
      for (const term of index.analyze(text)) {
        counts.set(term, (counts.get(term) ?? 0) + 1);
        length++;
      }
      if (length !== segment.docLengths[ordinal]) {
        throw new Error(`delete key ${key}: the text does not match the indexed document (length differs)`);
      }
      const localTerms: number[] = [];
      const frequencies: number[] = [];
      for (const [term, tf] of counts) {
        const id = dictionary.idOf(term);
        const t = id === undefined ? -1 : segment.localTerm(id);
        if (t < 0 || segment.frequency(t, ordinal) !== tf) {
          throw new Error(`delete key ${key}: the text does not match the indexed document`);
        }
        localTerms.push(t);
        frequencies.push(tf);
        const termId = id as number;
        dfDelta.set(termId, (dfDelta.get(termId) ?? 0) - 1);
      }
      deletions.push({ segment, ordinal, localTerms, frequencies });
      liveDocumentCount--;
      totalLength -= length;
    }

    // Additions: one segment, keys from the counter.
    let segment: SegmentRecord | null = null;
    let segmentData: ReturnType<SegmentWriter["finish"]> | null = null;
    /** Per term of the new segment, its id in the dictionary now (−1: a new term); `apply` reuses it. */
    let knownIds: Int32Array | undefined;
    const keys: number[] = [];
    const state: IndexState = { ...before };
    let vocabularySize = index.vocabularySize;
    if (texts.length > 0) {
      if (before.nextKey + texts.length > 0xffffffff) throw new RangeError("index: keys exhausted (u32)");
      const writer = new SegmentWriter(index.options.analyzer, index.termCache);
      for (const text of texts) writer.add(text);
      const terms = writer.termList;
      const addedDf = writer.termDocumentFrequencies;
      knownIds = new Int32Array(terms.length);
      const lookUp = (term: string): number | undefined => dictionary.idOf(term);
      for (let t = 0; t < terms.length; t++) {
        const slot = writer.termSlot(t);
        const id =
          slot >= 0
            ? index.termCache.dictionaryId(slot, dictionary.forgetEpoch, lookUp)
            : dictionary.idOf(terms[t] ?? "");
        knownIds[t] = id ?? -1;
        // Every term of the new segment has df > 0 after the write, unless deletions take it back to 0.
        const dfBefore = id === undefined ? 0 : dictionary.documentFrequency(id);
        let dfAfter = dfBefore + (addedDf[t] ?? 0);
        if (id !== undefined) {
          dfAfter += dfDelta.get(id) ?? 0;
          dfDelta.delete(id);
        }
        if (dfBefore === 0 && dfAfter > 0) vocabularySize++;
        else if (dfBefore > 0 && dfAfter === 0) vocabularySize--;
      }
      liveDocumentCount += texts.length;
      totalLength += writer.totalLength;
      const segmentKeys = new Uint32Array(texts.length);
      for (let i = 0; i < texts.length; i++) {
        segmentKeys[i] = before.nextKey + i;
        keys.push(before.nextKey + i);
      }
      const reference = liveDocumentCount > 0 && totalLength > 0 ? totalLength / liveDocumentCount : 1;
      segmentData = writer.finish(segmentKeys, reference);
      const id = before.nextSegmentId;
      segment = { id, documentCount: texts.length, bytes: encodeSegment(id, segmentData) };
      if (written !== null) segment.vectors = written.bytes ?? encodeVectors(written.set);
      state.nextKey = before.nextKey + texts.length;
      state.nextSegmentId = id + 1;
    }
    // Terms only deleted from.
    for (const [id, delta] of dfDelta) {
      const dfBefore = dictionary.documentFrequency(id);
      if (dfBefore > 0 && dfBefore + delta === 0) vocabularySize--;
    }
    const tombstones = deletions.map(({ segment: { id }, ordinal }) => ({ segmentId: id, ordinal }));
    let applied = false;
    let discarded = false;
    return {
      keys,
      segment,
      tombstones,
      state,
      liveDocumentCount,
      totalLength,
      vocabularySize,
      apply(): void {
        if (applied) throw new Error("this write was already applied");
        if (discarded) throw new Error("this write was discarded");
        if (index.version !== version) throw new Error("the index changed since this write was prepared");
        if (segment !== null && segmentData !== null) {
          index.attachSegment(
            segment.id,
            segmentData,
            segmentData.terms,
            [],
            segment.bytes.byteLength,
            segmentVectors,
            true,
            knownIds,
          );
        }
        for (const deletion of deletions) index.deleteDocument(deletion);
        index.setState(state);
        index.version++;
        applied = true;
      },
      discard(): void {
        if (applied || discarded) return;
        discarded = true;
        segmentVectors?.release();
      },
    };
  }
}
