/**
 * JSON bodies with a nesting limit (MAX_JSON_DEPTH, issue #35). JSON.parse itself takes 100,000
 * levels, but what runs on the value afterwards recurses: JSON.stringify of a 5,000-level Anthropic
 * `tool_use.input` or Ollama `tool_calls[].function.arguments` overflowed the stack (a 500), and so
 * can schema validation. The text is scanned first, without recursion and without building anything,
 * so a deep body is a 400 in each API's own error shape (its error handler maps it) before a value
 * exists, and no dialect has to guard its own fields.
 */
import type { FastifyInstance } from "fastify";
import { badRequest, type DomainError } from "./errors.js";

const OPEN_OBJECT = 0x7b; // {
const OPEN_ARRAY = 0x5b; // [
const CLOSE_OBJECT = 0x7d; // }
const CLOSE_ARRAY = 0x5d; // ]
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \

/**
 * The index at which `text` nests deeper than `maxDepth` arrays and objects, or -1. Brackets inside
 * strings do not count; malformed JSON is left to the parser (this only counts).
 */
export function depthExceededAt(text: string, maxDepth: number): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (++depth > maxDepth) return i;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) depth--;
  }
  return -1;
}

/** A 400 saying where the body nests too deep and what the limit is. */
export function tooDeep(at: number, maxDepth: number): DomainError {
  return badRequest(
    `Malformed JSON body: it nests arrays and objects deeper than ${maxDepth} levels (at character ${at}; MAX_JSON_DEPTH)`,
  );
}

/** JSON.parse of a body's text, after the depth scan: throws a 400 (DomainError) for deep or invalid JSON. */
export function parseJsonText(text: string, maxDepth: number): unknown {
  const at = depthExceededAt(text, maxDepth);
  if (at >= 0) throw tooDeep(at, maxDepth);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badRequest(`Malformed JSON body: ${(error as Error).message}`);
  }
}

/**
 * Replaces Fastify's application/json parser by one that scans the depth first, then hands the text
 * to Fastify's own parser (its prototype-poisoning checks, its messages for empty and invalid bodies).
 */
export function registerJsonBodyParser(app: FastifyInstance, maxDepth: number): void {
  const parse = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = body as string;
    const at = depthExceededAt(text, maxDepth);
    if (at >= 0) {
      done(tooDeep(at, maxDepth), undefined);
      return;
    }
    parse(request, text, done);
  });
}
