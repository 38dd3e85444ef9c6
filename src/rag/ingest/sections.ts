/**
 * The heading structure of a document's text (Markdown, HTML, DOCX): where each section starts and
 * its heading path, outermost first. Loaders find the headings; the service gives each chunk the path
 * in force where it starts (`metadata.headings`), as pages.ts gives it its pages.
 */
import { shortTitle } from "./title.js";

/** From `start` on (until the next section), the text is under `headings` (outermost first). */
export interface Section {
  start: number;
  headings: string[];
}

/** A heading found in the text: where its line starts, its level (1 outermost) and its text. */
export interface Heading {
  start: number;
  level: number;
  text: string;
}

/** Headings deeper than this are folded into the deepest level (HTML and Markdown stop at 6, Word at 9). */
const MAX_LEVEL = 9;

/**
 * The sections the headings open, in order of the text: each heading's path is those open above it
 * (lower levels) plus itself. A heading's text is cut as a title is (loaders.shortTitle): a label.
 */
export function sectionsOf(headings: readonly Heading[]): Section[] {
  const open: Array<string | undefined> = [];
  const sections: Section[] = [];
  for (const { start, level, text } of headings) {
    const label = shortTitle(text.replace(/\s+/g, " ").trim());
    if (label === "") continue;
    const depth = Math.min(Math.max(level, 1), MAX_LEVEL);
    open.length = depth - 1;
    open[depth - 1] = label;
    const path = open.filter((heading): heading is string => heading !== undefined);
    // Two headings at one offset (an empty section): the later one holds.
    if (sections.length > 0 && sections[sections.length - 1]!.start === start) sections.pop();
    sections.push({ start, headings: path });
  }
  return sections;
}

/** The heading path in force at `offset` (empty before the first heading). */
export function headingsAt(sections: readonly Section[], offset: number): string[] {
  let low = 0;
  let high = sections.length - 1;
  let found = -1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    if (sections[mid]!.start <= offset) {
      found = mid;
      low = mid + 1;
    } else high = mid - 1;
  }
  return found < 0 ? [] : sections[found]!.headings;
}

/** A fence line (``` or ~~~, up to three spaces in): its character and length, else null. */
function fenceOf(line: string): { char: string; length: number } | null {
  let at = 0;
  while (at < 3 && line[at] === " ") at++;
  const char = line[at];
  if (char !== "`" && char !== "~") return null;
  let end = at;
  while (line[end] === char) end++;
  return end - at >= 3 ? { char, length: end - at } : null;
}

/**
 * The headings of Markdown text: ATX (`## Title`, closing #s dropped) and setext (a line underlined
 * with `===` or `---`), not inside fenced code blocks. One scan of the lines, no backtracking regex.
 */
export function markdownHeadings(text: string): Heading[] {
  const headings: Heading[] = [];
  let fence: { char: string; length: number } | null = null;
  let previous: { start: number; line: string } | null = null;
  for (let start = 0; start < text.length;) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    const line = text.slice(start, end).replace(/\r$/, "");
    const opened = fenceOf(line);
    if (fence) {
      // A closing fence: the opening's character, at least as many, and nothing else on the line.
      if (opened && opened.char === fence.char && opened.length >= fence.length) {
        if (line.trim() === opened.char.repeat(line.trim().length)) fence = null;
      }
      previous = null;
    } else if (opened) {
      fence = opened;
      previous = null;
    } else {
      const trimmed = line.trimStart();
      const indent = line.length - trimmed.length;
      let level = 0;
      while (level < trimmed.length && trimmed[level] === "#") level++;
      const spaced = level === trimmed.length || trimmed[level] === " " || trimmed[level] === "\t";
      if (indent < 4 && level >= 1 && level <= 6 && spaced) {
        let body = trimmed.slice(level).trim();
        let cut = body.length;
        while (cut > 0 && body[cut - 1] === "#") cut--;
        if (cut === 0 || body[cut - 1] === " " || body[cut - 1] === "\t") body = body.slice(0, cut).trim();
        headings.push({ start, level, text: body });
        previous = null;
      } else if (previous && indent < 4 && /^(=+|-+)\s*$/.test(trimmed)) {
        headings.push({ start: previous.start, level: trimmed[0] === "=" ? 1 : 2, text: previous.line });
        previous = null;
      } else previous = trimmed === "" ? null : { start, line: trimmed };
    }
    start = end + 1;
  }
  return headings;
}
