/** Hostile grammars and schemas of issue #23, shared by the budget's unit tests and the attack tests. */

/** Issue #23's grammar: every level an item and an optional copy of it, so parses multiply. */
export function nestedOptionalGrammar(levels: number, leaf = '"x"'): string {
  const lines = ["root ::= a0"];
  for (let i = 0; i < levels; i++) lines.push(`a${i} ::= a${i + 1} a${i + 1}?`);
  lines.push(`a${levels} ::= ${leaf}`);
  return lines.join("\n");
}

/** A schema nested `depth` objects deep. */
export function deepSchema(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 0; i < depth; i++) schema = { type: "object", properties: { a: schema }, required: ["a"] };
  return schema;
}

/**
 * Issue #35's shape: the blow-up (nested optionals, `levels` deep) hides behind one character among 12
 * decoy alternatives whose own parses are larger at first, about 2 KB in all. The beam of the old
 * pre-check (the 5 largest stack sets and 3 random ones) followed the decoys and missed it.
 */
export function decoyHiddenGrammar(levels = 14): string {
  const decoys = Array.from({ length: 12 }, (_, i) => {
    const first = String.fromCharCode(97 + i); // a … l
    // Several parses at once (larger sets than the hidden path's single one), bounded.
    return `d${i} ::= "${first}" ( [m-p]{1,6} | [m-q] [r-u]? [m-q]? | "${first}${first}" [m-z]{0,8} )+ ".${"-".repeat(48)}"`;
  });
  const lines = [
    `root ::= ${decoys.map((_, i) => `d${i}`).join(" | ")} | "z" n0`,
    ...decoys,
    ...nestedOptionalGrammar(levels)
      .split("\n")
      .slice(1)
      .map((line) => line.replace(/\ba(\d+)\b/g, "n$1")),
  ];
  return lines.join("\n");
}

/**
 * A blow-up the exhaustive pre-check cannot see: a bracket decoy makes 3^depth distinct stack sets,
 * each larger than the hidden path's, so the exploration reaches its horizon before it follows
 * `prefix` (a run of "z") to the nested optionals. Steered there at run time with a logit bias on "z",
 * the sampler's stacks grow with every "x" it writes.
 */
export function horizonHiddenGrammar(levels = 12, prefix = 14): string {
  return [
    `root ::= br | "${"z".repeat(prefix)}" n0`,
    'br ::= "(" br ")" | "[" br "]" | "{" br "}" | "y"',
    ...nestedOptionalGrammar(levels)
      .split("\n")
      .slice(1)
      .map((line) => line.replace(/\ba(\d+)\b/g, "n$1")),
  ].join("\n");
}
