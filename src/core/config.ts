/**
 * The one place that reads the environment. Every variable of the contract is parsed and checked
 * here; a bad value stops start-up with a message that names the variable and says what is allowed.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { isIP } from "node:net";
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
    /**
     * LOG_FORMAT: "auto" writes readable lines on a terminal and JSON lines elsewhere (files, pipes,
     * log collectors); "json" and "pretty" force one.
     */
    logFormat: "auto" | "json" | "pretty";
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
    /**
     * 401s one client address may get per minute before 429 (AUTH_FAILURES_PER_MINUTE; by default
     * RATE_LIMIT_PER_MINUTE when set, else 30); 0 = no limit. A valid key is never limited by it.
     */
    authFailuresPerMinute: number;
    /**
     * Host names a request's `Host` may name besides the bind address, `localhost` and loopback
     * addresses (ALLOWED_HOSTS; `.example.com` takes its subdomains too); `*`: any (keys on only).
     */
    allowedHosts: string[];
    /**
     * Proxies whose X-Forwarded-For is believed (TRUST_PROXY): addresses or CIDR ranges, or a number
     * of hops; false: none, the client address is the connection's.
     */
    trustProxy: string | number | false;
  };
  /** The default model and the llama.cpp runtime that serves it. */
  textgen: {
    /** A `.gguf` path or a Hugging Face reference (`hf:<owner>/<repo>/<file>.gguf`). */
    modelPath: string;
    llamaThreads: number;
    /**
     * LLAMA_CONTEXT_SIZE: total context tokens, shared by the parallel sequences; null (unset): sized
     * from the model and memory (src/textgen/engine/context-plan.ts).
     */
    llamaContextSize: number | null;
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
    /**
     * Engine features of #36 (src/textgen/engine/): the RAM prefix cache's size in bytes (0: off), the
     * KV cache's type, speculative decoding ("auto": with a draft model when one is named) and the
     * default model's draft model; presets override each per model.
     */
    promptCacheRamBytes: number;
    kvCacheType: "f16" | "q8_0" | "q4_0";
    speculative: "auto" | "draft" | "ngram" | "off";
    draftModelPath: string | null;
    /** Draft tokens proposed per step at most. */
    speculativeMaxTokens: number;
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
    /** Hosts `/api/pull` may download from, redirects included (MODELS_PULL_HOSTS); `.x` takes subdomains. */
    modelsPullHosts: string[];
    /** Bytes one pulled model file may have (MODELS_PULL_MAX_BYTES). */
    modelsPullMaxBytes: number;
    /** How long a pull waits for the next byte from the server (MODELS_PULL_TIMEOUT_MS). */
    modelsPullTimeoutMs: number;
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
    /**
     * Tokens one request may hold on GENERATION_URL's server (prompt and answer): RAG fits its prompts
     * to it, counting text by an estimate (rag/answering/generation-port.ts), as it cannot see that
     * server's tokenizer. The in-process model's own context is read from it instead.
     */
    generationContextSize: number;
  };
  /**
   * Where the Responses API's file_search tool searches vector stores. RAG_URL: a Lectern RAG app's
   * base URL; unset: the RAG app of this process when both run in one, else file_search is refused.
   */
  fileSearch: {
    ragUrl: string | null;
    /** RAG_API_KEY: sent to RAG_URL instead of the caller's own key. */
    ragApiKey: string | null;
    /** How long one search of RAG_URL may take. */
    ragTimeoutMs: number;
  };
  /** The RAG store and the files it reads. */
  /**
   * The Responses API's store (`store`, `previous_response_id`, `item_reference`, the Conversations
   * API): SQLite `responses.db` under `rag.dataDir`, or `rag.databaseUrl`'s database.
   */
  responses: {
    /** How long a response, or a conversation after its last change, is kept; 0: nothing is kept. */
    ttlMs: number;
    /** Bytes of stored JSON, all tenants together; past it the oldest go first. */
    maxBytes: number;
  };
  /** The Batch API (textgen/batches/): its files and lines, in the Responses store's database. */
  batches: {
    /** BATCH_MAX_FILE_BYTES: an uploaded batch input file at most (OpenAI's 200 MB; 64 MiB here). */
    maxFileBytes: number;
    /** BATCH_MAX_LINES: requests in one batch at most (50,000 as OpenAI). */
    maxLines: number;
    /** BATCH_MAX_LINE_BYTES: one line of an input file at most; a longer one fails the batch. */
    maxLineBytes: number;
    /** BATCH_CONCURRENCY: batch lines in flight at once, all batches together. */
    concurrency: number;
  };
  rag: {
    /** SQLite store (without DATABASE_URL) and uploaded files; the Responses store's too. */
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
     * MCP_SESSIONS: "on" keeps an MCP session per client at /mcp (Mcp-Session-Id, server-sent events);
     * "off" (default) answers each request on its own (stateless), which any replica can serve.
     */
    mcpSessions: boolean;
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
    /**
     * Of those, how many one tenant may hold at once (the rest are kept for other tenants); null:
     * the parse gate's default (half, never all when there are several).
     */
    maxParsesPerTenant: number | null;
    /** Requests waiting for a parse slot before new ones get 429 with Retry-After. */
    maxParseQueue: number;
    /** Time one file's parse may take in its parse process before it is stopped (422). */
    maxParseMs: number;
    /** JavaScript heap of one parse process, in MB; a parse that needs more is stopped (413). */
    maxParseHeapMb: number;
    /** Tesseract's languages for OCR (scanned PDF pages, images): names joined with "+". */
    ocrLanguages: string;
  };
  /**
   * Where the `lectern` command finds running apps: `models`, `generate` and `ask` ask them when they
   * answer, and work in process when not.
   */
  client: {
    /** LECTERN_URL: the text generation app; default http://HOST:TEXTGEN_PORT (loopback for 0.0.0.0). */
    textgenUrl: string;
    /** LECTERN_RAG_URL: the RAG app; default http://HOST:RAG_PORT. */
    ragUrl: string;
    /** LECTERN_API_KEY: the key sent to them when API_KEYS_FILE is on there. */
    apiKey: string | null;
  };
  /** Bounds of one request: bodies, tokens, embedding inputs, grammars and JSON schemas. */
  limits: {
    /** Body limit of `/rag/build` and the document routes. */
    maxBodyBytesLarge: number;
    /** Body limit of every other route. */
    maxBodyBytes: number;
    /** Nesting depth of a JSON body (MAX_JSON_DEPTH); deeper bodies are a 400 before they are parsed. */
    maxJsonDepth: number;
    /**
     * Characters of text one request may have tokenized (MAX_TOKENIZE_CHARS): llama.cpp tokenizes
     * synchronously, on the event loop (see TextgenService).
     */
    maxTokenizeChars: number;
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
    /** Time one token's grammar-constrained sampling may take, counted while sampling (#35). */
    grammarMaxTokenMs: number;
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

/** OCR_LANGUAGES: tesseract language names joined with "+" (checked here: they become its `-l`). */
function ocrLanguages(env: Env): string {
  const raw = read(env, "OCR_LANGUAGES") ?? "eng";
  if (!/^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$/.test(raw)) {
    throw new ConfigError(
      `OCR_LANGUAGES must be tesseract language names joined with "+" (e.g. eng+deu), got "${raw}"`,
    );
  }
  return raw;
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

/** Host names as ALLOWED_HOSTS and MODELS_PULL_HOSTS take them: `name`, `.suffix` (or `*.suffix`), `*`. */
function hostList(env: Env, name: string, fallback: string[], allowAny: boolean): string[] {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  return raw
    .split(",")
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== "")
    .map((entry) => {
      if (entry === "*" && allowAny) return entry;
      const host = entry.replace(/^\*\./, ".");
      const bare = host.replace(/^\./, "").replace(/^\[(.*)\]$/, "$1");
      if (!/^[a-z0-9-]+(\.[a-z0-9-]+)*$/.test(bare) && isIP(bare) === 0)
        throw new ConfigError(
          `${name} must be a comma-separated list of host names (no scheme or port) such as example.com or .example.com, got "${entry}"`,
        );
      return host.startsWith(".") ? host : bare;
    });
}

/** TRUST_PROXY: unset, no proxy; a number of hops; or addresses, CIDR ranges and proxy-addr's names. */
function trustProxy(env: Env): string | number | false {
  const raw = read(env, "TRUST_PROXY");
  if (raw === undefined || raw === "false") return false;
  if (/^\d+$/.test(raw)) return integer(env, "TRUST_PROXY", 0, 1, 100);
  const named = new Set(["loopback", "linklocal", "uniquelocal"]);
  for (const entry of raw.split(",").map((part) => part.trim())) {
    const [address, bits, extra] = entry.split("/");
    const family = isIP(address ?? "");
    const bitsOk = bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= (family === 6 ? 128 : 32));
    if (named.has(entry) || (family !== 0 && bitsOk && extra === undefined)) continue;
    throw new ConfigError(
      `TRUST_PROXY must be a number of proxies, or addresses and CIDR ranges of the proxies (e.g. 127.0.0.1 or 10.0.0.0/8; "loopback" for all loopback addresses), got "${entry}"`,
    );
  }
  return raw;
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

/** The model hub's hosts: huggingface.co and the CDN and Xet storage hosts its downloads redirect to. */
export const MODEL_HUB_HOSTS = ["huggingface.co", ".huggingface.co", "hf.co", ".hf.co"];

/** A duration in whole days, hours, minutes or seconds (30d, 12h, 1h30m, 90s) or plain seconds; in ms. */
function duration(env: Env, name: string, fallback: string): number {
  const raw = read(env, name) ?? fallback;
  if (/^\d+$/.test(raw)) return Number(raw) * 1000;
  const units: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  const parts = [...raw.matchAll(/(\d+)([smhd])/g)];
  if (parts.length === 0 || parts.map((part) => part[0]).join("") !== raw)
    throw new ConfigError(`${name} must be a duration such as 30d, 12h or 90s, or seconds, got "${raw}"`);
  return parts.reduce((sum, part) => sum + Number(part[1]) * units[part[2]!]!, 0);
}

/** RESPONSES_MAX_BYTES: a size of at least 64K; 1G when unset. */
function responsesMaxBytes(env: Env): number {
  if (read(env, "RESPONSES_MAX_BYTES") === undefined) return 1024 ** 3;
  const bytes = byteSize(env, "RESPONSES_MAX_BYTES");
  if (bytes < 64 * 1024)
    throw new ConfigError(
      `RESPONSES_MAX_BYTES must be at least 64K, got ${bytes} bytes (RESPONSES_TTL=0 keeps nothing)`,
    );
  return bytes;
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

/** The URL a client on this machine reaches an app at: a wildcard bind address is reached on loopback. */
function localUrl(host: string, port: number): string {
  const reachable = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  return `http://${reachable.includes(":") ? `[${reachable}]` : reachable}:${port}`;
}

export function loadConfig(env: Env = process.env): Config {
  const host = read(env, "HOST") ?? "127.0.0.1";
  const textgenPort = integer(env, "TEXTGEN_PORT", 8000, 0, 65535);
  const ragPort = integer(env, "RAG_PORT", 8001, 0, 65535);
  const maxConcurrent = integer(env, "MAX_CONCURRENT", 4, 1, 64);
  const gpu = oneOf(env, "LLAMA_GPU", "auto", ["auto", "false"] as const);
  const mib = 1024 * 1024;
  const largeBody = integer(env, "MAX_BODY_BYTES", 64 * mib, 1024, 1024 * mib);
  const dataDir = path.resolve(read(env, "DATA_DIR") ?? "./data");
  const apiKeysFile = read(env, "API_KEYS_FILE") ?? null;
  const rateLimitPerMinute = integer(env, "RATE_LIMIT_PER_MINUTE", 0, 0, 10_000_000);
  const allowedHosts = hostList(env, "ALLOWED_HOSTS", [], true);
  if (allowedHosts.includes("*") && apiKeysFile === null)
    throw new ConfigError(
      "ALLOWED_HOSTS=* needs API_KEYS_FILE: without keys, any web page could reach this server through DNS rebinding; list the host names instead",
    );
  return {
    server: {
      host,
      textgenPort,
      ragPort,
      logLevel: oneOf(env, "LOG_LEVEL", "info", [
        "fatal",
        "error",
        "warn",
        "info",
        "debug",
        "trace",
        "silent",
      ] as const),
      logFormat: oneOf(env, "LOG_FORMAT", "auto", ["auto", "json", "pretty"] as const),
      httpRequestTimeoutMs: integer(env, "HTTP_REQUEST_TIMEOUT_MS", 60_000, 1000, 3_600_000),
      shutdownGraceMs: integer(env, "SHUTDOWN_GRACE_MS", 10_000, 0, 600_000),
    },
    auth: {
      apiKeysFile,
      rateLimitPerMinute,
      corsOrigins: origins(env, "CORS_ORIGINS"),
      authFailuresPerMinute: integer(
        env,
        "AUTH_FAILURES_PER_MINUTE",
        rateLimitPerMinute > 0 ? rateLimitPerMinute : 30,
        0,
        10_000_000,
      ),
      allowedHosts,
      trustProxy: trustProxy(env),
    },
    textgen: {
      modelPath: read(env, "MODEL_PATH") ?? DEFAULT_MODEL,
      llamaThreads: integer(env, "LLAMA_THREADS", physicalCores(), 1, 512),
      llamaContextSize:
        read(env, "LLAMA_CONTEXT_SIZE") === undefined
          ? null
          : integer(env, "LLAMA_CONTEXT_SIZE", 0, 256, 1 << 20),
      llamaGpu: gpu === "false" ? false : "auto",
      llamaBinary: oneOf(env, "LLAMA_BINARY", "auto", ["auto", "prebuilt"] as const),
      llamaFlashAttention: oneOf(env, "LLAMA_FLASH_ATTENTION", "on", ["on", "off"] as const) === "on",
      llamaContexts: countOrAuto(env, "LLAMA_CONTEXTS", 1, 64),
      maxConcurrent,
      maxQueue: integer(env, "MAX_QUEUE", 64, 0, 100_000),
      requestTimeoutMs: integer(env, "REQUEST_TIMEOUT_MS", 120_000, 100, 86_400_000),
      promptCacheRamBytes: integer(env, "PROMPT_CACHE_RAM_MB", 2048, 0, 1 << 24) * mib,
      kvCacheType: oneOf(env, "LLAMA_KV_CACHE_TYPE", "f16", ["f16", "q8_0", "q4_0"] as const),
      speculative: oneOf(env, "SPECULATIVE", "auto", ["auto", "draft", "ngram", "off"] as const),
      draftModelPath: read(env, "DRAFT_MODEL_PATH") ?? null,
      speculativeMaxTokens: integer(env, "SPECULATIVE_MAX_TOKENS", 16, 1, 64),
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
      modelsPullHosts: hostList(env, "MODELS_PULL_HOSTS", MODEL_HUB_HOSTS, false),
      modelsPullMaxBytes: byteSize(env, "MODELS_PULL_MAX_BYTES") || 64 * 1024 ** 3,
      modelsPullTimeoutMs: integer(env, "MODELS_PULL_TIMEOUT_MS", 30_000, 100, 3_600_000),
    },
    generation: {
      generationUrl: url(env, "GENERATION_URL", ["http:", "https:"]),
      generationUpstreamUrl: url(env, "GENERATION_UPSTREAM_URL", ["http:", "https:"]),
      generationModel: read(env, "GENERATION_MODEL") ?? null,
      generationApiKey: read(env, "GENERATION_API_KEY") ?? null,
      generationTimeoutMs: integer(env, "GENERATION_TIMEOUT_MS", 30_000, 100, 3_600_000),
      generationContextSize: integer(env, "GENERATION_CONTEXT_SIZE", 4096, 256, 1 << 20),
    },
    fileSearch: {
      ragUrl: url(env, "RAG_URL", ["http:", "https:"]),
      ragApiKey: read(env, "RAG_API_KEY") ?? null,
      ragTimeoutMs: integer(env, "RAG_TIMEOUT_MS", 30_000, 100, 3_600_000),
    },
    responses: {
      ttlMs: duration(env, "RESPONSES_TTL", "30d"),
      maxBytes: responsesMaxBytes(env),
    },
    batches: {
      maxFileBytes: byteSize(env, "BATCH_MAX_FILE_BYTES") || 64 * 1024 ** 2,
      maxLines: integer(env, "BATCH_MAX_LINES", 50_000, 1, 50_000),
      maxLineBytes: byteSize(env, "BATCH_MAX_LINE_BYTES") || 1024 ** 2,
      concurrency: integer(env, "BATCH_CONCURRENCY", 2, 1, 64),
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
      mcpSessions: oneOf(env, "MCP_SESSIONS", "off", ["off", "on"] as const) === "on",
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
      maxParsesPerTenant: read(env, "MAX_PARSES_PER_TENANT")
        ? integer(env, "MAX_PARSES_PER_TENANT", 1, 1, 256)
        : null,
      maxParseQueue: integer(env, "MAX_PARSE_QUEUE", 16, 0, 100_000),
      maxParseMs: integer(env, "MAX_PARSE_MS", 60_000, 100, 3_600_000),
      maxParseHeapMb: integer(env, "MAX_PARSE_HEAP_MB", 512, 32, 65_536),
      ocrLanguages: ocrLanguages(env),
    },
    client: {
      textgenUrl: url(env, "LECTERN_URL", ["http:", "https:"]) ?? localUrl(host, textgenPort),
      ragUrl: url(env, "LECTERN_RAG_URL", ["http:", "https:"]) ?? localUrl(host, ragPort),
      apiKey: read(env, "LECTERN_API_KEY") ?? null,
    },
    limits: {
      // MAX_BODY_BYTES names the large limit; other routes keep 1 MiB unless that is larger.
      maxBodyBytes: Math.min(mib, largeBody),
      maxBodyBytesLarge: largeBody,
      // JSON.stringify and the schema checks recurse: 5,000 levels overflowed the stack (a 500).
      maxJsonDepth: integer(env, "MAX_JSON_DEPTH", 256, 8, 1000),
      // The /tokenize route's bound (4 × 32,768): a 1 MiB prompt held the event loop 0.5–6 s.
      maxTokenizeChars: integer(env, "MAX_TOKENIZE_CHARS", 131_072, 1024, 64 * mib),
      maxNewTokens: integer(env, "MAX_NEW_TOKENS", 2048, 1, 1 << 20),
      embeddingMaxInputs: integer(env, "EMBEDDING_MAX_INPUTS", 2048, 1, 100_000),
      grammarMaxBytes: integer(env, "GRAMMAR_MAX_BYTES", 128 * 1024, 64, 16 * mib),
      grammarMaxRules: integer(env, "GRAMMAR_MAX_RULES", 4096, 1, 1_000_000),
      grammarMaxExpansion: integer(env, "GRAMMAR_MAX_EXPANSION", 200_000, 16, 10_000_000),
      grammarMaxNesting: integer(env, "GRAMMAR_MAX_NESTING", 64, 2, 1000),
      grammarMaxStacks: integer(env, "GRAMMAR_MAX_STACKS", 512, 1, 100_000),
      grammarMaxTokenMs: integer(env, "GRAMMAR_MAX_TOKEN_MS", 1000, 10, 600_000),
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
