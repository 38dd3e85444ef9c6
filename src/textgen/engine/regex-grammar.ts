/**
 * A JSON Schema `pattern` (an ECMA-262 regular expression) as a GBNF expression for the inside of a
 * JSON string, as llama.cpp's json-schema-to-grammar turns patterns into grammar rules. The grammar
 * writes JSON text, so what the expression matches is the string's JSON form: `"` and `\` are written
 * escaped, control characters never (classes and `.` leave them out).
 *
 * The subset: literals and escapes, `.`, classes (`[a-z]`, `[^"]`, `\d \w \s` and their negations),
 * groups (`(…)`, `(?:…)`), alternation, and the quantifiers `* + ? {n} {n,} {n,m}` (a lazy `?` after
 * one changes nothing here). `^` and `$` anchor; a side without one is free, as JSON Schema's
 * unanchored patterns are. Back-references, look-arounds and Unicode property classes cannot be
 * written as a context-free grammar of this kind: a RegexGrammarError says which, and the caller
 * decides whether that refuses the schema or leaves the pattern unenforced. Written here because no
 * package turns patterns into GBNF.
 */

export class RegexGrammarError extends Error {}

/** Longest pattern and deepest group nesting translated; larger ones are left unenforced. */
const MAX_PATTERN_LENGTH = 1000;
const MAX_NESTING = 32;
/** Largest count in a `{m,n}`: the grammar copies the item that many times. */
const MAX_REPEAT = 100;

type Range = [number, number];

/** A character set: code point ranges, possibly negated. */
interface CharSet {
  ranges: Range[];
  negated: boolean;
}

type Node =
  | { kind: "set"; set: CharSet }
  | { kind: "seq"; items: Node[] }
  | { kind: "alt"; options: Node[] }
  | { kind: "repeat"; item: Node; min: number; max: number };

const DIGIT: Range[] = [[0x30, 0x39]];
const WORD: Range[] = [
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
];
const SPACE: Range[] = [
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x2028, 0x2029],
  [0xfeff, 0xfeff],
];
/** The class escapes, by their lower-case letter. */
const CLASS_ESCAPES = new Map<string, Range[]>([
  ["d", DIGIT],
  ["w", WORD],
  ["s", SPACE],
]);
/** Escapes of one control character (\0 is NUL: back-references start at \1). */
const CONTROL_ESCAPES = new Map<string, number>([
  ["n", 0x0a],
  ["r", 0x0d],
  ["t", 0x09],
  ["f", 0x0c],
  ["v", 0x0b],
  ["0", 0],
]);

class Parser {
  private pos = 0;
  private depth = 0;

  constructor(private readonly src: string) {}

  /** The whole pattern; the anchors are only read at its two ends. */
  static parse(pattern: string): { node: Node; anchoredStart: boolean; anchoredEnd: boolean } {
    let body = pattern;
    const anchoredStart = body.startsWith("^");
    if (anchoredStart) body = body.slice(1);
    // A final `$` anchors unless it is escaped (an odd number of backslashes before it).
    const trailing = /(\\*)\$$/.exec(body);
    const anchoredEnd = trailing !== null && trailing[1]!.length % 2 === 0;
    if (anchoredEnd) body = body.slice(0, -1);
    const parser = new Parser(body);
    const node = parser.alternation();
    if (parser.pos < body.length)
      throw new RegexGrammarError(`unexpected "${body[parser.pos]}" at ${parser.pos}`);
    return { node, anchoredStart, anchoredEnd };
  }

  private alternation(): Node {
    const options = [this.sequence()];
    while (this.src[this.pos] === "|") {
      this.pos++;
      options.push(this.sequence());
    }
    return options.length === 1 ? options[0]! : { kind: "alt", options };
  }

  private sequence(): Node {
    const items: Node[] = [];
    while (this.pos < this.src.length && this.src[this.pos] !== "|" && this.src[this.pos] !== ")") {
      const atom = this.atom();
      items.push(this.quantified(atom));
    }
    return { kind: "seq", items };
  }

  private quantified(atom: Node): Node {
    const char = this.src[this.pos];
    let min: number;
    let max: number;
    if (char === "*" || char === "+" || char === "?") {
      this.pos++;
      [min, max] = char === "*" ? [0, Infinity] : char === "+" ? [1, Infinity] : [0, 1];
    } else if (char === "{" && /^\{\d+(,\d*)?\}/.test(this.src.slice(this.pos))) {
      const match = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.pos))!;
      this.pos += match[0].length;
      min = Number(match[1]);
      max = match[2] === undefined ? min : match[3] === "" ? Infinity : Number(match[3]);
      if (max < min) throw new RegexGrammarError(`{${min},${max}}: the maximum is below the minimum`);
      if (min > MAX_REPEAT || (Number.isFinite(max) && max > MAX_REPEAT))
        throw new RegexGrammarError(`a repetition count over ${MAX_REPEAT}`);
    } else return atom;
    if (this.src[this.pos] === "?") this.pos++; // lazy: the same language
    const after = this.src[this.pos];
    if (after === "*" || after === "+" || after === "?")
      throw new RegexGrammarError(`a quantifier follows a quantifier at ${this.pos}`);
    return { kind: "repeat", item: atom, min, max };
  }

  private atom(): Node {
    const char = this.src[this.pos]!;
    if (char === "(") {
      if (++this.depth > MAX_NESTING)
        throw new RegexGrammarError(`groups nest more than ${MAX_NESTING} deep`);
      this.pos++;
      if (this.src[this.pos] === "?") {
        if (this.src.startsWith("?:", this.pos)) this.pos += 2;
        else if (/^\?<[A-Za-z_]/.test(this.src.slice(this.pos)))
          this.pos = this.src.indexOf(">", this.pos) + 1;
        else throw new RegexGrammarError("look-arounds cannot be enforced by a grammar");
      }
      const inner = this.alternation();
      if (this.src[this.pos] !== ")") throw new RegexGrammarError("an unclosed group");
      this.pos++;
      this.depth--;
      return inner;
    }
    if (char === "[") return { kind: "set", set: this.charClass() };
    if (char === ".") {
      this.pos++;
      return {
        kind: "set",
        set: {
          ranges: [
            [0x0a, 0x0a],
            [0x0d, 0x0d],
            [0x2028, 0x2029],
          ],
          negated: true,
        },
      };
    }
    if (char === "\\") return this.escape(false);
    if ("*+?".includes(char)) throw new RegexGrammarError(`nothing to repeat at ${this.pos}`);
    if (char === "^" || char === "$")
      throw new RegexGrammarError(`"${char}" inside a pattern cannot be enforced`);
    const code = this.src.codePointAt(this.pos)!;
    this.pos += code > 0xffff ? 2 : 1;
    return literal(code);
  }

  /** An escape outside (or, `inClass`, inside) a class: a set of characters. */
  private escape(inClass: boolean): Node & { kind: "set" } {
    const next = this.src[this.pos + 1];
    if (next === undefined) throw new RegexGrammarError("a pattern ending in a backslash");
    this.pos += 2;
    const ranges = CLASS_ESCAPES.get(next.toLowerCase());
    // Upper case is the complement (\D, \W, \S).
    if (ranges) return { kind: "set", set: { ranges, negated: next !== next.toLowerCase() } };
    const control = CONTROL_ESCAPES.get(next);
    if (control !== undefined) return literal(control);
    switch (next) {
      case "b":
        if (inClass) return literal(0x08);
        throw new RegexGrammarError("word boundaries cannot be enforced by a grammar");
      case "x":
      case "u": {
        const match =
          next === "x"
            ? /^[0-9a-fA-F]{2}/.exec(this.src.slice(this.pos))
            : /^(?:\{([0-9a-fA-F]{1,6})\}|[0-9a-fA-F]{4})/.exec(this.src.slice(this.pos));
        if (!match) throw new RegexGrammarError(`a bad \\${next} escape`);
        this.pos += match[0].length;
        return literal(Number.parseInt(match[1] ?? match[0], 16));
      }
      case "p":
      case "P":
        throw new RegexGrammarError("Unicode property classes cannot be enforced here");
      default:
        if (/[1-9k]/.test(next))
          throw new RegexGrammarError("back-references cannot be enforced by a grammar");
        return literal(next.codePointAt(0)!);
    }
  }

  private charClass(): CharSet {
    this.pos++;
    const negated = this.src[this.pos] === "^";
    if (negated) this.pos++;
    const ranges: Range[] = [];
    const negatedParts: Range[][] = [];
    let first = true;
    while (this.src[this.pos] !== "]" || first) {
      first = false;
      if (this.pos >= this.src.length) throw new RegexGrammarError("an unclosed character class");
      const low = this.classAtom();
      if (low.negated) {
        negatedParts.push(low.ranges);
        continue;
      }
      if (this.src[this.pos] === "-" && this.src[this.pos + 1] !== "]" && low.ranges.length === 1) {
        this.pos++;
        const high = this.classAtom();
        if (high.negated || high.ranges.length !== 1)
          throw new RegexGrammarError("a class range with a class end");
        const [from, to] = [low.ranges[0]![0], high.ranges[0]![1]];
        if (to < from) throw new RegexGrammarError("a class range out of order");
        ranges.push([from, to]);
      } else ranges.push(...low.ranges);
    }
    this.pos++;
    // `[\D]` and the like: their complement joined in.
    for (const part of negatedParts) ranges.push(...complement(part));
    return { ranges: normalise(ranges), negated };
  }

  private classAtom(): CharSet {
    if (this.src[this.pos] === "\\") return this.escape(true).set;
    const code = this.src.codePointAt(this.pos)!;
    this.pos += code > 0xffff ? 2 : 1;
    return { ranges: [[code, code]], negated: false };
  }
}

function literal(code: number): Node & { kind: "set" } {
  return { kind: "set", set: { ranges: [[code, code]], negated: false } };
}

function normalise(ranges: Range[]): Range[] {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: Range[] = [];
  for (const [low, high] of sorted) {
    const last = out[out.length - 1];
    if (last && low <= last[1] + 1) last[1] = Math.max(last[1], high);
    else out.push([low, high]);
  }
  return out;
}

function complement(ranges: Range[]): Range[] {
  const out: Range[] = [];
  let next = 0;
  for (const [low, high] of normalise(ranges)) {
    if (low > next) out.push([next, low - 1]);
    next = high + 1;
  }
  if (next <= 0x10ffff) out.push([next, 0x10ffff]);
  return out;
}

// --- GBNF ---------------------------------------------------------------------------------------

/** A code point inside a GBNF class or string literal. */
function gbnfChar(code: number): string {
  if (/[A-Za-z0-9 ]/.test(String.fromCodePoint(code))) return String.fromCodePoint(code);
  if (code <= 0xff) return `\\x${code.toString(16).padStart(2, "0")}`;
  if (code <= 0xffff) return `\\u${code.toString(16).padStart(4, "0")}`;
  return `\\U${code.toString(16).padStart(8, "0")}`;
}

/** The characters a JSON string holds unescaped: no `"`, no `\`, no control characters. */
const JSON_UNSAFE: Range[] = [
  [0x00, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
];

/** JSON's escapes for the unsafe characters a set allows (control characters other than \t \n \r dropped). */
const JSON_ESCAPES: [number, string][] = [
  [0x22, '"\\\\\\""'],
  [0x5c, '"\\\\\\\\"'],
  [0x09, '"\\\\t"'],
  [0x0a, '"\\\\n"'],
  [0x0d, '"\\\\r"'],
];

function contains(set: CharSet, code: number): boolean {
  const inside = set.ranges.some(([low, high]) => code >= low && code <= high);
  return inside !== set.negated;
}

function setGrammar(set: CharSet): string {
  const escapes = JSON_ESCAPES.filter(([code]) => contains(set, code)).map(([, text]) => text);
  let classText: string | undefined;
  if (set.negated) {
    const excluded = normalise([...set.ranges, ...JSON_UNSAFE]);
    classText = `[^${excluded.map(rangeText).join("")}]`;
  } else {
    const safe = subtract(set.ranges, JSON_UNSAFE);
    if (safe.length > 0) classText = `[${safe.map(rangeText).join("")}]`;
  }
  const options = [...(classText ? [classText] : []), ...escapes];
  if (options.length === 0)
    throw new RegexGrammarError("a character class that only allows control characters");
  return options.length === 1 ? options[0]! : `(${options.join(" | ")})`;
}

function rangeText([low, high]: Range): string {
  return low === high ? gbnfChar(low) : `${gbnfChar(low)}-${gbnfChar(high)}`;
}

function subtract(ranges: Range[], remove: Range[]): Range[] {
  let out = normalise(ranges);
  for (const [rLow, rHigh] of remove) {
    const next: Range[] = [];
    for (const [low, high] of out) {
      if (rHigh < low || rLow > high) next.push([low, high]);
      else {
        if (low < rLow) next.push([low, rLow - 1]);
        if (high > rHigh) next.push([rHigh + 1, high]);
      }
    }
    out = next;
  }
  return out;
}

function nodeGrammar(node: Node): string {
  switch (node.kind) {
    case "set":
      return setGrammar(node.set);
    case "seq":
      return node.items.length === 0 ? '""' : node.items.map(nodeGrammar).join(" ");
    case "alt":
      return `(${node.options.map(nodeGrammar).join(" | ")})`;
    case "repeat": {
      const item = `(${nodeGrammar(node.item)})`;
      if (node.min === 0 && node.max === Infinity) return `${item}*`;
      if (node.min === 1 && node.max === Infinity) return `${item}+`;
      if (node.min === 0 && node.max === 1) return `${item}?`;
      if (node.max === Infinity) return `${item}{${node.min},}`;
      return node.min === node.max ? `${item}{${node.min}}` : `${item}{${node.min},${node.max}}`;
    }
  }
}

/** Any JSON string content (what an unanchored side of a pattern allows). */
const ANY_STRING_CHARS = '([^"\\\\\\x00-\\x1f] | "\\\\" ["\\\\/bfnrt] | "\\\\u" [0-9a-fA-F]{4})*';

/**
 * The GBNF expression of a JSON string (quotes included) whose value matches `pattern`. Throws
 * RegexGrammarError for what it cannot enforce.
 */
export function patternGrammar(pattern: string): string {
  if (pattern.length > MAX_PATTERN_LENGTH)
    throw new RegexGrammarError(`a pattern longer than ${MAX_PATTERN_LENGTH} characters`);
  const { node, anchoredStart, anchoredEnd } = Parser.parse(pattern);
  const body = nodeGrammar(node);
  return [
    '"\\""',
    ...(anchoredStart ? [] : [ANY_STRING_CHARS]),
    `(${body})`,
    ...(anchoredEnd ? [] : [ANY_STRING_CHARS]),
    '"\\""',
  ].join(" ");
}

/** RFC 4122's textual form, which `format: "uuid"` means. */
export const UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
