/** Shared settings of the benchmark scripts. */
import path from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const resultsDir = path.join(repoRoot, "bench/results");

/** MODEL_PATH, else LECTERN_TEST_MODEL, else the shared test model. */
export function benchModelPath(): string {
  return (
    process.env.MODEL_PATH ??
    process.env.LECTERN_TEST_MODEL ??
    path.join(repoRoot, "../shared/models/stories260K.gguf")
  );
}
