/** Starts the apps on their ports; used by the CLI and by tests that need real sockets. */
import type { Config } from "./core/config.js";
import { buildRagApp } from "./rag/app.js";
import { buildTextgenApp } from "./textgen/app.js";
import { createGenerator } from "./textgen/create-generator.js";

export type Which = "textgen" | "rag" | "all";

export interface Listening {
  close(): Promise<void>;
}

export async function serve(which: Which, config: Config): Promise<Listening[]> {
  const started: Listening[] = [];
  if (which === "textgen" || which === "all") {
    const app = await buildTextgenApp({ config, generator: createGenerator(config) });
    await app.listen({ host: config.host, port: config.textgenPort });
    started.push(app);
  }
  if (which === "rag" || which === "all") {
    const app = await buildRagApp({ config });
    await app.listen({ host: config.host, port: config.ragPort });
    started.push(app);
  }
  return started;
}
