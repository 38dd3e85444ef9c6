/**
 * Conversations: a follow-up such as "and how long does that take?" means nothing to a keyword
 * search on its own. The history is condensed into one standalone question by the generation model
 * (the prompt is CONDENSE_PROMPT, the only place it is written; BRIEF_CONDENSE_PROMPT where the context
 * per request is too small for it), and the search runs on it.
 *
 * What the rewrite can do depends on the model. A real chat model resolves "that" to "rotating API
 * keys"; a tiny one (the 260K-parameter test model writes children's stories) cannot. Two things keep
 * the search useful either way, and make it deterministic:
 * - with the in-process model, the rewrite is constrained by a grammar to words of the conversation
 *   itself (a question made of words the search can match; no invented story),
 * - the search query is the rewrite followed by the recent user turns, so the topic words of the
 *   earlier questions reach the search even when the rewrite misses them.
 * Without a model, the last user turn is searched as it stands and the response says so.
 */
import type { ChatMessage, ContextWindow, GenerationPort } from "./generation-port.js";
import { countOrOver, cutToFit } from "./prompt.js";
import type { ChatTurn } from "./schemas.js";

export type Turn = ChatTurn;

export const CONDENSE_PROMPT =
  "Rewrite the user's last question as one standalone question that can be understood without the " +
  "conversation: replace words like it, that and they with what they refer to. Reply with the question only.";

/** Earlier user turns added to the search query after the rewrite (most recent first). */
const PRIOR_USER_TURNS = 2;
/** Characters of history sent to the model, newest kept (fewer where the context is small). */
const MAX_HISTORY_CHARS = 3000;
/** Distinct words the rewrite grammar offers, and words in a rewrite: bound the grammar and output. */
const MAX_GRAMMAR_WORDS = 300;
const MAX_REWRITE_WORDS = 16;
const MAX_REWRITE_TOKENS = 96;

export interface SearchPlan {
  /** The last user turn, as sent. */
  question: string;
  /** What the search runs on. */
  searchQuery: string;
  /** The model's standalone question; null when there was nothing to rewrite or no model. */
  standaloneQuestion: string | null;
  queryRewritten: boolean;
  /** Why the last turn is searched as it stands, when a conversation was sent. */
  rewriteSkippedReason?: string;
  /** Tokens the rewrite took (prompt and output), when the model rewrote. */
  rewriteUsage?: { promptTokens: number; tokens: number };
}

/** The last user turn; a 400-worthy message when the conversation does not end with one. */
export function lastUserTurn(turns: readonly Turn[]): string | { problem: string } {
  const last = turns.at(-1);
  if (!last || last.role !== "user")
    return { problem: "messages must end with a user message (the question to answer)" };
  if (last.content.trim().length === 0) return { problem: "the last user message is empty" };
  return last.content;
}

/** History lines, newest last, within MAX_HISTORY_CHARS and (given a window) `maxTokens` tokens. */
function historyLines(turns: readonly Turn[], window?: ContextWindow, maxTokens = Infinity): string[] {
  const lines: string[] = [];
  let chars = 0;
  let tokens = 0;
  for (const turn of turns.slice(0, -1).reverse()) {
    if (turn.role === "system") continue;
    let line = `${turn.role === "user" ? "User" : "Assistant"}: ${turn.content.replace(/\s+/g, " ").trim()}`;
    if (chars + line.length > MAX_HISTORY_CHARS) break;
    const lineTokens = window ? window.countText(line) + 1 : 0;
    if (window && tokens + lineTokens > maxTokens) {
      // The newest turns matter most: the first that does not fit is cut to the room left, if any.
      const room = maxTokens - tokens - 1;
      if (room < MIN_HISTORY_TOKENS) break;
      line = cutToFit(window, line, room);
      lines.unshift(line);
      break;
    }
    lines.unshift(line);
    chars += line.length;
    tokens += lineTokens;
  }
  return lines;
}

/** The messages that ask the model for a standalone question, from these history lines. */
export function condenseMessages(
  turns: readonly Turn[],
  lines = historyLines(turns),
  system = CONDENSE_PROMPT,
): ChatMessage[] {
  return [
    { role: "system", content: system },
    {
      role: "user",
      content: `Conversation:\n${lines.join("\n")}\n\nLast question: ${turns.at(-1)!.content.trim()}\n\nStandalone question:`,
    },
  ];
}

/** Tokens of history worth a rewrite: with fewer, the rewrite cannot see what "it" refers to. */
const MIN_HISTORY_TOKENS = 16;
/** The same request in fewer tokens, for a context too small to hold CONDENSE_PROMPT and the turns. */
export const BRIEF_CONDENSE_PROMPT = "Rewrite the last question to stand alone. Reply with it only.";

/**
 * The rewrite's prompt and token limit fitted to the context per request: the output takes at most a
 * quarter of a small context, the history the newest turns that fit the rest (behind the brief
 * instructions where the full ones leave no room for a turn). Null when no turn fits either way, so the
 * search runs on the last question as it stands.
 */
async function condensePrompt(
  turns: readonly Turn[],
  window: ContextWindow,
): Promise<{ messages: ChatMessage[]; maxTokens: number } | null> {
  const maxTokens = Math.min(MAX_REWRITE_TOKENS, Math.floor(window.tokens / 4));
  for (const system of [CONDENSE_PROMPT, BRIEF_CONDENSE_PROMPT]) {
    const bare = await countOrOver(window, condenseMessages(turns, [], system));
    const room = window.tokens - maxTokens - bare;
    if (room < MIN_HISTORY_TOKENS) continue;
    const lines = historyLines(turns, window, room);
    if (lines.length > 0) return { messages: condenseMessages(turns, lines, system), maxTokens };
  }
  return null;
}

/** Words of the conversation, lower-cased, in first-seen order, the user's before the assistant's. */
function conversationWords(turns: readonly Turn[]): string[] {
  const words = new Set<string>();
  const ordered = [...turns.filter((t) => t.role === "user"), ...turns.filter((t) => t.role === "assistant")];
  for (const turn of ordered) {
    for (const word of turn.content.toLowerCase().match(/[a-z0-9]+(?:['-][a-z0-9]+)*/g) ?? []) {
      if (words.size >= MAX_GRAMMAR_WORDS) return [...words];
      words.add(word);
    }
  }
  return [...words];
}

/** A GBNF grammar: 1 … MAX_REWRITE_WORDS words of the conversation, separated by spaces, then "?". */
export function rewriteGrammar(turns: readonly Turn[]): string {
  const words = conversationWords(turns);
  // Words are [a-z0-9'-] only, so they need no escaping inside a GBNF string.
  const alternatives = words.map((word) => `"${word}"`).join(" | ");
  return `root ::= word (" " word){0,${MAX_REWRITE_WORDS - 1}} "?"\nword ::= ${alternatives}\n`;
}

function cleanRewrite(text: string): string {
  const line = text.split("\n").find((l) => l.trim().length > 0) ?? "";
  return line.replace(/\s+/g, " ").trim().slice(0, 1000);
}

/** Decides what to search for a conversation, rewriting it with the model when there is one. */
export async function planSearch(
  turns: readonly Turn[],
  question: string,
  port: GenerationPort | null,
  signal?: AbortSignal,
): Promise<SearchPlan> {
  const priorUser = turns
    .slice(0, -1)
    .filter((turn) => turn.role === "user")
    .map((turn) => turn.content.replace(/\s+/g, " ").trim())
    .filter((content) => content.length > 0);
  const asItStands = (reason?: string): SearchPlan => ({
    question,
    searchQuery: question,
    standaloneQuestion: null,
    queryRewritten: false,
    ...(reason !== undefined && { rewriteSkippedReason: reason }),
  });
  if (turns.filter((turn) => turn.role !== "system").length <= 1) return asItStands();
  if (!port) return asItStands("no generation model: the last user turn is searched as it stands");
  let standalone: string;
  let rewriteUsage: SearchPlan["rewriteUsage"];
  try {
    const prompt = await condensePrompt(turns, await port.contextWindow());
    if (!prompt)
      return asItStands(
        "the rewrite's instructions and the last question fill the model's context per request",
      );
    const result = await port.chat({
      ...prompt,
      ...(port.grammar && { grammar: rewriteGrammar(turns) }),
      signal,
    });
    standalone = cleanRewrite(result.text);
    rewriteUsage = { promptTokens: result.promptTokens, tokens: result.tokens };
  } catch (error) {
    return asItStands(`rewrite failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (standalone.length === 0) return asItStands("the model's rewrite was empty");
  const recent = priorUser.slice(-PRIOR_USER_TURNS).reverse();
  return {
    question,
    searchQuery: [standalone, question, ...recent].join(" \n"),
    standaloneQuestion: standalone,
    queryRewritten: true,
    rewriteUsage,
  };
}
