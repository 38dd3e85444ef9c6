/**
 * The parse gate's fairness (#35): a tenant holds at most its share of the parse slots, freed slots
 * go to waiting tenants in turn, and one tenant filling the queue leaves every other tenant a place.
 * Parses here are promises the test settles, so the order of events is exact.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { toApiError } from "../../../src/core/http.js";
import { defaultParsesPerTenant, ParseGate } from "../../../src/rag/ingest/parse-gate.js";

/** A parse that runs until the test ends it; `started` records when the gate let it in. */
function heldParse(gate: ParseGate, tenant: string, log: string[], label: string, signal?: AbortSignal) {
  let finish!: () => void;
  const done = gate.run(
    () =>
      new Promise<void>((resolve) => {
        log.push(label);
        finish = resolve;
      }),
    signal,
    tenant,
  );
  return { done, finish: () => finish() };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("parse gate fairness", () => {
  it("by default a tenant gets half the slots, never all of them when there are several", () => {
    assert.deepEqual([1, 2, 3, 4, 8, 9].map(defaultParsesPerTenant), [1, 1, 2, 2, 4, 5]);
  });

  it("a tenant with slow files holds its share only; another tenant's file starts at once", async () => {
    const gate = new ParseGate(2, 16);
    const log: string[] = [];
    const a1 = heldParse(gate, "a", log, "a1");
    const a2 = heldParse(gate, "a", log, "a2");
    const a3 = heldParse(gate, "a", log, "a3");
    await tick();
    assert.deepEqual(log, ["a1"], "a's second file waits although a slot is free");
    const b1 = heldParse(gate, "b", log, "b1");
    await tick();
    assert.deepEqual(log, ["a1", "b1"], "b's file takes the slot a may not hold");
    assert.equal(gate.queued, 2);
    b1.finish();
    await b1.done;
    await tick();
    assert.deepEqual(log, ["a1", "b1"], "the freed slot is b's share: a stays at one");
    a1.finish();
    await a1.done;
    await tick();
    assert.deepEqual(log, ["a1", "b1", "a2"]);
    a2.finish();
    await a2.done;
    await tick();
    a3.finish();
    await a3.done;
    assert.deepEqual(log, ["a1", "b1", "a2", "a3"]);
    assert.equal(gate.queued, 0);
  });

  it("freed slots go to the waiting tenants in turn, not in arrival order", async () => {
    const gate = new ParseGate(1, 16);
    const log: string[] = [];
    const first = heldParse(gate, "x", log, "x0");
    // Parses that end as soon as they start: the gate drains by itself, in its own order.
    const quick = (tenant: string, label: string) =>
      gate.run(async () => void log.push(label), undefined, tenant);
    const all = [
      quick("a", "a1"),
      quick("a", "a2"),
      quick("a", "a3"),
      quick("b", "b1"),
      quick("c", "c1"),
      quick("b", "b2"),
    ];
    await tick();
    first.finish();
    await Promise.all([first.done, ...all]);
    assert.deepEqual(log, ["x0", "a1", "b1", "c1", "a2", "b2", "a3"]);
  });

  it("past MAX_PARSE_QUEUE a tenant already waiting gets 429, a tenant with nothing waiting still queues once", async () => {
    const gate = new ParseGate(1, 2);
    const log: string[] = [];
    const running = heldParse(gate, "a", log, "a0");
    const a1 = heldParse(gate, "a", log, "a1");
    const a2 = heldParse(gate, "a", log, "a2");
    await tick();
    const tooMany = (error: unknown) => {
      const apiError = toApiError(error);
      assert.equal(apiError.statusCode, 429);
      assert.ok(Number(apiError.headers["retry-after"]) > 0);
      assert.match(apiError.message, /MAX_PARSE_QUEUE/);
      return true;
    };
    await assert.rejects(
      gate.run(async () => log.push("a3"), undefined, "a"),
      tooMany,
    );
    const b1 = heldParse(gate, "b", log, "b1");
    await assert.rejects(
      gate.run(async () => log.push("b2"), undefined, "b"),
      tooMany,
    );
    const c1 = heldParse(gate, "c", log, "c1");
    // Twice the queue is the hard bound, whoever asks.
    await assert.rejects(
      gate.run(async () => log.push("d1"), undefined, "d"),
      tooMany,
    );
    assert.equal(gate.queued, 4);
    for (const parse of [running, a1, b1, c1, a2]) {
      await tick();
      parse.finish();
      await parse.done;
    }
    assert.deepEqual(log, ["a0", "a1", "b1", "c1", "a2"]);
  });

  it("a waiting client that leaves gives its place up; a failed parse frees its slot", async () => {
    const gate = new ParseGate(1, 4);
    const log: string[] = [];
    const running = heldParse(gate, "a", log, "a0");
    const controller = new AbortController();
    const leaving = heldParse(gate, "b", log, "b-left", controller.signal);
    const staying = heldParse(gate, "c", log, "c1");
    controller.abort();
    await assert.rejects(leaving.done, (error: unknown) => toApiError(error).statusCode === 499);
    assert.equal(gate.queued, 1);
    running.finish();
    await running.done;
    await tick();
    staying.finish();
    await staying.done;
    assert.deepEqual(log, ["a0", "c1"]);
    await assert.rejects(
      gate.run(() => Promise.reject(new Error("bad file")), undefined, "c"),
      /bad file/,
    );
    assert.equal(await gate.run(async () => "free again", undefined, "c"), "free again");
  });
});
