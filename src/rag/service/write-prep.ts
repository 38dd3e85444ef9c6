/**
 * A write's documents made ready for the engine and the store: normalised (ids, well-formed text),
 * chunked, and their new segment built. Everything here costs in proportion to the text, so above a
 * small size (OFF_THREAD_CHARS of text or OFF_THREAD_DOCUMENTS documents) it runs on a worker thread
 * of its own, as a large write's vectors do (search/indexer/vector-build.ts), the documents sent to it
 * and the result back in slices that leave the loop free in between: the thread normalises,
 * chunks and analyses (search/indexer/segment-build.ts) and sends back what the event loop cannot
 * rebuild cheaply — ids, chunk bounds, pages and the encoded segment, transferred rather than copied.
 * The loop then makes the records from the request's own strings (a chunk's text is a slice of its
 * document's) and the engine only numbers the segment (IndexWriter.prepare `built`).
 *
 * Small writes are prepared inline, as before: a thread's start-up would cost more than their work,
 * and the engine's shared term cache (used inline only) keeps batched appends fast.
 */
import { DomainError } from "../../core/errors.js";
import { resolveIndexOptions } from "../search/core/segmented-index.js";
import type { ScorerParameters } from "../search/scoring.js";
import { SegmentBuilder, transferablesOf, type BuiltSegment } from "../search/indexer/segment-build.js";
import { receivePieces } from "../search/indexer/pieces.js";
import { DATA_THREAD_LIMITS, startWorker, WorkerSlots } from "../search/indexer/start-worker.js";
import type { AnalyzerOptions } from "../search/types.js";
import type { ChunkRecord, DocumentRecord, IndexSettings, VectorSpace } from "../store/types.js";
import { engineOptionsOf } from "./common.js";
import {
  chunkDocuments,
  chunkPages,
  engineText,
  duplicateId,
  normaliseDocument,
  normaliseDocuments,
  normalisedById,
  chunkMetadata,
  pageStartsOfRecord,
} from "./documents.js";
import { chunkDocument } from "../ingest/chunker.js";
import type { DocumentInput } from "./types.js";

/** Characters of text above which a write is prepared on a worker thread (about 30 ms of work inline). */
export const OFF_THREAD_CHARS = 512 * 1024;
/** Documents above which a write is prepared on a worker thread. */
export const OFF_THREAD_DOCUMENTS = 2_000;

/** A write's documents, ready: records, their chunks, and the new segment or the texts it is made of. */
export interface PreparedDocuments {
  documents: DocumentRecord[];
  chunked: Array<{ document: DocumentRecord; chunks: ChunkRecord[] }>;
  chunkCount: number;
  /** The engine text of every chunk, in order: when prepared inline, or when asked for (embedding). */
  engineTexts: string[] | null;
  /** The new segment when prepared on a worker thread (null: the writer analyses `engineTexts`). */
  built: BuiltSegment | null;
}

/** How an index analyses and scores: what a segment built apart from it must be built with. */
export interface Analysis {
  analyzer: AnalyzerOptions;
  scorer: ScorerParameters;
}

/** The analysis of an index with these settings (its engine options, engineOptionsOf; no directory: analysis only). */
export function analysisOf(settings: IndexSettings, vectors: VectorSpace | null): Analysis {
  const options = resolveIndexOptions(engineOptionsOf({ scorer: settings.scorer, vectors }, undefined));
  return {
    analyzer: options.analyzer,
    scorer: { kind: options.scorer, k1: options.bm25.k1, b: options.bm25.b },
  };
}

/** Whether a write of these documents is worth a thread. */
export function preparesOffThread(inputs: readonly DocumentInput[]): boolean {
  if (inputs.length > OFF_THREAD_DOCUMENTS) return true;
  let chars = 0;
  for (const input of inputs) {
    chars += input.text.length;
    if (chars > OFF_THREAD_CHARS) return true;
  }
  return false;
}

/**
 * Normalises and chunks `inputs` with `settings` (400s as normaliseDocuments), inline or, above the
 * small size, with the segment on a worker thread. `wantTexts`: the engine texts are needed (to embed).
 */
export async function prepareDocuments(
  inputs: DocumentInput[],
  settings: IndexSettings,
  analysis: Analysis,
  wantTexts: boolean,
): Promise<PreparedDocuments> {
  if (!preparesOffThread(inputs)) {
    const documents = normaliseDocuments(inputs);
    const { chunked, engineTexts } = chunkDocuments(documents, settings);
    return { documents, chunked, chunkCount: engineTexts.length, engineTexts, built: null };
  }
  const job: DocumentsJob = {
    inputs,
    chunking: { chunkSize: settings.chunkSize, overlap: settings.overlap },
    analysis,
    wantTexts,
  };
  return recordsOf(inputs, await slots.run(() => runOffThread(job)));
}

/** Large writes prepared at once (each thread holds a copy of its write); the others wait their turn. */
const slots = new WorkerSlots(2);

/** What the worker thread is given. */
export interface DocumentsJob {
  inputs: DocumentInput[];
  chunking: { chunkSize: number; overlap: number };
  analysis: Analysis;
  wantTexts: boolean;
  /** Let go of each input once it is done (the thread's own copy: its peak memory is the process's). */
  release?: boolean;
}

/** What it sends back: enough to make the records from the inputs without redoing the work. */
export interface DocumentsJobResult {
  /** Per document kept (one per id), the position of its input. */
  positions: Uint32Array;
  ids: string[];
  /** Documents whose text or title normalisation changed (lone surrogates replaced), by position in `ids`. */
  rewritten: Array<{ at: number; text: string; title: string | null }>;
  /** Chunks per document, and each chunk's [start, end) in its document's text. */
  chunkCounts: Uint32Array;
  bounds: Uint32Array;
  /** Per chunk, its page, first and last page (1-based; 0s outside paged documents); null: none paged. */
  pages: Uint32Array | null;
  engineTexts: string[] | null;
  built: BuiltSegment | null;
}

/** The work of the thread (pure: the tests run it inline too). */
export function runDocumentsJob(job: DocumentsJob): DocumentsJobResult {
  const { inputs } = job;
  const preparation = new DocumentsPreparation(job);
  const kept = [...normalisedById(inputs).values()];
  kept.forEach(({ record, position }, at) => {
    preparation.add(record, inputs[position]!, position);
    if (job.release) {
      inputs[position] = undefined as unknown as DocumentInput;
      (kept as unknown[])[at] = undefined;
    }
  });
  return preparation.finish();
}

/**
 * Documents normalised, chunked and analysed one at a time into a job's result. `addInOrder` takes
 * them as they come (the thread need not hold a write's every text at once), which keeps
 * normalisedById's outcome only when every input names its id: then any id seen twice is a 400, as
 * there (an input without an id may repeat an earlier one, the later kept, so those go through
 * runDocumentsJob, which sees them all first).
 */
export class DocumentsPreparation {
  private readonly positions: number[] = [];
  private readonly ids: string[] = [];
  private readonly seen = new Set<string>();
  private readonly rewritten: DocumentsJobResult["rewritten"] = [];
  private readonly chunkCounts: number[] = [];
  private readonly bounds: number[] = [];
  private readonly pageList: number[] = [];
  private paged = false;
  private readonly engineTexts: string[] | null;
  private readonly builder: SegmentBuilder;

  constructor(private readonly job: Omit<DocumentsJob, "inputs">) {
    this.engineTexts = job.wantTexts ? [] : null;
    this.builder = new SegmentBuilder(job.analysis.analyzer, job.analysis.scorer);
  }

  /** The inputs at positions `base`, `base + 1`, …, each with its own id. */
  addInOrder(inputs: readonly DocumentInput[], base: number): void {
    inputs.forEach((input, i) => {
      const record = normaliseDocument(input, base + i);
      if (this.seen.has(record.id)) throw duplicateId(record.id, base + i);
      this.seen.add(record.id);
      this.add(record, input, base + i);
    });
  }

  /** One document kept: `record` normalised from `input`, at `position` of the write's inputs. */
  add(record: DocumentRecord, input: DocumentInput, position: number): void {
    const at = this.ids.length;
    this.positions.push(position);
    this.ids.push(record.id);
    if (record.text !== input.text || record.title !== (input.title ?? null))
      this.rewritten.push({ at, text: record.text, title: record.title });
    const pageStarts = pageStartsOfRecord(record);
    const chunks = chunkDocument(record, input.chunking ?? this.job.chunking);
    this.chunkCounts.push(chunks.length);
    for (const chunk of chunks) {
      this.bounds.push(chunk.start, chunk.end);
      if (pageStarts) {
        this.paged = true;
        const { page, first, last } = chunkPages(pageStarts, chunk.start, chunk.end);
        this.pageList.push(page, first, last);
      } else this.pageList.push(0, 0, 0);
      const text = engineText(record.title, chunk.text);
      this.builder.add(text);
      this.engineTexts?.push(text);
    }
  }

  finish(): DocumentsJobResult {
    return {
      positions: Uint32Array.from(this.positions),
      ids: this.ids,
      rewritten: this.rewritten,
      chunkCounts: Uint32Array.from(this.chunkCounts),
      bounds: Uint32Array.from(this.bounds),
      pages: this.paged ? Uint32Array.from(this.pageList) : null,
      engineTexts: this.engineTexts,
      built: this.builder.finish(),
    };
  }
}

/** The buffers of a result, transferred to the event loop rather than copied. */
export function resultTransferables(result: DocumentsJobResult): ArrayBuffer[] {
  const arrays = [
    result.positions,
    result.chunkCounts,
    result.bounds,
    ...(result.pages ? [result.pages] : []),
  ];
  return [
    ...arrays.map((array) => array.buffer as ArrayBuffer),
    ...(result.built ? transferablesOf(result.built) : []),
  ];
}

/**
 * The records as normaliseDocuments and chunkDocuments make them, from the inputs and what the thread
 * found: the same ids, texts, chunk texts (slices of the document's text) and metadata.
 */
export function recordsOf(inputs: DocumentInput[], result: DocumentsJobResult): PreparedDocuments {
  const rewritten = new Map(result.rewritten.map((entry) => [entry.at, entry]));
  const { bounds, pages, chunkCounts } = result;
  const documents: DocumentRecord[] = [];
  const chunked: PreparedDocuments["chunked"] = [];
  let c = 0;
  result.ids.forEach((id, at) => {
    const input = inputs[result.positions[at]!]!;
    const changed = rewritten.get(at);
    const document: DocumentRecord = {
      id,
      title: changed ? changed.title : (input.title ?? null),
      text: changed ? changed.text : input.text,
      metadata: input.metadata ?? {},
      source: input.source ?? null,
      contentHash: input.contentHash ?? null,
    };
    const chunks: ChunkRecord[] = [];
    for (let seq = 0; seq < chunkCounts[at]!; seq++, c++) {
      const start = bounds[2 * c]!;
      const end = bounds[2 * c + 1]!;
      const page = pages?.[3 * c] ?? 0;
      const pagesOfChunk = page > 0 ? { page, first: pages![3 * c + 1]!, last: pages![3 * c + 2]! } : null;
      chunks.push({
        chunkId: `${id}#${seq}`,
        documentId: id,
        seq,
        text: document.text.slice(start, end),
        start,
        end,
        // The sections travel with the input, not through the thread: they are read here.
        metadata: chunkMetadata(document.metadata, start, end, pagesOfChunk, input.sections),
      });
    }
    documents.push(document);
    chunked.push({ document, chunks });
  });
  return { documents, chunked, chunkCount: c, engineTexts: result.engineTexts, built: result.built };
}

/** Documents, and characters of text, one message to the thread carries. */
const RUN_DOCUMENTS = 2_000;
const RUN_CHARS = 1024 * 1024;

/** What the thread reports instead of a result: the domain error it threw (a 400), or a failure. */
type Failure =
  { error: { kind: DomainError["kind"]; message: string; details: unknown[] } } | { failure: string };

/**
 * Runs the job on a thread of its own (started for it, gone after it). The documents go to it in runs
 * and the result comes back in pieces (search/indexer/pieces.ts), the loop free in between: a write's
 * text copied in one message would hold it as long as parsing it would. Streamed (every input with
 * its id), each run is sent once the thread has prepared the one before.
 */
async function runOffThread(job: DocumentsJob): Promise<DocumentsJobResult> {
  const { inputs, ...settings } = job;
  // Every input naming its id: the thread prepares each run as it comes (DocumentsPreparation).
  const streamed = inputs.every((input) => input.id !== undefined);
  const worker = startWorker(
    "write-prep-worker",
    { workerData: { ...settings, streamed }, resourceLimits: DATA_THREAD_LIMITS },
    import.meta.url,
  );
  try {
    return await new Promise<DocumentsJobResult>((resolve, reject) => {
      worker.once("error", reject);
      worker.once("exit", (code) =>
        reject(new Error(`write preparation worker exited with code ${code} before answering`)),
      );
      const failed = (message: unknown) => {
        const reply = message as Failure;
        if ("error" in reply)
          reject(new DomainError(reply.error.kind, reply.error.message, { details: reply.error.details }));
        else reject(new Error(`preparing a write failed: ${reply.failure}`));
      };
      const send = async () => {
        for (let at = 0; at < inputs.length;) {
          let end = at;
          let chars = 0;
          while (end < inputs.length && end - at < RUN_DOCUMENTS && chars < RUN_CHARS)
            chars += inputs[end++]!.text.length;
          worker.postMessage({ inputs: inputs.slice(at, end), base: at });
          at = end;
          if (!streamed) await new Promise((next) => setImmediate(next));
          else {
            const reply = await new Promise((answer) => worker.once("message", answer));
            if (!(reply as { more?: boolean }).more) return failed(reply);
          }
        }
        worker.postMessage({ go: true });
        return receivePieces(worker, failed) as Promise<DocumentsJobResult>;
      };
      send().then((result) => result && resolve(result), reject);
    });
  } finally {
    // Its heap is gone before the write goes on to the store (both count in this process's peak).
    await worker.terminate();
  }
}
