/**
 * A complexity budget for GBNF grammars, checked before llama.cpp sees one.
 *
 * Why: llama.cpp's grammar sampler keeps one pushdown stack per way the text so far can be parsed
 * (llama_grammar_advance_stack), and filters every candidate token against every stack. A small
 * ambiguous grammar multiplies those stacks with each character: `a{i} ::= a{i+1} a{i+1}?` over 12
 * levels (260 bytes) took seconds per token, over 40 levels it never finished a token, and a 50,000
 * value alternation starts with 50,000 stacks. None of that can be interrupted once a token is being
 * sampled, so the bound has to hold before sampling starts.
 *
 * How: the grammar is parsed here the way llama.cpp parses it (same rewrite of `?`, `*`, `+` and
 * `{m,n}` into rules), with limits on its size, rules, alternatives, nesting and repetition. Then
 * the sampler's stacks are simulated character by character, exactly as llama.cpp advances them,
 * along the inputs that make them grow: a beam of the largest stack sets (and a few others, so that a
 * blow-up behind a narrow prefix is also reached), one representative character per character class
 * the grammar distinguishes. A grammar whose stacks pass `maxStacks` on any explored input is refused.
 * The simulation itself has a work budget; a grammar too costly to simulate is refused too.
 * Written here because no package models llama.cpp's stack semantics; the parser follows
 * llama.cpp's grammar-parser (src/llama-grammar.cpp) so both see the same rules.
 */

export interface GrammarBudget {
  /** Grammar text, in bytes (UTF-8). */
  maxBytes: number;
  /** Rules after rewriting groups and repetitions into rules, as llama.cpp does. */
  maxRules: number;
  /** Grammar elements after that rewrite (`x{100}` is 100 copies of x). */
  maxExpansion: number;
  /** Alternatives of one rule (or group). */
  maxAlternatives: number;
  /** Nested parentheses (llama.cpp's parser recurses into each group). */
  maxNesting: number;
  /** The largest count in `{m,n}`. */
  maxRepetition: number;
  /** Parse stacks the sampler may hold at once: its work per token grows with them. */
  maxStacks: number;
}

/** A grammar over the budget, with the field and the limit it passed. */
export class GrammarBudgetError extends Error {
  constructor(
    message: string,
    readonly limit: keyof GrammarBudget | "analysis",
  ) {
    super(message);
  }
}

/**
 * Characters simulated per explored input (long: a blow-up may need many characters per level to
 * show, e.g. 18-character leaves), stack sets kept per step, and the simulation's work cap.
 */
const PROBE_LENGTH = 4096;
const BEAM_WIDTH = 8;
const RANDOM_SHARE = 3;
const PROBE_WORK = 2_000_000;

// Element kinds of the flattened grammar (llama.cpp's llama_gretype, with character sets folded).
const END = 0;
const ALT = 1;
const REF = 2;
const CHAR = 3;
const TOKEN = 4;

interface Element {
  kind: typeof END | typeof ALT | typeof REF | typeof CHAR | typeof TOKEN;
  /** REF: the rule id. */
  rule?: number;
  /** CHAR: inclusive code point ranges, and whether the set is their complement (`[^…]`, `.`). */
  ranges?: [number, number][];
  negated?: boolean;
}

/**
 * Throws GrammarBudgetError when the grammar is over `budget`, or a plain Error naming a syntax
 * problem. Returns the largest number of parse stacks seen, for diagnostics.
 */
export function checkGrammarBudget(grammar: string, budget: GrammarBudget): number {
  const bytes = Buffer.byteLength(grammar, "utf8");
  if (bytes > budget.maxBytes)
    throw new GrammarBudgetError(
      `the grammar is ${bytes} bytes; GRAMMAR_MAX_BYTES allows ${budget.maxBytes}`,
      "maxBytes",
    );
  const parsed = new GbnfParser(grammar, budget).parse();
  checkLeftRecursionWork(parsed);
  return simulateStacks(parsed, budget);
}

interface ParsedGrammar {
  rules: Element[][];
  names: string[];
  root: number;
}

class GbnfParser {
  private pos = 0;
  private readonly rules: Element[][] = [];
  private readonly ids = new Map<string, number>();
  private readonly names: string[] = [];
  private elements = 0;
  private nesting = 0;

  constructor(
    private readonly src: string,
    private readonly budget: GrammarBudget,
  ) {}

  parse(): ParsedGrammar {
    this.skipSpace(true);
    while (this.pos < this.src.length) this.parseRule();
    this.names.forEach((name, id) => {
      if (this.rules[id] === undefined) throw new Error(`the rule "${name}" is used but not defined`);
    });
    const root = this.ids.get("root");
    if (root === undefined) throw new Error("no `root` rule");
    return { rules: this.rules, names: this.names, root };
  }

  private symbol(name: string): number {
    let id = this.ids.get(name);
    if (id === undefined) {
      id = this.names.length;
      this.names.push(name);
      this.ids.set(name, id);
      if (this.names.length > this.budget.maxRules)
        throw new GrammarBudgetError(
          `the grammar has more than ${this.budget.maxRules} rules (counting the rules llama.cpp makes of groups and repetitions); GRAMMAR_MAX_RULES allows ${this.budget.maxRules}`,
          "maxRules",
        );
    }
    return id;
  }

  private generated(base: string): number {
    return this.symbol(`${base}_${this.names.length}`);
  }

  private addRule(id: number, rule: Element[]): void {
    this.elements += rule.length;
    if (this.elements > this.budget.maxExpansion)
      throw new GrammarBudgetError(
        `the grammar expands to more than ${this.budget.maxExpansion} elements (repetitions copied out); GRAMMAR_MAX_EXPANSION allows ${this.budget.maxExpansion}`,
        "maxExpansion",
      );
    this.rules[id] = rule;
  }

  private parseRule(): void {
    const name = this.parseName();
    this.skipSpace(false);
    if (!this.src.startsWith("::=", this.pos)) throw new Error(`expecting ::= after "${name}"`);
    this.pos += 3;
    this.skipSpace(true);
    const id = this.symbol(name);
    this.parseAlternates(name, id, false);
    const char = this.src[this.pos];
    if (char === "\r") this.pos += this.src[this.pos + 1] === "\n" ? 2 : 1;
    else if (char === "\n") this.pos++;
    else if (char !== undefined) throw new Error(`expecting newline or end at offset ${this.pos}`);
    this.skipSpace(true);
  }

  private parseAlternates(name: string, id: number, nested: boolean): void {
    const rule: Element[] = [];
    let alternatives = 1;
    this.parseSequence(name, rule, nested);
    while (this.src[this.pos] === "|") {
      if (++alternatives > this.budget.maxAlternatives)
        throw new GrammarBudgetError(
          `the rule "${name}" has more than ${this.budget.maxAlternatives} alternatives; GRAMMAR_MAX_ALTERNATIVES allows ${this.budget.maxAlternatives}`,
          "maxAlternatives",
        );
      rule.push({ kind: ALT });
      this.pos++;
      this.skipSpace(true);
      this.parseSequence(name, rule, nested);
    }
    rule.push({ kind: END });
    this.addRule(id, rule);
  }

  // One loop per element, as llama.cpp's parse_sequence; only groups recurse, and their depth is capped.
  private parseSequence(name: string, rule: Element[], nested: boolean): void {
    let lastStart = rule.length;
    let rulesInLast = 1;
    for (;;) {
      const char = this.src[this.pos];
      if (char === '"') {
        this.pos++;
        lastStart = rule.length;
        rulesInLast = 1;
        while (this.src[this.pos] !== '"') {
          if (this.pos >= this.src.length) throw new Error("unterminated string");
          const code = this.parseChar();
          rule.push({ kind: CHAR, ranges: [[code, code]], negated: false });
        }
        this.pos++;
        this.skipSpace(nested);
      } else if (char === "[") {
        this.pos++;
        const negated = this.src[this.pos] === "^";
        if (negated) this.pos++;
        lastStart = rule.length;
        rulesInLast = 1;
        const ranges: [number, number][] = [];
        while (this.src[this.pos] !== "]") {
          if (this.pos >= this.src.length) throw new Error("unterminated character class");
          const low = this.parseChar();
          let high = low;
          if (this.src[this.pos] === "-" && this.src[this.pos + 1] !== "]") {
            this.pos++;
            if (this.pos >= this.src.length) throw new Error("unterminated character class");
            high = this.parseChar();
          }
          ranges.push([low, high]);
        }
        this.pos++;
        rule.push({ kind: CHAR, ranges, negated });
        this.skipSpace(nested);
      } else if (char === "<" || char === "!") {
        if (char === "!") this.pos++;
        if (this.src[this.pos] !== "<") throw new Error(`expecting '<' at offset ${this.pos}`);
        const close = this.src.indexOf(">", this.pos);
        if (close === -1) throw new Error("unterminated token");
        this.pos = close + 1;
        lastStart = rule.length;
        rulesInLast = 1;
        rule.push({ kind: TOKEN });
        this.skipSpace(nested);
      } else if (char !== undefined && isWordChar(char)) {
        const ref = this.symbol(this.parseName());
        this.skipSpace(nested);
        lastStart = rule.length;
        rulesInLast = 1;
        rule.push({ kind: REF, rule: ref });
      } else if (char === "(") {
        if (++this.nesting > this.budget.maxNesting)
          throw new GrammarBudgetError(
            `parentheses nest more than ${this.budget.maxNesting} deep; GRAMMAR_MAX_NESTING allows ${this.budget.maxNesting}`,
            "maxNesting",
          );
        this.pos++;
        this.skipSpace(true);
        const before = this.names.length;
        const sub = this.generated(name);
        this.parseAlternates(name, sub, true);
        this.nesting--;
        rulesInLast = Math.max(1, this.names.length - before);
        lastStart = rule.length;
        rule.push({ kind: REF, rule: sub });
        if (this.src[this.pos] !== ")") throw new Error(`expecting ')' at offset ${this.pos}`);
        this.pos++;
        this.skipSpace(nested);
      } else if (char === ".") {
        lastStart = rule.length;
        rulesInLast = 1;
        rule.push({ kind: CHAR, ranges: [], negated: true });
        this.pos++;
        this.skipSpace(nested);
      } else if (char === "*" || char === "+" || char === "?") {
        this.pos++;
        this.skipSpace(nested);
        const [min, max] = char === "*" ? [0, Infinity] : char === "+" ? [1, Infinity] : [0, 1];
        this.repeat(name, rule, lastStart, rulesInLast, min, max);
      } else if (char === "{") {
        this.pos++;
        this.skipSpace(nested);
        const min = this.parseCount();
        this.skipSpace(nested);
        let max = min;
        if (this.src[this.pos] === ",") {
          this.pos++;
          this.skipSpace(nested);
          max = /[0-9]/.test(this.src[this.pos] ?? "") ? this.parseCount() : Infinity;
          this.skipSpace(nested);
        }
        if (this.src[this.pos] !== "}") throw new Error(`expecting '}' at offset ${this.pos}`);
        this.pos++;
        this.skipSpace(nested);
        this.repeat(name, rule, lastStart, rulesInLast, min, max);
      } else return;
    }
  }

  /** llama.cpp's rewrite: S{m,n} is S m times, then n-m nested optional rules (S' ::= S S' |). */
  private repeat(
    name: string,
    rule: Element[],
    lastStart: number,
    rulesInLast: number,
    min: number,
    max: number,
  ): void {
    if (lastStart === rule.length)
      throw new Error(`expecting an item before a repetition at offset ${this.pos}`);
    const count = Number.isFinite(max) && max > 0 ? max : Math.max(1, min);
    if (rulesInLast * count > this.budget.maxRepetition)
      throw new GrammarBudgetError(
        `a repetition makes ${rulesInLast * count} copies of its item (count ${count}); GRAMMAR_MAX_REPETITION allows ${this.budget.maxRepetition}`,
        "maxRepetition",
      );
    const item = rule.slice(lastStart);
    // Checked before copying: the copies themselves must not be the flood.
    if (this.elements + lastStart + item.length * count > this.budget.maxExpansion)
      throw new GrammarBudgetError(
        `the grammar expands to more than ${this.budget.maxExpansion} elements (repetitions copied out); GRAMMAR_MAX_EXPANSION allows ${this.budget.maxExpansion}`,
        "maxExpansion",
      );
    rule.length = lastStart;
    for (let i = 0; i < min; i++) rule.push(...item);
    const optional = Number.isFinite(max) ? max - min : 1;
    let previous = -1;
    for (let i = 0; i < optional; i++) {
      const id = this.generated(name);
      const body = [...item];
      if (!Number.isFinite(max)) body.push({ kind: REF, rule: id });
      else if (i > 0) body.push({ kind: REF, rule: previous });
      body.push({ kind: ALT }, { kind: END });
      this.addRule(id, body);
      previous = id;
    }
    if (optional > 0) rule.push({ kind: REF, rule: previous });
  }

  private parseCount(): number {
    const match = /^[0-9]+/.exec(this.src.slice(this.pos, this.pos + 12));
    if (!match) throw new Error(`expecting a number at offset ${this.pos}`);
    this.pos += match[0].length;
    return Number(match[0]);
  }

  private parseName(): string {
    const start = this.pos;
    while (this.pos < this.src.length && isWordChar(this.src[this.pos]!)) this.pos++;
    if (this.pos === start) throw new Error(`expecting a rule name at offset ${start}`);
    return this.src.slice(start, this.pos);
  }

  private parseChar(): number {
    const char = this.src[this.pos]!;
    if (char !== "\\") {
      const code = this.src.codePointAt(this.pos)!;
      this.pos += code > 0xffff ? 2 : 1;
      return code;
    }
    const escape = this.src[this.pos + 1];
    const hexDigits = escape === "x" ? 2 : escape === "u" ? 4 : escape === "U" ? 8 : 0;
    if (hexDigits > 0) {
      const hex = /^[0-9a-fA-F]*/.exec(this.src.slice(this.pos + 2, this.pos + 2 + hexDigits))![0];
      if (hex.length === 0) throw new Error(`bad escape at offset ${this.pos}`);
      this.pos += 2 + hex.length;
      return Number.parseInt(hex, 16);
    }
    const simple: Record<string, number> = {
      t: 9,
      r: 13,
      n: 10,
      "\\": 92,
      '"': 34,
      "[": 91,
      "]": 93,
      "-": 45,
    };
    const code = escape === undefined ? undefined : simple[escape];
    if (code === undefined) throw new Error(`unknown escape at offset ${this.pos}`);
    this.pos += 2;
    return code;
  }

  private skipSpace(newlineOk: boolean): void {
    const src = this.src;
    while (this.pos < src.length) {
      const char = src[this.pos];
      if (char === "#")
        while (this.pos < src.length && src[this.pos] !== "\n" && src[this.pos] !== "\r") this.pos++;
      else if (char === " " || char === "\t" || (newlineOk && (char === "\n" || char === "\r"))) this.pos++;
      else return;
    }
  }
}

function isWordChar(char: string): boolean {
  return /[a-zA-Z0-9-]/.test(char);
}

/** Calls llama.cpp's left-recursion check may make before it gives up on a grammar. */
const LEFT_RECURSION_WORK = 100_000;

/**
 * llama.cpp's llama_grammar_detect_left_recursion (run when the grammar is created, on the calling
 * thread) recurses into a rule's leftmost references, and past one that has an empty alternative into
 * the next, without remembering rules it has finished: a chain of `a ::= b? b?` is 2^depth calls.
 * Counted here with memoisation; a left-recursive grammar, which llama.cpp refuses, is refused here.
 */
function checkLeftRecursionWork({ rules, names }: ParsedGrammar): void {
  const directlyEmpty = rules.map((rule) =>
    rule.some(
      (element, i) =>
        (element.kind === ALT || element.kind === END) && (i === 0 || rule[i - 1]!.kind === ALT),
    ),
  );
  const leftRefs = rules.map((rule) => {
    const refs: number[] = [];
    let atStart = true;
    for (const element of rule) {
      if (element.kind === ALT || element.kind === END) atStart = true;
      else if (element.kind === REF && atStart) {
        refs.push(element.rule!);
        atStart = directlyEmpty[element.rule!]!;
      } else atStart = false;
    }
    return refs;
  });
  const calls = new Array<number>(rules.length).fill(-1);
  const state = new Array<number>(rules.length).fill(0); // 0 new, 1 on the path, 2 done
  for (let start = 0; start < rules.length; start++) {
    if (state[start] === 2) continue;
    const stack: { rule: number; next: number; total: number }[] = [{ rule: start, next: 0, total: 1 }];
    state[start] = 1;
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      const refs = leftRefs[frame.rule]!;
      if (frame.next < refs.length) {
        const child = refs[frame.next++]!;
        if (state[child] === 1)
          throw new Error(`left recursion at the rule "${names[child]}" (llama.cpp does not support it)`);
        if (state[child] === 2) frame.total += calls[child]!;
        else {
          state[child] = 1;
          stack.push({ rule: child, next: 0, total: 1 });
        }
        continue;
      }
      stack.pop();
      state[frame.rule] = 2;
      calls[frame.rule] = Math.min(frame.total, Number.MAX_SAFE_INTEGER);
      const parent = stack[stack.length - 1];
      if (parent) parent.total += calls[frame.rule]!;
      if (frame.total > LEFT_RECURSION_WORK)
        throw new GrammarBudgetError(
          `the grammar's rules nest optional items at their start so deeply that llama.cpp's left-recursion check alone would take over ${LEFT_RECURSION_WORK} steps (through "${names[frame.rule]}")`,
          "maxExpansion",
        );
    }
  }
}

// --- The sampler's stacks, simulated -------------------------------------------------------------

/** The grammar flattened as llama.cpp holds it: a position is an index into `elements`. */
interface Flat {
  elements: Element[];
  ruleStart: number[];
}

type Stack = number[];

function flatten(rules: Element[][]): Flat {
  const elements: Element[] = [];
  const ruleStart: number[] = [];
  for (const rule of rules) {
    ruleStart.push(elements.length);
    elements.push(...rule);
  }
  return { elements, ruleStart };
}

class StackSimulator {
  work = 0;

  constructor(
    private readonly flat: Flat,
    private readonly budget: GrammarBudget,
  ) {}

  private endOfSequence(pos: number): boolean {
    const kind = this.flat.elements[pos]!.kind;
    return kind === END || kind === ALT;
  }

  /** llama_grammar_advance_stack: every stack `stack` can become with a terminal (or nothing) on top. */
  advance(stack: Stack, into: Map<string, Stack>): void {
    const todo: Stack[] = [stack];
    const seen = new Set<string>();
    while (todo.length > 0) {
      const current = todo.pop()!;
      const key = current.join(",");
      this.work += current.length + 1;
      if (this.work > PROBE_WORK)
        throw new GrammarBudgetError(
          "the grammar is too ambiguous to check within its analysis budget; simplify nested optional items and alternatives",
          "analysis",
        );
      if (seen.has(key)) continue;
      seen.add(key);
      const top = current[current.length - 1];
      if (top === undefined || this.flat.elements[top]!.kind !== REF) {
        into.set(key, current);
        if (into.size > this.budget.maxStacks) throw this.overBudget(into.size);
        continue;
      }
      let sub = this.flat.ruleStart[this.flat.elements[top]!.rule!]!;
      for (;;) {
        const next = current.slice(0, -1);
        if (!this.endOfSequence(top + 1)) next.push(top + 1);
        if (!this.endOfSequence(sub)) next.push(sub);
        todo.push(next);
        while (!this.endOfSequence(sub)) sub++;
        if (this.flat.elements[sub]!.kind !== ALT) break;
        sub++;
      }
    }
  }

  overBudget(count: number): GrammarBudgetError {
    return new GrammarBudgetError(
      `the grammar is too ambiguous: llama.cpp's sampler would track over ${this.budget.maxStacks} parse stacks at once (${count} seen), and its work per token grows with them; GRAMMAR_MAX_STACKS allows ${this.budget.maxStacks}. Nested optional items and overlapping alternatives multiply them.`,
      "maxStacks",
    );
  }

  initial(root: number): Map<string, Stack> {
    const stacks = new Map<string, Stack>();
    let pos = this.flat.ruleStart[root]!;
    for (;;) {
      this.advance(this.endOfSequence(pos) ? [] : [pos], stacks);
      while (!this.endOfSequence(pos)) pos++;
      if (this.flat.elements[pos]!.kind !== ALT) break;
      pos++;
    }
    return stacks;
  }

  /** llama_grammar_accept for one character (or, for `code` -1, any special token). */
  accept(stacks: Map<string, Stack>, code: number): Map<string, Stack> {
    const next = new Map<string, Stack>();
    for (const stack of stacks.values()) {
      const top = stack[stack.length - 1];
      if (top === undefined) continue;
      const element = this.flat.elements[top]!;
      if (code === -1 ? element.kind !== TOKEN : element.kind !== CHAR || !matches(element, code)) continue;
      const after = stack.slice(0, -1);
      if (!this.endOfSequence(top + 1)) after.push(top + 1);
      this.advance(after, next);
    }
    return next;
  }

  /** One character per class of characters the stacks' tops tell apart, and -1 for a token. */
  representatives(stacks: Map<string, Stack>): number[] {
    const bounds = new Set<number>([0]);
    let token = false;
    for (const stack of stacks.values()) {
      const top = stack[stack.length - 1];
      if (top === undefined) continue;
      const element = this.flat.elements[top]!;
      if (element.kind === TOKEN) token = true;
      for (const [low, high] of element.ranges ?? []) {
        bounds.add(low);
        bounds.add(high + 1);
      }
    }
    const codes = [...bounds].filter((code) => code <= 0x10ffff);
    if (token) codes.push(-1);
    return codes;
  }
}

function matches(element: Element, code: number): boolean {
  let inside = false;
  for (const [low, high] of element.ranges!)
    if (code >= low && code <= high) {
      inside = true;
      break;
    }
  return inside !== element.negated!;
}

/** Stack elements that tell stack sets apart when exploring (see setKey). */
const KEY_DEPTH = 6;

/**
 * What identifies a stack set for the exploration: its size and the tops of its stacks. Sets that
 * differ only deep down (a JSON value nested one level more) behave alike and are explored once, so
 * recursive grammars converge; a set that grew is always new, so a growing one is followed.
 */
function setKey(stacks: Map<string, Stack>): string {
  const tops = new Set<string>();
  for (const stack of stacks.values()) tops.add(stack.slice(-KEY_DEPTH).join(","));
  return `${stacks.size}|${[...tops].sort().join("|")}`;
}

/** Explores inputs that grow the stacks; throws when they pass the budget. Returns the most seen. */
function simulateStacks(parsed: ParsedGrammar, budget: GrammarBudget): number {
  const simulator = new StackSimulator(flatten(parsed.rules), budget);
  const start = simulator.initial(parsed.root);
  let most = start.size;
  let beam = [start];
  const visited = new Set<string>([setKey(start)]);
  let random = 0x2545f491;
  for (let step = 0; step < PROBE_LENGTH && beam.length > 0; step++) {
    const candidates: Map<string, Stack>[] = [];
    for (const stacks of beam)
      for (const code of simulator.representatives(stacks)) {
        const next = simulator.accept(stacks, code);
        if (next.size === 0) continue;
        const key = setKey(next);
        if (visited.has(key)) continue;
        visited.add(key);
        most = Math.max(most, next.size);
        candidates.push(next);
      }
    // The largest sets, where a blow-up shows first, and a few others so a narrow prefix is followed.
    candidates.sort((a, b) => b.size - a.size);
    beam = candidates.slice(0, BEAM_WIDTH - RANDOM_SHARE);
    const rest = candidates.slice(BEAM_WIDTH - RANDOM_SHARE);
    for (let i = 0; i < RANDOM_SHARE && rest.length > 0; i++) {
      random = (Math.imul(random, 1103515245) + 12345) >>> 0;
      beam.push(rest.splice(random % rest.length, 1)[0]!);
    }
  }
  return most;
}
