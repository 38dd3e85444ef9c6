/**
 * The one place that reads the environment. Every variable of the contract is parsed and checked
 * here; a bad value stops start-up with a message that names the variable and says what is allowed.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ConfigError } from "./errors.js";

export { ConfigError };

export interface Config {
  /** Where the apps listen, what they log, how long they wait on clients and on shutdown. */
  server: {
    host: string;
    textgenPort: number;
    ragPort: number;
    logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
    /** Time a client has to send a whole request (headers and body). */
    httpRequestTimeoutMs: number;
    /** On SIGTERM, how long in-flight generations may run on before they are stopped. */
    shutdownGraceMs: number;
  };
  /** Who may call: API keys, rate limit, CORS. */
  auth: {
    /** API_KEYS_FILE; null means auth is off. The keys are read where the app is built (core/http.ts). */
    apiKeysFile: string | null;
    /** Requests per minute per key (per client address without keys); 0 = no limit. */
    rateLimitPerMinute: number;
    /** Origins allowed by CORS; empty = CORS off (no Access-Control headers). */
    corsOrigins: string[];
  };
  /** The default model and the llama.cpp runtime that serves it. */
  textgen: {
    /** A `.gguf` path or a Hugging Face reference (`hf:<owner>/<repo>/<file>.gguf`). */
    modelPath: string;
    llamaThreads: number;
    /** Total context tokens, shared by the parallel sequences. */
    llamaContextSize: number;
    llamaGpu: "auto" | false;
    /**
     * Which llama.cpp binary: "auto" takes the build for this CPU that `npm run build:native` makes
     * (OpenMP threads, this CPU's instructions) when there is one, else the prebuilt one node-llama-cpp
     * ships; "prebuilt" always takes the prebuilt one.
     */
    llamaBinary: "auto" | "prebuilt";
    /**
     * llama.cpp's flash attention (fused attention kernel); on by default, as llama-server's "auto"
     * turns it on: bench/llama-server.ts measured the 0.5B-shaped model at 1.23× the tokens/s of it
     * off at 1 stream and 1.21× at 8 (2 threads, one libuv pool thread).
     */
    llamaFlashAttention: boolean;
    /**
     * llama.cpp contexts the MAX_CONCURRENT sequences are spread over; "auto": 1 on a GPU, one per
     * sequence for a model that fits in CPU caches run on one thread, else one per LLAMA_THREADS cores.
     */
    llamaContexts: number | "auto";
    /** Parallel sequences of the llama.cpp context. */
    maxConcurrent: number;
    /** Requests waiting for a sequence before new ones get 429. */
    maxQueue: number;
    requestTimeoutMs: number;
  };
  /** Many models (#24): MODELS_DIR, presets, the registry's bounds; embeddings (#15). */
  models: {
    modelsDir: string;
    /** JSON or INI presets (llama-server's --models-preset): aliases, roles, per-model settings. */
    modelsPresets: string | null;
    /** Models loaded at once; the least recently used idle one unloads beyond it (0 = no limit). */
    modelsMaxLoaded: number;
    /** Bytes the loaded models may take (file + KV cache, estimated); 0 = no limit. */
    modelsMemoryBudget: number;
    /** How long a model other than the default stays loaded when idle, in ms; -1 = for ever. */
    modelKeepAliveMs: number;
    /** /v1/embeddings from EMBEDDING_MODEL_PATH, or from MODEL_PATH's model when unset. */
    embeddingModelPath: string | null;
    /** Tokens one embedding input may hold. */
    embeddingContextSize: number;
  };
  /** Generation served by another server: RAG's GENERATION_URL, text generation's GENERATION_UPSTREAM_URL. */
  generation: {
    generationUrl: string | null;
    generationUpstreamUrl: string | null;
    /** Model id requested from GENERATION_URL / GENERATION_UPSTREAM_URL; discovered when unset. */
    generationModel: string | null;
    /** Bearer key sent to those servers. */
    generationApiKey: string | null;
    /** How long RAG waits for a generative answer before falling back to an extractive one. */
    generationTimeoutMs: number;
  };
  /** The RAG store and the files it reads. */
  rag: {
    /** SQLite store (without DATABASE_URL) and uploaded files. */
    dataDir: string;
    databaseUrl: string | null;
    ragFilesDir: string | null;
    /**
     * Bounds of one walk of RAG_FILES_DIR (a `files` build, a folder sync): entries looked at, time
     * taken, and whether files with several hard links are read (off: a hard link made inside the
     * folder to a file outside it cannot be told apart from the file).
     */
    filesMaxEntries: number;
    filesWalkTimeoutMs: number;
    filesAllowHardLinks: boolean;
    /** Slack kept beside the SQLite database so deletes still work on a full disk (0: none). */
    diskReserveBytes: number;
    /**
     * Where segments whose vectors have an HNSW graph keep their stored codes, on disk rather than in
     * memory (searches walk the graph's own copy); null: in memory.
     */
    vectorSpillDir: string | null;
    /**
     * Retrieval by meaning (#26). EMBEDDING_URL: base URL (with /v1) of an OpenAI-compatible
     * `/embeddings` (ours, llama.cpp's server, Ollama, vLLM, TEI); unset: the embedding model of this
     * process when both apps run in one. RERANK_URL: base URL of a `/rerank` in the llama.cpp / Jina /
     * Cohere shape; unset: this process's reranker.
     */
    embeddingUrl: string | null;
    /** Model asked of EMBEDDING_URL (or of this process); unset: the server's default. */
    embeddingModel: string | null;
    embeddingApiKey: string | null;
    /** Texts per embedding request. */
    embeddingBatchSize: number;
    /** How long one embedding request (one batch) may take. */
    embeddingTimeoutMs: number;
    rerankUrl: string | null;
    rerankModel: string | null;
    rerankApiKey: string | null;
    /** How long one rerank request may take. */
    rerankTimeoutMs: number;
  };
  /** Bounds of what one build, append or uploaded file may cost to parse. */
  ingest: {
    /**
     * Documents one build or append may carry: each costs objects and store rows whatever its size, so
     * a million tiny ones cost what 64 MB of text does not (the request schema's ceiling is 1,000,000).
     */
    maxBuildDocuments: number;
    /** Characters of text one build or append may carry in total. */
    maxBuildChars: number;
    /** Bytes a .docx part or a PDF's compressed streams may inflate to, per file (decompression bombs). */
    maxExtractedBytes: number;
    /** Characters of text one uploaded or server-side file may yield. */
    maxFileChars: number;
    /** Pages one PDF may have. */
    maxPdfPages: number;
    /** Element nesting depth one HTML file may have. */
    maxHtmlDepth: number;
    /** Requests whose files are parsed at once; parsing is what costs memory on hostile files. */
    maxConcurrentParses: number;
    /** Requests waiting for a parse slot before new ones get 429 with Retry-After. */
    maxParseQueue: number;
    /** Time one file's parse may take on its worker thread before it is stopped (422). */
    maxParseMs: number;
    /** Heap of one parse worker thread, in MB; a parse that needs more is stopped (413). */
    maxParseHeapMb: number;
  };
  /** Bounds of one request: bodies, tokens, embedding inputs, grammars and JSON schemas. */
  limits: {
    /** Body limit of `/rag/build` and the document routes. */
    maxBodyBytesLarge: number;
    /** Body limit of every other route. */
    maxBodyBytes: number;
    /** Upper bound of `max_length` / `max_tokens`. */
    maxNewTokens: number;
    /** Inputs one /v1/embeddings request may carry. */
    embeddingMaxInputs: number;
    /**
     * Budget of a GBNF grammar (`grammar`, and the grammars JSON schemas compile to), checked before
     * sampling: see src/textgen/engine/grammar-budget.ts. `grammarMaxStacks` bounds llama.cpp's parse stacks,
     * which its grammar sampler's work per token grows with.
     */
    grammarMaxBytes: number;
    grammarMaxRules: number;
    grammarMaxExpansion: number;
    grammarMaxNesting: number;
    grammarMaxStacks: number;
    /** Budget of a JSON schema (`response_format`, `json_schema`, tool parameters). */
    schemaMaxDepth: number;
    schemaMaxProperties: number;
    schemaMaxEnum: number;
    schemaMaxEnumBytes: number;
    schemaMaxAlternatives: number;
  };
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

/** A size such as 8G, 512M, 1.5GiB or plain bytes; 0 when unset. */
function byteSize(env: Env, name: string): number {
  const raw = read(env, name);
  if (raw === undefined) return 0;
  const match = /^(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?$/i.exec(raw);
  if (!match)
    throw new ConfigError(`${name} must be a size such as 8G, 512M or a number of bytes, got "${raw}"`);
  const power = ["", "k", "m", "g", "t"].indexOf(match[2]!.toLowerCase());
  return Math.round(Number(match[1]) * 1024 ** power);
}

/** VECTOR_SPILL_DIR: unset, `<DATA_DIR>/vector-spill`; set but empty, null (spilling off). */
function vectorSpillDir(env: Env, dataDir: string): string | null {
  const raw = env["VECTOR_SPILL_DIR"];
  if (raw === undefined) return path.join(dataDir, "vector-spill");
  return raw.trim() === "" ? null : path.resolve(raw.trim());
}

/** Ollama's keep_alive: a duration (30s, 5m, 1h), seconds, 0, or -1 for ever; in ms. */
function keepAlive(env: Env, name: string, fallback: string): number {
  const raw = read(env, name) ?? fallback;
  if (/^-\d+$/.test(raw)) return -1;
  if (/^\d+$/.test(raw)) return Number(raw) * 1000;
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const parts = [...raw.matchAll(/(\d+)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((part) => part[0]).join("") !== raw)
    throw new ConfigError(`${name} must be a duration such as 30s, 5m or 1h, seconds, 0 or -1, got "${raw}"`);
  return parts.reduce((sum, part) => sum + Number(part[1]) * units[part[2]!]!, 0);
}

export function loadConfig(env: Env = process.env): Config {
  const host = read(env, "HOST") ?? "127.0.0.1";
  const maxConcurrent = integer(env, "MAX_CONCURRENT", 4, 1, 64);
  const gpu = oneOf(env, "LLAMA_GPU", "auto", ["auto", "false"] as const);
  const mib = 1024 * 1024;
  const largeBody = integer(env, "MAX_BODY_BYTES", 64 * mib, 1024, 1024 * mib);
  const dataDir = path.resolve(read(env, "DATA_DIR") ?? "./data");
  return {
    server: {
      host,
      textgenPort: integer(env, "TEXTGEN_PORT", 8000, 0, 65535),
      ragPort: integer(env, "RAG_PORT", 8001, 0, 65535),
      logLevel: oneOf(env, "LOG_LEVEL", "info", [
        "fatal",
        "error",
        "warn",
        "info",
        "debug",
        "trace",
        "silent",
      ] as const),
      httpRequestTimeoutMs: integer(env, "HTTP_REQUEST_TIMEOUT_MS", 60_000, 1000, 3_600_000),
      shutdownGraceMs: integer(env, "SHUTDOWN_GRACE_MS", 10_000, 0, 600_000),
    },
    auth: {
      apiKeysFile: read(env, "API_KEYS_FILE") ?? null,
      rateLimitPerMinute: integer(env, "RATE_LIMIT_PER_MINUTE", 0, 0, 10_000_000),
      corsOrigins: origins(env, "CORS_ORIGINS"),
    },
    textgen: {
      modelPath: read(env, "MODEL_PATH") ?? DEFAULT_MODEL,
      llamaThreads: integer(env, "LLAMA_THREADS", physicalCores(), 1, 512),
      llamaContextSize: integer(env, "LLAMA_CONTEXT_SIZE", 4096, 256, 1 << 20),
      llamaGpu: gpu === "false" ? false : "auto",
      llamaBinary: oneOf(env, "LLAMA_BINARY", "auto", ["auto", "prebuilt"] as const),
      llamaFlashAttention: oneOf(env, "LLAMA_FLASH_ATTENTION", "on", ["on", "off"] as const) === "on",
      llamaContexts: countOrAuto(env, "LLAMA_CONTEXTS", 1, 64),
      maxConcurrent,
      maxQueue: integer(env, "MAX_QUEUE", 64, 0, 100_000),
      requestTimeoutMs: integer(env, "REQUEST_TIMEOUT_MS", 120_000, 100, 86_400_000),
    },
    models: {
      modelsDir: path.resolve(read(env, "MODELS_DIR") ?? "./models"),
      modelsPresets:
        read(env, "MODELS_PRESETS") === undefined ? null : path.resolve(read(env, "MODELS_PRESETS")!),
      modelsMaxLoaded: integer(env, "MODELS_MAX_LOADED", 4, 0, 1024),
      modelsMemoryBudget: byteSize(env, "MODELS_MEMORY_BUDGET"),
      modelKeepAliveMs: keepAlive(env, "MODEL_KEEP_ALIVE", "5m"),
      embeddingModelPath: read(env, "EMBEDDING_MODEL_PATH") ?? null,
      embeddingContextSize: integer(env, "EMBEDDING_CONTEXT_SIZE", 2048, 16, 1 << 20),
    },
    generation: {
      generationUrl: url(env, "GENERATION_URL", ["http:", "https:"]),
      generationUpstreamUrl: url(env, "GENERATION_UPSTREAM_URL", ["http:", "https:"]),
      generationModel: read(env, "GENERATION_MODEL") ?? null,
      generationApiKey: read(env, "GENERATION_API_KEY") ?? null,
      generationTimeoutMs: integer(env, "GENERATION_TIMEOUT_MS", 30_000, 100, 3_600_000),
    },
    rag: {
      dataDir,
      databaseUrl: url(env, "DATABASE_URL", ["postgres:", "postgresql:"]),
      ragFilesDir:
        read(env, "RAG_FILES_DIR") === undefined ? null : path.resolve(read(env, "RAG_FILES_DIR")!),
      filesMaxEntries: integer(env, "RAG_FILES_MAX_ENTRIES", 200_000, 1, 100_000_000),
      filesWalkTimeoutMs: integer(env, "RAG_FILES_WALK_MS", 30_000, 100, 3_600_000),
      filesAllowHardLinks:
        oneOf(env, "RAG_FILES_HARD_LINKS", "refuse", ["refuse", "allow"] as const) === "allow",
      diskReserveBytes: integer(env, "DISK_RESERVE_BYTES", 8 * mib, 0, 1024 * 1024 * mib),
      vectorSpillDir: vectorSpillDir(env, dataDir),
      embeddingUrl: url(env, "EMBEDDING_URL", ["http:", "https:"]),
      embeddingModel: read(env, "EMBEDDING_MODEL") ?? null,
      embeddingApiKey: read(env, "EMBEDDING_API_KEY") ?? null,
      embeddingBatchSize: integer(env, "EMBEDDING_BATCH_SIZE", 64, 1, 100_000),
      embeddingTimeoutMs: integer(env, "EMBEDDING_TIMEOUT_MS", 60_000, 100, 3_600_000),
      rerankUrl: url(env, "RERANK_URL", ["http:", "https:"]),
      rerankModel: read(env, "RERANK_MODEL") ?? null,
      rerankApiKey: read(env, "RERANK_API_KEY") ?? null,
      rerankTimeoutMs: integer(env, "RERANK_TIMEOUT_MS", 30_000, 100, 3_600_000),
    },
    ingest: {
      maxBuildDocuments: integer(env, "MAX_BUILD_DOCUMENTS", 100_000, 1, 1_000_000),
      maxBuildChars: integer(env, "MAX_BUILD_CHARS", 1_000_000_000, 1, 100_000_000_000),
      // A few times the body limit: real documents compress 2-10x; bombs compress 1000x.
      maxExtractedBytes: integer(env, "MAX_EXTRACTED_BYTES", 4 * largeBody, 1024, 64 * 1024 * mib),
      // No file's text is longer than the largest body could be as plain text.
      maxFileChars: integer(env, "MAX_FILE_CHARS", largeBody, 1, 1 << 30),
      maxPdfPages: integer(env, "MAX_PDF_PAGES", 10_000, 1, 1_000_000),
      maxHtmlDepth: integer(env, "MAX_HTML_DEPTH", 256, 8, 100_000),
      maxConcurrentParses: integer(env, "MAX_CONCURRENT_PARSES", 2, 1, 256),
      maxParseQueue: integer(env, "MAX_PARSE_QUEUE", 16, 0, 100_000),
      maxParseMs: integer(env, "MAX_PARSE_MS", 60_000, 100, 3_600_000),
      maxParseHeapMb: integer(env, "MAX_PARSE_HEAP_MB", 512, 32, 65_536),
    },
    limits: {
      // MAX_BODY_BYTES names the large limit; other routes keep 1 MiB unless that is larger.
      maxBodyBytes: Math.min(mib, largeBody),
      maxBodyBytesLarge: largeBody,
      maxNewTokens: integer(env, "MAX_NEW_TOKENS", 2048, 1, 1 << 20),
      embeddingMaxInputs: integer(env, "EMBEDDING_MAX_INPUTS", 2048, 1, 100_000),
      grammarMaxBytes: integer(env, "GRAMMAR_MAX_BYTES", 128 * 1024, 64, 16 * mib),
      grammarMaxRules: integer(env, "GRAMMAR_MAX_RULES", 4096, 1, 1_000_000),
      grammarMaxExpansion: integer(env, "GRAMMAR_MAX_EXPANSION", 200_000, 16, 10_000_000),
      grammarMaxNesting: integer(env, "GRAMMAR_MAX_NESTING", 64, 2, 1000),
      grammarMaxStacks: integer(env, "GRAMMAR_MAX_STACKS", 512, 1, 100_000),
      schemaMaxDepth: integer(env, "SCHEMA_MAX_DEPTH", 32, 1, 1000),
      schemaMaxProperties: integer(env, "SCHEMA_MAX_PROPERTIES", 1000, 1, 1_000_000),
      schemaMaxEnum: integer(env, "SCHEMA_MAX_ENUM", 500, 1, 1_000_000),
      schemaMaxEnumBytes: integer(env, "SCHEMA_MAX_ENUM_BYTES", 32 * 1024, 16, 16 * mib),
      schemaMaxAlternatives: integer(env, "SCHEMA_MAX_ALTERNATIVES", 128, 1, 100_000),
    },
  };
}

/** A Hugging Face reference or URL, downloaded into MODELS_DIR; anything else is a local path. */
export function isRemoteModelReference(reference: string): boolean {
  return /^(hf:|https?:\/\/)/i.test(reference);
}

/** The first bytes of every GGUF file. */
const GGUF_MAGIC = "GGUF";

/**
 * Start-up checks of what the configuration names on disk, for the apps being started: a local
 * MODEL_PATH must be a GGUF file (a hub reference is resolved later: offline, /health says why), and
 * RAG_FILES_DIR must be a folder. Kept out of loadConfig, which parses values only, so commands and
 * tests that never read these paths do not need them to exist.
 */
export function checkStartupPaths(config: Config, apps: { textgen: boolean; rag: boolean }): void {
  if (
    apps.textgen &&
    config.generation.generationUpstreamUrl === null &&
    !isRemoteModelReference(config.textgen.modelPath)
  ) {
    const file = path.resolve(config.textgen.modelPath);
    const info = statSync(file, { throwIfNoEntry: false });
    if (info === undefined) {
      throw new ConfigError(
        `MODEL_PATH names no file: ${file} does not exist (give a .gguf file, or a hub reference such as ${DEFAULT_MODEL})`,
      );
    }
    if (!info.isFile()) throw new ConfigError(`MODEL_PATH must name a .gguf file; ${file} is not a file`);
    const magic = Buffer.alloc(GGUF_MAGIC.length);
    const fd = openSync(file, "r");
    try {
      readSync(fd, magic, 0, magic.length, 0);
    } finally {
      closeSync(fd);
    }
    if (magic.toString("latin1") !== GGUF_MAGIC) {
      throw new ConfigError(
        `MODEL_PATH must name a GGUF model file; ${file} is not one (it does not start with "GGUF")`,
      );
    }
  }
  if (apps.rag && config.rag.ragFilesDir !== null) {
    const info = statSync(config.rag.ragFilesDir, { throwIfNoEntry: false });
    if (info === undefined)
      throw new ConfigError(`RAG_FILES_DIR names a folder that does not exist: ${config.rag.ragFilesDir}`);
    if (!info.isDirectory())
      throw new ConfigError(`RAG_FILES_DIR must name a folder; ${config.rag.ragFilesDir} is not one`);
  }
}
