/**
 * Extractive answers: the sentences of the top results that best match the question, each followed
 * by the number of the result it came from ("[2]"). Greedy weighted set cover: a sentence gains the
 * weight of the question's terms it adds, a term found in few candidate sentences weighing more (the
 * distinctive "rotate" over the everywhere "keys"), and a crisper sentence wins a tie. Terms come
 * from the index's analyzer, so stemming and stop words match how results were ranked. Markdown
 * headings and rules are not sentences: "# Rotating API keys" names a section, it answers nothing.
 *
 * Hard-wrapped text (READMEs, man pages, plain-text mail) breaks lines inside sentences; the lines of
 * a paragraph are joined before sentences are split, or a sentence would end at "… which is". And a
 * result scoring far below the best (under RELATIVE_SCORE_CUT of it) lends no sentence: beside a
 * 0.91, a 0.197 matched a word or two by chance.
 */
import type { Analyzer } from "../search/index.js";
import type { AnswerSource } from "./source.js";

/** Results scoring below this share of the best result's score are left out of extractive answers. */
export const RELATIVE_SCORE_CUT = 0.5;

const sentenceSegmenter = new Intl.Segmenter("en", { granularity: "sentence" });

/** ATX headings ("# Title"), setext underlines and thematic breaks ("===", "---", "***"). */
const NOT_PROSE = /^\s{0,3}(#{1,6}(\s|$)|[=\-*_]{3,}\s*$)/;
/** List markers and block quotes at a line's start: kept out of the sentence. */
const LINE_MARKER = /^\s{0,3}(>\s?|[-*+]\s+|\d{1,9}[.)]\s+)/;

interface Candidate {
  sentence: string;
  resultNumber: number;
  position: number;
  terms: Set<string>;
}

/**
 * The prose of a source, one block per paragraph, list item or quote, separated by blank lines: a
 * block's wrapped lines joined by spaces; heading and rule lines dropped, line markers stripped.
 */
function proseOf(text: string): string {
  const blocks: string[] = [];
  let current: string[] = [];
  const close = () => {
    if (current.length > 0) blocks.push(current.join(" "));
    current = [];
  };
  for (const line of text.split("\n")) {
    if (line.trim() === "" || NOT_PROSE.test(line)) {
      close();
      continue;
    }
    // A list item or quote starts a block of its own; its continuation lines join it.
    if (LINE_MARKER.test(line)) close();
    current.push(line.replace(LINE_MARKER, "").trim());
  }
  close();
  return blocks.join("\n\n");
}

/**
 * The sources that may lend sentences, as their result numbers: the first `maxSources`, less those
 * scoring under RELATIVE_SCORE_CUT of the best. Scores that are not all ≥ 0 (a reranker's logits) have
 * no such ratio: then only `maxSources` bounds them.
 */
function eligibleSources(sources: readonly AnswerSource[], maxSources: number): number[] {
  const top = sources.slice(0, maxSources);
  const best = Math.max(...top.map((source) => source.score));
  const ratioHolds = best > 0 && top.every((source) => source.score >= 0);
  return top.flatMap((source, index) =>
    !ratioHolds || source.score >= RELATIVE_SCORE_CUT * best ? [index + 1] : [],
  );
}

function candidatesOf(
  sources: readonly AnswerSource[],
  queryTerms: Set<string>,
  analyze: Analyzer,
  maxSources: number,
): Candidate[] {
  const candidates: Candidate[] = [];
  for (const resultNumber of eligibleSources(sources, maxSources)) {
    let position = 0;
    for (const { segment } of sentenceSegmenter.segment(proseOf(sources[resultNumber - 1]!.text))) {
      const sentence = segment.replace(/\s+/g, " ").trim();
      if (sentence.length < 3) continue;
      const terms = new Set(analyze(sentence).filter((term) => queryTerms.has(term)));
      if (terms.size > 0) candidates.push({ sentence, resultNumber, position: position++, terms });
    }
  }
  return candidates;
}

export interface ExtractiveAnswer {
  /** The sentences, each followed by its result number ("[2]"). */
  text: string;
  /** The result numbers the sentences came from, ascending. */
  sources: number[];
}

/** The extractive answer to `query` from `sources` (ranked best first), or null when no sentence matches. */
export function composeExtractive(
  query: string,
  sources: readonly AnswerSource[],
  analyze: Analyzer,
  options: { maxSentences?: number; maxSources?: number } = {},
): ExtractiveAnswer | null {
  const queryTerms = new Set(analyze(query));
  if (queryTerms.size === 0 || sources.length === 0) return null;
  const maxSentences = options.maxSentences ?? 3;
  const candidates = candidatesOf(sources, queryTerms, analyze, options.maxSources ?? 3);
  const chosen = coverTerms(candidates, maxSentences);
  if (chosen.length === 0) return null;
  chosen.sort((a, b) => a.resultNumber - b.resultNumber || a.position - b.position);
  return {
    text: chosen.map((c) => `${c.sentence} [${c.resultNumber}]`).join(" "),
    sources: [...new Set(chosen.map((c) => c.resultNumber))],
  };
}

/** composeExtractive's text alone. */
export function extractiveAnswer(
  query: string,
  sources: readonly AnswerSource[],
  analyze: Analyzer,
  options: { maxSentences?: number; maxSources?: number } = {},
): string | null {
  return composeExtractive(query, sources, analyze, options)?.text ?? null;
}

/** Up to `maxSentences` candidates, greedily, each adding the most weight of terms not yet covered. */
function coverTerms(candidates: Candidate[], maxSentences: number): Candidate[] {
  // A term's weight: higher when few candidate sentences hold it (an IDF over the candidates).
  const holding = new Map<string, number>();
  for (const candidate of candidates)
    for (const term of candidate.terms) holding.set(term, (holding.get(term) ?? 0) + 1);
  const weight = (term: string) => Math.log(1 + (candidates.length + 1) / (holding.get(term) ?? 1));

  const covered = new Set<string>();
  const chosen: Candidate[] = [];
  while (chosen.length < maxSentences) {
    let best: Candidate | undefined;
    let bestGain = 0;
    for (const candidate of candidates) {
      if (chosen.includes(candidate)) continue;
      let gain = 0;
      for (const term of candidate.terms) gain += weight(term) * (covered.has(term) ? 0.25 : 1);
      // Earlier results and shorter sentences win ties: they are the better-ranked, crisper evidence.
      gain -= candidate.resultNumber * 0.01 + candidate.sentence.length / 100_000;
      if (gain > bestGain) {
        best = candidate;
        bestGain = gain;
      }
    }
    if (!best || (chosen.length > 0 && [...best.terms].every((term) => covered.has(term)))) break;
    chosen.push(best);
    for (const term of best.terms) covered.add(term);
  }
  return chosen;
}
