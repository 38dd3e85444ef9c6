/**
 * Loaded into a served child (`--import`, by test/helpers/serve-process.ts): every 100 ms it appends
 * "<wall-clock ms> <longest event-loop delay in those 100 ms>" to LECTERN_TEST_LOOP_LAG_FILE, so that a
 * liveness test can read how long the server's own loop was held, measured inside the server and not
 * through the (loaded) test process's scheduling.
 */
import { appendFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";
import process from "node:process";
import { setInterval } from "node:timers";
import { isMainThread } from "node:worker_threads";

const file = process.env["LECTERN_TEST_LOOP_LAG_FILE"];
// Processes and threads the server starts inherit --import: only the server's main thread records.
delete process.env["LECTERN_TEST_LOOP_LAG_FILE"];
if (file && isMainThread) {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  setInterval(() => {
    appendFileSync(file, `${Date.now()} ${(delay.max / 1e6).toFixed(1)}\n`);
    delay.reset();
  }, 100).unref();
}
