/**
 * The port of the Responses store (store/responses-store.ts) to its database: SQLite under DATA_DIR
 * (run on a worker thread, sqlite-worker.ts) or PostgreSQL (postgres-backend.ts). Everything is kept
 * per tenant; items travel as JSON text, so the database never parses them and the worker's channel
 * copies strings, not object graphs.
 *
 * What is kept: objects (responses and conversations), each with its items, in the order they came:
 * a response's input and output items (its own input only: its predecessors' items are theirs, and
 * `history` walks the chain), a conversation's items. An object lives until RESPONSES_TTL after its
 * last change (a response: its creation), or until RESPONSES_MAX_BYTES needs its room (oldest first);
 * an object past its TTL is gone for every read before a sweep deletes it.
 */

/** One item: its id and its JSON text (the id is in the text too). */
export interface ItemRow {
  id: string;
  json: string;
}

export interface NewResponse {
  id: string;
  previousId: string | null;
  /** The conversation this response's input and output join; null: none. */
  conversationId: string | null;
  /** Kept as a response (`store` true); false: its items only join the conversation. */
  keep: boolean;
  /** The response object without its `output`, as JSON. */
  body: string;
  input: ItemRow[];
  output: ItemRow[];
}

/** A stored response: its object without `output`, and its output items. */
export interface StoredResponse {
  body: string;
  output: string[];
}

export type ObjectKind = "response" | "conversation";

export interface PageQuery {
  /** An item id: the items after it in `order`. */
  after?: string;
  /** An item id: the items before it in `order`. */
  before?: string;
  limit: number;
  order: "asc" | "desc";
}

export interface ItemPage {
  items: ItemRow[];
  hasMore: boolean;
}

/** A response's whole history, oldest first, or the earliest response of its chain that is gone. */
export type History = { items: string[] } | { missing: string };

export interface StoreLimits {
  ttlMs: number;
  maxBytes: number;
}

/** A page of JSON rows, newest first, and whether older ones follow. */
export interface JsonPage {
  rows: string[];
  hasMore: boolean;
}

/** A batch's object and its line counts (from the recorded lines). */
export interface StoredBatch {
  body: string;
  completed: number;
  failed: number;
}

/**
 * The Batch API's tables (textgen/batches/), per tenant like the rest: files' objects (their input
 * content is a file under DATA_DIR; output and error files are built from the recorded lines),
 * batches' objects, and each line's result, recorded once (a second record of a line is ignored),
 * so a batch resumed after a crash never writes a line twice. Never evicted: deleted with their file.
 */
export interface BatchBackend {
  saveFile(tenant: string, id: string, body: string, now: number): Promise<void>;
  file(tenant: string, id: string): Promise<string | undefined>;
  /** Newest first; `after`: a file id, the files older than it. */
  listFiles(tenant: string, after: string | undefined, limit: number): Promise<JsonPage | "no_cursor">;
  deleteFile(tenant: string, id: string): Promise<boolean>;
  /** Creates or replaces a batch's object; `active`: its runner has work left (resumed at start). */
  saveBatch(tenant: string, id: string, body: string, active: boolean, now: number): Promise<void>;
  batch(tenant: string, id: string): Promise<StoredBatch | undefined>;
  listBatches(tenant: string, after: string | undefined, limit: number): Promise<JsonPage | "no_cursor">;
  /** Every tenant's batches with work left, oldest first. */
  activeBatches(): Promise<{ tenant: string; id: string }[]>;
  /** Records a line's result; false when it was recorded before (it is kept as it was). */
  recordLine(tenant: string, batchId: string, line: number, ok: boolean, body: string): Promise<boolean>;
  /** The numbers of the lines recorded so far. */
  recordedLines(tenant: string, batchId: string): Promise<number[]>;
  /** The recorded results of the lines that succeeded (`ok`) or failed, in line order. */
  lineResults(tenant: string, batchId: string, ok: boolean): Promise<string[]>;
}

/** Every method takes the time it runs at (ms), so tests can move the clock. */
export interface ResponsesBackend extends BatchBackend {
  /** Keeps a response (when `keep`) and appends its items to its conversation in one transaction. */
  saveResponse(tenant: string, response: NewResponse, now: number): Promise<"saved" | "no_conversation">;
  response(tenant: string, id: string, now: number): Promise<StoredResponse | undefined>;
  /** Deletes a response or a conversation with its items; false when there was none. */
  deleteObject(tenant: string, kind: ObjectKind, id: string, now: number): Promise<boolean>;
  /** The input and output items of a response and of every response before it, oldest first. */
  history(tenant: string, id: string, now: number): Promise<History | undefined>;
  /** The newest item with this id, of any live response or conversation. */
  item(tenant: string, itemId: string, now: number): Promise<string | undefined>;
  /**
   * A page of a response's input items or of a conversation's items; undefined when the owner is
   * not there, "no_cursor" when `after`/`before` names no item of it.
   */
  page(
    tenant: string,
    kind: ObjectKind,
    ownerId: string,
    query: PageQuery,
    now: number,
  ): Promise<ItemPage | "no_cursor" | undefined>;
  createConversation(tenant: string, id: string, body: string, items: ItemRow[], now: number): Promise<void>;
  /** A conversation object's JSON. */
  conversation(tenant: string, id: string, now: number): Promise<string | undefined>;
  /** Replaces a conversation object's JSON; false when there is none. */
  updateConversation(tenant: string, id: string, body: string, now: number): Promise<boolean>;
  /** Every item of a conversation, oldest first (the prompt of a response that continues it). */
  conversationItems(tenant: string, id: string, now: number): Promise<string[] | undefined>;
  /** Appends items; false when there is no such conversation. */
  addConversationItems(tenant: string, id: string, items: ItemRow[], now: number): Promise<boolean>;
  conversationItem(tenant: string, id: string, itemId: string, now: number): Promise<string | undefined>;
  deleteConversationItem(
    tenant: string,
    id: string,
    itemId: string,
    now: number,
  ): Promise<"deleted" | "no_item" | "no_conversation">;
  /** Deletes what is past its TTL, then the oldest until the store fits RESPONSES_MAX_BYTES. */
  evict(now: number): Promise<number>;
  /** Bytes of JSON kept, all tenants together (what RESPONSES_MAX_BYTES bounds). */
  sizeBytes(): Promise<number>;
  close(): Promise<void>;
}

/** The methods a worker proxy forwards (all but close). */
export const BACKEND_METHODS = [
  "saveResponse",
  "response",
  "deleteObject",
  "history",
  "item",
  "page",
  "createConversation",
  "conversation",
  "updateConversation",
  "conversationItems",
  "addConversationItems",
  "conversationItem",
  "deleteConversationItem",
  "evict",
  "sizeBytes",
  "saveFile",
  "file",
  "listFiles",
  "deleteFile",
  "saveBatch",
  "batch",
  "listBatches",
  "activeBatches",
  "recordLine",
  "recordedLines",
  "lineResults",
] as const satisfies readonly Exclude<keyof ResponsesBackend, "close">[];

/** Objects one eviction transaction deletes, so a big sweep never holds the database long. */
export const EVICTION_BATCH = 64;

/** Bytes a stored text counts for. */
export const utf8Bytes = (text: string) => Buffer.byteLength(text, "utf8");
