/**
 * The real CLI (`node --import tsx src/cli/serve.ts <app>`) as a child process on a free port, and
 * small HTTP helpers that see what a client sees (refused connections, resets, cut streams).
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { freePort } from "../../scripts/lib/free-port.js";
import { repoRoot, testModelPath } from "./env.js";

export interface ServedProcess {
  child: ChildProcess;
  port: number;
  url: string;
  /** Resolves when the process ended: its exit code or signal, and when (performance.now()). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  stderr(): string;
  stdout(): string;
  /**
   * The longest the server's event loop was held between `from` and now (wall-clock ms, Date.now()),
   * as the server itself measured it (test/helpers/loop-lag-preload.mjs), in ms.
   */
  loopLagSince(from: number): Promise<number>;
}

const LOOP_LAG_PRELOAD = path.join(repoRoot, "test", "helpers", "loop-lag-preload.mjs");
/** How often the preload writes a line (ms). */
const LOOP_LAG_PERIOD_MS = 100;

/** Starts one app of the CLI with the test model on a free port, silent logs, one llama thread. */
export async function startServe(
  which: "textgen" | "rag",
  env: Record<string, string> = {},
  /** Another entry point than `src/cli/serve.ts <which>`, e.g. `bin/lectern.mjs serve rag`. */
  entry: string[] = [path.join(repoRoot, "src", "cli", "serve.ts"), which],
): Promise<ServedProcess> {
  const port = await freePort();
  const lagFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "lectern-loop-lag-")), "lag.txt");
  const child = spawn(process.execPath, ["--import", LOOP_LAG_PRELOAD, "--import", "tsx", ...entry], {
    cwd: repoRoot,
    env: {
      ...process.env,
      LECTERN_TEST_LOOP_LAG_FILE: lagFile,
      HOST: "127.0.0.1",
      MODEL_PATH: testModelPath,
      LLAMA_THREADS: "1",
      LLAMA_GPU: "false",
      LOG_LEVEL: "silent",
      // Set as the CLI would (src/cli/thread-pool.ts), so it serves from this child rather than a
      // restarted one, and tests that read the child's RSS read the server's.
      ...(process.platform === "linux"
        ? { MALLOC_MMAP_THRESHOLD_: "131072", GLIBC_TUNABLES: "glibc.malloc.hugetlb=1" }
        : {}),
      [which === "textgen" ? "TEXTGEN_PORT" : "RAG_PORT"]: String(port),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  let stdout = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal, at: performance.now() })),
  );
  return {
    child,
    port,
    url: `http://127.0.0.1:${port}`,
    exited,
    stderr: () => stderr,
    stdout: () => stdout,
    loopLagSince: (from) => loopLagSince(lagFile, from),
  };
}

async function loopLagSince(file: string, from: number): Promise<number> {
  // The line covering the last moments is written within a period: wait for it.
  const until = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 2.5 * LOOP_LAG_PERIOD_MS));
  let longest = 0;
  let lines = 0;
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    const [at, lag] = line.split(" ").map(Number);
    if (at === undefined || lag === undefined || !Number.isFinite(lag)) continue;
    if (at < from || at > until + LOOP_LAG_PERIOD_MS) continue;
    longest = Math.max(longest, lag);
    lines++;
  }
  // Each line covers one period: a stall longer than the window still ends in a line after it.
  if (lines === 0) throw new Error("the server wrote no event-loop delay in the window");
  return longest;
}

/**
 * Polls GET /health until it answers 200, or fails after `timeoutMs` (or when the process ends). The
 * default is a liveness bound, not a speed figure: a start compiles TypeScript (tsx) and loads a model,
 * which took over a minute on a 2-core machine under a load of 15.
 */
export async function waitHealthy(served: ServedProcess, timeoutMs = 180_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let ended = false;
  void served.exited.then(() => (ended = true));
  for (;;) {
    if (ended) throw new Error(`the process ended before it was healthy: ${served.stderr()}`);
    try {
      const res = await request(served.port, { method: "GET", path: "/health" });
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (performance.now() > deadline)
      throw new Error(`not healthy after ${timeoutMs} ms: ${served.stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Whether the response ended normally (not aborted or reset). */
  complete: boolean;
}

/**
 * One request on its own connection. Resolves with the response once it ended (even if it was cut:
 * `complete` says); rejects when no response came (refused, reset before the headers). `onData` sees
 * each piece of the body as it arrives.
 */
export function request(
  port: number,
  options: {
    method: string;
    path: string;
    body?: unknown;
    onData?: (text: string) => void;
    /** Called once the whole request (body included) has been handed to the socket. */
    onSent?: () => void;
  },
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        method: options.method,
        path: options.path,
        agent: false,
        headers: payload === undefined ? {} : { "content-type": "application/json" },
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
          options.onData?.(chunk);
        });
        const finish = (complete: boolean) =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, complete });
        res.on("end", () => finish(res.complete));
        res.on("aborted", () => finish(false));
        res.on("error", () => finish(false));
      },
    );
    req.on("error", reject);
    if (options.onSent) req.on("finish", options.onSent);
    req.end(payload);
  });
}
