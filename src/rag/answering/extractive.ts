/**
 * Extractive answers: the sentences of the top results that best match the question, each followed
 * by the number of the result it came from ("[2]"). Greedy weighted set cover: a sentence gains the
 * weight of the question's terms it adds, a term found in few candidate sentences weighing more (the
 * distinctive "rotate" over the everywhere "keys"), and a crisper sentence wins a tie. Terms come
 * from the index's analyzer, so stemming and stop words match how results were ranked. Markdown
 * headings and rules are not sentences: "# Rotating API keys" names a section, it answers nothing.
 */
import type { Analyzer } from "../search/index.js";

export interface AnswerSource {
  text: string;
}

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

/** The prose of a source: heading and rule lines dropped, line markers stripped. */
function proseOf(text: string): string {
  return text
    .split("\n")
    .map((line) => (NOT_PROSE.test(line) ? "" : line.replace(LINE_MARKER, "")))
    .join("\n");
}

function candidatesOf(
  sources: AnswerSource[],
  queryTerms: Set<string>,
  analyze: Analyzer,
  maxSources: number,
): Candidate[] {
  const candidates: Candidate[] = [];
  sources.slice(0, maxSources).forEach((source, index) => {
    let position = 0;
    for (const { segment } of sentenceSegmenter.segment(proseOf(source.text))) {
      const sentence = segment.replace(/\s+/g, " ").trim();
      if (sentence.length < 3) continue;
      const terms = new Set(analyze(sentence).filter((term) => queryTerms.has(term)));
      if (terms.size > 0) candidates.push({ sentence, resultNumber: index + 1, position: position++, terms });
    }
  });
  return candidates;
}

export function extractiveAnswer(
  query: string,
  sources: AnswerSource[],
  analyze: Analyzer,
  options: { maxSentences?: number; maxSources?: number } = {},
): string | null {
  const queryTerms = new Set(analyze(query));
  if (queryTerms.size === 0 || sources.length === 0) return null;
  const maxSentences = options.maxSentences ?? 3;
  const candidates = candidatesOf(sources, queryTerms, analyze, options.maxSources ?? 3);
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
  if (chosen.length === 0) return null;
  chosen.sort((a, b) => a.resultNumber - b.resultNumber || a.position - b.position);
  return chosen.map((c) => `${c.sentence} [${c.resultNumber}]`).join(" ");
}
