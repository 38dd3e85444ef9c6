/** Real apps on real sockets (port 0), for tests that need HTTP clients rather than inject(). */
import type { AddressInfo } from "node:net";
import { buildTextgenApp } from "../../src/textgen/app.js";
import { createGenerator } from "../../src/textgen/engine/create-generator.js";
import type { LlamaGenerator } from "../../src/textgen/engine/llama-generator.js";
import { testConfig } from "./env.js";

export interface RunningTextgen {
  url: string;
  app: Awaited<ReturnType<typeof buildTextgenApp>>;
  close(): Promise<void>;
}

export async function startTextgen(overrides: Record<string, string> = {}): Promise<RunningTextgen> {
  const config = testConfig(overrides);
  const generator = createGenerator(config) as LlamaGenerator;
  const app = await buildTextgenApp({ config, generator });
  await app.listen({ host: "127.0.0.1", port: 0 });
  await generator.ready();
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, app, close: () => app.close() };
}

/** The value of a counter or gauge without labels (or summed over its labels) from /metrics. */
export async function readMetric(baseUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  let total = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) total += Number(line.split(" ").pop());
  }
  return total;
}

/** Reads server-sent events from a fetch response, yielding {event, data}. */
export async function* sseEvents(response: Response): AsyncGenerator<{ event: string; data: string }> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let boundary: number;
    while ((boundary = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, boundary);
      buffer = buffer.slice(boundary + 2);
      let event = "message";
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      yield { event, data: data.join("\n") };
    }
  }
}
