/**
 * The README runs top to bottom (issue #33): `npm start` as a child process (the test model, a fresh
 * data folder), then every runnable example block of README.md (the convention at the top of its
 * source: test/helpers/readme-blocks.ts), in order, in one bash session from the repository folder,
 * as a reader would paste them. Each command must exit 0; each HTTP answer must have a 2xx status
 * (or the status the README shows) and be JSON or an event stream; the answers the README shows must
 * have its keys and its literal values. The README's ports become free ones, so the test runs beside
 * anything else on this machine.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { freePort } from "../scripts/lib/free-port.js";
import { repoRoot, testModelPath } from "./helpers/env.js";
import {
  jsonValues,
  matchesLiteral,
  parseShown,
  readmeBlocks,
  sseData,
  valuesOf,
  type Statement,
} from "./helpers/readme-blocks.js";

const README = readFileSync(path.join(repoRoot, "README.md"), "utf8");
const { blocks, skipped } = readmeBlocks(README);
/**
 * One command's bound: a hang guard, not a latency target. The slowest wait for a second app to load
 * its modules on a shared, loaded 2-core machine (a minute and more seen there).
 */
const STATEMENT_TIMEOUT_MS = 300_000;

const scratch = mkdtempSync(path.join(os.tmpdir(), "lectern-readme-"));
const dataDir = path.join(scratch, "data");
/** The README's ports (8000, 8001, and those of the second apps) → free ports here. */
const ports = new Map<string, number>();

/** The README's text with its ports replaced by this run's. */
function withPorts(text: string): string {
  return text.replace(
    /(localhost:|127\.0\.0\.1:|_PORT=)(80\d\d)\b/g,
    (_match, prefix: string, port: string) => {
      const mapped = ports.get(port);
      if (mapped === undefined) throw new Error(`port ${port} of the README has no free port mapped`);
      return `${prefix}${mapped}`;
    },
  );
}

let app: ChildProcess;
let appLog = "";
let shell: Shell;

/** One bash process that runs the statements one after another (variables and `$!` carry over). */
class Shell {
  private readonly child: ChildProcess;
  private stdout = "";
  private stderr = "";
  private waiters: Array<() => void> = [];
  private count = 0;

  constructor(env: NodeJS.ProcessEnv) {
    // Its own process group: what it starts in the background is stopped with it.
    this.child = spawn("bash", ["--noprofile", "--norc"], {
      cwd: repoRoot,
      env,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true,
    });
    this.child.stdout!.setEncoding("utf8").on("data", (text: string) => this.take("out", text));
    this.child.stderr!.setEncoding("utf8").on("data", (text: string) => this.take("err", text));
  }

  private take(stream: "out" | "err", text: string): void {
    if (stream === "out") this.stdout += text;
    else this.stderr += text;
    for (const wake of this.waiters.splice(0)) wake();
  }

  /** Runs one statement; its exit code, what it printed, and the HTTP statuses of its curl calls. */
  async run(text: string): Promise<{ code: number; stdout: string; stderr: string; statuses: number[] }> {
    const mark = `@@done-${++this.count}-${process.pid}`;
    this.child.stdin!.write(
      `${text}\n__code=$?; printf '\\n${mark} %s\\n' "$__code"; printf '\\n${mark}\\n' >&2\n`,
    );
    const deadline = performance.now() + STATEMENT_TIMEOUT_MS;
    const outDone = new RegExp(`\\n${mark} (\\d+)\\n`);
    while (!(outDone.test(this.stdout) && this.stderr.includes(`\n${mark}\n`))) {
      if (performance.now() > deadline)
        throw new Error(`no end after ${STATEMENT_TIMEOUT_MS} ms; printed:\n${this.stdout}\n${this.stderr}`);
      if (this.child.exitCode !== null) throw new Error(`bash ended: ${this.stderr}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 1000);
      });
    }
    const match = outDone.exec(this.stdout)!;
    const stdout = this.stdout.slice(0, match.index);
    this.stdout = this.stdout.slice(match.index + match[0].length);
    const errEnd = this.stderr.indexOf(`\n${mark}\n`);
    const stderr = this.stderr.slice(0, errEnd);
    this.stderr = this.stderr.slice(errEnd + mark.length + 2);
    const statuses = [...stderr.matchAll(/@@status (\d{3})/g)].map((status) => Number(status[1]));
    return {
      code: Number(match[1]),
      stdout,
      stderr: stderr.replace(/@@status \d{3}\n?/g, ""),
      statuses,
    };
  }

  stop(): void {
    try {
      process.kill(-this.child.pid!, "SIGTERM");
    } catch {
      // Already gone.
    }
  }
}

/** GET /health until it answers 200 (or the app exits), for both apps of `npm start`. */
async function waitHealthy(url: string): Promise<void> {
  // Generous: `npm start` loads its modules and the model beside other tests on a loaded machine.
  const deadline = performance.now() + 300_000;
  for (;;) {
    if (app.exitCode !== null) throw new Error(`npm start ended: ${appLog}`);
    const status = await fetch(`${url}/health`).then(
      (response) => response.status,
      () => 0,
    );
    if (status === 200) return;
    if (performance.now() > deadline) throw new Error(`${url} is not healthy: ${appLog}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

before(async () => {
  for (const port of new Set(README.match(/(?<=localhost:|127\.0\.0\.1:|_PORT=)80\d\d\b/g) ?? []))
    ports.set(port, await freePort());
  ports.set("8000", ports.get("8000") ?? (await freePort()));
  ports.set("8001", ports.get("8001") ?? (await freePort()));
  // The status of every HTTP answer goes to stderr, the answers themselves are untouched.
  writeFileSync(path.join(scratch, ".curlrc"), '-w "%{stderr}@@status %{http_code}\\n"\n');
  const env = {
    ...process.env,
    // As the README's reader has them: the test model, `npm start` and the CLI sharing one store.
    MODEL_PATH: testModelPath,
    DATA_DIR: dataDir,
    MODELS_DIR: path.join(scratch, "models"),
    TEXTGEN_PORT: String(ports.get("8000")),
    RAG_PORT: String(ports.get("8001")),
    LLAMA_THREADS: "1",
    LLAMA_GPU: "false",
    LOG_LEVEL: "warn",
    CURL_HOME: scratch,
  };
  app = spawn("npm", ["start"], { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  app.stdout!.setEncoding("utf8").on("data", (text: string) => (appLog += text));
  app.stderr!.setEncoding("utf8").on("data", (text: string) => (appLog += text));
  await waitHealthy(`http://127.0.0.1:${ports.get("8000")}`);
  await waitHealthy(`http://127.0.0.1:${ports.get("8001")}`);
  // Background apps the examples start log nothing unless something goes wrong.
  shell = new Shell({
    ...env,
    LOG_LEVEL: "silent",
    LECTERN_URL: `http://127.0.0.1:${ports.get("8000")}`,
    LECTERN_RAG_URL: `http://127.0.0.1:${ports.get("8001")}`,
  });
});

after(async () => {
  shell?.stop();
  if (app?.pid !== undefined) {
    try {
      process.kill(-app.pid, "SIGTERM");
    } catch {
      // Already gone.
    }
    await new Promise((resolve) => (app.exitCode !== null ? resolve(null) : app.once("exit", resolve)));
  }
  rmSync(scratch, { recursive: true, force: true });
});

/** Checks one command's result against the README: exit code, statuses, shape, the shown answer. */
function check(
  statement: Statement,
  result: { code: number; stdout: string; stderr: string; statuses: number[] },
): void {
  const where = `README line ${statement.line}: ${statement.text.split("\n")[0]}`;
  assert.equal(result.code, 0, `${where}\nexit ${result.code}\n${result.stdout}\n${result.stderr}`);
  const shown = statement.shown === undefined ? undefined : parseShown(statement.shown);
  const expectedStatus = shown?.status;
  // A wait loop's failed tries are expected; its last answer is what counts.
  const looping = /^\s*(until|while)\b/.test(statement.text);
  const counted = looping ? result.statuses.slice(-1) : result.statuses;
  for (const status of counted) {
    if (expectedStatus !== undefined) assert.equal(status, expectedStatus, `${where}\n${result.stdout}`);
    else assert.ok(status >= 200 && status < 300, `${where}\nHTTP ${status}: ${result.stdout}`);
  }
  const isCurl = /^(\s*\w+=\S+\s+)*curl\b/.test(statement.text);
  if (!isCurl || result.stdout.trim() === "") {
    assert.equal(shown?.keys.length ?? 0, 0, `${where}: an answer is shown, but nothing was printed`);
    return;
  }
  // The answer as JSON: the last value printed, or an event stream's last JSON event.
  const events = sseData(result.stdout);
  let answers: unknown[];
  if (events) {
    assert.ok(events.length > 0, `${where}: an empty event stream`);
    answers = events.map((event) => event.data).filter((data) => typeof data === "object");
  } else {
    try {
      answers = jsonValues(result.stdout);
    } catch (error) {
      assert.fail(`${where}: the answer is not JSON (${(error as Error).message})`);
    }
  }
  if (!shown) return;
  const answer = events ? answers : answers.at(-1);
  for (const key of shown.keys)
    assert.ok(valuesOf(answer, key).length > 0, `${where}: the answer has no "${key}":\n${result.stdout}`);
  for (const { key, literal } of shown.values)
    assert.ok(
      valuesOf(answer, key).some((value) => matchesLiteral(value, literal)),
      `${where}: "${key}" is ${JSON.stringify(valuesOf(answer, key))}, the README shows ${literal}`,
    );
}

describe("the README, top to bottom", () => {
  it("has runnable blocks, and says why of every block it does not run", () => {
    assert.ok(blocks.length >= 5, `only ${blocks.length} runnable blocks`);
    for (const skip of skipped)
      assert.ok(skip.reason.length >= 10, `README line ${skip.line}: give a reason`);
  });

  for (const block of blocks)
    it(`runs the block of line ${block.line} (${block.section})`, { timeout: 1_800_000 }, async () => {
      for (const statement of block.statements) check(statement, await shell.run(withPorts(statement.text)));
    });
});
