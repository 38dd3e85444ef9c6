/**
 * The apps under soak as child processes of the real CLI (`node --import tsx src/cli/serve.ts <app>`)
 * on free loopback ports, their health, and their resident memory from /proc.
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "./free-port.js";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The small test model: LECTERN_TEST_MODEL, else ../shared/models/stories260K.gguf. */
export function testModelPath(): string {
  const model = path.resolve(
    process.env.LECTERN_TEST_MODEL ?? path.join(repoRoot, "../shared/models/stories260K.gguf"),
  );
  if (!fs.existsSync(model)) throw new Error(`test model not found at ${model}; set LECTERN_TEST_MODEL`);
  return model;
}

export interface AppProcess {
  name: "rag" | "textgen";
  child: ChildProcess;
  pid: number;
  url: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts one app; its output goes to `logFile`. Loopback only. */
export async function startApp(
  name: "rag" | "textgen",
  env: Record<string, string>,
  logFile: string,
  nodeArgs: string[] = [],
): Promise<AppProcess> {
  const port = await freePort();
  const log = fs.openSync(logFile, "a");
  const child = spawn(
    process.execPath,
    [...nodeArgs, "--import", "tsx", path.join(repoRoot, "src", "cli", "serve.ts"), name],
    {
      cwd: repoRoot,
      env: {
        ...process.env,
        HOST: "127.0.0.1",
        [name === "rag" ? "RAG_PORT" : "TEXTGEN_PORT"]: String(port),
        ...env,
      },
      stdio: ["ignore", log, log],
    },
  );
  fs.closeSync(log);
  if (child.pid === undefined) throw new Error(`could not start the ${name} app`);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  return { name, child, pid: child.pid, url: `http://127.0.0.1:${port}`, exited };
}

export async function waitHealthy(app: AppProcess, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let ended = false;
  void app.exited.then(() => (ended = true));
  for (;;) {
    if (ended) throw new Error(`the ${app.name} app exited before it was healthy`);
    try {
      const res = await fetch(`${app.url}/health`);
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`the ${app.name} app is not healthy after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Resident set size of a process in bytes (VmRSS of /proc/<pid>/status), or null if it is gone. */
export function readRss(pid: number): number | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return match ? Number(match[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** SIGTERM, then the exit code (SIGKILL after `timeoutMs`). */
export async function stopApp(app: AppProcess, timeoutMs = 20_000) {
  if (app.child.exitCode !== null || app.child.signalCode !== null) return app.exited;
  app.child.kill("SIGTERM");
  const timer = setTimeout(() => app.child.kill("SIGKILL"), timeoutMs);
  const result = await app.exited;
  clearTimeout(timer);
  return result;
}
