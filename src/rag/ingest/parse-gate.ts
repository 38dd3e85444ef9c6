/**
 * The gate every request's parsing goes through: at most MAX_CONCURRENT_PARSES requests parse at
 * once, and no tenant holds more than MAX_PARSES_PER_TENANT of those slots, so one tenant's slow files
 * (each may take up to MAX_PARSE_MS) never hold every slot while another tenant's small file waits.
 * Waiting requests are kept per tenant, in arrival order, and a freed slot goes to the tenants in turn
 * (round robin, skipping a tenant at its cap), as fair queuing does for flows: a tenant with many
 * requests queued gets one slot's turn, not its queue's length.
 *
 * The queue is bounded: past MAX_PARSE_QUEUE waiting requests a new one gets 429 with Retry-After
 * rather than holding its connection and spooled files, except that a tenant with nothing waiting
 * may still queue one request while fewer than twice MAX_PARSE_QUEUE wait, so one tenant filling the
 * queue cannot turn every other tenant away.
 */
import { busy, DomainError } from "../../core/errors.js";

/** A tenant's default share: half the slots (rounded up), never all of them when there are several. */
export function defaultParsesPerTenant(concurrency: number): number {
  return concurrency <= 1 ? 1 : Math.min(concurrency - 1, Math.ceil(concurrency / 2));
}

interface Waiter {
  admit: () => void;
}

const clientLeft = () => new DomainError("cancelled", "The client closed the request");

export class ParseGate {
  private running = 0;
  /** Slots held, per tenant (absent: none). */
  private readonly held = new Map<string, number>();
  /** Waiting requests per tenant; the map's order is the turn order (a served tenant moves last). */
  private readonly waiting = new Map<string, Waiter[]>();
  private waitingCount = 0;

  constructor(
    private readonly concurrency: number,
    private readonly queueLength: number,
    private readonly retryAfterSeconds = 2,
    private readonly perTenant = defaultParsesPerTenant(concurrency),
  ) {}

  /**
   * Runs `parse` once a slot is free for `tenant`. With `signal`, a caller whose client left while
   * waiting gives its place up at once (rejected), so abandoned requests never fill the queue.
   */
  async run<T>(parse: () => Promise<T>, signal?: AbortSignal, tenant = "default"): Promise<T> {
    await this.acquire(tenant, signal);
    try {
      return await parse();
    } finally {
      this.release(tenant);
    }
  }

  private acquire(tenant: string, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(clientLeft());
    // Nobody of this tenant waits ahead (FIFO per tenant) and a slot is free within its share.
    if (!this.waiting.has(tenant) && this.canTake(tenant)) {
      this.take(tenant);
      return Promise.resolve();
    }
    const queued = this.waiting.get(tenant);
    const full =
      this.waitingCount >= this.queueLength &&
      (queued !== undefined || this.waitingCount >= 2 * this.queueLength);
    if (full) {
      throw busy(
        `${this.running} uploads are being parsed and ${this.waitingCount} wait (MAX_CONCURRENT_PARSES, MAX_PARSE_QUEUE; one tenant parses at most ${this.perTenant} at once, MAX_PARSES_PER_TENANT); retry shortly`,
        this.retryAfterSeconds,
      );
    }
    // The slot is handed over by dispatch(), already counted as held by this tenant.
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        admit: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        if (this.dequeue(tenant, waiter)) reject(clientLeft());
      };
      if (queued) queued.push(waiter);
      else this.waiting.set(tenant, [waiter]);
      this.waitingCount++;
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  private canTake(tenant: string): boolean {
    return this.running < this.concurrency && (this.held.get(tenant) ?? 0) < this.perTenant;
  }

  private take(tenant: string): void {
    this.running++;
    this.held.set(tenant, (this.held.get(tenant) ?? 0) + 1);
  }

  private release(tenant: string): void {
    this.running--;
    const left = (this.held.get(tenant) ?? 1) - 1;
    if (left > 0) this.held.set(tenant, left);
    else this.held.delete(tenant);
    this.dispatch();
  }

  /** Hands free slots to waiting tenants in turn, skipping those at their share. */
  private dispatch(): void {
    while (this.running < this.concurrency) {
      let next: string | undefined;
      for (const tenant of this.waiting.keys()) {
        if (this.canTake(tenant)) {
          next = tenant;
          break;
        }
      }
      if (next === undefined) return;
      const queue = this.waiting.get(next)!;
      const waiter = queue.shift()!;
      this.waitingCount--;
      // The tenant served goes to the end of the turn order.
      this.waiting.delete(next);
      if (queue.length > 0) this.waiting.set(next, queue);
      this.take(next);
      waiter.admit();
    }
  }

  /** Removes a waiter that gave up; false when it was admitted meanwhile. */
  private dequeue(tenant: string, waiter: Waiter): boolean {
    const queue = this.waiting.get(tenant);
    const at = queue?.indexOf(waiter) ?? -1;
    if (at < 0) return false;
    queue!.splice(at, 1);
    this.waitingCount--;
    if (queue!.length === 0) this.waiting.delete(tenant);
    return true;
  }

  /** Requests waiting for a slot now (for tests and metrics). */
  get queued(): number {
    return this.waitingCount;
  }
}
