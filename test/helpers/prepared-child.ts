/**
 * The crash tests' child processes (rag-crash-builder.ts, rag-crash-mutator.ts) are spawned early, so
 * that they import and prepare while an earlier one runs: each prints "prepared", waits for a line on
 * stdin, then does its write and prints what it reached, line by line, until it ends or is killed.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { repoRoot } from "./env.js";

export interface ChildEnd {
  stdout: string;
  stderr: string;
  signal: NodeJS.Signals | null;
  /** `done <status> <ms>`, printed when the child finished its request, or null. */
  done: { status: number; ms: number } | null;
}

export interface PreparedChild {
  /** Whether the child has printed `line` (a whole line) so far. */
  saw(line: string): boolean;
  /** Called after each piece of stdout, e.g. to kill the child at a line. */
  onOutput(listener: () => void): void;
  /** Waits until the child is prepared, lets it go, and resolves when it has ended. */
  run(): Promise<ChildEnd>;
  /** SIGKILL: at a chosen moment, or to end the child after a failure. */
  kill(): void;
}

/** Spawns `script` (under tsx, from the repository root) with `args`. */
export function prepareChild(script: string, args: string[]): PreparedChild {
  const child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
    cwd: repoRoot,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const listeners: Array<() => void> = [];
  let onPrepared: () => void = () => {};
  const prepared = new Promise<void>((resolve) => (onPrepared = resolve));
  const saw = (line: string) => stdout.split("\n").includes(line);
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    stdout += chunk;
    if (saw("prepared")) onPrepared();
    for (const listener of listeners) listener();
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const closed = new Promise<ChildEnd>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (_code, signal) => {
      const done = /^done (\d+) (\d+)$/m.exec(stdout);
      resolve({
        stdout,
        stderr,
        signal,
        done: done ? { status: Number(done[1]), ms: Number(done[2]) } : null,
      });
    });
  });
  return {
    saw,
    onOutput: (listener) => listeners.push(listener),
    async run() {
      await Promise.race([prepared, closed]);
      assert.ok(saw("prepared"), `the child ended before it was prepared: ${stderr}`);
      child.stdin.end("go\n");
      return closed;
    },
    kill: () => child.kill("SIGKILL"),
  };
}
