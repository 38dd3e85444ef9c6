/** Shared test settings: where the test model is, and a config for tests. */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig, type Config } from "../../src/core/config.js";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** LECTERN_TEST_MODEL first, so a user without ../shared can point the tests at any GGUF. */
export const testModelPath = path.resolve(
  process.env.LECTERN_TEST_MODEL ?? path.join(repoRoot, "../shared/models/stories260K.gguf"),
);

/**
 * A URL where no app answers (port 1, TCP multiplexing, is never served here): the `lectern`
 * commands that ask running apps (LECTERN_URL, LECTERN_RAG_URL) then work in process, whatever else
 * runs on this machine's default ports.
 */
export const NO_APP = "http://127.0.0.1:1";

/** The one name the test model is served under: its file name without `.gguf`. */
export const testModelName = path.basename(testModelPath).replace(/\.gguf$/i, "");

if (!existsSync(testModelPath)) {
  throw new Error(`Test model not found at ${testModelPath}; set LECTERN_TEST_MODEL to a .gguf file`);
}

/**
 * DATA_DIR of a test that names none: a folder of this test process, removed when it exits, so what
 * an app keeps there unasked (the text generation app's Responses store) never lands in ./data.
 */
let scratchDataDir: string | undefined;
process.on("exit", () => {
  if (scratchDataDir) rmSync(scratchDataDir, { recursive: true, force: true });
});

export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig({
    MODEL_PATH: testModelPath,
    // One thread: on a 2-core machine two threads make the tiny model 10-50x slower under load.
    LLAMA_THREADS: "1",
    LLAMA_GPU: "false",
    LLAMA_CONTEXT_SIZE: "4096",
    MAX_CONCURRENT: "4",
    LOG_LEVEL: "silent",
    // A small slack file per test store (the default 8 MiB, written per app, adds up over the suite).
    DISK_RESERVE_BYTES: "65536",
    DATA_DIR: (scratchDataDir ??= mkdtempSync(path.join(os.tmpdir(), "lectern-test-data-"))),
    ...overrides,
  });
}
