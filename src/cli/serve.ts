/**
 * `npm start` / `npm run start:textgen` / `npm run start:rag`: starts one app or both in this process.
 * Configuration comes from the environment (see src/core/config.ts); a bad value stops here with a
 * message naming the variable (exit 78). Start-up and shutdown are run-servers.ts's, shared with
 * `lectern serve`.
 */
import type { Which } from "../server.js";
import { loadConfigOrReport } from "./load-config.js";
import { EXIT_CONFIG, runServers } from "./run-servers.js";

async function main(): Promise<void> {
  const which = (process.argv[2] ?? "all") as Which;
  if (!["textgen", "rag", "all"].includes(which)) {
    process.stderr.write(`usage: serve [textgen|rag|all]\n`);
    process.exit(2);
  }
  const config = loadConfigOrReport();
  if (config === null) process.exit(EXIT_CONFIG);
  await runServers(which, config);
}

await main();
