/**
 * The merge worker thread retires after WORKER_IDLE_MS (10 s) without a job. A merge asked for in the
 * same event-loop turn as that retirement goes to a new worker; the retired worker's late `exit` must
 * not reject it (it did: "merge worker exited with code 1 before answering", a merge dropped). The event
 * loop is blocked past the idle time so the retirement and the next merge meet, as a busy query loop made
 * them meet in bench/hybrid.ts. The test asserts the merge's result, not a timing.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { IndexWriter, mergeInBackground, SegmentedIndex } from "../../../src/rag/search/index.js";

describe("merge worker", () => {
  it("a merge asked for as the idle worker retires still completes", async () => {
    const index = SegmentedIndex.create({ scorer: "bm25" });
    const writer = new IndexWriter(index);
    for (const batch of [["a cat"], ["a dog"], ["a bird"]]) writer.prepare({ add: batch }).apply();
    await mergeInBackground(index, [0, 1]);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10_500);
    const merged = await mergeInBackground(index, [1, 2]);
    assert.ok(merged, "the second merge gives a result");
  });
});
