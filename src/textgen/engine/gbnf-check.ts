/**
 * A light check of a GBNF grammar before llama.cpp parses it. llama.cpp reports only "failed to
 * parse grammar" to us (the detail goes to its stderr), so the commonest mistakes are found here to
 * name them in the 400: no `root` rule, a rule used but never defined, an unterminated string or
 * character class. Anything subtler still fails in llama.cpp, with a generic message.
 */

/** The first problem found, or undefined when the grammar looks well formed. */
export function checkGbnf(grammar: string): string | undefined {
  const defined = new Set<string>();
  const used: { name: string; line: number }[] = [];
  let line = 1;
  let i = 0;
  // Inside `{2,5}`: counts, not rule names (tracked as we go, so the scan stays linear).
  let inRepetition = false;
  const text = grammar;
  while (i < text.length) {
    const char = text[i]!;
    if (char === "{" || char === "}") {
      inRepetition = char === "{";
      i++;
    } else if (char === "\n") {
      line++;
      i++;
    } else if (char === "#") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (char === '"' || char === "[") {
      const close = char === '"' ? '"' : "]";
      const startLine = line;
      i++;
      while (i < text.length && text[i] !== close) {
        if (text[i] === "\\") i++;
        else if (text[i] === "\n")
          return `line ${startLine}: unterminated ${char === '"' ? "string" : "character class"}`;
        i++;
      }
      if (i >= text.length)
        return `line ${startLine}: unterminated ${char === '"' ? "string" : "character class"}`;
      i++;
    } else if (isNameChar(text.charCodeAt(i))) {
      let end = i;
      while (end < text.length && isNameChar(text.charCodeAt(end))) end++;
      const name = text.slice(i, end);
      let next = end;
      while (text[next] === " " || text[next] === "\t") next++;
      if (text.startsWith("::=", next)) defined.add(name);
      else if (!/^\d+$/.test(name) && !inRepetition) used.push({ name, line });
      i = end;
    } else i++;
  }
  if (defined.size === 0)
    return "no rules: a grammar is lines of the form `name ::= …`, starting with `root ::= …`";
  if (!defined.has("root")) return "no `root` rule: generation starts from the rule named root";
  const missing = used.find((use) => !defined.has(use.name));
  if (missing) return `line ${missing.line}: the rule "${missing.name}" is used but not defined`;
  return undefined;
}

/** [a-zA-Z0-9_-], without a regular expression per character. */
function isNameChar(code: number): boolean {
  return (
    (code >= 97 && code <= 122) ||
    (code >= 65 && code <= 90) ||
    (code >= 48 && code <= 57) ||
    code === 95 ||
    code === 45
  );
}
