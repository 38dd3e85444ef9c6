/**
 * `npm start` / `npm run start:textgen` / `npm run start:rag`: starts one app or both in this process.
 * Configuration comes from the environment (see src/core/config.ts); a bad value stops here with a
 * message naming the variable.
 */
import { ConfigError, loadConfig, type Config } from "../core/config.js";
import { serve, type Which } from "../server.js";

async function main(): Promise<void> {
  const which = (process.argv[2] ?? "all") as Which;
  if (!["textgen", "rag", "all"].includes(which)) {
    process.stderr.write(`usage: serve [textgen|rag|all]\n`);
    process.exit(2);
  }
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`lectern: configuration error: ${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
  const apps = await serve(which, config);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`lectern: ${signal} received, closing\n`);
    // In-flight work gets SHUTDOWN_GRACE_MS; past that and a margin, leave anyway.
    const force = setTimeout(() => process.exit(1), config.shutdownGraceMs + 5_000);
    force.unref();
    await Promise.allSettled(apps.map((app) => app.close()));
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

await main();
