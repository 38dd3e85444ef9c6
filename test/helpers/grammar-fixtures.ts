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
