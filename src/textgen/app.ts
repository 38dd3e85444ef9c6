/** Builds the text generation app without listening; `app.inject()` drives it in tests. */
import type { Config } from "../core/config.js";
import { createHttpApp } from "../core/http.js";
import type { Generator } from "./generator.js";
import { registerTextgenRoutes, SERVICE_NAME } from "./routes.js";
import { Scheduler } from "./scheduler.js";

export interface TextgenAppDeps {
  config: Config;
  generator: Generator;
}

export async function buildTextgenApp({ config, generator }: TextgenAppDeps) {
  const app = await createHttpApp({
    service: SERVICE_NAME,
    description:
      "Generate text with a local GGUF model (llama.cpp). Errors are JSON: {error:{code,message,details}}.",
    bodyLimit: config.maxBodyBytes,
    logLevel: config.logLevel,
    tags: [
      { name: "generation", description: "Text generation" },
      { name: "service", description: "Health and identity" },
    ],
  });
  const scheduler = new Scheduler({
    maxConcurrent: config.maxConcurrent,
    maxQueue: config.maxQueue,
    timeoutMs: config.requestTimeoutMs,
  });
  registerTextgenRoutes(app, { generator, scheduler, maxNewTokens: config.maxNewTokens });
  app.addHook("onClose", async () => generator.close());
  return app;
}
