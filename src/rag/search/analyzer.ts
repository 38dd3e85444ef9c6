/**
 * Text analysis: text → terms. The chain follows Lucene's EnglishAnalyzer, in this order:
 *
 * 1. Unicode NFKC (so "ﬁ" → "fi", full-width "ＡＢＣ１" → "ABC1") and lower-casing;
 * 2. word segmentation by Unicode UAX #29 rules (what `Intl.Segmenter` does with `granularity: "word"`):
 *    "don't", "e.g", "3.5", "1,000", "p53", "foo_bar" stay whole; hyphens, slashes and spaces split;
 * 3. English possessives dropped ("john's" → "john");
 * 4. a short stop-word list (Lucene's 33 words) removed;
 * 5. Porter stemming ("running" → "run") of Latin-script words.
 *
 * Numbers are ordinary terms. The options can switch stemming and stop words off.
 */

import { stemmer } from "stemmer";

import { scanWords } from "./scanner.js";

import type { AnalyzerOptions } from "./types.js";

/** Turns a text into its terms, in order, with repeats. */
export type Analyzer = (text: string) => string[];

/** {@link AnalyzerOptions} with every field filled in. */
export interface ResolvedAnalyzerOptions {
  stemming: boolean;
  stopWords: boolean | readonly string[];
}

/**
 * Lucene's `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`. Deliberately short: long lists (stopwords-iso,
 * sklearn's 318 words) also drop words that carry meaning in queries ("system", "found", "well", "show").
 */
export const ENGLISH_STOP_WORDS: readonly string[] = Object.freeze([
  "a",
  "an",
  "and",
  "are",
  "as",
  "at",
  "be",
  "but",
  "by",
  "for",
  "if",
  "in",
  "into",
  "is",
  "it",
  "no",
  "not",
  "of",
  "on",
  "or",
  "such",
  "that",
  "the",
  "their",
  "then",
  "there",
  "these",
  "they",
  "this",
  "to",
  "was",
  "will",
  "with",
]);

export const DEFAULT_ANALYZER_OPTIONS: Readonly<ResolvedAnalyzerOptions> = Object.freeze({
  stemming: true,
  stopWords: true,
});

/** Fills in defaults and validates; the result is plain JSON (it is stored in serialised indexes). */
export function resolveAnalyzerOptions(options: AnalyzerOptions = {}): ResolvedAnalyzerOptions {
  const stemming = options.stemming ?? DEFAULT_ANALYZER_OPTIONS.stemming;
  const stopWords = options.stopWords ?? DEFAULT_ANALYZER_OPTIONS.stopWords;
  if (typeof stemming !== "boolean") throw new TypeError("analyzer option `stemming` must be a boolean");
  if (typeof stopWords === "boolean") return { stemming, stopWords };
  if (!Array.isArray(stopWords) || !stopWords.every((word) => typeof word === "string")) {
    throw new TypeError("analyzer option `stopWords` must be a boolean or an array of strings");
  }
  return { stemming, stopWords: [...stopWords] };
}

/** True when two option sets produce the same analysis. */
export function sameAnalyzerOptions(a: AnalyzerOptions, b: AnalyzerOptions): boolean {
  const x = resolveAnalyzerOptions(a);
  const y = resolveAnalyzerOptions(b);
  if (x.stemming !== y.stemming) return false;
  if (typeof x.stopWords === "boolean" || typeof y.stopWords === "boolean")
    return x.stopWords === y.stopWords;
  const setX = stopWordSet(x.stopWords);
  const setY = stopWordSet(y.stopWords);
  return setX.size === setY.size && [...setX].every((word) => setY.has(word));
}

// --- Tokenisation -------------------------------------------------------------------------------------

/*
 * Words are found by a hand-written scanner (scanner.ts) that implements exactly this regex: a run of
 * letters/marks/digits/connectors, possibly joined by one "mid" character — `' ’ . : ·` between letters
 * ("don't", "e.g"), `. , ; ' ’` between digits ("3.5", "1,000"). For scripts that separate words with
 * spaces these are UAX #29's rules, at a fraction of `Intl.Segmenter`'s cost (which also allocates an
 * object per segment). The regex is the specification; the tests check the scanner against it.
 * Scripts written without spaces (Chinese, Japanese, Thai, Lao, Khmer, Myanmar) need ICU's dictionary
 * segmentation, so text containing any of them goes through `Intl.Segmenter` instead.
 */
const WORD_CHAR = String.raw`[\p{L}\p{M}\p{N}\p{Pc}]`;
export const TOKEN_PATTERN = new RegExp(
  String.raw`${WORD_CHAR}+(?:(?:(?<=[\p{L}\p{M}])[:'’.·](?=\p{L})|(?<=\p{N})[.,;'’](?=\p{N}))${WORD_CHAR}+)*`,
  "gu",
);
const NEEDS_DICTIONARY_SEGMENTATION =
  /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u;
// eslint-disable-next-line no-control-regex
const ASCII_ONLY = /^[\u0000-\u007f]*$/;

let wordSegmenter: Intl.Segmenter | undefined;

/** Fixed locale: the result must not depend on the host's default locale. */
function getWordSegmenter(): Intl.Segmenter {
  wordSegmenter ??= new Intl.Segmenter("en", { granularity: "word" });
  return wordSegmenter;
}

/**
 * Step 1 of the analysis: NFKC and lower-casing. `dictionary` is true when the text needs ICU's
 * dictionary-based segmentation ({@link segmentWords}); otherwise the words are what the scanner finds.
 */
export function normalizeText(text: string): { text: string; dictionary: boolean } {
  const ascii = ASCII_ONLY.test(text); // ASCII is already NFKC and has no such scripts
  const normalised = (ascii ? text : text.normalize("NFKC")).toLowerCase();
  return { text: normalised, dictionary: !ascii && NEEDS_DICTIONARY_SEGMENTATION.test(normalised) };
}

/** Words of a normalised text by `Intl.Segmenter` (UAX #29 with dictionaries). */
export function segmentWords(normalised: string): string[] {
  const words: string[] = [];
  for (const segment of getWordSegmenter().segment(normalised)) {
    if (segment.isWordLike) words.push(segment.segment);
  }
  return words;
}

/**
 * Whether a line of a normalised text needs `Intl.Segmenter`. A text that does is segmented line by
 * line: a line break always ends a word (UAX #29 WB3a/b), so its other lines can take the fast path.
 */
export function needsDictionarySegmentation(line: string): boolean {
  return NEEDS_DICTIONARY_SEGMENTATION.test(line);
}

/** Lower-cased NFKC words of `text`, before stop words, possessives and stemming. */
export function tokenize(text: string): string[] {
  const { text: normalised, dictionary } = normalizeText(text);
  if (!dictionary) return scanWords(normalised);
  const words: string[] = [];
  for (const line of normalised.split("\n")) {
    for (const word of needsDictionarySegmentation(line) ? segmentWords(line) : scanWords(line))
      words.push(word);
  }
  return words;
}

// --- Token filters ------------------------------------------------------------------------------------

const POSSESSIVE = /['’]s$/;
/** Porter's rules are for English; only Latin-script words (with digits or inner punctuation) are stemmed. */
const STEMMABLE = /^[\p{Script=Latin}\p{N}\p{M}\p{Pc}'’.:·,;]+$/u;

function stopWordSet(words: readonly string[]): Set<string> {
  const set = new Set<string>();
  for (const word of words) {
    set.add(word.normalize("NFKC").toLowerCase().replace(POSSESSIVE, ""));
  }
  return set;
}

/** Bounded memo: word → term (or null for a stop word). Cleared when full; vocabularies are Zipfian. */
const CACHE_LIMIT = 200_000;

/**
 * The per-word part of the analysis (possessive, stop words, stemming) for one lower-cased NFKC word from
 * {@link tokenize}: returns the term, or null for a stop word. Uncached; {@link createAnalyzer} caches it.
 */
export function createWordFilter(options: AnalyzerOptions = {}): (word: string) => string | null {
  const resolved = resolveAnalyzerOptions(options);
  const stopWords =
    resolved.stopWords === true
      ? stopWordSet(ENGLISH_STOP_WORDS)
      : resolved.stopWords === false
        ? new Set<string>()
        : stopWordSet(resolved.stopWords);
  const stemming = resolved.stemming;
  return (word: string): string | null => {
    const base = word.replace(POSSESSIVE, "");
    if (stopWords.has(base)) return null;
    return stemming && STEMMABLE.test(base) ? stemmer(base) : base;
  };
}

/**
 * Creates an analyzer. Each analyzer keeps a bounded cache of word → term, so reuse one analyzer for
 * many texts rather than creating one per call.
 *
 * @example
 * const analyze = createAnalyzer();
 * analyze("The runner's shoes were running"); // → ["runner", "shoe", "were", "run"]
 * createAnalyzer({ stemming: false, stopWords: false })("The shoes"); // → ["the", "shoes"]
 */
export function createAnalyzer(options: AnalyzerOptions = {}): Analyzer {
  const toTerm = createWordFilter(options);
  const cache = new Map<string, string | null>();
  return (text: string): string[] => {
    const terms: string[] = [];
    for (const word of tokenize(text)) {
      let term = cache.get(word);
      if (term === undefined) {
        term = toTerm(word);
        if (cache.size >= CACHE_LIMIT) cache.clear();
        cache.set(word, term);
      }
      if (term !== null) terms.push(term);
    }
    return terms;
  };
}
