/**
 * The synthetic embedding model and reranker the RAG retrieval tests serve from a text generation app
 * (random weights, real GGUFs: scripts/lib/synthetic-gguf.ts), made once into a shared cache folder.
 */
import { copyFileSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { syntheticModel, type SyntheticShape } from "../../scripts/lib/synthetic-gguf.js";
import { testModelPath } from "./env.js";

export const TINY: SyntheticShape = { embedding: 64, feedForward: 128, layers: 2, heads: 4, kvHeads: 4 };
export const modelCacheDir = path.join(os.tmpdir(), "lectern-test-models");

/** The embedding model (mean pooling) and the reranker (a rank head), as files in the cache. */
export async function retrievalModels(): Promise<{ embed: string; rerank: string }> {
  return {
    embed: await syntheticModel(testModelPath, TINY, {
      dir: modelCacheDir,
      tag: "embed",
      metadata: { "llama.pooling_type": 1 },
    }),
    rerank: await syntheticModel(testModelPath, TINY, { dir: modelCacheDir, rankHead: {} }),
  };
}

/** A new MODELS_DIR holding each file under its key's name (`{embed: f}` → `embed.gguf`). */
export function modelsDirOf(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-models-"));
  for (const [name, file] of Object.entries(files)) copyFileSync(file, path.join(dir, `${name}.gguf`));
  return dir;
}
