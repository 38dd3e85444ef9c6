/**
 * The file_search tool's port: searching vector stores of Lectern's RAG app. Two transports carry the
 * same HTTP contract, the RAG app's `POST /v1/vector_stores/{id}/search` (OpenAI's request and page
 * shapes): `inject` into the RAG app of this process (both apps in one: `lectern serve all`), or a
 * fetch to RAG_URL. Either way the RAG app's own auth, tenants and limits apply to the search.
 */
import type { Config } from "../../../core/config.js";
import { DomainError, notReady } from "../../../core/errors.js";

/** One passage found, the fields a `file_search_call`'s results and citations need. */
export interface FileSearchResult {
  file_id: string;
  filename: string;
  score: number;
  attributes: Record<string, string | number | boolean>;
  text: string;
}

export interface FileSearchOptions {
  /** 1…50 (OpenAI's bounds); the results of all stores together are cut to it. */
  maxNumResults: number;
  /** 0…1: results scoring below it are dropped. */
  scoreThreshold?: number;
  /** OpenAI's comparison / compound filter, passed through as given. */
  filters?: unknown;
  ranker?: string;
}

/** The caller's credentials, forwarded so the search acts for the same tenant. */
export type CallerHeaders = { authorization?: string; "x-api-key"?: string };

export interface FileSearchPort {
  /** Where searches go, for messages ("the RAG app of this process", "RAG_URL=…"). */
  readonly where: string;
  search(
    storeIds: readonly string[],
    query: string,
    options: FileSearchOptions,
    caller: CallerHeaders,
  ): Promise<FileSearchResult[]>;
}

/** What one POST answered: its status and body text. */
export interface SearchReply {
  status: number;
  body: string;
}
/** Sends one search request (path and JSON body) with the given headers. */
export type SearchTransport = (
  path: string,
  body: string,
  headers: Record<string, string>,
) => Promise<SearchReply>;

/** The part of a Fastify app `inject` needs: the RAG app of this process. */
export interface Injectable {
  inject(options: {
    method: "POST";
    url: string;
    headers: Record<string, string>;
    payload: string;
  }): Promise<{ statusCode: number; body: string }>;
}

/** Into the RAG app of this process, once it is built (server.ts builds it after this app). */
export function injectTransport(app: () => Injectable | undefined): SearchTransport {
  return async (path, body, headers) => {
    const target = app();
    if (!target) throw notReady("file_search: the RAG app of this process has not started yet");
    const reply = await target.inject({ method: "POST", url: path, headers, payload: body });
    return { status: reply.statusCode, body: reply.body };
  };
}

/** To a RAG app elsewhere (RAG_URL), with RAG_API_KEY when set. */
export function fetchTransport(baseUrl: string, timeoutMs: number): SearchTransport {
  // RAG_URL is the app's base URL; one written with its /v1 (as GENERATION_URL is) works too.
  const base = baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "");
  return async (path, body, headers) => {
    try {
      const reply = await fetch(`${base}${path}`, {
        method: "POST",
        headers,
        body,
        signal: AbortSignal.timeout(timeoutMs),
      });
      return { status: reply.status, body: await reply.text() };
    } catch (error) {
      throw new DomainError("upstream", `file_search: RAG_URL=${baseUrl} did not answer: ${String(error)}`);
    }
  };
}

/** A result of the page, read tolerantly: ids as strings, the text of its text parts. */
export function parseResult(raw: Record<string, unknown>): FileSearchResult | undefined {
  const fileId = raw.file_id;
  if (typeof fileId !== "string") return undefined;
  const content = Array.isArray(raw.content) ? (raw.content as { type?: string; text?: unknown }[]) : [];
  const text = content
    .filter((part) => typeof part.text === "string")
    .map((part) => part.text as string)
    .join("\n");
  const attributes =
    raw.attributes && typeof raw.attributes === "object"
      ? (raw.attributes as FileSearchResult["attributes"])
      : {};
  return {
    file_id: fileId,
    // Older pages named the file `file`; a result without a name is cited by its id.
    filename: String(raw.filename ?? raw.file ?? fileId),
    score: typeof raw.score === "number" ? raw.score : 0,
    attributes,
    text,
  };
}

/** The RAG app's error answer as ours: its status kept, its message named as the RAG app's. */
function searchError(status: number, body: string, storeId: string, at: string): DomainError {
  let message = body.slice(0, 500);
  try {
    const parsed = JSON.parse(body) as { error?: { message?: string } | string };
    const error = parsed.error;
    message = typeof error === "string" ? error : (error?.message ?? message);
  } catch {
    // Not JSON: the start of the text says what happened.
  }
  const said = `file_search in vector store "${storeId}" (${at}): ${message}`;
  if (status === 404) return new DomainError("not_found", said);
  if (status === 400 || status === 422) return new DomainError("invalid", said);
  if (status === 401 || status === 403) return new DomainError("forbidden", said);
  if (status === 429 || status === 503) return new DomainError("busy", said, { retryAfter: "1" });
  return new DomainError("upstream", `${said} (status ${status})`);
}

/** One store's search, through a transport. */
async function searchStore(
  send: SearchTransport,
  at: string,
  storeId: string,
  query: string,
  options: FileSearchOptions,
  headers: Record<string, string>,
): Promise<FileSearchResult[]> {
  const body = JSON.stringify({
    query,
    max_num_results: options.maxNumResults,
    ...(options.filters !== undefined && options.filters !== null && { filters: options.filters }),
    ...((options.ranker !== undefined || options.scoreThreshold !== undefined) && {
      ranking_options: {
        ...(options.ranker !== undefined && { ranker: options.ranker }),
        ...(options.scoreThreshold !== undefined && { score_threshold: options.scoreThreshold }),
      },
    }),
  });
  const reply = await send(`/v1/vector_stores/${encodeURIComponent(storeId)}/search`, body, headers);
  if (reply.status !== 200) throw searchError(reply.status, reply.body, storeId, at);
  const page = JSON.parse(reply.body) as { data?: Record<string, unknown>[] };
  return (page.data ?? []).flatMap((raw) => parseResult(raw) ?? []);
}

/**
 * Results of several stores as one list: best score first (a stable sort keeps each store's own
 * order among equal scores), none below the threshold, at most maxNumResults.
 */
export function mergeResults(lists: FileSearchResult[][], options: FileSearchOptions): FileSearchResult[] {
  const threshold = options.scoreThreshold ?? 0;
  return lists
    .flat()
    .filter((result) => result.score >= threshold)
    .sort((a, b) => b.score - a.score)
    .slice(0, options.maxNumResults);
}

/** A FileSearchPort over a transport; `apiKey` given: sent instead of the caller's credentials. */
export function vectorStoreSearch(send: SearchTransport, where: string, apiKey?: string): FileSearchPort {
  return {
    where,
    async search(storeIds, query, options, caller) {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (apiKey) headers.authorization = `Bearer ${apiKey}`;
      else {
        if (caller.authorization) headers.authorization = caller.authorization;
        if (caller["x-api-key"]) headers["x-api-key"] = caller["x-api-key"];
      }
      const lists = await Promise.all(
        storeIds.map((id) => searchStore(send, where, id, query, options, headers)),
      );
      return mergeResults(lists, options);
    },
  };
}

/**
 * The port a text generation app gets: RAG_URL when set (it names the RAG app to use, even beside
 * one in this process), else the RAG app of this process when there is one, else none (a request
 * with file_search is then a 400 naming both ways).
 */
export function fileSearchPortOf(
  config: Config,
  inProcess?: () => Injectable | undefined,
): FileSearchPort | undefined {
  const { ragUrl, ragApiKey, ragTimeoutMs } = config.fileSearch;
  if (ragUrl !== null)
    return vectorStoreSearch(
      fetchTransport(ragUrl, ragTimeoutMs),
      `RAG_URL=${ragUrl}`,
      ragApiKey ?? undefined,
    );
  if (inProcess) return vectorStoreSearch(injectTransport(inProcess), "the RAG app of this process");
  return undefined;
}
