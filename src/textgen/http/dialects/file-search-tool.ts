/**
 * The Responses API's hosted `file_search` tool, run the way OpenAI runs it, over Lectern's RAG app
 * (file-search.ts): a `file_search_call` output item, then the message with `file_citation`
 * annotations.
 *
 * OpenAI's model writes the search queries itself; the small local models served here cannot be
 * relied on to, so the query is the text of the latest user message, and the search always runs
 * (before generation) when the tool is given and tool_choice is not "none". Its results go into the
 * prompt as numbered passages the model is asked to cite as [n].
 *
 * Citations, deterministic: each [n] the answer writes (n one of the passages) is a file_citation of
 * passage n's file at the index just after the marker; an answer with no such marker cites every
 * distinct file among the results, best first, at the end of the text.
 */
import { randomBytes } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { badRequest } from "../../../core/errors.js";
import type { ChatMessage } from "../../engine/generator.js";
import type { WireFrame } from "./run.js";
import type { CallerHeaders, FileSearchPort, FileSearchResult } from "./file-search.js";

/** The file_search tool as the request gives it (read tolerantly; checked in `fileSearchTool`). */
interface FileSearchToolBody {
  type: string;
  vector_store_ids?: unknown;
  max_num_results?: unknown;
  ranking_options?: { ranker?: unknown; score_threshold?: unknown } | null;
  filters?: unknown;
}

export interface FileSearchTool {
  storeIds: string[];
  maxNumResults: number;
  scoreThreshold?: number;
  ranker?: string;
  filters?: unknown;
}

/** OpenAI's default and bounds of max_num_results. */
const DEFAULT_RESULTS = 10;
const MAX_RESULTS = 50;
/** The RAG app's search takes queries of up to 4,096 characters; a longer message is cut to them. */
const MAX_QUERY_CHARS = 4096;

const invalid = (message: string, index: number, field = "") =>
  badRequest(message, [{ path: `/tools/${index}${field}` }]);

/** The request's file_search tool, checked as OpenAI checks it; none: undefined. */
export function fileSearchTool(tools: readonly FileSearchToolBody[] | undefined): FileSearchTool | undefined {
  const found = (tools ?? [])
    .map((tool, index) => ({ tool, index }))
    .filter((t) => t.tool.type === "file_search");
  if (found.length === 0) return undefined;
  if (found.length > 1) throw invalid("Only one file_search tool may be given", found[1]!.index);
  const { tool, index } = found[0]!;
  const ids = tool.vector_store_ids;
  if (!Array.isArray(ids) || ids.length === 0 || !ids.every((id) => typeof id === "string" && id !== ""))
    throw invalid(
      "file_search needs vector_store_ids: a non-empty list of vector store ids",
      index,
      "/vector_store_ids",
    );
  const max = tool.max_num_results ?? DEFAULT_RESULTS;
  if (!Number.isInteger(max) || (max as number) < 1 || (max as number) > MAX_RESULTS)
    throw invalid(`max_num_results must be an integer from 1 to ${MAX_RESULTS}`, index, "/max_num_results");
  const threshold = tool.ranking_options?.score_threshold;
  if (threshold !== undefined && (typeof threshold !== "number" || threshold < 0 || threshold > 1))
    throw invalid(
      "ranking_options.score_threshold must be a number from 0 to 1",
      index,
      "/ranking_options/score_threshold",
    );
  const ranker = tool.ranking_options?.ranker;
  return {
    storeIds: [...new Set(ids as string[])],
    maxNumResults: max as number,
    ...(threshold !== undefined && { scoreThreshold: threshold }),
    ...(typeof ranker === "string" && { ranker }),
    ...(tool.filters !== undefined && tool.filters !== null && { filters: tool.filters }),
  };
}

export interface FileCitation {
  type: "file_citation";
  file_id: string;
  filename: string;
  index: number;
}

/** A search that ran: its output item, its stream events, the citations of an answer. */
export interface FileSearchRun {
  readonly item: Record<string, unknown>;
  readonly results: FileSearchResult[];
  frames(frame: (type: string, payload: object) => WireFrame, outputIndex: number): WireFrame[];
  annotate(text: string): FileCitation[];
}

const cite = (result: FileSearchResult, index: number): FileCitation => ({
  type: "file_citation",
  file_id: result.file_id,
  filename: result.filename,
  index,
});

/** The citations of an answer, by the rule in this file's comment. */
export function citations(text: string, results: readonly FileSearchResult[]): FileCitation[] {
  const marked: FileCitation[] = [];
  for (const match of text.matchAll(/\[(\d{1,3})\]/g)) {
    const result = results[Number(match[1]) - 1];
    if (result) marked.push(cite(result, match.index + match[0].length));
  }
  if (marked.length > 0) return marked;
  const seen = new Set<string>();
  return results.filter((r) => !seen.has(r.file_id) && seen.add(r.file_id)).map((r) => cite(r, text.length));
}

/** The search query: the latest user message's text (see this file's comment). */
function queryOf(messages: readonly ChatMessage[]): string {
  const text =
    messages
      .filter((message) => message.role === "user")
      .at(-1)
      ?.content.trim() ?? "";
  if (text === "")
    throw badRequest("file_search searches for the latest user message's text; this request has none", [
      { path: "/input" },
    ]);
  return [...text].slice(0, MAX_QUERY_CHARS).join("");
}

/** The latest user message with the passages before it, numbered for the model to cite. */
export function withPassages(messages: ChatMessage[], results: readonly FileSearchResult[]): ChatMessage[] {
  if (results.length === 0) return messages;
  const at = messages.findLastIndex((message) => message.role === "user");
  const passages = results.map((r, i) => `[${i + 1}] ${r.filename}:\n${r.text}`).join("\n\n");
  const user = messages[at]!;
  const content =
    `Passages from the files searched (cite them as [1], [2], …):\n\n${passages}\n\n` +
    `Answer from these passages.\n\n${user.content}`;
  return messages.map((message, index) => (index === at ? { ...user, content } : message));
}

/** The caller's credentials, as the RAG app reads them. */
function callerOf(request: FastifyRequest): CallerHeaders {
  const key = request.headers["x-api-key"];
  return {
    ...(request.headers.authorization && { authorization: request.headers.authorization }),
    ...(typeof key === "string" && { "x-api-key": key }),
  };
}

/**
 * Runs the request's file_search (when it has one and tool_choice allows tools): the results, and the
 * messages with the passages given to the model.
 */
export async function runFileSearch(
  tool: FileSearchTool | undefined,
  toolChoice: unknown,
  messages: ChatMessage[],
  port: FileSearchPort | undefined,
  request: FastifyRequest,
  include: readonly string[] | undefined,
): Promise<{ run?: FileSearchRun; messages: ChatMessage[] }> {
  if (!tool || toolChoice === "none") return { messages };
  if (!port)
    throw badRequest(
      "file_search needs Lectern's RAG app: run both apps in one process (lectern serve all) or set RAG_URL " +
        "(and RAG_API_KEY where its keys differ) on this text generation app",
      [{ path: "/tools" }],
    );
  const query = queryOf(messages);
  const results = await port.search(tool.storeIds, query, tool, callerOf(request));
  const run = fileSearchRun(query, results, include?.includes("file_search_call.results") === true);
  return { run, messages: withPassages(messages, results) };
}

function fileSearchRun(query: string, results: FileSearchResult[], withResults: boolean): FileSearchRun {
  const id = `fs_${randomBytes(12).toString("hex")}`;
  const item = {
    type: "file_search_call",
    id,
    status: "completed",
    queries: [query],
    // OpenAI gives the results only when `include` asks for them.
    results: withResults
      ? results.map((r) => ({
          file_id: r.file_id,
          filename: r.filename,
          score: r.score,
          attributes: r.attributes,
          text: r.text,
        }))
      : null,
  };
  return {
    item,
    results,
    // The search ran before the stream opened: its events come together, at the start.
    frames: (frame, outputIndex) => {
      const where = { output_index: outputIndex, item_id: id };
      return [
        frame("response.output_item.added", {
          output_index: outputIndex,
          item: { ...item, status: "in_progress", results: null },
        }),
        frame("response.file_search_call.in_progress", where),
        frame("response.file_search_call.searching", where),
        frame("response.file_search_call.completed", where),
        frame("response.output_item.done", { output_index: outputIndex, item }),
      ];
    },
    annotate: (text) => citations(text, results),
  };
}
