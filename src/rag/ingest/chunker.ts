/**
 * Splits a document's text into overlapping chunks of at most `chunkSize` characters (UTF-16 code
 * units, i.e. JavaScript string length).
 *
 * Where a cut is needed, it prefers, in this order, the last paragraph boundary (a blank line), the
 * last sentence boundary, the last whitespace in the window; only a single word longer than the
 * window is cut inside, and then on a grapheme boundary (never inside a surrogate pair). Paragraph
 * and sentence cuts are only taken in the second half of the window so that chunks stay reasonably
 * full. The next chunk starts about `overlap` characters before the cut, at the earliest sentence
 * start, else the earliest word start, within that overlap window.
 *
 * Sentence segmentation (Intl.Segmenter, slow) runs only for documents longer than `chunkSize` and
 * only on the window around a cut, so chunking stays linear and cheap.
 *
 * Every chunk's text is exactly `document.text.slice(start, end)`, without leading or trailing
 * whitespace; whitespace-only text gives no chunks.
 */
import { badRequest } from "../../core/errors.js";
import type { ChunkRecord, DocumentRecord } from "../store/types.js";

export interface ChunkOptions {
  /** Maximum chunk length in characters, ≥ 2. */
  chunkSize: number;
  /** Wanted overlap between consecutive chunks in characters, 0 … chunkSize / 2. */
  overlap: number;
}

const sentenceSegmenter = new Intl.Segmenter("en", { granularity: "sentence" });
const graphemeSegmenter = new Intl.Segmenter("en", { granularity: "grapheme" });

/** A blank line: a newline, optional non-newline whitespace, a newline. */
const PARAGRAPH_BREAK = /\n[^\S\n]*\n/g;
/** Characters of context given to the segmenters on each side of the window they look at. */
const CONTEXT = 32;
/** Width of the first, narrow look for a sentence end before the limit. */
const SENTENCE_PROBE = 200;

/** Same set as String.prototype.trim: WhiteSpace and LineTerminator of ECMAScript. */
function isWhitespace(code: number): boolean {
  if (code <= 0x20) return code === 0x20 || (code >= 0x09 && code <= 0x0d);
  if (code < 0xa0) return false;
  return (
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000 ||
    code === 0xfeff
  );
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/** Moves `end` back over whitespace, not below `floor`. */
function trimEnd(text: string, end: number, floor: number): number {
  while (end > floor && isWhitespace(text.charCodeAt(end - 1))) end--;
  return end;
}

/** True when `i` falls between the two halves of a surrogate pair. */
function splitsSurrogatePair(text: string, i: number): boolean {
  return i > 0 && isHighSurrogate(text.charCodeAt(i - 1)) && isLowSurrogate(text.charCodeAt(i));
}

/** The last grapheme boundary in (floor, i]; else the last code point boundary; else just past floor's code point. */
function graphemeBoundaryAtOrBefore(text: string, i: number, floor: number): number {
  const from = Math.max(floor, i - CONTEXT);
  const to = Math.min(text.length, i + CONTEXT);
  let best = -1;
  for (const { index } of graphemeSegmenter.segment(text.slice(from, to))) {
    const b = from + index;
    if (b > i) break;
    // The slice start is only a real boundary when it is `floor` itself, which is excluded anyway.
    if (index > 0 && b > floor) best = b;
  }
  if (best > floor) return best;
  let cut = i;
  if (splitsSurrogatePair(text, cut)) cut--;
  if (cut <= floor) cut = floor + (isHighSurrogate(text.charCodeAt(floor)) ? 2 : 1);
  return Math.min(cut, text.length);
}

/** The first grapheme boundary in [i, ceiling]; else the first code point boundary. */
function graphemeBoundaryAtOrAfter(text: string, i: number, ceiling: number): number {
  const from = Math.max(0, i - CONTEXT);
  const to = Math.min(text.length, i + CONTEXT);
  for (const { index } of graphemeSegmenter.segment(text.slice(from, to))) {
    const b = from + index;
    if (index > 0 && b >= i) return Math.min(b, ceiling);
  }
  return splitsSurrogatePair(text, i) ? Math.min(i + 1, ceiling) : i;
}

/**
 * Sentence boundaries of one window of the text, found with Intl.Segmenter on that slice only.
 * Boundaries at the slice ends are not trusted unless they are the ends of the text itself.
 */
class SentenceWindow {
  private readonly segments: Intl.Segments;

  constructor(
    private readonly text: string,
    readonly from: number,
    readonly to: number,
  ) {
    this.segments = sentenceSegmenter.segment(text.slice(from, to));
  }

  covers(from: number, to: number): boolean {
    return (
      (this.from === 0 || from - CONTEXT >= this.from) &&
      (this.to === this.text.length || to + CONTEXT <= this.to)
    );
  }

  private real(b: number): boolean {
    return (b > this.from || b === 0) && (b < this.to || b === this.text.length);
  }

  /** The last boundary ≤ i, or -1. */
  atOrBefore(i: number): number {
    const segment = this.segments.containing(i - this.from);
    if (segment === undefined) return -1;
    const b = this.from + segment.index;
    return this.real(b) ? b : -1;
  }

  /** The first boundary > i, or -1. */
  after(i: number): number {
    const segment = this.segments.containing(i - this.from);
    if (segment === undefined) return -1;
    const b = this.from + segment.index + segment.segment.length;
    return this.real(b) ? b : -1;
  }
}

/** Cutting one document; holds the sentence window last segmented so that cut and overlap share it. */
class Cutter {
  private window: SentenceWindow | undefined;

  constructor(
    private readonly text: string,
    private readonly chunkSize: number,
    private readonly overlap: number,
  ) {}

  private sentences(from: number, to: number): SentenceWindow {
    if (this.window?.covers(from, to)) return this.window;
    this.window = new SentenceWindow(
      this.text,
      Math.max(0, from - CONTEXT),
      Math.min(this.text.length, to + CONTEXT),
    );
    return this.window;
  }

  /**
   * End (exclusive, trailing whitespace removed) of the chunk starting at `pos`, which must be
   * followed by more than `chunkSize` characters of content. Returns a value in (pos, pos + chunkSize].
   */
  cut(pos: number): number {
    const text = this.text;
    const limit = pos + this.chunkSize;
    const minEnd = pos + Math.floor(this.chunkSize / 2);

    // 1. The last blank line whose preceding content ends in [minEnd, limit]. Matched on a slice so
    // that a paragraph-less document is not rescanned to its end for every cut.
    let best = -1;
    const slice = text.slice(pos, Math.min(text.length, limit + CONTEXT));
    PARAGRAPH_BREAK.lastIndex = 0;
    for (let m = PARAGRAPH_BREAK.exec(slice); m !== null; m = PARAGRAPH_BREAK.exec(slice)) {
      if (pos + m.index > limit) break;
      const end = trimEnd(text, pos + m.index, pos);
      if (end >= minEnd) best = end;
      // A run of blank lines matches once per pair of newlines; step back so none is skipped.
      PARAGRAPH_BREAK.lastIndex = m.index + m[0].length - 1;
    }
    if (best > pos) return best;

    // 2. The last sentence end in [minEnd, limit]. Most sentences are short: look near the limit
    // first (with room for the overlap window that follows), then at the whole second half.
    const probeFrom = Math.max(minEnd, limit - SENTENCE_PROBE);
    best = this.lastSentenceEnd(this.sentences(probeFrom - this.overlap, limit), pos, minEnd, limit);
    if (best < 0 && probeFrom > minEnd) {
      best = this.lastSentenceEnd(this.sentences(minEnd, limit), pos, minEnd, limit);
    }
    if (best > pos) return best;

    // 3. The last whitespace in (pos, limit]: the chunk ends before it.
    for (let i = limit; i > pos; i--) {
      if (isWhitespace(text.charCodeAt(i))) return trimEnd(text, i, pos);
    }

    // 4. One word longer than the window: cut it on a grapheme boundary.
    return graphemeBoundaryAtOrBefore(text, limit, pos);
  }

  private lastSentenceEnd(window: SentenceWindow, pos: number, minEnd: number, limit: number): number {
    const text = this.text;
    // The sentence holding the character at `limit` may end with whitespace only after it.
    const next = window.after(limit);
    if (next >= 0) {
      const end = trimEnd(text, next, pos);
      if (end <= limit && end >= minEnd) return end;
    }
    const b = window.atOrBefore(limit);
    if (b < 0) return -1;
    const end = trimEnd(text, b, pos);
    return end >= minEnd ? end : -1;
  }

  /** Start of the chunk after the one spanning [pos, cut), about `overlap` characters before `cut`. */
  nextStart(pos: number, cut: number): number {
    const text = this.text;
    const windowStart = Math.max(pos + 1, cut - this.overlap);
    if (windowStart >= cut) return cut;
    // Keep at least half the wanted overlap when starting on a sentence.
    const latestSentenceStart = cut - Math.floor(this.overlap / 2);
    if (windowStart <= latestSentenceStart) {
      const window = this.sentences(windowStart, cut);
      let b = window.atOrBefore(windowStart);
      if (b !== windowStart) b = window.after(windowStart);
      if (b >= windowStart && b <= latestSentenceStart) {
        while (b < cut && isWhitespace(text.charCodeAt(b))) b++;
        if (b < cut) return b;
      }
    }
    for (let i = windowStart; i < cut; i++) {
      if (!isWhitespace(text.charCodeAt(i)) && isWhitespace(text.charCodeAt(i - 1))) return i;
    }
    return graphemeBoundaryAtOrAfter(text, windowStart, cut);
  }
}

function validate({ chunkSize, overlap }: ChunkOptions): void {
  if (!Number.isInteger(chunkSize) || chunkSize < 2) {
    throw badRequest(`chunk_size must be an integer ≥ 2, got ${chunkSize}`);
  }
  if (!overlapFits(chunkSize, overlap)) {
    throw badRequest(`overlap must be an integer from 0 to chunk_size/2 (${chunkSize / 2}), got ${overlap}`);
  }
}

/** The one rule for an overlap: a whole number of characters from 0 to half a chunk. */
export function overlapFits(chunkSize: number, overlap: number): boolean {
  return Number.isInteger(overlap) && overlap >= 0 && overlap <= chunkSize / 2;
}

/** The overlap when a request names none: 128 characters, at most half a chunk. */
export function defaultOverlap(chunkSize: number): number {
  return Math.min(128, Math.floor(chunkSize / 2));
}

export function chunkDocument(document: DocumentRecord, options: ChunkOptions): ChunkRecord[] {
  validate(options);
  const { chunkSize, overlap } = options;
  const text = document.text;
  const end = trimEnd(text, text.length, 0);
  let pos = 0;
  while (pos < end && isWhitespace(text.charCodeAt(pos))) pos++;

  const chunks: ChunkRecord[] = [];
  const push = (start: number, stop: number) => {
    const seq = chunks.length;
    chunks.push({
      chunkId: `${document.id}#${seq}`,
      documentId: document.id,
      seq,
      text: text.slice(start, stop),
      start,
      end: stop,
      metadata: { ...document.metadata },
    });
  };

  const cutter = new Cutter(text, chunkSize, overlap);
  while (pos < end) {
    if (end - pos <= chunkSize) {
      push(pos, end);
      break;
    }
    const cut = cutter.cut(pos);
    push(pos, cut);
    let next = overlap > 0 ? cutter.nextStart(pos, cut) : cut;
    if (next <= pos) next = cut;
    while (next < end && isWhitespace(text.charCodeAt(next))) next++;
    pos = next;
  }
  return chunks;
}

/** Chunks many documents with the same options. */
export function chunkDocuments(documents: readonly DocumentRecord[], options: ChunkOptions): ChunkRecord[][] {
  return documents.map((document) => chunkDocument(document, options));
}
