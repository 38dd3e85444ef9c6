/**
 * The Responses API's store: responses (`store`, default true as OpenAI's), what continues them
 * (`previous_response_id`, `item_reference`), and the Conversations API, kept durably per tenant
 * (the key's tenant; "default" with keys off) in SQLite or PostgreSQL (types.ts says what is kept).
 *
 * A whole response is answered once its save has committed; a stream's last event goes out as its
 * save starts, so a client may ask for it before the commit: every read of a tenant first waits for
 * that tenant's saves in flight, so a client of this process reads what it was just answered.
 */
import type { FastifyRequest } from "fastify";
import { actingTenant } from "../../core/auth.js";
import { DomainError, notFound } from "../../core/errors.js";
import type { ResponseItem, ResponsesStore } from "../http/dialects/openai-responses.js";
import { newId, normaliseItem, toRow } from "./items.js";
import type { BatchBackend, ItemRow, PageQuery, ResponsesBackend, StoreLimits } from "./types.js";

export interface StoreOptions {
  limits: StoreLimits;
  /** The clock (ms): tests move it to see the TTL at work. */
  now?: () => number;
  log?: { warn: (object: object, message: string) => void };
  /** Where it is kept, for the start-up line (a path or a redacted URL). */
  where: string;
}

export interface ItemList {
  object: "list";
  data: ResponseItem[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

export interface Conversation {
  id: string;
  object: "conversation";
  created_at: number;
  metadata: Record<string, string>;
}

/** How often what is past its TTL is swept while the store is in use (reads never see it anyway). */
const SWEEP_EVERY_MS = 10 * 60_000;

const parse = (json: string) => JSON.parse(json) as ResponseItem;

function list(rows: ItemRow[], hasMore: boolean): ItemList {
  return {
    object: "list",
    data: rows.map((row) => parse(row.json)),
    first_id: rows[0]?.id ?? null,
    last_id: rows.at(-1)?.id ?? null,
    has_more: hasMore,
  };
}

export class DurableResponsesStore implements ResponsesStore {
  readonly where: string;
  readonly limits: StoreLimits;
  private readonly now: () => number;
  private readonly pending = new Map<string, Set<Promise<unknown>>>();
  private sweeping: Promise<void> | undefined;
  private sweepAgain = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly backend: ResponsesBackend,
    private readonly options: StoreOptions,
  ) {
    this.where = options.where;
    this.limits = options.limits;
    this.now = options.now ?? Date.now;
  }

  // The dialect's seam (dialects/openai-responses.ts).

  async history(responseId: string, request: FastifyRequest): Promise<ResponseItem[] | undefined> {
    const tenant = await this.settled(request);
    const found = await this.backend.history(tenant, responseId, this.now());
    if (!found) return undefined;
    if ("missing" in found)
      throw new DomainError(
        "not_found",
        `Previous response with id '${responseId}' cannot be continued: '${found.missing}', an earlier response of its chain, was deleted or has expired.`,
        { details: [{ path: "/previous_response_id" }] },
      );
    return found.items.map(parse);
  }

  async item(itemId: string, request: FastifyRequest): Promise<ResponseItem | undefined> {
    const tenant = await this.settled(request);
    const json = await this.backend.item(tenant, itemId, this.now());
    return json === undefined ? undefined : parse(json);
  }

  async conversation(conversationId: string, request: FastifyRequest): Promise<ResponseItem[] | undefined> {
    const tenant = await this.settled(request);
    return (await this.backend.conversationItems(tenant, conversationId, this.now()))?.map(parse);
  }

  async save(response: ResponseItem, input: ResponseItem[], request: FastifyRequest): Promise<void> {
    const tenant = actingTenant(request, undefined);
    const output = response.output as ResponseItem[];
    const conversation = (response.conversation as { id?: string } | null | undefined)?.id ?? null;
    const saving = this.backend.saveResponse(
      tenant,
      {
        id: String(response.id),
        previousId: typeof response.previous_response_id === "string" ? response.previous_response_id : null,
        conversationId: conversation,
        keep: response.store === true,
        // `output` stays in the body as a placeholder, so a stored response reads back in its order.
        body: JSON.stringify({ ...response, output: [] }),
        input: input.map((item, index) => toRow(normaliseItem(item, `/input/${index}`))),
        output: output.map(toRow),
      },
      this.now(),
    );
    const result = await this.track(tenant, saving);
    if (result === "no_conversation")
      this.options.log?.warn(
        { conversation },
        "the response's conversation was deleted before the response finished: its items were not added",
      );
    this.sweepSoon();
  }

  // The routes' own (responses-routes.ts, conversations-routes.ts).

  async retrieve(request: FastifyRequest, id: string): Promise<ResponseItem | undefined> {
    const tenant = await this.settled(request);
    const stored = await this.backend.response(tenant, id, this.now());
    if (!stored) return undefined;
    return { ...parse(stored.body), output: stored.output.map(parse) };
  }

  async deleteResponse(request: FastifyRequest, id: string): Promise<boolean> {
    const tenant = await this.settled(request);
    return this.backend.deleteObject(tenant, "response", id, this.now());
  }

  /** A page of a response's input items or of a conversation's items; undefined: no such owner. */
  async items(
    request: FastifyRequest,
    kind: "response" | "conversation",
    id: string,
    query: PageQuery,
  ): Promise<ItemList | undefined> {
    const tenant = await this.settled(request);
    const page = await this.backend.page(tenant, kind, id, query, this.now());
    if (page === "no_cursor") {
      const [field, cursor] = query.after !== undefined ? ["after", query.after] : ["before", query.before];
      throw new DomainError("not_found", `Item with id '${cursor}' not found.`, {
        details: [{ path: `/${field}` }],
      });
    }
    return page && list(page.items, page.hasMore);
  }

  async createConversation(
    request: FastifyRequest,
    items: ResponseItem[],
    metadata: Record<string, string>,
  ): Promise<Conversation> {
    const rows = await this.resolved(request, items);
    const tenant = actingTenant(request, undefined);
    const conversation: Conversation = {
      id: newId("conv"),
      object: "conversation",
      created_at: Math.floor(this.now() / 1000),
      metadata,
    };
    await this.track(
      tenant,
      this.backend.createConversation(
        tenant,
        conversation.id,
        JSON.stringify(conversation),
        rows,
        this.now(),
      ),
    );
    this.sweepSoon();
    return conversation;
  }

  async getConversation(request: FastifyRequest, id: string): Promise<Conversation | undefined> {
    const tenant = await this.settled(request);
    const json = await this.backend.conversation(tenant, id, this.now());
    return json === undefined ? undefined : (JSON.parse(json) as Conversation);
  }

  async updateConversation(
    request: FastifyRequest,
    id: string,
    metadata: Record<string, string>,
  ): Promise<Conversation | undefined> {
    const current = await this.getConversation(request, id);
    if (!current) return undefined;
    const updated = { ...current, metadata };
    const tenant = actingTenant(request, undefined);
    const done = await this.track(
      tenant,
      this.backend.updateConversation(tenant, id, JSON.stringify(updated), this.now()),
    );
    return done ? updated : undefined;
  }

  async deleteConversation(request: FastifyRequest, id: string): Promise<boolean> {
    const tenant = await this.settled(request);
    return this.backend.deleteObject(tenant, "conversation", id, this.now());
  }

  /** Appends items (references resolved) to a conversation: the list of what was added. */
  async addItems(request: FastifyRequest, id: string, items: ResponseItem[]): Promise<ItemList | undefined> {
    const rows = await this.resolved(request, items);
    const tenant = actingTenant(request, undefined);
    const added = await this.track(tenant, this.backend.addConversationItems(tenant, id, rows, this.now()));
    this.sweepSoon();
    return added ? list(rows, false) : undefined;
  }

  async conversationItem(request: FastifyRequest, id: string, itemId: string) {
    const tenant = await this.settled(request);
    const json = await this.backend.conversationItem(tenant, id, itemId, this.now());
    return json === undefined ? undefined : parse(json);
  }

  /** Deletes an item: the conversation after it; undefined when there is no such conversation. */
  async deleteItem(request: FastifyRequest, id: string, itemId: string): Promise<Conversation | undefined> {
    const tenant = await this.settled(request);
    const result = await this.backend.deleteConversationItem(tenant, id, itemId, this.now());
    if (result === "no_conversation") return undefined;
    if (result === "no_item") throw notFound(`Item with id '${itemId}' not found.`);
    return this.getConversation(request, id);
  }

  /** The Batch API's tables, in the same database (textgen/batches/). */
  get batchTables(): BatchBackend {
    return this.backend;
  }

  /** Bytes kept, all tenants together. */
  sizeBytes(): Promise<number> {
    return this.backend.sizeBytes();
  }

  /** Sweeps what is past its TTL or over the size bound now (the store does so after every write). */
  async sweep(): Promise<void> {
    this.sweepSoon();
    await this.sweeping;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await Promise.allSettled([...this.pending.values()].flatMap((set) => [...set]));
    await this.sweeping;
    await this.backend.close();
  }

  /** Items a client gives (a conversation's): references resolved, each in its kept shape. */
  private async resolved(request: FastifyRequest, items: ResponseItem[]): Promise<ItemRow[]> {
    const rows: ItemRow[] = [];
    for (const [index, item] of items.entries()) {
      if (item.type !== "item_reference") {
        rows.push(toRow(normaliseItem(item, `/items/${index}`)));
        continue;
      }
      const found = typeof item.id === "string" ? await this.item(item.id, request) : undefined;
      if (!found)
        throw new DomainError("not_found", `Item with id '${String(item.id)}' not found.`, {
          details: [{ path: `/items/${index}` }],
        });
      rows.push(toRow(found));
    }
    return rows;
  }

  /** The request's tenant, once its writes in flight have landed. */
  private async settled(request: FastifyRequest): Promise<string> {
    const tenant = actingTenant(request, undefined);
    const writes = this.pending.get(tenant);
    if (writes) await Promise.allSettled([...writes]);
    return tenant;
  }

  private async track<T>(tenant: string, work: Promise<T>): Promise<T> {
    const writes = this.pending.get(tenant) ?? new Set();
    this.pending.set(tenant, writes);
    writes.add(work);
    try {
      return await work;
    } finally {
      writes.delete(work);
      if (writes.size === 0) this.pending.delete(tenant);
    }
  }

  /** Evicts in bounded batches until nothing is past its TTL or over the bound; one sweep at a time. */
  private sweepSoon(): void {
    this.timer ??= setInterval(() => this.sweepSoon(), SWEEP_EVERY_MS).unref();
    if (this.sweeping) {
      this.sweepAgain = true;
      return;
    }
    this.sweeping = (async () => {
      do {
        this.sweepAgain = false;
        while ((await this.backend.evict(this.now())) > 0);
      } while (this.sweepAgain);
    })()
      .catch((error: unknown) => this.options.log?.warn({ err: error }, "Responses store: eviction failed"))
      .finally(() => (this.sweeping = undefined));
  }
}
