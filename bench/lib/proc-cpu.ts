/**
 * CPU time of a whole process (every thread: the JS thread, libuv's pool, llama.cpp's), in ns, from
 * Linux's /proc/<pid>/task/<tid>/schedstat (time on a CPU, time waiting for one). Wall-clock speed on
 * a loaded machine mostly measures the other load; CPU time per token does not, so the benchmarks
 * report it next to tokens/s. Returns null where /proc is missing (not Linux).
 */
import { readdirSync, readFileSync } from "node:fs";

export interface CpuSample {
  /** Nanoseconds the process's threads ran on a CPU. */
  runNs: number;
  /** Nanoseconds they were runnable but waited for a CPU (other load on the machine). */
  waitNs: number;
}

export function processCpu(pid: number = process.pid): CpuSample | null {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  let runNs = 0;
  let waitNs = 0;
  for (const tid of tasks) {
    try {
      const [run, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ");
      runNs += Number(run);
      waitNs += Number(wait);
    } catch {
      // The thread ended between listing and reading; its time is lost either way.
    }
  }
  return { runNs, waitNs };
}

/** CPU spent by `pid` while `work` ran. */
export async function withCpu<T>(
  pid: number,
  work: () => Promise<T>,
): Promise<{ result: T; cpu: CpuSample | null }> {
  const before = processCpu(pid);
  const result = await work();
  const after = processCpu(pid);
  const cpu =
    before && after ? { runNs: after.runNs - before.runNs, waitNs: after.waitNs - before.waitNs } : null;
  return { result, cpu };
}
