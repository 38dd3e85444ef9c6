/**
 * RAG depends on the text generation app only through its ports (GenerationPort, EmbeddingPort,
 * RerankPort): no file of src/rag/ imports src/textgen/ but the adapters named here, which the
 * composition root (src/server.ts) connects. A new import of textgen from RAG fails here; a port or an
 * adapter is the way. Imports are read as the import-cycle test reads them (type-only ones included).
 */
import assert from "node:assert/strict";
import path from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { importsOf, sourceFiles } from "../helpers/source-imports.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const srcDir = path.join(repoRoot, "src");
const ragDir = path.join(srcDir, "rag") + path.sep;
const textgenDir = path.join(srcDir, "textgen") + path.sep;

/** The adapters of RAG's ports over textgen's code, and why each may read it. */
const ALLOWED: Record<string, string> = {
  "rag/local-models.ts": "the ports over the text generation service of this process",
  "rag/answering/upstream-generation.ts": "the generation port over GENERATION_URL (textgen's OpenAI client)",
};

function textgenImports(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const file of sourceFiles(srcDir).filter((f) => f.startsWith(ragDir))) {
    const targets = importsOf(file).filter((target) => target.startsWith(textgenDir));
    if (targets.length > 0)
      found.set(
        path.relative(srcDir, file),
        targets.map((t) => path.relative(srcDir, t)),
      );
  }
  return found;
}

describe("layering: src/rag/ and src/textgen/", () => {
  const found = textgenImports();

  it("no file of src/rag/ imports src/textgen/ outside the adapters of its ports", () => {
    const outside = [...found]
      .filter(([file]) => !(file in ALLOWED))
      .map(([file, targets]) => `${file} → ${targets.join(", ")}`);
    assert.deepEqual(outside, []);
  });

  it("each allowed adapter exists and does read textgen (the list stays true)", () => {
    for (const file of Object.keys(ALLOWED)) assert.ok(found.has(file), `${file} imports nothing of textgen`);
  });

  it("the rule is seen: an adapter's textgen import is found by the walker", () => {
    const targets = found.get("rag/local-models.ts") ?? [];
    assert.ok(targets.includes("textgen/engine/service.ts"), targets.join(", "));
  });
});
