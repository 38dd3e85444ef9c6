/** What answers are written from: search results, ranked best first. */
import type { QueryResult } from "../service.js";

/** A result as an answer uses it: its text, title and score (the one type of both answer kinds). */
export type AnswerSource = Pick<QueryResult, "text" | "title" | "score">;
