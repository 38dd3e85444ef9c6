/**
 * Running merges. A merge works on a snapshot (segment data + tombstones at that moment),
 * inline ({@link mergeNow}) or on a worker thread ({@link mergeInBackground}); the index stays fully
 * usable meanwhile. core/merge-commit.ts's `prepareMerge` turns the result into a commit against the index
 * as it is then: deletes that happened meanwhile become tombstones of the merged segment.
 */

import type { Worker } from "node:worker_threads";
import type { Segment } from "../core/segment.js";
import type { MergeableIndex, MergeResult } from "../core/merge-commit.js";
import { runMergeJob, type MergeJob, type MergeOutput } from "./merger.js";
import { startWorker } from "./start-worker.js";
import type { VectorCodes } from "../vectors/quantize.js";

type Snapshot = { job: MergeJob; deleted: Uint32Array[] };
type Source = Segment;

/** The segments to merge, checked (given once each, all in the index). */
function sourcesOf(index: MergeableIndex, segmentIds: readonly number[]): Source[] {
  if (segmentIds.length === 0) throw new RangeError("merge: no segments given");
  if (new Set(segmentIds).size !== segmentIds.length) throw new RangeError("merge: a segment is given twice");
  return segmentIds.map((id) => {
    const segment = index.segmentById(id);
    if (segment === undefined) throw new RangeError(`merge: segment ${id} is not in the index`);
    return segment;
  });
}

/** One source as of now: copies of its arrays (memcpy: it stays in use meanwhile) and its tombstones. */
function copySource(segment: Source): {
  entry: MergeJob["segments"][number];
  deleted: Uint32Array;
  vectors: { codes: VectorCodes; scales: Float32Array | null } | null;
} {
  const deleted = segment.live.deletedOrdinals();
  const { vectors } = segment;
  return {
    vectors:
      vectors === null ? null : { codes: vectors.copyCodes(), scales: vectors.scales?.slice() ?? null },
    entry: {
      data: {
        keys: segment.keys.slice(),
        docLengths: segment.docLengths.slice(),
        termOffsets: segment.termOffsets.slice(),
        docIds: segment.docIds.slice(),
        termFreqs: segment.termFreqs.slice(),
        referenceAverageLength: segment.referenceAverageLength,
      },
      termIds: segment.termIds.slice(),
      deleted: deleted.slice(),
    },
    deleted,
  };
}

/** The union of the sources' global term ids, ascending (the worker matches terms by global id). */
function unionOfTermIds(segments: readonly Source[]): Uint32Array {
  let maxId = 0;
  for (const segment of segments) for (const id of segment.termIds) if (id > maxId) maxId = id;
  const held = new Uint8Array(maxId + 1);
  let count = 0;
  for (const segment of segments) {
    for (const id of segment.termIds) {
      if (held[id] === 0) count++;
      held[id] = 1;
    }
  }
  const ids = new Uint32Array(count);
  for (let id = 0, i = 0; id <= maxId; id++) if (held[id] === 1) ids[i++] = id;
  return ids;
}

/** Appends the strings of `ids[from, to)` to `strings` and their running ends to `ends`. */
function appendTermStrings(
  index: MergeableIndex,
  ids: Uint32Array,
  from: number,
  to: number,
  strings: string[],
  ends: Uint32Array,
): void {
  let end = from === 0 ? 0 : (ends[from - 1] ?? 0);
  for (let i = from; i < to; i++) {
    const term = index.dictionary.termOf(ids[i] ?? 0);
    strings.push(term);
    ends[i] = end += term.length;
  }
}

function averageLengthOf(index: MergeableIndex): number {
  const averageLength = index.liveDocumentCount > 0 ? index.totalLength / index.liveDocumentCount : 0;
  return averageLength > 0 ? averageLength : 1;
}

/** The merge job for these segments as they are now (their bytes, tombstones and term ids), in one go. */
function snapshot(index: MergeableIndex, segmentIds: readonly number[]): Snapshot {
  const segments = sourcesOf(index, segmentIds);
  const referenceAverageLength = averageLengthOf(index);
  const copies = segments.map(copySource);
  const ids = unionOfTermIds(segments);
  const strings: string[] = [];
  const ends = new Uint32Array(ids.length);
  appendTermStrings(index, ids, 0, ids.length, strings, ends);
  return snapshotOf(index, copies, { ids, text: strings.join(""), ends }, referenceAverageLength);
}

/** The merge job of copied sources and their term strings, with each source's tombstones at copy time. */
function snapshotOf(
  index: MergeableIndex,
  copies: ReadonlyArray<ReturnType<typeof copySource>>,
  terms: MergeJob["terms"],
  referenceAverageLength: number,
): Snapshot {
  const vectorOptions = index.options.vectors;
  return {
    job: {
      segments: copies.map(({ entry }) => entry),
      terms,
      referenceAverageLength,
      scorer: index.scorerParameters,
      ...(vectorOptions === null
        ? {}
        : {
            vectors: {
              options: { ...vectorOptions },
              inputs: copies.map(({ vectors }, i) => {
                if (vectors === null) throw new Error(`merge: source ${i} has no vectors`);
                return vectors;
              }),
            },
          }),
    },
    deleted: copies.map(({ deleted }) => deleted),
  };
}

/** Term strings looked up per event-loop turn while snapshotting in steps. */
const TERMS_PER_STEP = 65_536;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * The same snapshot taken in steps, one source segment (or TERMS_PER_STEP term strings) per event-loop
 * turn, so that queries and writes run in between (#14: a merge must not block longer than a commit).
 * Consistent because a segment's arrays never change once built and each source's tombstones are taken
 * with its copy (`prepareMerge` turns later deletes into tombstones, per source). A source that leaves the
 * index meanwhile fails the merge: its term ids may have been released and reused.
 */
async function snapshotInSteps(index: MergeableIndex, segmentIds: readonly number[]): Promise<Snapshot> {
  const segments = sourcesOf(index, segmentIds);
  const referenceAverageLength = averageLengthOf(index);
  const stillThere = (): void => {
    for (const segment of segments) {
      if (index.segmentById(segment.id) !== segment)
        throw new Error(`merge: segment ${segment.id} left the index while it was being snapshotted`);
    }
  };
  const copies: ReturnType<typeof copySource>[] = [];
  for (const segment of segments) {
    if (copies.length > 0) {
      await nextTurn();
      stillThere();
    }
    copies.push(copySource(segment));
  }
  await nextTurn();
  stillThere();
  const ids = unionOfTermIds(segments);
  const strings: string[] = [];
  const ends = new Uint32Array(ids.length);
  for (let from = 0; from < ids.length; from += TERMS_PER_STEP) {
    if (from > 0) {
      await nextTurn();
      stillThere();
    }
    appendTermStrings(index, ids, from, Math.min(from + TERMS_PER_STEP, ids.length), strings, ends);
  }
  return snapshotOf(index, copies, { ids, text: strings.join(""), ends }, referenceAverageLength);
}

function resultOf(segmentIds: readonly number[], deleted: Uint32Array[], output: MergeOutput): MergeResult {
  return {
    sourceIds: [...segmentIds],
    snapshotDeleted: deleted,
    bytes: output.bytes,
    derived: output.derived,
    vectors: output.vectors,
  };
}

/** Merges synchronously (tests, small indexes). */
export function mergeNow(index: MergeableIndex, segmentIds: readonly number[]): MergeResult {
  const { job, deleted } = snapshot(index, segmentIds);
  return resultOf(segmentIds, deleted, runMergeJob(job));
}

/**
 * Snapshots the segments in steps on the event loop (see `snapshotInSteps`), merges them on the merge
 * worker thread, resolves with the result.
 */
export async function mergeInBackground(
  index: MergeableIndex,
  segmentIds: readonly number[],
): Promise<MergeResult> {
  const { job, deleted } = await snapshotInSteps(index, segmentIds);
  const output = await mergeWorker.run(job);
  return resultOf(segmentIds, deleted, output);
}

/** How long the merge worker waits for its next job before it exits (it costs memory while it waits). */
const WORKER_IDLE_MS = 10_000;

type WorkerReply = { id: number; output?: MergeOutput; error?: string };

/**
 * One merge worker thread per process, started on the first merge and kept while merges keep coming:
 * starting a thread (and, under tsx, compiling the merger in it) costs more than a small merge does, and
 * batched ingestion runs hundreds of them. Jobs run one at a time in the order given. The thread never
 * keeps the process alive (`unref`) and exits after WORKER_IDLE_MS without a job.
 */
class MergeWorker {
  private worker: Worker | null = null;
  private nextId = 0;
  private readonly pending = new Map<
    number,
    { resolve: (o: MergeOutput) => void; reject: (e: Error) => void }
  >();
  private idleTimer: NodeJS.Timeout | null = null;

  run(job: MergeJob): Promise<MergeOutput> {
    const worker = this.worker ?? this.start();
    if (this.idleTimer !== null) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    const id = this.nextId++;
    const result = new Promise<MergeOutput>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    worker.ref(); // a merge in flight is work the process is doing
    worker.postMessage({ id, job }, transferablesOf(job));
    return result;
  }

  private start(): Worker {
    const worker = startWorker("merge-worker");
    this.worker = worker;
    worker.on("message", ({ id, output, error }: WorkerReply) => {
      const waiting = this.pending.get(id);
      this.pending.delete(id);
      if (waiting !== undefined) {
        if (output !== undefined) waiting.resolve(output);
        else waiting.reject(new Error(`merge worker failed: ${error ?? "unknown error"}`));
      }
      if (this.pending.size === 0) this.becomeIdle(worker);
    });
    const fail = (error: Error): void => {
      // A worker retired when idle has no jobs: every job since went to its successor, whose jobs its
      // late `exit` must not reject (the idle timer's terminate and the next run can meet in one turn).
      if (this.worker !== worker) return;
      this.worker = null;
      for (const { reject } of this.pending.values()) reject(error);
      this.pending.clear();
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`merge worker exited with code ${code} before answering`)));
    return worker;
  }

  private becomeIdle(worker: Worker): void {
    worker.unref();
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      if (this.worker !== worker || this.pending.size > 0) return;
      this.worker = null;
      void worker.terminate();
    }, WORKER_IDLE_MS);
    this.idleTimer.unref();
  }
}

const mergeWorker = new MergeWorker();

/** The job's arrays, handed over to the worker rather than copied. */
function transferablesOf(job: MergeJob): ArrayBuffer[] {
  return [
    ...job.segments.flatMap(({ data, deleted, termIds }) =>
      [data.keys, data.docLengths, data.termOffsets, data.docIds, data.termFreqs, deleted, termIds].map(
        (array) => array.buffer as ArrayBuffer,
      ),
    ),
    job.terms.ids.buffer as ArrayBuffer,
    job.terms.ends.buffer as ArrayBuffer,
    ...(job.vectors?.inputs ?? []).flatMap(({ codes, scales }) =>
      [codes, scales].flatMap((array) => (array === null ? [] : [array.buffer as ArrayBuffer])),
    ),
  ];
}
