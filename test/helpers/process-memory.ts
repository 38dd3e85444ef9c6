/** Resident memory of a child process (a server under test), from Linux's /proc/<pid>/status. */
import { readFileSync, writeFileSync } from "node:fs";

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
