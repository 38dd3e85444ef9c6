/** `lectern models`, and MODELS_PRESETS in both its formats (INI as llama-server's, and JSON). */
import { strict as assert } from "node:assert";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { syntheticModel } from "../../scripts/lib/synthetic-gguf.js";
import { NO_APP, repoRoot, testModelPath } from "../helpers/env.js";

interface Row {
  id: string;
  role: string;
  size_bytes: number | null;
  status: string;
  reason?: string;
  aliases: string[];
}

function lecternModels(env: Record<string, string>): Row[] {
  const result = spawnSync(process.execPath, [path.join(repoRoot, "bin/lectern.mjs"), "models", "--json"], {
    // No app answers there: the files are checked in process.
    env: { ...process.env, MODEL_PATH: testModelPath, LECTERN_URL: NO_APP, ...env },
    encoding: "utf8",
  });
  assert.equal(result.status, 0, result.stderr);
  return JSON.parse(result.stdout) as Row[];
}

describe("lectern models", () => {
  it("lists MODELS_DIR with roles, sizes and what is wrong with a bad file; presets add aliases", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lectern-models-"));
    const shape = { embedding: 64, feedForward: 128, layers: 2, heads: 4, kvHeads: 4 };
    const rerank = await syntheticModel(testModelPath, shape, {
      dir: path.join(os.tmpdir(), "lectern-test-models"),
      rankHead: {},
    });
    copyFileSync(rerank, path.join(dir, "ranker.gguf"));
    writeFileSync(path.join(dir, "broken.gguf"), "GGUF");
    const ini = path.join(dir, "presets.ini");
    writeFileSync(ini, "version = 1\n[*]\nthreads = 1\n[ranker]\nalias = rr, jina\nctx-size = 512\n");
    const rows = lecternModels({ MODELS_DIR: dir, MODELS_PRESETS: ini });
    const byId = new Map(rows.map((row) => [row.id, row]));
    assert.deepEqual([...byId.keys()].sort(), ["broken", "ranker", "stories260K"]);
    assert.equal(byId.get("stories260K")!.role, "generate");
    assert.equal(byId.get("ranker")!.role, "rerank");
    assert.deepEqual(byId.get("ranker")!.aliases, ["rr", "jina"]);
    assert.ok(byId.get("ranker")!.size_bytes! > 0);
    assert.equal(byId.get("broken")!.status, "bad");
    assert.match(byId.get("broken")!.reason!, /GGUF header is truncated/);

    const json = path.join(dir, "presets.json");
    writeFileSync(json, JSON.stringify({ small: { model: testModelPath, alias: ["tiny"], role: "embed" } }));
    const fromJson = lecternModels({ MODELS_DIR: dir, MODELS_PRESETS: json });
    const small = fromJson.find((row) => row.id === "small")!;
    assert.deepEqual(small.aliases, ["tiny"]);
    assert.equal(small.role, "embed");
  });
});
