/**
 * The text generation app serving a ScriptedGenerator: the app serves a given generator as it serves
 * a remote one (GENERATION_UPSTREAM_URL set, so nothing loads a model), and every answer is the
 * script's. Nothing is contacted at that URL: the scripted generator stands in for it.
 */
import type { AddressInfo } from "node:net";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { testConfig } from "./env.js";
import { ScriptedGenerator, type Script } from "./scripted-generator.js";

export interface ScriptedApp {
  url: string;
  generator: ScriptedGenerator;
  close(): Promise<void>;
}

export async function startScriptedApp(
  scripts: Record<string, Script>,
  overrides: Record<string, string> = {},
): Promise<ScriptedApp> {
  const config = testConfig({ GENERATION_UPSTREAM_URL: "http://127.0.0.1:9/v1", ...overrides });
  const generator = new ScriptedGenerator(scripts);
  const app = await buildTextgenApp({ config, generator });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, generator, close: () => app.close() };
}
