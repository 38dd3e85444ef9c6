/**
 * One libuv pool thread for llama.cpp's decodes, when one context decodes on several threads.
 *
 * node-llama-cpp runs every llama_decode and sampling call on libuv's thread pool (4 threads by
 * default), so consecutive decodes of a context run on whichever pool thread is free. llama.cpp's
 * compute threads are tied to the thread that calls it (OpenMP keeps a team per calling thread), and
 * changing caller at every token costs: on the 2-core machine here, a bare decode-and-sample loop of
 * the 0.5B-shaped Q4_K_M model on 2 threads took 38 ms a token with the build for this CPU (OpenMP)
 * and 27–31 with the prebuilt binary from a 4-thread pool, 25 with either from a 1-thread pool (and
 * from a 2-thread pool, 30: the calls still alternate). llama-server, which decodes from one thread,
 * took 25.9 ms there. bench/llama-server.ts measures the app both ways (`--variant`).
 *
 * libuv reads UV_THREADPOOL_SIZE once, when its pool starts, and loading an ES module has started it
 * before any of our code runs: so the command starts itself again with the variable set, unless the
 * user set it. Only for one context decoding on more than one thread: several contexts decode at once
 * on several pool threads, and one thread gains nothing to switch between.
 */
import { spawn } from "node:child_process";
import os from "node:os";
import type { Config } from "../core/config.js";
import type { Which } from "../server.js";
import { cpuContextCount } from "../textgen/engine/llama-generator.js";

/**
 * glibc's malloc answers a request of 128 KiB or more with a mapping of its own, returned to the
 * system when freed; but each such block freed raises that threshold to its size (up to 32 MiB), so
 * once a model has been unloaded, llama.cpp's KV caches and compute buffers of the next loads come
 * from the heap arenas, where the freed blocks stay in RSS, fragmented. Over 100 load/unload cycles of
 * two models (bench/models.ts) the app grew by hundreds of MB that way, with no leak behind it (the
 * same run with a fixed threshold stays flat). Setting the threshold turns that adjustment off. glibc
 * reads the variable once, at start-up: the command starts itself again with it, unless it is set.
 */
export function allocatorEnv(
  config: { generation: Pick<Config["generation"], "generationUpstreamUrl"> },
  which: Which,
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): Record<string, string> {
  if (which === "rag" || config.generation.generationUpstreamUrl !== null || platform !== "linux") return {};
  const added: Record<string, string> = {};
  if (env.MALLOC_MMAP_THRESHOLD_ === undefined) added.MALLOC_MMAP_THRESHOLD_ = String(128 * 1024);
  // Transparent huge pages for malloc's mappings (glibc ≥ 2.35; older ones ignore it): llama.cpp's
  // repacked weights, KV caches and compute buffers come from malloc, and on a kernel whose THP mode is
  // "madvise" (the common default) they got 4 KiB pages. Every decode streams the weights: with 2 MiB
  // pages a step took 3–6 % less (bench/llama-server.ts, docs/BENCHMARKS.md "On an Intel Xeon").
  if (env.GLIBC_TUNABLES === undefined) added.GLIBC_TUNABLES = "glibc.malloc.hugetlb=1";
  return added;
}

/** Set in the restarted process: the pid of the one that started it (see watchParent). */
const PARENT_ENV = "LECTERN_POOL_PARENT_PID";

/** The pool size the apps want, or undefined to leave libuv's default. */
export function decodeThreadPoolSize(
  config: {
    generation: Pick<Config["generation"], "generationUpstreamUrl">;
    textgen: Pick<Config["textgen"], "llamaThreads" | "llamaContexts" | "maxConcurrent">;
  },
  which: Which,
  cores = os.availableParallelism(),
): number | undefined {
  if (which === "rag" || config.generation.generationUpstreamUrl !== null || config.textgen.llamaThreads <= 1)
    return undefined;
  // LLAMA_CONTEXTS=auto on a CPU (the one-per-sequence case needs one thread); on a GPU it is one.
  const contexts =
    config.textgen.llamaContexts === "auto"
      ? cpuContextCount(cores, config.textgen.llamaThreads)
      : config.textgen.llamaContexts;
  return Math.min(contexts, config.textgen.maxConcurrent) <= 1 ? 1 : undefined;
}

/**
 * Runs this command again with `env` added (UV_THREADPOOL_SIZE, MALLOC_MMAP_THRESHOLD_, GLIBC_TUNABLES) and mirrors
 * it: signals go to it, and this process exits as it did. Never returns.
 */
export function restartWithEnv(env: Record<string, string>): Promise<never> {
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: "inherit",
    env: { ...process.env, ...env, [PARENT_ENV]: String(process.pid) },
  });
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(signal, () => child.kill(signal));
  return new Promise<never>(() => {
    child.once("error", (error) => {
      process.stderr.write(`lectern: cannot start: ${error.message}\n`);
      process.exit(1);
    });
    child.once("exit", (code, signal) =>
      process.exit(code ?? (signal ? 128 + os.constants.signals[signal] : 1)),
    );
  });
}

/**
 * In a restarted process: `stop` once the process that started it is gone (killed with SIGKILL, say,
 * so it could pass nothing on), rather than serving on as an orphan that holds the port.
 */
export function watchParent(stop: () => void): void {
  const parent = Number(process.env[PARENT_ENV]);
  if (!parent) return;
  const timer = setInterval(() => {
    if (process.ppid !== parent) {
      clearInterval(timer);
      stop();
    }
  }, 500);
  timer.unref();
}
