/**
 * OpenAI's cursor paging (`after`, `before`, `limit`, `order`) over items kept in arrival order
 * (`seq`), the same for SQLite and PostgreSQL: which side of each cursor, which way to read, and
 * whether the page read backwards must be turned round.
 */
import type { PageQuery } from "./types.js";

export interface PagePlan {
  /** Bounds on seq: [operator, the cursor's seq]. */
  bounds: Array<[">" | "<", number]>;
  /** Read in descending seq. */
  descending: boolean;
  /** The rows were read away from the page's order (a `before` page): reverse them. */
  reverse: boolean;
}

/** `cursors` are the seqs of the items `after` and `before` name (already looked up). */
export function planPage(query: PageQuery, cursors: { after?: number; before?: number }): PagePlan {
  const asc = query.order === "asc";
  const bounds: PagePlan["bounds"] = [];
  if (cursors.after !== undefined) bounds.push([asc ? ">" : "<", cursors.after]);
  if (cursors.before !== undefined) bounds.push([asc ? "<" : ">", cursors.before]);
  // Only `before`: the page is the `limit` items nearest the cursor, so read from it outwards.
  const backwards = cursors.before !== undefined && cursors.after === undefined;
  return { bounds, descending: asc === backwards, reverse: backwards };
}

/** The page from `limit + 1` rows read: the extra row only says there are more. */
export function toPage<Row>(rows: Row[], limit: number, reverse: boolean): { rows: Row[]; hasMore: boolean } {
  const hasMore = rows.length > limit;
  const page = rows.slice(0, limit);
  return { rows: reverse ? page.reverse() : page, hasMore };
}
