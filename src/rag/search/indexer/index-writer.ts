/**
 * IndexWriter: turns a batch (texts to add, documents to delete) into a {@link PreparedWrite}: the new
 * segment's bytes, the tombstones and the statistics after the write, computed without changing the
 * index. The caller commits them to its store, then `apply()`s them (writes are serialised by the caller).
 */

import { encodeSegment, setSegmentId, viewSegment, type StoredTerms } from "../core/segment-codec.js";
import type { DocumentDeletion, SegmentedIndex } from "../core/segmented-index.js";
import type { SegmentData } from "../core/segment.js";
import type { IndexState, SegmentRecord, Tombstone } from "../types.js";
import type { BuiltSegment } from "./segment-build.js";
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
   * `add`: texts to index, or `built`: their segment built elsewhere (segment-build.ts, on a worker
   * thread), numbered here (its id and keys rewritten in place: its bytes become this write's).
   * `vectors`: one embedding per added text, in order, of the index's dimension; required when the
   * index keeps vectors (options.vectors), refused when it does not. They are normalised, quantised to
   * the index's storage and encoded with the segment (`segment.vectors`). Or `encodedVectors`: the same
   * already built and encoded (vector-build.ts builds them on a worker thread), checked as a load checks
   * a stored segment's.
   * `delete`: live documents by key, each with the exact text it was added with (re-analysed to subtract
   * its terms; its stored length and term frequencies are checked). Unknown or deleted key: RangeError.
   */
  prepare(batch: {
    add?: readonly string[];
    built?: BuiltSegment;
    delete?: ReadonlyArray<{ key: number; text: string }>;
    vectors?: ReadonlyArray<ArrayLike<number>>;
    encodedVectors?: Uint8Array;
  }): PreparedWrite {
    const index = this.index;
    const added = batch.built?.documentCount ?? batch.add?.length ?? 0;
    if (batch.add !== undefined && batch.add.length > 0 && batch.built !== undefined)
      throw new RangeError("give a write's texts or its built segment, not both");
    const written = vectorsOf(index, added, batch.vectors, batch.encodedVectors);
    try {
      return this.prepareWith(batch, added, written);
    } catch (error) {
      written?.set.release(); // decoded into the index's directory: nothing will own it
      throw error;
    }
  }

  private prepareWith(
    batch: Parameters<IndexWriter["prepare"]>[0],
    added: number,
    written: ReturnType<typeof vectorsOf>,
  ): PreparedWrite {
    const index = this.index;
    const version = index.version;
    const before = index.state;
    const deletes = prepareDeletions(index, batch.delete ?? []);
    const { deletions, dfDelta } = deletes;
    let liveDocumentCount = deletes.liveDocumentCount;
    let totalLength = deletes.totalLength;

    // Additions: one segment, keys from the counter.
    let addition: Addition | null = null;
    const keys: number[] = [];
    const state: IndexState = { ...before };
    let vocabularySize = index.vocabularySize;
    if (added > 0) {
      if (before.nextKey + added > 0xffffffff) throw new RangeError("index: keys exhausted (u32)");
      for (let i = 0; i < added; i++) keys.push(before.nextKey + i);
      const counted = { liveDocumentCount: liveDocumentCount + added, totalLength, vocabularySize };
      addition = batch.built
        ? builtAddition(index, batch.built, dfDelta, counted)
        : textAddition(index, batch.add ?? [], dfDelta, counted);
      ({ liveDocumentCount, totalLength, vocabularySize } = counted);
      if (written !== null) addition.segment.vectors = written.bytes ?? encodeVectors(written.set);
      state.nextKey = before.nextKey + added;
      state.nextSegmentId = before.nextSegmentId + 1;
    }
    // Terms only deleted from.
    for (const [id, delta] of dfDelta) {
      const dfBefore = index.dictionary.documentFrequency(id);
      if (dfBefore > 0 && dfBefore + delta === 0) vocabularySize--;
    }
    const tombstones = deletions.map(({ segment: { id }, ordinal }) => ({ segmentId: id, ordinal }));
    const segmentVectors = written?.set ?? null;
    let applied = false;
    let discarded = false;
    return {
      keys,
      segment: addition?.segment ?? null,
      tombstones,
      state,
      liveDocumentCount,
      totalLength,
      vocabularySize,
      apply(): void {
        if (applied) throw new Error("this write was already applied");
        if (discarded) throw new Error("this write was discarded");
        if (index.version !== version) throw new Error("the index changed since this write was prepared");
        addition?.attach(segmentVectors);
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

/** A write's new segment: its record for the store, and how to attach it to the index once committed. */
interface Addition {
  segment: SegmentRecord;
  /** Attaches the segment with its vectors, whose owner the index becomes. */
  attach(vectors: SegmentVectors | null): void;
}

/** The statistics a write changes, updated by an addition as its terms are counted. */
interface Counted {
  liveDocumentCount: number;
  totalLength: number;
  vocabularySize: number;
}

/**
 * Every deleted document found and checked first: its segment and ordinal, its terms (the text is
 * re-analysed; its length and term frequencies must match the stored ones) and the document-frequency
 * changes by term id (every deleted term is in the dictionary).
 */
function prepareDeletions(index: SegmentedIndex, deletes: ReadonlyArray<{ key: number; text: string }>) {
  const dictionary = index.dictionary;
  const deletions: DocumentDeletion[] = [];
  const seen = new Set<number>();
  let liveDocumentCount = index.liveDocumentCount;
  let totalLength = index.totalLength;
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
  return { deletions, dfDelta, liveDocumentCount, totalLength };
}

/**
 * A term of the new segment whose dictionary id is `id` (undefined: a new term) and which `addedDf`
 * documents hold: the vocabulary after the write counts it when its df becomes positive (deletions may
 * take it back to 0). Its deletion delta is used up here.
 */
function countTerm(
  index: SegmentedIndex,
  id: number | undefined,
  addedDf: number,
  dfDelta: Map<number, number>,
  counted: Counted,
): void {
  const dfBefore = id === undefined ? 0 : index.dictionary.documentFrequency(id);
  let dfAfter = dfBefore + addedDf;
  if (id !== undefined) {
    dfAfter += dfDelta.get(id) ?? 0;
    dfDelta.delete(id);
  }
  if (dfBefore === 0 && dfAfter > 0) counted.vocabularySize++;
  else if (dfBefore > 0 && dfAfter === 0) counted.vocabularySize--;
}

/** The new segment of `texts`, analysed here (with the index's term cache). */
function textAddition(
  index: SegmentedIndex,
  texts: readonly string[],
  dfDelta: Map<number, number>,
  counted: Counted,
): Addition {
  const dictionary = index.dictionary;
  const before = index.state;
  const writer = new SegmentWriter(index.options.analyzer, index.termCache);
  for (const text of texts) writer.add(text);
  const terms = writer.termList;
  const addedDf = writer.termDocumentFrequencies;
  /** Per term of the new segment, its id in the dictionary now (−1: a new term); `attach` reuses it. */
  const knownIds = new Int32Array(terms.length);
  const lookUp = (term: string): number | undefined => dictionary.idOf(term);
  for (let t = 0; t < terms.length; t++) {
    const slot = writer.termSlot(t);
    const id =
      slot >= 0
        ? index.termCache.dictionaryId(slot, dictionary.forgetEpoch, lookUp)
        : dictionary.idOf(terms[t] ?? "");
    knownIds[t] = id ?? -1;
    countTerm(index, id, addedDf[t] ?? 0, dfDelta, counted);
  }
  counted.totalLength += writer.totalLength;
  const segmentKeys = new Uint32Array(texts.length);
  for (let i = 0; i < texts.length; i++) segmentKeys[i] = before.nextKey + i;
  const { liveDocumentCount, totalLength } = counted;
  const reference = liveDocumentCount > 0 && totalLength > 0 ? totalLength / liveDocumentCount : 1;
  const data: SegmentData = writer.finish(segmentKeys, reference);
  const id = before.nextSegmentId;
  const segment: SegmentRecord = { id, documentCount: texts.length, bytes: encodeSegment(id, data) };
  return {
    segment,
    attach: (vectors) =>
      void index.attachSegment(id, data, data.terms, [], segment.bytes.byteLength, vectors, true, knownIds),
  };
}

/**
 * The new segment built elsewhere: its id and keys rewritten in its bytes (which it then views), its
 * terms looked up in the dictionary from its dictionary text (no string per ASCII term).
 */
function builtAddition(
  index: SegmentedIndex,
  built: BuiltSegment,
  dfDelta: Map<number, number>,
  counted: Counted,
): Addition {
  const dictionary = index.dictionary;
  const before = index.state;
  const id = before.nextSegmentId;
  const { bytes } = built;
  setSegmentId(bytes, id);
  const data = viewSegment(bytes);
  if (data.keys.length !== built.documentCount || data.termCount !== built.termByteEnds.length)
    throw new RangeError("built segment: its bytes do not match its counts");
  for (let d = 0; d < data.keys.length; d++) data.keys[d] = before.nextKey + d;
  const terms: StoredTerms = {
    count: data.termCount,
    text: data.dictionaryText,
    ends: built.termByteEnds,
    decoded: built.wideTerms,
  };
  const knownIds = new Int32Array(terms.count);
  const { termOffsets } = data;
  for (let t = 0, start = 0; t < terms.count; t++) {
    const end = terms.ends[t] ?? 0;
    const wide = terms.decoded.get(t);
    const known = wide === undefined ? dictionary.idOfAscii(terms.text, start, end) : dictionary.idOf(wide);
    knownIds[t] = known ?? -1;
    countTerm(index, known, (termOffsets[t + 1] ?? 0) - (termOffsets[t] ?? 0), dfDelta, counted);
    start = end;
  }
  counted.totalLength += built.totalLength;
  const segment: SegmentRecord = { id, documentCount: built.documentCount, bytes };
  return {
    segment,
    attach: (vectors) =>
      void index.attachBuiltSegment(id, data, terms, bytes.byteLength, knownIds, built.derived, vectors),
  };
}
