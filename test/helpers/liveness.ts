/**
 * What the reliability tests assert of a server child process while an attack runs: that `/health`
 * keeps answering (probed from this process, every 50 ms) and the server's event loop is never held
 * long (measured inside it), and how much the child's peak resident memory grew (VmHWM, reset before
 * the attack).
 */
import { spawn } from "node:child_process";
import { memoryOf, resetPeak } from "./process-memory.js";
import type { ServedProcess } from "./serve-process.js";

/**
 * A liveness bound, not a speed figure: the longest the server's event loop was held while the attack
 * ran, measured inside the server (a second is generous: /health does no work). Probes from this
 * process must still answer 200; their round trip also waits on this (loaded) process and is only
 * reported.
 */
export const HEALTH_BOUND_MS = 1000;
/** Peak resident memory an attack may add to the server. */
export const RSS_GROWTH_BOUND = 300 * 1000 * 1000;

export interface Probed<T> {
  result: T;
  /** The longest the server's event loop was held while the work ran, in ms (measured by the server). */
  slowest: number;
  /** The slowest /health round trip seen from this process, in ms. */
  slowestProbe: number;
  probes: number;
  /** Growth of the child's peak resident memory over its resident memory before the work, in bytes. */
  growth: number;
}

/** Runs `work` while probing the child's /health; fails a probe that is not a 200. */
export async function whileProbing<T>(served: ServedProcess, work: () => Promise<T>): Promise<Probed<T>> {
  const pid = served.child.pid!;
  const before = memoryOf(pid).rss;
  resetPeak(pid);
  const from = Date.now();
  let done = false;
  const finished = work().finally(() => (done = true));
  // A rejection is awaited below; keep it from counting as unhandled meanwhile.
  finished.catch(() => undefined);
  let slowestProbe = 0;
  let probes = 0;
  do {
    const started = performance.now();
    const res = await fetch(`${served.url}/health`);
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`/health answered ${res.status}`);
    slowestProbe = Math.max(slowestProbe, performance.now() - started);
    probes++;
    await new Promise((resolve) => setTimeout(resolve, 50));
  } while (!done);
  const result = await finished;
  const growth = memoryOf(pid).peak - before;
  return { result, slowest: await served.loopLagSince(from), slowestProbe, probes, growth };
}

export interface CurlReply {
  status: number;
  headers: string;
  body: string;
}

/**
 * One request sent by curl, a process of its own: this process stays free to probe /health while a
 * large body goes out (`--data-binary @file`, a form file…). `args` are curl's, the URL included.
 */
export function curl(args: string[]): Promise<CurlReply> {
  return new Promise((resolve, reject) => {
    const child = spawn("curl", ["-sS", "-D", "-", "-o", "-", "-w", "\n%{http_code}", ...args]);
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (piece: string) => (out += piece));
    child.stderr.setEncoding("utf8").on("data", (piece: string) => (err += piece));
    child.on("error", reject);
    child.on("exit", (code) => {
      const cut = out.lastIndexOf("\n");
      const status = Number(out.slice(cut + 1));
      if (code !== 0 && !status) return reject(new Error(`curl failed (${code}): ${err}`));
      const response = out.slice(0, cut);
      // Headers of the last response (curl prints a 100 Continue's first), then the body.
      const split = response.lastIndexOf("\r\n\r\n");
      resolve({ status, headers: response.slice(0, split), body: response.slice(split + 4) });
    });
  });
}
