/**
 * Extractive answers: the sentences of the top results that best cover the query's terms, each
 * followed by the number of the result it came from ("[2]"). Greedy set cover weighted by the
 * index's analyzer, so stemming and stop words match how results were ranked.
 */
import type { Analyzer } from "./search/index.js";

export interface AnswerSource {
  text: string;
}

const sentenceSegmenter = new Intl.Segmenter("en", { granularity: "sentence" });

interface Candidate {
  sentence: string;
  resultNumber: number;
  position: number;
  terms: Set<string>;
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
  const candidates: Candidate[] = [];
  sources.slice(0, options.maxSources ?? 3).forEach((source, index) => {
    let position = 0;
    for (const { segment } of sentenceSegmenter.segment(source.text)) {
      const sentence = segment.replace(/\s+/g, " ").trim();
      if (sentence.length < 3) continue;
      const terms = new Set(analyze(sentence).filter((term) => queryTerms.has(term)));
      if (terms.size > 0) candidates.push({ sentence, resultNumber: index + 1, position: position++, terms });
    }
  });

  const covered = new Set<string>();
  const chosen: Candidate[] = [];
  while (chosen.length < maxSentences) {
    let best: Candidate | undefined;
    let bestGain = 0;
    for (const candidate of candidates) {
      if (chosen.includes(candidate)) continue;
      let gain = 0;
      for (const term of candidate.terms) gain += covered.has(term) ? 0.25 : 1;
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
