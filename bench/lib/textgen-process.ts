/**
 * Starts bench/lib/textgen-server.ts as a child process and talks to its /predict the way a client
 * would: plain JSON, or server-sent events read as they arrive.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";
import { allocatorEnv, decodeThreadPoolSize } from "../../src/cli/thread-pool.js";
import { loadConfig } from "../../src/core/config.js";
import { repoRoot } from "./bench-env.js";

export interface TextgenProcess {
  url: string;
  pid: number;
  sequenceContextSize: number;
  /** Which llama.cpp binary and device the app loaded the model with (its start-up line's words). */
  binary: string;
  device: string;
  /** libuv pool threads (UV_THREADPOOL_SIZE) the app runs with. */
  threadPool: string;
  close(): Promise<void>;
}

export interface StartOptions {
  env: Record<string, string>;
  /** Extra node flags for the server, e.g. ["--cpu-prof", "--cpu-prof-dir=…"]. */
  nodeFlags?: string[];
}

export async function startTextgenProcess({ env, nodeFlags = [] }: StartOptions): Promise<TextgenProcess> {
  const fullEnv: Record<string, string | undefined> = { ...process.env, ...env };
  // The libuv pool `npm start` would give it (src/cli/thread-pool.ts), unless `env` names one.
  const poolSize = decodeThreadPoolSize(loadConfig(fullEnv), "textgen");
  if (poolSize !== undefined && fullEnv.UV_THREADPOOL_SIZE === undefined)
    fullEnv.UV_THREADPOOL_SIZE = String(poolSize);
  // And glibc's fixed mmap threshold, as `npm start` gives it (src/cli/thread-pool.ts).
  Object.assign(fullEnv, allocatorEnv(loadConfig(fullEnv), "textgen", fullEnv));
  const child: ChildProcess = spawn(
    process.execPath,
    [...nodeFlags, "--import", "tsx", path.join(repoRoot, "bench/lib/textgen-server.ts")],
    { cwd: repoRoot, env: fullEnv, stdio: ["pipe", "pipe", "inherit"] },
  );
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const first = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`textgen server exited with ${code} before listening`)));
  });
  const info = JSON.parse(first) as {
    port: number;
    sequence_context_size: number;
    binary: string;
    device: string;
    thread_pool: string;
  };
  return {
    url: `http://127.0.0.1:${info.port}`,
    pid: child.pid!,
    sequenceContextSize: info.sequence_context_size,
    binary: info.binary,
    device: info.device,
    threadPool: info.thread_pool,
    async close() {
      child.stdin!.end();
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export interface PredictBody {
  text: string;
  max_length: number;
  temperature: number;
  seed?: number;
}

export interface PredictResult {
  text: string;
  tokens: number;
  promptTokens: number;
  ms: number;
  /** Streaming only: from sending the request to the first token event. */
  firstTokenMs: number | null;
}

interface PredictJson {
  generated_text: string;
  tokens_generated: number;
  prompt_tokens: number;
}

export async function predict(baseUrl: string, body: PredictBody): Promise<PredictResult> {
  const started = performance.now();
  const response = await fetch(`${baseUrl}/predict`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as PredictJson;
  const ms = performance.now() - started;
  if (response.status !== 200)
    throw new Error(`/predict answered ${response.status}: ${JSON.stringify(json)}`);
  return {
    text: json.generated_text,
    tokens: json.tokens_generated,
    promptTokens: json.prompt_tokens,
    ms,
    firstTokenMs: null,
  };
}

/** Streaming /predict: one `data: {"token": …}` event per piece, then `event: done`. */
export async function predictStream(baseUrl: string, body: PredictBody): Promise<PredictResult> {
  const started = performance.now();
  const response = await fetch(`${baseUrl}/predict`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  if (response.status !== 200)
    throw new Error(`/predict answered ${response.status}: ${await response.text()}`);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let firstTokenMs: number | null = null;
  let done: PredictJson | undefined;
  for (;;) {
    const { value, done: ended } = await reader.read();
    if (ended) break;
    buffer += decoder.decode(value, { stream: true });
    let boundary: number;
    while ((boundary = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, boundary);
      buffer = buffer.slice(boundary + 2);
      if (block.startsWith("event: done")) {
        done = JSON.parse(block.slice(block.indexOf("data: ") + 6)) as PredictJson;
      } else if (block.startsWith("event: error")) {
        throw new Error(`stream error: ${block}`);
      } else if (firstTokenMs === null && block.startsWith("data: ")) {
        firstTokenMs = performance.now() - started;
      }
    }
  }
  const ms = performance.now() - started;
  if (!done) throw new Error("stream ended without a done event");
  return {
    text: done.generated_text,
    tokens: done.tokens_generated,
    promptTokens: done.prompt_tokens,
    ms,
    firstTokenMs,
  };
}

export interface CompletionStreamResult {
  text: string;
  promptTokens: number;
  /** usage.prompt_tokens_details.cached_tokens: prompt tokens taken from the prompt cache. */
  cachedTokens: number;
  /** From sending the request to the first chunk with text. */
  firstTokenMs: number | null;
}

/** Streaming POST /v1/completions with usage, timed to the first text chunk. */
export async function completionStream(
  baseUrl: string,
  body: { prompt: string; max_tokens: number; temperature: number },
): Promise<CompletionStreamResult> {
  const started = performance.now();
  const response = await fetch(`${baseUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
  });
  if (response.status !== 200)
    throw new Error(`/v1/completions answered ${response.status}: ${await response.text()}`);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let text = "";
  let firstTokenMs: number | null = null;
  let usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | undefined;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let boundary: number;
    while ((boundary = buffer.indexOf("\n\n")) >= 0) {
      const data = buffer.slice(0, boundary).replace(/^data: /, "");
      buffer = buffer.slice(boundary + 2);
      if (data === "[DONE]") continue;
      const chunk = JSON.parse(data) as { choices: { text?: string }[]; usage?: typeof usage };
      const piece = chunk.choices[0]?.text ?? "";
      if (piece !== "" && firstTokenMs === null) firstTokenMs = performance.now() - started;
      text += piece;
      if (chunk.usage) usage = chunk.usage;
    }
  }
  if (!usage) throw new Error("stream ended without usage");
  return {
    text,
    promptTokens: usage.prompt_tokens,
    cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
    firstTokenMs,
  };
}
