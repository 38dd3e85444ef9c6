/**
 * Checks JSON Schema cannot express: how deeply a value nests, and whether a string is well-formed
 * UTF-16 (a lone surrogate cannot be stored faithfully as UTF-8, so ids holding one are refused).
 */
import { badRequest } from "./errors.js";

/** Index names and tenant ids: safe as path segments, never "." or "..". */
export const NAME_PATTERN = "^(?!\\.{1,2}$)[A-Za-z0-9._-]{1,128}$";
/** NAME_PATTERN in words, for error messages (the regex itself helps nobody). */
export const NAME_RULE = '1 to 128 letters, digits, ".", "_" or "-", and not "." or ".."';

/** 400 when `value` nests objects or arrays deeper than `maxDepth`. Iterative: no stack to overflow. */
export function checkNestingDepth(value: unknown, maxDepth: number, what: string): void {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (current === null || typeof current !== "object") continue;
    if (depth >= maxDepth) throw badRequest(`${what} nests deeper than ${maxDepth} levels`);
    for (const child of Object.values(current)) stack.push([child, depth + 1]);
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** 400 when `text` holds a lone UTF-16 surrogate. */
export function checkWellFormed(text: string, what: string): void {
  if (LONE_SURROGATE.test(text)) throw badRequest(`${what} holds an unpaired UTF-16 surrogate`);
}
