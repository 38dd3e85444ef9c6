/** Resident memory of a child process (a server under test), from Linux's /proc/<pid>/status. */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";

/** Current and peak resident memory, in bytes. */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)![1]) * 1024;
  return { rss: kib("VmRSS"), peak: kib("VmHWM") };
}

/** Current resident memory, in bytes. */
export const rssOf = (pid: number): number => memoryOf(pid).rss;

/** Starts a new peak measurement (writing 5 to clear_refs resets VmHWM to the current RSS). */
export function resetPeak(pid: number): void {
  writeFileSync(`/proc/${pid}/clear_refs`, "5");
}

/**
 * The processes below `pid` (children, their children, …), from /proc/<pid>/task/<tid>/children:
 * a few small reads, cheap enough to repeat every few milliseconds.
 */
export function descendantsOf(pid: number): number[] {
  const found: number[] = [];
  const visit = (parent: number) => {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${parent}/task`);
    } catch {
      return; // gone meanwhile
    }
    for (const task of tasks) {
      let children = "";
      try {
        children = readFileSync(`/proc/${parent}/task/${task}/children`, "utf8");
      } catch {
        continue;
      }
      for (const child of children.split(" ").filter(Boolean).map(Number)) {
        found.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return found;
}

/**
 * Samples the peak resident memory (VmHWM) of every process below `pid` every `intervalMs` until
 * stopped; `stop()` gives the largest seen. A process that dies between samples is seen at its last
 * sample: a lower bound of its peak, which the kernel's limits bound from above.
 */
export function sampleDescendantPeaks(pid: number, intervalMs = 50): { stop(): number } {
  let largest = 0;
  const sample = () => {
    for (const child of descendantsOf(pid)) {
      try {
        largest = Math.max(largest, memoryOf(child).peak);
      } catch {
        // gone meanwhile, or not a process with memory (a zombie)
      }
    }
  };
  sample();
  const timer = setInterval(sample, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return largest;
    },
  };
}
