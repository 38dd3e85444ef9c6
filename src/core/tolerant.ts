/**
 * Tolerant reading of a foreign dialect's body, as vLLM, llama.cpp and Ollama read theirs: the route's
 * schema declares every field the API's current reference defines (implemented, or accepted with no
 * effect), and a field it does not declare is ignored: taken out of the body before validation, and
 * named (with its path) in the `x-lectern-ignored-fields` response header and a debug log line. A
 * declared field sent as null means "not set", as it does in those APIs. What is left is validated as
 * usual, so a known field with a wrong type is still a 400 in the dialect's shape.
 *
 * Pure, and driven by the JSON schema alone, so a recorded request body can be read the same way
 * without a server (`readTolerantly`).
 */

/** Response header naming the fields that were ignored (comma-separated dotted paths). */
export const IGNORED_FIELDS_HEADER = "x-lectern-ignored-fields";
/** Response header naming schema keywords the grammar does not enforce (dotted paths). */
export const UNENFORCED_HEADER = "x-lectern-unenforced";

type Schema = Record<string, unknown>;

/** A header value stays readable: past this many paths the rest are counted. */
const MAX_LISTED = 50;

/**
 * Removes the fields `schema` does not declare from `body` (in place) and returns their paths, e.g.
 * `best_of`, `messages.2.cache_hint`. Also removes declared fields sent as null where the schema
 * does not take null.
 */
export function readTolerantly(schema: unknown, body: unknown): string[] {
  const ignored: string[] = [];
  visit(schema, body, "", ignored);
  return ignored;
}

function visit(schema: unknown, value: unknown, path: string, ignored: string[]): void {
  if (!isObject(schema) || value === null || typeof value !== "object") return;
  if (Array.isArray(schema.anyOf)) {
    const branch = pickBranch(schema.anyOf as Schema[], value);
    if (branch) visit(branch, value, path, ignored);
    return;
  }
  if (Array.isArray(value)) {
    if (schema.type === "array" && isObject(schema.items))
      value.forEach((item, i) => visit(schema.items, item, join(path, String(i)), ignored));
    return;
  }
  if (schema.type !== "object" || !isObject(schema.properties)) return;
  // A map (Type.Record) or an object that declares it takes any key: nothing to ignore here.
  const open = schema.patternProperties !== undefined || isObject(schema.additionalProperties);
  const record = value as Schema;
  for (const key of Object.keys(record)) {
    const property = (schema.properties as Schema)[key];
    if (property === undefined) {
      if (open || schema.additionalProperties === true) continue;
      ignored.push(join(path, key));
      delete record[key];
      continue;
    }
    if (record[key] === null && !takesNull(property)) {
      delete record[key];
      continue;
    }
    visit(property, record[key], join(path, key), ignored);
  }
}

/**
 * The branch of a union a value is read by: for objects, the one whose literal `type` (or `role`)
 * matches, or the only object branch; for arrays, the array branch. Undefined when none is clear.
 */
function pickBranch(branches: Schema[], value: object): Schema | undefined {
  if (Array.isArray(value)) return only(branches.filter((branch) => branch.type === "array"));
  const objects = branches.filter((branch) => branch.type === "object" && isObject(branch.properties));
  for (const key of ["type", "role"]) {
    const discriminant = (value as Schema)[key];
    if (typeof discriminant !== "string") continue;
    const matching = objects.filter((branch) =>
      literalsOf((branch.properties as Schema)[key]).includes(discriminant),
    );
    if (matching.length === 1) return matching[0];
  }
  return only(objects);
}

function only<T>(items: T[]): T | undefined {
  return items.length === 1 ? items[0] : undefined;
}

/** The string constants a property schema allows (`Type.Literal`, or a union of them). */
function literalsOf(schema: unknown): string[] {
  if (!isObject(schema)) return [];
  if (typeof schema.const === "string") return [schema.const];
  if (Array.isArray(schema.anyOf)) return schema.anyOf.flatMap(literalsOf);
  return [];
}

function takesNull(schema: unknown): boolean {
  if (!isObject(schema)) return false;
  if (Object.keys(schema).length === 0) return true; // Type.Unknown
  if (schema.type === "null") return true;
  return Array.isArray(schema.anyOf) && schema.anyOf.some(takesNull);
}

function join(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}

function isObject(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A header value listing paths (at most MAX_LISTED, then how many more). */
export function headerList(paths: readonly string[]): string {
  const listed = paths.slice(0, MAX_LISTED).map((path) => path.replace(/[^\x20-\x7e]/g, "?"));
  const more = paths.length - listed.length;
  return more > 0 ? `${listed.join(", ")}, … ${more} more` : listed.join(", ");
}
