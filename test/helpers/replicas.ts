/** RAG app replicas as real processes (`node --import tsx src/cli/serve.ts rag`) on free ports. */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../../scripts/lib/free-port.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export interface Replica {
  url: string;
  child: ChildProcess;
  /** What the process wrote (stdout and stderr) so far. */
  stderr(): string;
  stop(): Promise<void>;
}

/** Starts one RAG replica with `env` added to this process's environment; resolves once /health answers. */
// Generous: a replica starting on a loaded 2-core CI machine took 23 s alone; this bounds a hang, not speed.
export async function startReplica(env: Record<string, string>, timeoutMs = 180_000): Promise<Replica> {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-replica-"));
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/serve.ts", "rag"], {
    cwd: ROOT,
    env: {
      ...process.env,
      HOST: "127.0.0.1",
      RAG_PORT: String(port),
      DATA_DIR: dataDir,
      LOG_LEVEL: "silent",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (data: string) => (stderr += data));
  child.stderr!.setEncoding("utf8").on("data", (data: string) => (stderr += data));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
  };

  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop();
      throw new Error(`replica exited (${child.exitCode ?? child.signalCode}) before answering: ${stderr}`);
    }
    try {
      const response = await fetch(`${url}/health`);
      if (response.ok) break;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`replica did not answer /health within ${timeoutMs} ms: ${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { url, child, stderr: () => stderr, stop };
}
