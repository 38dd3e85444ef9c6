/**
 * The one place that reads the environment. Every variable of the contract is parsed and checked
 * here; a bad value stops start-up with a message that names the variable and says what is allowed.
 */
import os from "node:os";
import path from "node:path";
import { KeyRing } from "./auth.js";

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

export interface Config {
  host: string;
  textgenPort: number;
  ragPort: number;
  /** A `.gguf` path or a Hugging Face reference (`hf:<owner>/<repo>/<file>.gguf`). */
  modelPath: string;
  modelsDir: string;
  dataDir: string;
  databaseUrl: string | null;
  ragFilesDir: string | null;
  generationUrl: string | null;
  generationUpstreamUrl: string | null;
  /** Model id requested from GENERATION_URL / GENERATION_UPSTREAM_URL; discovered when unset. */
  generationModel: string | null;
  /** Bearer key sent to those servers. */
  generationApiKey: string | null;
  /** How long RAG waits for a generative answer before falling back to an extractive one. */
  generationTimeoutMs: number;
  llamaThreads: number;
  /** Total context tokens, shared by the parallel sequences. */
  llamaContextSize: number;
  llamaGpu: "auto" | false;
  /**
   * llama.cpp contexts the MAX_CONCURRENT sequences are spread over; "auto": 1 on a GPU, one per
   * sequence for a model that fits in CPU caches run on one thread, else one per LLAMA_THREADS cores.
   */
  llamaContexts: number | "auto";
  apiKeysFile: string | null;
  /** Parsed from API_KEYS_FILE; null means auth is off. */
  apiKeys: KeyRing | null;
  /** Requests per minute per key (per client address without keys); 0 = no limit. */
  rateLimitPerMinute: number;
  /** Origins allowed by CORS; empty = CORS off (no Access-Control headers). */
  corsOrigins: string[];
  /** Documents one build or append may carry. */
  maxBuildDocuments: number;
  /** Characters of text one build or append may carry in total. */
  maxBuildChars: number;
  /** Time a client has to send a whole request (headers and body). */
  httpRequestTimeoutMs: number;
  /** On SIGTERM, how long in-flight generations may run on before they are stopped. */
  shutdownGraceMs: number;
  /** Body limit of `/rag/build` and the document routes. */
  maxBodyBytesLarge: number;
  /** Body limit of every other route. */
  maxBodyBytes: number;
  /** Upper bound of `max_length` / `max_tokens`. */
  maxNewTokens: number;
  /** Parallel sequences of the llama.cpp context. */
  maxConcurrent: number;
  /** Requests waiting for a sequence before new ones get 429. */
  maxQueue: number;
  requestTimeoutMs: number;
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
}

export const DEFAULT_MODEL = "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf";

type Env = Record<string, string | undefined>;

function read(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === "" ? undefined : value;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max)
    throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

function countOrAuto(env: Env, name: string, min: number, max: number): number | "auto" {
  const raw = read(env, name);
  if (raw === undefined || raw === "auto") return "auto";
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be "auto" or a whole number, got "${raw}"`);
  return integer(env, name, min, min, max);
}

function url(env: Env, name: string, protocols: string[]): string | null {
  const raw = read(env, name);
  if (raw === undefined) return null;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL such as ${protocols[0]}//host:port/…, got "${raw}"`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(" or ")}, got "${parsed.protocol}"`);
  }
  return raw.replace(/\/+$/, "");
}

function oneOf<T extends string>(env: Env, name: string, fallback: T, allowed: readonly T[]): T {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(", ")}, got "${raw}"`);
  }
  return raw as T;
}

function origins(env: Env, name: string): string[] {
  const raw = read(env, name);
  if (raw === undefined) return [];
  return raw.split(",").map((origin) => {
    const trimmed = origin.trim();
    if (trimmed === "*") return trimmed;
    try {
      return new URL(trimmed).origin;
    } catch {
      throw new ConfigError(
        `${name} must be a comma-separated list of origins such as https://app.example, got "${trimmed}"`,
      );
    }
  });
}

function physicalCores(): number {
  // Node has no physical-core count; llama.cpp gains nothing from SMT siblings, so halve logical
  // CPUs on machines that report many, and keep at least one thread.
  const logical = os.availableParallelism();
  return Math.max(1, logical > 2 ? Math.floor(logical / 2) : logical);
}

export function loadConfig(env: Env = process.env): Config {
  const host = read(env, "HOST") ?? "127.0.0.1";
  const maxConcurrent = integer(env, "MAX_CONCURRENT", 4, 1, 64);
  const gpu = oneOf(env, "LLAMA_GPU", "auto", ["auto", "false"] as const);
  const mib = 1024 * 1024;
  const largeBody = integer(env, "MAX_BODY_BYTES", 64 * mib, 1024, 1024 * mib);
  return {
    host,
    textgenPort: integer(env, "TEXTGEN_PORT", 8000, 0, 65535),
    ragPort: integer(env, "RAG_PORT", 8001, 0, 65535),
    modelPath: read(env, "MODEL_PATH") ?? DEFAULT_MODEL,
    modelsDir: path.resolve(read(env, "MODELS_DIR") ?? "./models"),
    dataDir: path.resolve(read(env, "DATA_DIR") ?? "./data"),
    databaseUrl: url(env, "DATABASE_URL", ["postgres:", "postgresql:"]),
    ragFilesDir: read(env, "RAG_FILES_DIR") === undefined ? null : path.resolve(read(env, "RAG_FILES_DIR")!),
    generationUrl: url(env, "GENERATION_URL", ["http:", "https:"]),
    generationUpstreamUrl: url(env, "GENERATION_UPSTREAM_URL", ["http:", "https:"]),
    generationModel: read(env, "GENERATION_MODEL") ?? null,
    generationApiKey: read(env, "GENERATION_API_KEY") ?? null,
    generationTimeoutMs: integer(env, "GENERATION_TIMEOUT_MS", 30_000, 100, 3_600_000),
    llamaThreads: integer(env, "LLAMA_THREADS", physicalCores(), 1, 512),
    llamaContextSize: integer(env, "LLAMA_CONTEXT_SIZE", 4096, 256, 1 << 20),
    llamaGpu: gpu === "false" ? false : "auto",
    llamaContexts: countOrAuto(env, "LLAMA_CONTEXTS", 1, 64),
    apiKeysFile: read(env, "API_KEYS_FILE") ?? null,
    apiKeys: read(env, "API_KEYS_FILE") === undefined ? null : KeyRing.load(read(env, "API_KEYS_FILE")!),
    rateLimitPerMinute: integer(env, "RATE_LIMIT_PER_MINUTE", 0, 0, 10_000_000),
    corsOrigins: origins(env, "CORS_ORIGINS"),
    maxBuildDocuments: integer(env, "MAX_BUILD_DOCUMENTS", 1_000_000, 1, 100_000_000),
    maxBuildChars: integer(env, "MAX_BUILD_CHARS", 1_000_000_000, 1, 100_000_000_000),
    httpRequestTimeoutMs: integer(env, "HTTP_REQUEST_TIMEOUT_MS", 60_000, 1000, 3_600_000),
    shutdownGraceMs: integer(env, "SHUTDOWN_GRACE_MS", 10_000, 0, 600_000),
    maxBodyBytesLarge: largeBody,
    // MAX_BODY_BYTES names the large limit; other routes keep 1 MiB unless that is larger.
    maxBodyBytes: Math.min(mib, largeBody),
    maxNewTokens: integer(env, "MAX_NEW_TOKENS", 2048, 1, 1 << 20),
    maxConcurrent,
    maxQueue: integer(env, "MAX_QUEUE", 64, 0, 100_000),
    requestTimeoutMs: integer(env, "REQUEST_TIMEOUT_MS", 120_000, 100, 86_400_000),
    logLevel: oneOf(env, "LOG_LEVEL", "info", [
      "fatal",
      "error",
      "warn",
      "info",
      "debug",
      "trace",
      "silent",
    ] as const),
  };
}
