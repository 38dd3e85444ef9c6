/**
 * /health probed while an attack runs, for the reliability tests: the slowest answer is what a load
 * balancer would have seen. A liveness bound, not a speed figure: /health does no work, so it answers
 * in milliseconds unless the event loop is held; a second is generous on a loaded 2-core CI machine.
 */
import assert from "node:assert/strict";

export const HEALTH_BOUND_MS = 1000;

/** Runs `work` while probing `${baseUrl}/health` every 50 ms; the result and the slowest probe (ms). */
export async function whileProbing<T>(
  baseUrl: string,
  work: Promise<T>,
): Promise<{ result: T; slowest: number }> {
  let done = false;
  const finished = work.finally(() => (done = true));
  let slowest = 0;
  do {
    const started = performance.now();
    const response = await fetch(`${baseUrl}/health`);
    await response.arrayBuffer();
    assert.equal(response.status, 200, "/health answered");
    slowest = Math.max(slowest, performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 50));
  } while (!done);
  return { result: await finished, slowest };
}
