/**
 * CPU time of a whole process (every thread: the JS thread, libuv's pool, llama.cpp's), from Linux's
 * /proc. Wall-clock speed on a loaded machine mostly measures the other load; CPU time per token does
 * not, so the benchmarks report it next to tokens/s. Returns null where /proc is missing (not Linux).
 *
 * Time on a CPU comes from /proc/<pid>/stat (utime + stime, in clock ticks of 10 ms), which counts the
 * threads that have ended too. Summing the live threads' /proc/<pid>/task/<tid>/schedstat, as this did
 * before, missed them: node-llama-cpp's prebuilt binary starts llama.cpp's worker threads for each
 * decode and ends them after it, so our app's CPU per token read as about half of what it is (one
 * core's worth for two threads computing). Time waiting for a CPU is only in schedstat: it is the live
 * threads' sum, and misses ended threads' waits.
 */
import { readdirSync, readFileSync } from "node:fs";

/** Linux's USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every architecture Node runs on. */
const CLOCK_TICK_NS = 1e9 / 100;

export interface CpuSample {
  /** Nanoseconds the process's threads ran on a CPU, ended threads included (10 ms resolution). */
  runNs: number;
  /** Nanoseconds its live threads were runnable but waited for a CPU (other load on the machine). */
  waitNs: number;
}

export function processCpu(pid: number = process.pid): CpuSample | null {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  let runNs: number;
  try {
    // The command (field 2) may hold spaces and parentheses: the fields after its closing one.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15, i.e. the 12th and 13th after the command.
    runNs = (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_NS;
  } catch {
    return null;
  }
  let waitNs = 0;
  for (const tid of tasks) {
    try {
      const [, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ");
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
