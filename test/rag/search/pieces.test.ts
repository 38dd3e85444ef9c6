/**
 * A value sent from a worker thread in pieces (src/rag/search/indexer/pieces.ts) arrives equal to what
 * was sent: long arrays cut into runs, long strings alone (inside cut arrays too), a root that is itself
 * cut, typed arrays and maps in the skeleton, nesting deeper than the cut goes; one piece per request.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Worker } from "node:worker_threads";
import { receivePieces } from "../../../src/rag/search/indexer/pieces.js";

/** A worker (under tsx, as the app's) that sends `value` back with sendInPieces. */
function echo(value: unknown): Worker {
  const source = `
    import { parentPort, workerData } from "node:worker_threads";
    import { askedFor, sendInPieces } from ${JSON.stringify(new URL("../../../src/rag/search/indexer/pieces.ts", import.meta.url).href)};
    await sendInPieces(parentPort, workerData, askedFor(parentPort));`;
  return new Worker(
    `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then(({ register }) => { register(); return import("data:text/javascript," + encodeURIComponent(${JSON.stringify(source)})); });`,
    { eval: true, workerData: value },
  );
}

async function roundTrip(value: unknown): Promise<unknown> {
  const worker = echo(value);
  try {
    return await receivePieces(worker, (message) => assert.fail(`unexpected ${JSON.stringify(message)}`));
  } finally {
    await worker.terminate();
  }
}

describe("values sent in pieces", () => {
  it("arrive equal, whatever was cut", async () => {
    const long = "x".repeat(200_000);
    const deep: Record<string, unknown> = {};
    let cursor = deep;
    for (let i = 0; i < 60; i++) cursor = cursor.next = { i, text: i === 59 ? long : "short" };
    const value = {
      index_name: "big",
      documents: Array.from({ length: 5_003 }, (_, i) =>
        i % 1000 === 7 ? { id: `d${i}`, text: long } : `doc ${i}`,
      ),
      nested: { lists: [Array.from({ length: 4_500 }, (_, i) => i), [long, long]] },
      keys: new Uint32Array([1, 2, 3]),
      map: new Map([[1, "one"]]),
      deep,
    };
    assert.deepEqual(await roundTrip(value), value);
    assert.deepEqual(
      await roundTrip(Array.from({ length: 7_000 }, (_, i) => [i, long.slice(0, i % 3)])),
      Array.from({ length: 7_000 }, (_, i) => [i, long.slice(0, i % 3)]),
    );
    assert.equal(await roundTrip(long), long);
    assert.deepEqual(await roundTrip({}), {});
  });
});
