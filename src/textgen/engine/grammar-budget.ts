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
 * the sampler's stacks are simulated character by character, exactly as llama.cpp advances them:
 * from every stack set reached, one representative character per character class the stacks' tops
 * tell apart, each distinct stack set (compared whole) explored once, the largest sets first (where a
 * blow-up shows), shallower first among equals. Exhaustive, not a beam: a blow-up behind a single
 * character among many decoy alternatives is reached (issue #35; the beam of 8 sets missed one).
 * A grammar whose stacks pass `maxStacks` on any explored input is refused. Recursive grammars have
 * infinitely many stack sets, so the exploration stops at a horizon (EXPLORED_SETS sets, PROBE_WORK
 * steps of simulation): a grammar explored to its horizon is accepted, and what lies beyond it is
 * bounded while sampling (GrammarStackMirror below, batcher.ts), never here alone.
 * * Written here because no package models llama.cpp's stack semantics; the parser follows
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
 * Characters simulated per explored input at most (long: a blow-up may need many characters per level
 * to show, e.g. 18-character leaves); distinct stack sets explored and simulation steps in all (the
 * horizon); and the steps one character may take (past it the grammar is refused: its sampler would
 * do that work per token too).
 */
const PROBE_LENGTH = 4096;
const EXPLORED_SETS = 5_000;
const PROBE_WORK = 10_000_000;
const STEP_WORK = 2_000_000;

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
  return checkAndCompileGrammar(grammar, budget).stacks;
}

/** checkGrammarBudget, also returning the parsed grammar that GrammarStackMirror follows. */
export function checkAndCompileGrammar(
  grammar: string,
  budget: GrammarBudget,
): { stacks: number; compiled: CompiledGrammar } {
  const bytes = Buffer.byteLength(grammar, "utf8");
  if (bytes > budget.maxBytes)
    throw new GrammarBudgetError(
      `the grammar is ${bytes} bytes; GRAMMAR_MAX_BYTES allows ${budget.maxBytes}`,
      "maxBytes",
    );
  const parsed = new GbnfParser(grammar, budget).parse();
  checkLeftRecursionWork(parsed);
  const stacks = simulateStacks(parsed, budget);
  const { elements, ruleStart } = flatten(parsed.rules);
  return {
    stacks,
    compiled: { elements, ruleStart, root: parsed.root, hasTokens: elements.some((e) => e.kind === TOKEN) },
  };
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

/**
 * A parse stack, interned: a node is its top element over the stack below it (another node, or -1
 * for the empty stack), so stacks that share their bottom share its nodes and a stack compares as a
 * number. The simulation allocates little this way, which is what made it fast enough to explore
 * every stack set rather than a beam.
 */
type StackId = number;
type StackSet = Set<StackId>;

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
  /** Steps since `startStep`, and in all. */
  work = 0;
  total = 0;
  /** Node id → its top element and the node below it. */
  private readonly tops: number[] = [];
  private readonly below: number[] = [];
  private readonly interned = new Map<number, StackId>();
  private readonly stride: number;

  constructor(
    private readonly flat: Flat,
    private readonly budget: Pick<GrammarBudget, "maxStacks">,
  ) {
    this.stride = flat.elements.length + 1;
  }

  startStep(): void {
    this.total += this.work;
    this.work = 0;
  }

  private push(below: StackId, top: number): StackId {
    const key = (below + 1) * this.stride + top;
    let id = this.interned.get(key);
    if (id === undefined) {
      id = this.tops.length;
      this.tops.push(top);
      this.below.push(below);
      this.interned.set(key, id);
    }
    return id;
  }

  private endOfSequence(pos: number): boolean {
    const kind = this.flat.elements[pos]!.kind;
    return kind === END || kind === ALT;
  }

  /** llama_grammar_advance_stack: every stack `stack` can become with a terminal (or nothing) on top. */
  advance(stack: StackId, into: StackSet): void {
    const todo: StackId[] = [stack];
    const seen = new Set<StackId>();
    while (todo.length > 0) {
      const current = todo.pop()!;
      if (++this.work > STEP_WORK)
        throw new GrammarBudgetError(
          "the grammar is too ambiguous to check within its analysis budget; simplify nested optional items and alternatives",
          "analysis",
        );
      if (seen.has(current)) continue;
      seen.add(current);
      const top = current === -1 ? undefined : this.tops[current]!;
      if (top === undefined || this.flat.elements[top]!.kind !== REF) {
        into.add(current);
        if (into.size > this.budget.maxStacks) throw this.overBudget(into.size);
        continue;
      }
      const rest = this.below[current]!;
      // What follows the reference, then each alternative of the rule it names, on top.
      const after = this.endOfSequence(top + 1) ? rest : this.push(rest, top + 1);
      let sub = this.flat.ruleStart[this.flat.elements[top]!.rule!]!;
      for (;;) {
        todo.push(this.endOfSequence(sub) ? after : this.push(after, sub));
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

  initial(root: number): StackSet {
    const stacks: StackSet = new Set();
    let pos = this.flat.ruleStart[root]!;
    for (;;) {
      this.advance(this.endOfSequence(pos) ? -1 : this.push(-1, pos), stacks);
      while (!this.endOfSequence(pos)) pos++;
      if (this.flat.elements[pos]!.kind !== ALT) break;
      pos++;
    }
    return stacks;
  }

  /** llama_grammar_accept for one character (or, for `code` -1, any special token). */
  accept(stacks: StackSet, code: number): StackSet {
    const next: StackSet = new Set();
    for (const stack of stacks) {
      if (stack === -1) continue;
      const top = this.tops[stack]!;
      const element = this.flat.elements[top]!;
      if (code === -1 ? element.kind !== TOKEN : element.kind !== CHAR || !matches(element, code)) continue;
      const rest = this.below[stack]!;
      this.advance(this.endOfSequence(top + 1) ? rest : this.push(rest, top + 1), next);
    }
    return next;
  }

  /** One character per class of characters the stacks' tops tell apart, and -1 for a token. */
  representatives(stacks: StackSet): number[] {
    const bounds = new Set<number>([0]);
    let token = false;
    for (const stack of stacks) {
      if (stack === -1) continue;
      const element = this.flat.elements[this.tops[stack]!]!;
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

/** A stack set compared whole: every stack (interned), in a canonical order. */
function setKey(stacks: StackSet): string {
  return [...stacks].sort((a, b) => a - b).join(",");
}

/**
 * Explores every stack set reachable within the horizon, largest first; throws when one passes the
 * budget. Returns the most stacks seen.
 */
function simulateStacks(parsed: ParsedGrammar, budget: GrammarBudget): number {
  const simulator = new StackSimulator(flatten(parsed.rules), budget);
  const start = simulator.initial(parsed.root);
  let most = start.size;
  const visited = new Set<string>([setKey(start)]);
  const queue = new SetQueue();
  queue.push({ stacks: start, depth: 0 });
  for (let next = queue.pop(); next; next = queue.pop()) {
    if (next.depth >= PROBE_LENGTH) continue;
    for (const code of simulator.representatives(next.stacks)) {
      simulator.startStep();
      const after = simulator.accept(next.stacks, code);
      if (after.size === 0) continue;
      const key = setKey(after);
      if (visited.has(key)) continue;
      visited.add(key);
      most = Math.max(most, after.size);
      // The horizon: what lies beyond it is bounded while sampling.
      if (visited.size > EXPLORED_SETS || simulator.total > PROBE_WORK) return most;
      queue.push({ stacks: after, depth: next.depth + 1 });
    }
  }
  return most;
}

interface Explored {
  stacks: StackSet;
  depth: number;
}

/** A binary heap of stack sets: the most stacks first, then the shallowest. */
class SetQueue {
  private readonly heap: Explored[] = [];

  push(item: Explored): void {
    const heap = this.heap;
    heap.push(item);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  pop(): Explored | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length === 0 || last === undefined) return top;
    heap[0] = last;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let best = i;
      if (left < heap.length && before(heap[left]!, heap[best]!)) best = left;
      if (right < heap.length && before(heap[right]!, heap[best]!)) best = right;
      if (best === i) return top;
      [heap[i], heap[best]] = [heap[best]!, heap[i]!];
      i = best;
    }
  }
}

function before(a: Explored, b: Explored): boolean {
  return a.stacks.size > b.stacks.size || (a.stacks.size === b.stacks.size && a.depth < b.depth);
}

// --- While sampling ------------------------------------------------------------------------------

/** A parsed grammar as llama.cpp holds it, small enough to pass between threads and keep. */
export interface CompiledGrammar {
  elements: Element[];
  ruleStart: number[];
  root: number;
  /** Whether it names tokens (`<[id]>`): the mirror below reads text only and then stays off. */
  hasTokens: boolean;
}

/**
 * llama.cpp's parse stacks for one response, followed token by token on the token's text: how many
 * there are is what its grammar sampler's next token will cost. Each advance is bounded (it stops as
 * soon as the stacks pass `maxStacks`, or after STEP_WORK steps), so a growing grammar is caught
 * after the token that grew it, before the next one is sampled.
 */
export class GrammarStackMirror {
  private stacks: StackSet;
  private readonly simulator: StackSimulator;
  /** Bytes of a character split across tokens (llama.cpp decodes UTF-8 across token pieces). */
  private partial: number[] = [];

  constructor(
    compiled: CompiledGrammar,
    readonly maxStacks: number,
  ) {
    this.simulator = new StackSimulator(compiled, { maxStacks });
    this.stacks = this.simulator.initial(compiled.root);
  }

  get size(): number {
    return this.stacks.size;
  }

  /**
   * Advances past `bytes` (a token's piece, UTF-8). Returns the stacks then held, or -1 when no stack
   * accepts the text (the mirror lost track: llama.cpp's own state is then trusted alone). Throws
   * GrammarBudgetError when the stacks pass `maxStacks` or the advance passes its work bound.
   */
  accept(bytes: Uint8Array): number {
    for (const code of this.codePoints(bytes)) {
      this.simulator.startStep();
      const next = this.simulator.accept(this.stacks, code);
      if (next.size === 0) return -1;
      this.stacks = next;
    }
    return this.stacks.size;
  }

  private *codePoints(bytes: Uint8Array): Generator<number> {
    for (const byte of bytes) {
      this.partial.push(byte);
      const first = this.partial[0]!;
      const length = first < 0x80 ? 1 : first >= 0xf0 ? 4 : first >= 0xe0 ? 3 : first >= 0xc0 ? 2 : 1;
      if (this.partial.length < length) continue;
      let code = length === 1 ? first : first & (0xff >> (length + 1));
      for (let i = 1; i < length; i++) code = (code << 6) | (this.partial[i]! & 0x3f);
      this.partial = [];
      yield code;
    }
  }
}
