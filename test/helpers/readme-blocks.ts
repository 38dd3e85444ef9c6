/**
 * The README's runnable examples, read by the convention its source states at the top: every fenced
 * block whose info string is `sh` runs, in order, unless the lines just before it hold
 * `<!-- not-run: reason -->`; other languages never run. In a block, a comment `# → …` after a
 * command shows its answer (continued on lines starting `#` and three spaces): a leading HTTP status
 * (`# → 409 …`) is the status expected instead of 2xx; every `"key":` shown must be in the answer;
 * every `"key":value` with a literal value (no `…`) must match it (numbers to the digits shown).
 */
import { spawnSync } from "node:child_process";

export interface ReadmeBlock {
  /** 1-based line of the opening fence. */
  line: number;
  /** The section heading the block stands under. */
  section: string;
  statements: Statement[];
}

export interface Statement {
  /** The command as bash reads it (continuation lines included). */
  text: string;
  line: number;
  /** The answer shown after it, when one is. */
  shown?: string;
}

export interface SkippedBlock {
  line: number;
  reason: string;
}

/** The runnable blocks of a README, and those marked not to run (with their reasons). */
export function readmeBlocks(markdown: string): { blocks: ReadmeBlock[]; skipped: SkippedBlock[] } {
  const lines = markdown.split("\n");
  const blocks: ReadmeBlock[] = [];
  const skipped: SkippedBlock[] = [];
  let section = "";
  for (let i = 0; i < lines.length; i++) {
    const heading = /^#{1,6} (.+)$/.exec(lines[i]!);
    if (heading) section = heading[1]!;
    const fence = /^(`{3,})(\S*)\s*$/.exec(lines[i]!);
    if (!fence) continue;
    const end = lines.findIndex((line, j) => j > i && line.startsWith(fence[1]!) && line.trim() === fence[1]);
    if (end < 0) throw new Error(`README line ${i + 1}: a fence that is never closed`);
    const body = lines.slice(i + 1, end);
    if (fence[2] === "sh") {
      const reason = markerBefore(lines, i);
      if (reason !== null) skipped.push({ line: i + 1, reason });
      else blocks.push({ line: i + 1, section, statements: statementsOf(body, i + 2) });
    }
    i = end;
  }
  return { blocks, skipped };
}

/** The reason of a `<!-- not-run: reason -->` on the lines just before line `index` (blank lines between). */
function markerBefore(lines: string[], index: number): string | null {
  for (let j = index - 1; j >= 0; j--) {
    const line = lines[j]!.trim();
    if (line === "") continue;
    const marker = /^<!--\s*not-run:\s*(.+?)\s*-->$/.exec(line);
    if (!marker) return null;
    return marker[1]!;
  }
  return null;
}

/** Whether bash reads `text` as complete commands (no open quote, continuation or compound). */
function complete(text: string): boolean {
  return spawnSync("bash", ["-n"], { input: text, encoding: "utf8" }).status === 0;
}

/** A block's lines as bash statements, each with the answer shown after it. */
function statementsOf(body: string[], firstLine: number): Statement[] {
  const statements: Statement[] = [];
  let pending: string[] = [];
  let pendingLine = 0;
  let shown: string[] | null = null;
  const closeShown = () => {
    if (shown && statements.length > 0) statements.at(-1)!.shown = shown.join("");
    shown = null;
  };
  body.forEach((line, index) => {
    const trimmed = line.trim();
    if (pending.length === 0 && trimmed.startsWith("#")) {
      const arrow = /^#\s*→\s?(.*)$/.exec(trimmed);
      if (arrow) {
        closeShown();
        shown = [arrow[1]!];
      } else if (shown && /^# {3}/.test(trimmed)) shown.push(trimmed.replace(/^#\s+/, ""));
      else closeShown();
      return;
    }
    if (pending.length === 0 && trimmed === "") {
      closeShown();
      return;
    }
    closeShown();
    if (pending.length === 0) pendingLine = firstLine + index;
    pending.push(line);
    const text = pending.join("\n");
    // bash -n takes a trailing backslash at the end of its input as the end: the next line continues.
    if (!line.endsWith("\\") && complete(text)) {
      statements.push({ text, line: pendingLine });
      pending = [];
    }
  });
  closeShown();
  if (pending.length > 0) throw new Error(`README line ${pendingLine}: a command that never ends`);
  return statements;
}

/** What an answer shown in the README promises: a status, keys, and literal values. */
export interface ShownAnswer {
  status?: number;
  keys: string[];
  values: Array<{ key: string; literal: string }>;
}

export function parseShown(shown: string): ShownAnswer {
  const status = /^(\d{3})\b/.exec(shown.trim());
  const keys = [...new Set([...shown.matchAll(/"([A-Za-z_][\w-]*)"\s*:/g)].map((match) => match[1]!))];
  const values = [
    ...shown.matchAll(
      /"([A-Za-z_][\w-]*)"\s*:\s*(-?\d+(?:\.\d+)?|true|false|null|"(?:[^"\\…]|\\.)*")(?=\s*[,}\]])/g,
    ),
  ].map((match) => ({ key: match[1]!, literal: match[2]! }));
  return { ...(status && { status: Number(status[1]) }), keys, values };
}

/** Every value stored under `key` anywhere in `value`. */
export function valuesOf(value: unknown, key: string): unknown[] {
  if (Array.isArray(value)) return value.flatMap((item) => valuesOf(item, key));
  if (value === null || typeof value !== "object") return [];
  return Object.entries(value).flatMap(([name, inner]) => [
    ...(name === key ? [inner] : []),
    ...valuesOf(inner, key),
  ]);
}

/** Whether `actual` matches a literal as shown: numbers to the digits shown, the rest exactly. */
export function matchesLiteral(actual: unknown, literal: string): boolean {
  const expected = JSON.parse(literal) as unknown;
  if (typeof expected === "number" && typeof actual === "number") {
    const digits = literal.includes(".") ? literal.split(".")[1]!.length : 0;
    return Number(actual.toFixed(digits)) === expected;
  }
  return actual === expected;
}

/** The JSON values written one after another (curl prints no newline between answers). */
export function jsonValues(text: string): unknown[] {
  const values: unknown[] = [];
  let start = -1;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!;
    if (inString) {
      if (char === "\\") i++;
      else if (char === '"') inString = false;
      continue;
    }
    if (char === '"') inString = true;
    if (char === "{" || char === "[") {
      if (depth === 0) start = i;
      depth++;
    } else if (char === "}" || char === "]") {
      depth--;
      if (depth === 0) values.push(JSON.parse(text.slice(start, i + 1)));
    } else if (depth === 0 && char.trim() !== "")
      throw new Error(`not JSON at ${i}: ${JSON.stringify(text.slice(i, i + 60))}`);
  }
  if (depth !== 0) throw new Error(`JSON cut short: ${JSON.stringify(text.slice(-80))}`);
  return values;
}

/**
 * Server-sent events as their JSON data, in order; `[DONE]` (OpenAI's end) as the string itself.
 * Null when `text` is not an event stream.
 */
export function sseData(text: string): Array<{ event: string; data: unknown }> | null {
  if (!/^(data|event):/m.test(text) || text.trimStart().startsWith("{")) return null;
  return text
    .split(/\n\n+/)
    .filter((block) => block.trim() !== "")
    .map((block) => {
      let event = "message";
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      const joined = data.join("\n");
      return { event, data: joined === "[DONE]" ? joined : (JSON.parse(joined) as unknown) };
    });
}
