/**
 * src/cli/thread-pool.ts: which configurations get one libuv pool thread, and the CLI that restarts
 * itself to get it: the restarted process serves and says so, stops with the command's signal and
 * exit code, and does not outlive a parent killed with SIGKILL.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { allocatorEnv, decodeThreadPoolSize } from "../../src/cli/thread-pool.js";
import { loadConfig } from "../../src/core/config.js";
import { request, startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";

// The CLI restarts itself only when the pool size is not already chosen.
delete process.env.UV_THREADPOOL_SIZE;

const started: ServedProcess[] = [];
const restartedPids: number[] = [];

after(() => {
  for (const served of started)
    if (served.child.exitCode === null && served.child.signalCode === null) served.child.kill("SIGKILL");
  for (const pid of restartedPids) if (alive(pid)) process.kill(pid, "SIGKILL");
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("decodeThreadPoolSize", () => {
  const size = (env: Record<string, string>, which: "textgen" | "rag" | "all", cores: number) =>
    decodeThreadPoolSize(loadConfig(env), which, cores);

  it("gives one pool thread when one context decodes on several threads", () => {
    assert.equal(size({ LLAMA_THREADS: "2" }, "textgen", 2), 1);
    assert.equal(size({ LLAMA_THREADS: "2" }, "all", 3), 1);
    assert.equal(size({ LLAMA_THREADS: "4", LLAMA_CONTEXTS: "1" }, "textgen", 16), 1);
    assert.equal(size({ LLAMA_THREADS: "2", MAX_CONCURRENT: "1" }, "textgen", 16), 1);
  });

  it("leaves libuv's default for one thread, several contexts, the RAG app alone or an upstream", () => {
    assert.equal(size({ LLAMA_THREADS: "1" }, "textgen", 2), undefined);
    assert.equal(size({ LLAMA_THREADS: "4" }, "textgen", 16), undefined);
    assert.equal(size({ LLAMA_THREADS: "2", LLAMA_CONTEXTS: "2" }, "textgen", 2), undefined);
    assert.equal(size({ LLAMA_THREADS: "2" }, "rag", 2), undefined);
    assert.equal(
      size({ LLAMA_THREADS: "2", GENERATION_UPSTREAM_URL: "http://127.0.0.1:9/v1" }, "textgen", 2),
      undefined,
    );
  });
});

describe("allocatorEnv", () => {
  const env = (
    config: Record<string, string>,
    which: "textgen" | "rag" | "all",
    processEnv = {},
    platform: NodeJS.Platform = "linux",
  ) => allocatorEnv(loadConfig(config), which, processEnv, platform);

  it("fixes glibc's mmap threshold and asks for huge pages for an app that loads models, on Linux, unless set", () => {
    const both = { MALLOC_MMAP_THRESHOLD_: "131072", GLIBC_TUNABLES: "glibc.malloc.hugetlb=1" };
    assert.deepEqual(env({}, "textgen"), both);
    assert.deepEqual(env({}, "all"), both);
    assert.deepEqual(env({}, "textgen", { MALLOC_MMAP_THRESHOLD_: "65536" }), {
      GLIBC_TUNABLES: "glibc.malloc.hugetlb=1",
    });
    assert.deepEqual(env({}, "textgen", { GLIBC_TUNABLES: "glibc.malloc.hugetlb=0" }), {
      MALLOC_MMAP_THRESHOLD_: "131072",
    });
    assert.deepEqual(
      env({}, "textgen", { MALLOC_MMAP_THRESHOLD_: "65536", GLIBC_TUNABLES: "glibc.malloc.hugetlb=0" }),
      {},
    );
    assert.deepEqual(env({}, "rag"), {});
    assert.deepEqual(env({}, "textgen", {}, "darwin"), {});
    assert.deepEqual(env({ GENERATION_UPSTREAM_URL: "http://127.0.0.1:9/v1" }, "textgen"), {});
  });
});

/** The restarted server's pid, from its start-up line (pino writes the pid on every line). */
async function startUpLine(served: ServedProcess): Promise<{ pid: number; msg: string }> {
  const deadline = performance.now() + 60_000;
  for (;;) {
    for (const line of served.stdout().split("\n")) {
      if (!line.includes("text generation: model")) continue;
      return JSON.parse(line) as { pid: number; msg: string };
    }
    if (performance.now() > deadline) throw new Error(`no start-up line: ${served.stdout()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function serveRestarted(): Promise<{ served: ServedProcess; pid: number }> {
  const served = await startServe("textgen", {
    LLAMA_THREADS: "2",
    LLAMA_CONTEXTS: "1",
    MAX_CONCURRENT: "2",
    LOG_LEVEL: "info",
  });
  started.push(served);
  await waitHealthy(served);
  const line = await startUpLine(served);
  restartedPids.push(line.pid);
  assert.notEqual(line.pid, served.child.pid, "the server runs in a restarted process");
  assert.match(line.msg, /libuv thread pool 1\b/);
  return { served, pid: line.pid };
}

describe("the CLI with one context on two llama threads", () => {
  it("restarts itself with one pool thread, serves, and stops with the command's SIGTERM", async () => {
    const { served, pid } = await serveRestarted();
    const res = await request(served.port, {
      method: "POST",
      path: "/predict",
      body: { text: "Once upon a time", max_length: 8, temperature: 0 },
    });
    assert.equal(res.status, 200, res.body);
    assert.ok((JSON.parse(res.body) as { tokens_generated: number }).tokens_generated > 0);
    served.child.kill("SIGTERM");
    const { code } = await served.exited;
    assert.equal(code, 0, served.stderr());
    // The command exits once the restarted process has.
    assert.equal(alive(pid), false);
  });

  it("does not outlive a parent killed with SIGKILL", async () => {
    const { served, pid } = await serveRestarted();
    served.child.kill("SIGKILL");
    await served.exited;
    const deadline = performance.now() + 60_000;
    while (alive(pid)) {
      assert.ok(
        performance.now() < deadline,
        "the restarted process still runs a minute after its parent died",
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });
});
