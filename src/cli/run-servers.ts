/**
 * Starting the apps from a command line (`npm start`, `lectern serve`): start-up checks, the apps,
 * and graceful shutdown on SIGTERM/SIGINT. A configuration error exits 78 (EX_CONFIG) with a line
 * naming the variable; an address that cannot be bound, or any other start-up failure, exits 1 with
 * one line and no stack trace. Serving a model on several threads from one context, the command first
 * starts itself again with one libuv pool thread, and serving models, with glibc's mmap threshold
 * fixed (thread-pool.ts says why).
 */
import { checkStartupPaths, ConfigError, type Config } from "../core/config.js";
import { ListenError, serve, type Which } from "../server.js";
import { allocatorEnv, decodeThreadPoolSize, restartWithEnv, watchParent } from "./thread-pool.js";

export const EXIT_CONFIG = 78;

function fail(message: string, code: number): never {
  process.stderr.write(`lectern: ${message}\n`);
  process.exit(code);
}

/** Starts `which` and runs until a signal; never returns normally (the process exits). */
export async function runServers(which: Which, config: Config): Promise<void> {
  let apps: Awaited<ReturnType<typeof serve>>;
  try {
    checkStartupPaths(config, { textgen: which !== "rag", rag: which !== "textgen" });
    const poolSize = decodeThreadPoolSize(config, which);
    const restartEnv = allocatorEnv(config, which);
    if (poolSize !== undefined && process.env.UV_THREADPOOL_SIZE === undefined)
      restartEnv.UV_THREADPOOL_SIZE = String(poolSize);
    if (Object.keys(restartEnv).length > 0) await restartWithEnv(restartEnv);
    apps = await serve(which, config);
  } catch (error) {
    if (error instanceof ConfigError) fail(`configuration error: ${error.message}`, EXIT_CONFIG);
    if (error instanceof ListenError) fail(error.message, 1);
    fail(`cannot start: ${(error as Error).message}`, 1);
  }
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`lectern: ${signal} received, closing\n`);
    // In-flight work gets SHUTDOWN_GRACE_MS; past that and a margin, leave anyway.
    const force = setTimeout(() => process.exit(1), config.server.shutdownGraceMs + 5_000);
    force.unref();
    await Promise.allSettled(apps.map((app) => app.close()));
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
  watchParent(() => void stop("the parent process ended"));
}
