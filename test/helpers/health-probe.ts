/**
 * /health probed while an attack runs, for the reliability tests. A liveness bound, not a speed
 * figure: what is bounded is the longest the server's event loop was held, measured where the server
 * runs (inside a served child, or here for an app in this process), since a probe's round trip on a
 * loaded 2-core CI machine also waits for the scheduler. /health does no work: a second is generous.
 */
import assert from "node:assert/strict";
import { monitorEventLoopDelay } from "node:perf_hooks";

import type { ServedProcess } from "./serve-process.js";

export const HEALTH_BOUND_MS = 1000;

/**
 * Runs `work` while probing `/health` every 50 ms (each must be a 200); the result and the longest
 * the server's loop was held (ms). `server` is a served child, or the base URL of an app listening
 * in this process.
 */
export async function whileProbing<T>(
  server: string | ServedProcess,
  work: Promise<T>,
): Promise<{ result: T; slowest: number }> {
  const baseUrl = typeof server === "string" ? server : server.url;
  const from = Date.now();
  const delay = typeof server === "string" ? monitorEventLoopDelay({ resolution: 10 }) : undefined;
  delay?.enable();
  let done = false;
  const finished = work.finally(() => (done = true));
  do {
    const response = await fetch(`${baseUrl}/health`);
    await response.arrayBuffer();
    assert.equal(response.status, 200, "/health answered");
    await new Promise((resolve) => setTimeout(resolve, 50));
  } while (!done);
  const result = await finished;
  delay?.disable();
  const slowest = delay ? delay.max / 1e6 : await (server as ServedProcess).loopLagSince(from);
  return { result, slowest };
}
