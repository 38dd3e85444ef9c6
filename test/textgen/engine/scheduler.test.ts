import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { Scheduler } from "../../../src/textgen/engine/scheduler.js";
import { toApiError } from "../../../src/core/http.js";

/** A job that runs until released or aborted, standing in for a generation. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return {
    open,
    job: (signal: AbortSignal) =>
      new Promise<string>((resolve) => {
        void opened.then(() => resolve("done"));
        signal.addEventListener("abort", () => resolve("aborted"));
      }),
  };
}

describe("Scheduler", () => {
  it("runs at most maxConcurrent at once and queues the rest in order", async () => {
    const scheduler = new Scheduler({ maxConcurrent: 2, maxQueue: 10, timeoutMs: 10_000 });
    const order: number[] = [];
    let running = 0;
    let peak = 0;
    await Promise.all(
      [0, 1, 2, 3, 4].map((i) =>
        scheduler.run(undefined, async () => {
          running++;
          peak = Math.max(peak, running);
          order.push(i);
          await sleep(10);
          running--;
        }),
      ),
    );
    assert.equal(peak, 2);
    assert.deepEqual(order, [0, 1, 2, 3, 4]);
    assert.equal(scheduler.stats().completed, 5);
  });

  it("answers 429 with Retry-After when the queue is full", async () => {
    const scheduler = new Scheduler({ maxConcurrent: 1, maxQueue: 1, timeoutMs: 10_000 });
    const g = gate();
    const running = scheduler.run(undefined, g.job);
    const queued = scheduler.run(undefined, g.job);
    await assert.rejects(
      scheduler.run(undefined, g.job),
      (error: unknown) =>
        toApiError(error).statusCode === 429 && Number(toApiError(error).headers["retry-after"]) >= 1,
    );
    g.open();
    assert.deepEqual(await Promise.all([running, queued]), ["done", "done"]);
  });

  it("a waiting job whose client leaves is dropped from the queue", async () => {
    const scheduler = new Scheduler({ maxConcurrent: 1, maxQueue: 5, timeoutMs: 10_000 });
    const g = gate();
    const running = scheduler.run(undefined, g.job);
    const client = new AbortController();
    let ran = false;
    const waiting = scheduler.run(client.signal, async () => {
      ran = true;
    });
    assert.equal(scheduler.stats().queued, 1);
    client.abort();
    await assert.rejects(waiting, (error: unknown) => toApiError(error).statusCode === 499);
    assert.equal(scheduler.stats().queued, 0);
    g.open();
    await running;
    assert.equal(ran, false);
  });

  it("a running job whose client leaves is aborted", async () => {
    const scheduler = new Scheduler({ maxConcurrent: 1, maxQueue: 5, timeoutMs: 10_000 });
    const g = gate();
    const client = new AbortController();
    let jobSignal: AbortSignal | undefined;
    const running = scheduler.run(client.signal, (signal) => ((jobSignal = signal), g.job(signal)));
    await sleep(5);
    client.abort();
    await assert.rejects(running, (error: unknown) => toApiError(error).statusCode === 499);
    assert.equal(jobSignal?.aborted, true);
    assert.equal(scheduler.stats().running, 0);
    assert.equal(scheduler.stats().cancelled, 1);
  });

  it("answers at the deadline even when the job ignores its signal, and holds the slot until it ends", async () => {
    const scheduler = new Scheduler({ maxConcurrent: 1, maxQueue: 5, timeoutMs: 50 });
    // A job that cannot be interrupted (a native step), ending only when opened.
    const g = gate();
    const stubborn = () =>
      new Promise<string>((resolve) => void g.job(new AbortController().signal).then(resolve));
    await assert.rejects(
      scheduler.run(undefined, stubborn),
      (error: unknown) => toApiError(error).statusCode === 504,
    );
    assert.equal(scheduler.stats().running, 1, "the slot stays held while the job still runs");
    g.open();
    await sleep(5);
    assert.equal(scheduler.stats().running, 0);
    assert.equal(await scheduler.run(undefined, async () => "next"), "next");
  });

  it("a job past its deadline is aborted and answered 504", async () => {
    const scheduler = new Scheduler({ maxConcurrent: 1, maxQueue: 5, timeoutMs: 50 });
    const g = gate();
    await assert.rejects(
      scheduler.run(undefined, g.job),
      (error: unknown) => toApiError(error).statusCode === 504,
    );
    assert.equal(scheduler.stats().timedOut, 1);
    assert.equal(scheduler.stats().running, 0);
  });
});
