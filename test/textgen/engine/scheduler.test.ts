import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { PreemptedError, Scheduler } from "../../../src/textgen/engine/scheduler.js";
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

  describe("priorities (the Batch API's hook)", () => {
    /**
     * Decode steps driven by hand: a job stands for a sequence in the batcher, which notices its
     * signal at the start of each step (batcher.ts dropAborted) and then leaves.
     */
    function deferred() {
      let resolve!: () => void;
      const promise = new Promise<void>((done) => (resolve = done));
      return { promise, resolve };
    }

    function steps() {
      let step = 0;
      let next = deferred();
      return {
        get step() {
          return step;
        },
        async tick() {
          step++;
          const current = next;
          next = deferred();
          current.resolve();
          await sleep(1);
        },
        job: (onStart?: () => void) => async (signal: AbortSignal) => {
          onStart?.();
          for (let i = 0; i < 1000; i++) {
            await next.promise;
            if (signal.aborted) return "dropped";
          }
          return "done";
        },
      };
    }

    it("an interactive request preempts a batch line and starts within one step", async () => {
      const clock = steps();
      const scheduler = new Scheduler({ maxConcurrent: 2, maxQueue: 4, timeoutMs: 60_000 });
      const lines = [0, 1].map(() =>
        scheduler.run(undefined, clock.job(), { priority: "batch" }).catch((error: unknown) => error),
      );
      await clock.tick();
      await clock.tick();
      assert.equal(scheduler.stats().runningBatch, 2);
      let startedAt = -1;
      const asked = clock.step;
      const interactive = scheduler.run(
        undefined,
        clock.job(() => (startedAt = clock.step)),
      );
      await clock.tick();
      assert.equal(startedAt, asked + 1, "the interactive request waited more than one step");
      // One line gave way (the most recent); it is told so, to be submitted again.
      const outcomes = await Promise.race([Promise.any(lines), sleep(1000).then(() => "none")]);
      assert.ok(outcomes instanceof PreemptedError, String(outcomes));
      assert.equal(scheduler.stats().preempted, 1);
      assert.equal(scheduler.stats().runningBatch, 1);
      // The other line runs on; so does the interactive request.
      for (let i = 0; i < 1000; i++) await clock.tick();
      assert.equal(await interactive, "done");
      const settled = await Promise.all(lines);
      assert.equal(settled.filter((outcome) => outcome === "done").length, 1);
    });

    it("waiting interactive requests are admitted before waiting batch lines", async () => {
      const scheduler = new Scheduler({ maxConcurrent: 1, maxQueue: 4, timeoutMs: 10_000 });
      const g = gate();
      const order: string[] = [];
      const running = scheduler.run(undefined, g.job);
      const queued = [
        scheduler.run(undefined, async () => void order.push("batch"), { priority: "batch" }),
        scheduler.run(undefined, async () => void order.push("interactive")),
      ];
      g.open();
      await Promise.all([running, ...queued]);
      assert.deepEqual(order, ["interactive", "batch"]);
    });

    it("interactive requests never preempt each other", async () => {
      const clock = steps();
      const scheduler = new Scheduler({ maxConcurrent: 1, maxQueue: 4, timeoutMs: 60_000 });
      const first = scheduler.run(undefined, clock.job());
      await clock.tick();
      const second = scheduler.run(undefined, clock.job());
      await clock.tick();
      assert.equal(scheduler.stats().preempted, 0);
      assert.equal(scheduler.stats().queued, 1);
      for (let i = 0; i < 2001; i++) await clock.tick();
      assert.deepEqual(await Promise.all([first, second]), ["done", "done"]);
    });
  });
});
