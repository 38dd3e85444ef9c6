/**
 * Arguments cut by max_tokens are an unfinished JSON text; Anthropic's `tool_use.input` and Ollama's
 * `tool_calls[].function.arguments` must be objects, so the text is closed (open string, arrays,
 * objects) and parsed; what cannot be closed that way gives {}. Cost is linear in the text.
 */
export function parseArgumentsObject(text: string): Record<string, unknown> {
  const asObject = (value: unknown) =>
    typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  try {
    return asObject(JSON.parse(text));
  } catch {
    // Unfinished: close it below.
  }
  const closers: string[] = [];
  let inString = false;
  let escaped = false;
  for (const char of text) {
    if (inString) {
      if (escaped) escaped = false;
      else if (char === "\\") escaped = true;
      else if (char === '"') inString = false;
    } else if (char === '"') inString = true;
    else if (char === "{") closers.push("}");
    else if (char === "[") closers.push("]");
    else if (char === "}" || char === "]") closers.pop();
  }
  let closed = text.replace(/\\$/, "");
  if (inString) closed += '"';
  // A dangling separator or key without a value cannot be closed; drop it.
  closed = closed
    .replace(/,\s*$/, "")
    .replace(/,?\s*"(?:[^"\\]|\\.)*"\s*:?\s*$/, (match) =>
      match.includes(":") || /^,/.test(match) ? "" : match,
    );
  try {
    return asObject(JSON.parse(closed + closers.reverse().join("")));
  } catch {
    return {};
  }
}
