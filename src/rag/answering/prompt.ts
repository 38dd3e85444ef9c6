/**
 * The prompt of a generative answer, fitted to the context one request may hold (ContextWindow):
 * question + history + sources + answer ≤ context. The answer's share is set aside first, then the
 * instructions (briefer ones in a context too small for the full ones) and the question (which must
 * fit, or there is nothing to ask), then the recent turns
 * of a conversation (at most a quarter of what is left, newest first, whole turns), then the
 * sources in rank order, whole while they fit; the first that does not fit is cut to the room left
 * (when enough tokens remain to say something) and the rest are left out. Results are numbered by rank, so
 * the model's [n] still names result n. The whole prompt is then counted as the model will read it,
 * and cut further in the rare case the parts' counts missed tokens at their seams.
 */
import { DomainError } from "../../core/errors.js";
import type { ChatMessage, ContextWindow } from "./generation-port.js";
import type { AnswerSource } from "./source.js";

const SYSTEM_PROMPT =
  "You answer questions using only the numbered sources you are given. After each statement, cite the " +
  "sources it rests on by number in square brackets, like [1] or [2][3]. If the sources do not contain " +
  "the answer, say that they do not. Be concise.";
/** The same instructions in fewer tokens, for a context too small to hold the full ones and a source. */
const BRIEF_SYSTEM_PROMPT = "Answer only from the numbered sources, citing them like [1].";

/** A turn of the conversation before the question, as the answer's prompt recalls it. */
export interface HistoryTurn {
  role: "user" | "assistant";
  content: string;
}

/**
 * How the context is shared: the answer takes at most a quarter of it (and at least 16 tokens), the
 * history at most a quarter of the room the instructions and question leave, and a source cut to fewer
 * than 24 tokens says too little to be worth its place.
 */
const SHARES = { answer: 0.25, minAnswerTokens: 16, history: 0.25, minSourceTokens: 24 } as const;

/** A token is rarely longer than this many characters: text past room × this is not counted. */
const MAX_CHARS_PER_TOKEN = 16;

export interface FittedPrompt {
  messages: ChatMessage[];
  /** Sources given to the model: results 1 … sourcesUsed. */
  sourcesUsed: number;
  /** Whether the last source given was cut to fit. */
  lastSourceCut: boolean;
  /** Tokens of the prompt, as counted (the model's count where it is local). */
  promptTokens: number;
  /** New tokens the answer may take: prompt + this ≤ contextTokens. */
  maxTokens: number;
  contextTokens: number;
}

/** The messages of an answer from these sources (numbered from 1) and turns. */
export function buildAnswerMessages(
  question: string,
  sources: readonly Pick<AnswerSource, "text" | "title">[],
  history: readonly HistoryTurn[] = [],
  system = SYSTEM_PROMPT,
): ChatMessage[] {
  const recalled = history.map(historyLine).join("\n");
  const numbered = sources.map((source, index) => sourceLine(index + 1, source)).join("\n");
  return [
    { role: "system", content: system },
    {
      role: "user",
      content:
        (recalled ? `Conversation so far:\n${recalled}\n\n` : "") +
        `Sources:\n${numbered}\n\nQuestion: ${question}`,
    },
  ];
}

const oneLine = (text: string) => text.replace(/\s+/g, " ").trim();

function sourceLine(number: number, source: Pick<AnswerSource, "text" | "title">): string {
  const title = source.title ? ` ${oneLine(source.title)}:` : "";
  return `[${number}]${title} ${oneLine(source.text)}`;
}

function historyLine(turn: HistoryTurn): string {
  return `${turn.role === "user" ? "User" : "Assistant"}: ${oneLine(turn.content)}`;
}

const tooLong = (message: string) => new DomainError("unprocessable", message);

/** Tokens of `messages`, or Infinity when the model refuses them as longer than its context. */
export async function countOrOver(window: ContextWindow, messages: readonly ChatMessage[]): Promise<number> {
  try {
    return await window.countMessages(messages);
  } catch (error) {
    if (error instanceof DomainError && error.kind === "invalid") return Infinity;
    throw error;
  }
}

/** `text` cut at a word boundary so that it counts at most `room` tokens, "…" marking the cut. */
export function cutToFit(window: ContextWindow, text: string, room: number): string {
  let chars = Math.min(text.length, room * MAX_CHARS_PER_TOKEN);
  for (;;) {
    const space = text.lastIndexOf(" ", chars);
    const cut = `${text.slice(0, space > chars / 2 ? space : chars)}…`;
    const tokens = window.countText(cut);
    if (tokens <= room || chars <= 1) return cut;
    chars = Math.floor(chars * Math.min(0.9, room / tokens));
  }
}

/** The newest turns whose lines fit `room` tokens, in their order. */
function recentTurns(window: ContextWindow, history: readonly HistoryTurn[], room: number) {
  const kept: HistoryTurn[] = [];
  let used = 0;
  for (const turn of [...history].reverse()) {
    const cost = window.countText(historyLine(turn)) + 1;
    if (used + cost > room) break;
    kept.unshift(turn);
    used += cost;
  }
  return { kept, used };
}

/** The sources that fit `room` tokens in rank order, the last one cut when it alone does not. */
function sourcesFitting(window: ContextWindow, sources: readonly AnswerSource[], room: number) {
  const kept: Array<Pick<AnswerSource, "text" | "title">> = [];
  let lastCut = false;
  for (const [index, source] of sources.entries()) {
    const head = sourceLine(index + 1, { ...source, text: "" });
    const headTokens = window.countText(head) + 1;
    // Only as much text is counted as could possibly fit: the work is bounded by the context.
    const counted = (room + 1) * MAX_CHARS_PER_TOKEN;
    const text = oneLine(source.text.slice(0, counted));
    const cost = headTokens + window.countText(text);
    const capped = source.text.length > counted;
    if (cost <= room && !capped) {
      kept.push(source);
      room -= cost;
      continue;
    }
    if (room - headTokens >= SHARES.minSourceTokens) {
      kept.push({ title: source.title, text: cutToFit(window, text, room - headTokens) });
      lastCut = true;
    }
    break;
  }
  return { kept, lastCut };
}

/**
 * The answer's prompt within `window`: `maxAnswerTokens` (or a quarter of a small context) for the
 * answer, then the question, history and sources as the module comment says. A DomainError
 * (unprocessable) when not even the question and one cut source fit: the caller answers without the
 * model, saying so.
 */
export async function fitAnswerPrompt(
  window: ContextWindow,
  input: { question: string; sources: readonly AnswerSource[]; history?: readonly HistoryTurn[] },
  maxAnswerTokens: number,
): Promise<FittedPrompt> {
  const maxTokens = Math.min(
    maxAnswerTokens,
    Math.max(SHARES.minAnswerTokens, Math.floor(window.tokens * SHARES.answer)),
  );
  // The full instructions where they leave room for a source, else the brief ones.
  let system = SYSTEM_PROMPT;
  let bare = await countOrOver(window, buildAnswerMessages(input.question, [], [], system));
  if (window.tokens - maxTokens - bare < SHARES.minSourceTokens) {
    system = BRIEF_SYSTEM_PROMPT;
    bare = await countOrOver(window, buildAnswerMessages(input.question, [], [], system));
  }
  let room = window.tokens - maxTokens - bare;
  if (room < SHARES.minSourceTokens)
    throw tooLong(
      `the question and instructions take ${Number.isFinite(bare) ? bare : "more than"} tokens of the ` +
        `${window.tokens} the context holds per request, leaving too little for the sources and the ` +
        `answer (${maxTokens} tokens)`,
    );
  const history = recentTurns(window, input.history ?? [], Math.floor(room * SHARES.history));
  room -= history.used;
  let { kept, lastCut } = sourcesFitting(window, input.sources, room);
  for (let attempt = 0; ; attempt++) {
    const messages = buildAnswerMessages(input.question, kept, history.kept, system);
    const promptTokens = await countOrOver(window, messages);
    const over = promptTokens + maxTokens - window.tokens;
    if (over <= 0)
      return {
        messages,
        sourcesUsed: kept.length,
        lastSourceCut: lastCut,
        promptTokens,
        maxTokens,
        contextTokens: window.tokens,
      };
    const last = kept.at(-1);
    // A seam miscount is a token or two: a few recounts settle it.
    if (!last || attempt >= 4)
      throw tooLong(`the sources could not be fitted to the ${window.tokens} tokens of context per request`);
    // Cut the last source by what was over (a whole source when that is little of it), then count again.
    const lastTokens = window.countText(last.text);
    const keep = Number.isFinite(over) ? lastTokens - over - 2 : Math.floor(lastTokens / 2);
    if (keep < SHARES.minSourceTokens) kept = kept.slice(0, -1);
    else kept = [...kept.slice(0, -1), { ...last, text: cutToFit(window, last.text, keep) }];
    lastCut = keep >= SHARES.minSourceTokens;
  }
}

export function citedNumbers(answer: string, sourceCount: number): number[] {
  const cited = new Set<number>();
  for (const match of answer.matchAll(/\[(\d+(?:\s*[,;]\s*\d+)*)\]/g)) {
    for (const part of match[1]!.split(/[,;]/)) {
      const n = Number(part.trim());
      if (Number.isInteger(n) && n >= 1 && n <= sourceCount) cited.add(n);
    }
  }
  return [...cited].sort((a, b) => a - b);
}
