/**
 * OpenAI's vector store search filters over document metadata: comparisons
 * `{type: "eq"|"ne"|"gt"|"gte"|"lt"|"lte"|"in"|"nin", key, value}` and compounds
 * `{type: "and"|"or", filters: [...]}`, compiled once into a predicate. Bounded: at most
 * MAX_FILTER_NODES nodes and MAX_FILTER_DEPTH levels, `in` / `nin` lists compiled to sets within the
 * value limits of service/filters.ts; anything else is a 400 naming where.
 */
import { badRequest } from "../../core/errors.js";
import { ListBudget, type MetadataPredicate as Predicate } from "../service/filters.js";

/**
 * Set on a search whose filter stopped at FILTER_MAX_CANDIDATES with fewer than max_num_results
 * passing (`examined=N; limit=L`): OpenAI's result page has no field to say it.
 */
export const FILTER_TRUNCATED_HEADER = "x-lectern-filter-truncated";

const MAX_FILTER_NODES = 256;
const MAX_FILTER_DEPTH = 16;
const COMPARISONS = new Set(["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]);

type Scalar = string | number | boolean;
const isScalar = (value: unknown): value is Scalar =>
  typeof value === "string" || typeof value === "number" || typeof value === "boolean";

function compare(type: string, actual: unknown, expected: Scalar): boolean {
  if (type === "eq") return actual === expected;
  if (type === "ne") return actual !== expected;
  // Order only between values of one type (numbers with numbers, strings with strings).
  if (typeof actual !== typeof expected || !(typeof actual === "number" || typeof actual === "string"))
    return false;
  const a = actual as number | string;
  const b = expected as number | string;
  return type === "gt" ? a > b : type === "gte" ? a >= b : type === "lt" ? a < b : a <= b;
}

export function compileFilter(filter: unknown): Predicate {
  let nodes = 0;
  const lists = new ListBudget();
  const build = (node: unknown, path: string, depth: number): Predicate => {
    if (++nodes > MAX_FILTER_NODES) throw badRequest(`filters has more than ${MAX_FILTER_NODES} filters`);
    if (depth > MAX_FILTER_DEPTH) throw badRequest(`filters nests deeper than ${MAX_FILTER_DEPTH} levels`);
    if (typeof node !== "object" || node === null || Array.isArray(node))
      throw badRequest(`${path} must be a filter object`, [{ path }]);
    const { type, key, value, filters } = node as Record<string, unknown>;
    if (type === "and" || type === "or") {
      if (!Array.isArray(filters) || filters.length === 0)
        throw badRequest(`${path}.filters must be a non-empty array`, [{ path: `${path}.filters` }]);
      const parts = filters.map((child, index) => build(child, `${path}.filters[${index}]`, depth + 1));
      return type === "and"
        ? (metadata) => parts.every((part) => part(metadata))
        : (metadata) => parts.some((part) => part(metadata));
    }
    if (typeof type !== "string" || !COMPARISONS.has(type))
      throw badRequest(`${path}.type must be one of eq, ne, gt, gte, lt, lte, in, nin, and, or`, [
        { path: `${path}.type` },
      ]);
    if (typeof key !== "string" || key.length === 0)
      throw badRequest(`${path}.key must be a metadata key`, [{ path: `${path}.key` }]);
    const listValued = type === "in" || type === "nin";
    const valid = listValued ? Array.isArray(value) && value.every(isScalar) : isScalar(value);
    if (!valid)
      throw badRequest(
        `${path}.value must be ${listValued ? "an array of strings, numbers or booleans" : "a string, number or boolean"}`,
        [{ path: `${path}.value` }],
      );
    if (listValued) {
      lists.take((value as Scalar[]).length, `${path}.value`);
      // A set's `has` is `===` for these scalars (SameValueZero differs only on NaN, which JSON lacks).
      const values = new Set(value as Scalar[]);
      return type === "in"
        ? (metadata) => values.has(metadata[key] as Scalar)
        : (metadata) => !values.has(metadata[key] as Scalar);
    }
    const expected = value as Scalar;
    return (metadata) => compare(type, metadata[key], expected);
  };
  return build(filter, "filters", 0);
}
