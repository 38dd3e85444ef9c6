import assert from "node:assert/strict";
import { test } from "node:test";
import { pickBatcher, threadSharing } from "../../../src/textgen/engine/llama-generator.js";

test("contexts that would oversubscribe the cores split the threads among those at work", () => {
  const batchers = [{ busy: false }, { busy: false }];
  const sharing = threadSharing(2, 2, 2, batchers);
  assert.ok(sharing);
  batchers[0]!.busy = true;
  assert.equal(sharing.threads(), 2);
  batchers[1]!.busy = true;
  assert.equal(sharing.threads(), 1);
  // One thread per context on two cores, or one context: each keeps its own threads.
  assert.equal(threadSharing(1, 2, 2, batchers), undefined);
  assert.equal(threadSharing(2, 1, 2, batchers), undefined);
  assert.equal(threadSharing(4, 2, 8, batchers), undefined);
});

test("requests fill one context before the next when contexts share threads; a cached prefix wins", () => {
  const make = (load: number, prefix = 0) => ({ load, capacity: 4, cachedPrefixLength: () => prefix });
  assert.equal(pickBatcher([make(0), make(0)], [], "", true), 0);
  assert.equal(pickBatcher([make(0), make(2)], [], "", true), 1);
  assert.equal(pickBatcher([make(4), make(1)], [], "", true), 1);
  assert.equal(pickBatcher([make(2), make(0)], [], "", false), 1);
  assert.equal(pickBatcher([make(3), make(0, 300)], [], "", true), 1);
});
