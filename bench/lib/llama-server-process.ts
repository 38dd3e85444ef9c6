/**
 * llama.cpp's `llama-server` (built by llama-cpp-tools.ts) as a child process, and our app through the
 * same kind of request: a raw-prompt completion, streamed, timed to its first token, with what each
 * server says it took from its prompt cache. For the benchmarks that compare the two side by side
 * (agent-session.ts, speculative.ts, kv-types.ts).
 */
import { spawn } from "node:child_process";
import { Agent, fetch as undiciFetch } from "undici";
import { freePort } from "../../scripts/lib/free-port.js";
import { startTextgenProcess } from "./textgen-process.js";

export interface Completion {
  prompt: string;
  maxTokens: number;
  temperature: number;
  seed?: number;
  ignoreEos?: boolean;
}

export interface CompletionSample {
  text: string;
  tokens: number;
  promptTokens: number;
  /** Prompt tokens taken from the server's cache (not evaluated). */
  cachedTokens: number;
  /** From sending the request to the first token. */
  firstTokenMs: number;
  ms: number;
}

export interface Server {
  name: string;
  pid: number;
  /** Its base URL (http://127.0.0.1:PORT), for requests of its own kind beyond complete(). */
  url: string;
  /** How it was started (flags or environment). */
  described: string;
  complete(request: Completion): Promise<CompletionSample>;
  close(): Promise<void>;
}

/**
 * Completions wait as long as they take: a first turn of 20,000 tokens on 2 cores is minutes of
 * prompt processing before its first byte, past fetch's default 300 s body and headers timeouts.
 */
const patient = new Agent({ bodyTimeout: 0, headersTimeout: 0 });
export const fetchPatiently = (
  url: string,
  init: { method: string; headers: Record<string, string>; body: string },
) => undiciFetch(url, { ...init, dispatcher: patient });

/** Reads a server-sent-event body block by block. */
async function* events(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let boundary: number;
    while ((boundary = buffer.indexOf("\n\n")) >= 0) {
      yield buffer.slice(0, boundary);
      buffer = buffer.slice(boundary + 2);
    }
  }
}

/** `llama-server` with `args` on top of model, address and threads. */
export async function startLlamaServer(
  binary: string,
  modelPath: string,
  threads: number,
  args: string[],
  name = "llama-server",
): Promise<Server> {
  const port = await freePort();
  const flags = ["-m", modelPath, "--host", "127.0.0.1", "--port", String(port), "-t", String(threads)];
  flags.push("-tb", String(threads), "--no-webui", ...args);
  const child = spawn(binary, flags, { stdio: ["ignore", "ignore", "pipe"] });
  // Never left running behind a benchmark that failed.
  process.once("exit", () => child.kill("SIGKILL"));
  let log = "";
  child.stderr.on("data", (chunk: Buffer) => (log = (log + chunk.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited with ${child.exitCode}:\n${log}`);
    const ok = await fetch(`${url}/health`).then(
      (response) => response.status === 200,
      () => false,
    );
    if (ok) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return {
    name,
    pid: child.pid!,
    url,
    described: `llama-server ${args.join(" ")}`.trim(),
    async complete(request) {
      const started = performance.now();
      const response = await fetchPatiently(`${url}/completion`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          prompt: request.prompt,
          n_predict: request.maxTokens,
          temperature: request.temperature,
          seed: request.seed ?? 1,
          ignore_eos: request.ignoreEos ?? false,
          cache_prompt: true,
          stream: true,
        }),
      });
      if (response.status !== 200)
        throw new Error(`llama-server answered ${response.status}: ${await response.text()}`);
      let firstTokenMs: number | undefined;
      let text = "";
      let final:
        { tokens_predicted: number; tokens_evaluated: number; timings?: { cache_n?: number } } | undefined;
      for await (const block of events(response.body!)) {
        if (!block.startsWith("data: ")) continue;
        const event = JSON.parse(block.slice(6)) as { content?: string; stop?: boolean };
        if (event.stop) final = event as typeof final;
        else if (event.content) {
          firstTokenMs ??= performance.now() - started;
          text += event.content;
        }
      }
      if (!final) throw new Error("llama-server's stream ended without its final event");
      return {
        text,
        tokens: final.tokens_predicted,
        promptTokens: final.tokens_evaluated,
        cachedTokens: final.timings?.cache_n ?? 0,
        firstTokenMs: firstTokenMs ?? performance.now() - started,
        ms: performance.now() - started,
      };
    },
    async close() {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Our app (bench/lib/textgen-server.ts in a child process) with `env`, through /v1/completions. */
export async function startOurApp(
  modelPath: string,
  threads: number,
  env: Record<string, string>,
  name = "lectern",
): Promise<Server> {
  const server = await startTextgenProcess({
    env: {
      MODEL_PATH: modelPath,
      LLAMA_THREADS: String(threads),
      LLAMA_GPU: "false",
      LOG_LEVEL: "warn",
      ...env,
    },
  });
  return {
    name,
    pid: server.pid,
    url: server.url,
    described: `lectern ${Object.entries(env)
      .map(([key, value]) => `${key}=${value}`)
      .join(" ")}`.trim(),
    async complete(request) {
      const started = performance.now();
      const response = await fetchPatiently(`${server.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          prompt: request.prompt,
          max_tokens: request.maxTokens,
          temperature: request.temperature,
          seed: request.seed ?? 1,
          ignore_eos: request.ignoreEos ?? false,
          stream: true,
          stream_options: { include_usage: true },
        }),
      });
      if (response.status !== 200)
        throw new Error(`/v1/completions answered ${response.status}: ${await response.text()}`);
      let firstTokenMs: number | undefined;
      let text = "";
      let usage:
        | {
            prompt_tokens: number;
            completion_tokens: number;
            prompt_tokens_details?: { cached_tokens?: number };
          }
        | undefined;
      for await (const block of events(response.body!)) {
        const data = block.replace(/^data: /, "");
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data) as { choices?: { text?: string }[]; usage?: typeof usage };
        if (!chunk.choices) throw new Error(`the stream failed: ${data}`);
        const piece = chunk.choices[0]?.text ?? "";
        if (piece !== "") {
          firstTokenMs ??= performance.now() - started;
          text += piece;
        }
        if (chunk.usage) usage = chunk.usage;
      }
      if (!usage) throw new Error("the stream ended without usage");
      return {
        text,
        tokens: usage.completion_tokens,
        promptTokens: usage.prompt_tokens,
        cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
        firstTokenMs: firstTokenMs ?? performance.now() - started,
        ms: performance.now() - started,
      };
    },
    close: () => server.close(),
  };
}
