/**
 * Writer exclusion (Lucene's IndexWriter write.lock, held per index): writes of one index run one at a
 * time in this process (KeyedMutex) and, when the store offers it, across processes (`withWriteLock`).
 * A write that still finds its base version stale (another replica committed in between: a 409
 * StaleVersionError from the store) is run again: the caller's work catches the cached index up and
 * recomputes the change, up to MAX_WRITE_ATTEMPTS times with a short jittered backoff, then the 409
 * reaches the client.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { conflict } from "../../core/errors.js";
import { KeyedMutex } from "../../core/keyed-mutex.js";
import { StaleVersionError } from "../store/common.js";
import type { IndexKey, IndexStore } from "../store/types.js";
import { cacheKey } from "./common.js";

/** Attempts of one write that keeps meeting a stale version before its 409 reaches the client. */
export const MAX_WRITE_ATTEMPTS = 5;

/** Before retry n (1, 2, …): a few ms at first, doubling, capped at 200 ms; ±50% jitter. */
function retryDelayMs(retry: number): number {
  return Math.min(200, 5 * 2 ** (retry - 1)) * (0.5 + Math.random());
}

export class WriteExclusion {
  private readonly writers = new KeyedMutex();

  constructor(
    private readonly store: IndexStore,
    /** Told of each retry (the tenant's write_retries figure). */
    private readonly onRetry: (key: IndexKey) => void,
  ) {}

  /** `work` alone among this index's writers, run again while its base version was stale. */
  withRetries<T>(key: IndexKey, work: () => Promise<T>): Promise<T> {
    const attempts = async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await work();
        } catch (error) {
          if (!(error instanceof StaleVersionError)) throw error;
          if (attempt >= MAX_WRITE_ATTEMPTS) {
            throw conflict(
              `Index "${key.name}" kept being changed by other writers (${attempt} attempts); retry the request`,
              { retryAfter: "1" },
            );
          }
          this.onRetry(key);
          await sleep(retryDelayMs(attempt));
        }
      }
    };
    return this.once(key, attempts);
  }

  /** `work` alone among this index's writers, in this process and (store lock) across processes. */
  once<T>(key: IndexKey, work: () => Promise<T>): Promise<T> {
    return this.writers.run(cacheKey(key), () =>
      this.store.withWriteLock ? this.store.withWriteLock(key, work) : work(),
    );
  }
}
