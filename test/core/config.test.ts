import assert from "node:assert/strict";
import path from "node:path";
import { describe, it } from "node:test";
import { ConfigError, DEFAULT_MODEL, loadConfig } from "../../src/core/config.js";

describe("config", () => {
  it("has the contract's defaults", () => {
    const config = loadConfig({});
    assert.equal(config.server.host, "127.0.0.1");
    assert.equal(config.server.textgenPort, 8000);
    assert.equal(config.server.ragPort, 8001);
    assert.equal(config.textgen.modelPath, DEFAULT_MODEL);
    assert.equal(config.models.modelsDir, path.resolve("models"));
    assert.equal(config.rag.dataDir, path.resolve("data"));
    assert.equal(config.rag.databaseUrl, null);
    assert.equal(config.rag.ragFilesDir, null);
    assert.equal(config.rag.vectorSpillDir, path.resolve("data", "vector-spill"));
    assert.equal(config.generation.generationUrl, null);
    // Unset: sized from the model and memory when it loads (context-plan.ts).
    assert.equal(config.textgen.llamaContextSize, null);
    assert.equal(config.textgen.llamaGpu, "auto");
    assert.equal(config.textgen.llamaContexts, "auto");
    assert.equal(config.limits.maxBodyBytesLarge, 64 * 1024 * 1024);
    assert.equal(config.limits.maxBodyBytes, 1024 * 1024);
    assert.equal(config.limits.maxNewTokens, 2048);
    assert.equal(config.textgen.maxQueue, 64);
    assert.ok(config.textgen.llamaThreads >= 1);
  });

  it("reads every variable", () => {
    const config = loadConfig({
      HOST: "0.0.0.0",
      TEXTGEN_PORT: "9000",
      RAG_PORT: "9001",
      MODEL_PATH: "/m/x.gguf",
      DATABASE_URL: "postgres://localhost/test",
      GENERATION_URL: "http://127.0.0.1:8000/v1/",
      LLAMA_THREADS: "3",
      LLAMA_GPU: "false",
      LLAMA_CONTEXTS: "2",
      RAG_FILES_DIR: "docs",
    });
    assert.equal(config.textgen.llamaContexts, 2);
    assert.equal(loadConfig({ LLAMA_CONTEXTS: "auto" }).textgen.llamaContexts, "auto");
    assert.equal(config.server.host, "0.0.0.0");
    assert.equal(config.server.textgenPort, 9000);
    assert.equal(config.server.ragPort, 9001);
    assert.equal(config.textgen.modelPath, "/m/x.gguf");
    assert.equal(config.rag.databaseUrl, "postgres://localhost/test");
    assert.equal(config.generation.generationUrl, "http://127.0.0.1:8000/v1");
    assert.equal(config.textgen.llamaThreads, 3);
    assert.equal(config.textgen.llamaGpu, false);
    assert.equal(config.rag.ragFilesDir, path.resolve("docs"));
  });

  it("VECTOR_SPILL_DIR: under DATA_DIR by default, a path when set, off when set empty", () => {
    assert.equal(loadConfig({ DATA_DIR: "/srv/d" }).rag.vectorSpillDir, path.resolve("/srv/d/vector-spill"));
    assert.equal(loadConfig({ VECTOR_SPILL_DIR: "spill" }).rag.vectorSpillDir, path.resolve("spill"));
    assert.equal(loadConfig({ VECTOR_SPILL_DIR: "" }).rag.vectorSpillDir, null);
    assert.equal(loadConfig({ VECTOR_SPILL_DIR: "  " }).rag.vectorSpillDir, null);
  });

  it("RESPONSES_TTL and RESPONSES_MAX_BYTES: 30 days and 1 GiB by default; durations and sizes", () => {
    assert.deepEqual(loadConfig({}).responses, { ttlMs: 30 * 86_400_000, maxBytes: 1024 ** 3 });
    assert.equal(loadConfig({ RESPONSES_TTL: "1d12h" }).responses.ttlMs, 36 * 3_600_000);
    assert.equal(loadConfig({ RESPONSES_TTL: "90" }).responses.ttlMs, 90_000);
    assert.equal(loadConfig({ RESPONSES_TTL: "0" }).responses.ttlMs, 0);
    assert.equal(loadConfig({ RESPONSES_MAX_BYTES: "256M" }).responses.maxBytes, 256 * 1024 ** 2);
  });

  it("MCP_SESSIONS: off (stateless) by default, on when asked", () => {
    assert.equal(loadConfig({}).rag.mcpSessions, false);
    assert.equal(loadConfig({ MCP_SESSIONS: "on" }).rag.mcpSessions, true);
  });

  const bad: Array<[string, string]> = [
    ["RESPONSES_TTL", "a month"],
    ["RESPONSES_TTL", "5w"],
    ["RESPONSES_MAX_BYTES", "1K"],
    ["RESPONSES_MAX_BYTES", "lots"],
    ["TEXTGEN_PORT", "eighty"],
    ["RAG_PORT", "70000"],
    ["LLAMA_THREADS", "0"],
    ["LLAMA_CONTEXT_SIZE", "-5"],
    ["LLAMA_GPU", "cuda-please"],
    ["LLAMA_CONTEXTS", "0"],
    ["LLAMA_CONTEXTS", "many"],
    ["DATABASE_URL", "mysql://x"],
    ["GENERATION_URL", "not a url"],
    ["MAX_BODY_BYTES", "1.5"],
    ["LOG_LEVEL", "loud"],
    ["MCP_SESSIONS", "yes"],
    // Tesseract's `-l`: names joined with "+", nothing that could be read as another argument.
    ["OCR_LANGUAGES", "eng deu"],
    ["OCR_LANGUAGES", "-psm"],
    ["OCR_LANGUAGES", "eng+"],
  ];
  it("OCR_LANGUAGES is eng unless set", () => {
    assert.equal(loadConfig({}).ingest.ocrLanguages, "eng");
    assert.equal(loadConfig({ OCR_LANGUAGES: "eng+deu" }).ingest.ocrLanguages, "eng+deu");
  });

  for (const [name, value] of bad) {
    it(`a bad ${name} (${value}) stops start-up with a message naming it`, () => {
      assert.throws(
        () => loadConfig({ [name]: value }),
        (error: unknown) => error instanceof ConfigError && error.message.startsWith(name),
      );
    });
  }
});
