/**
 * No import cycle in src/, type-only imports included: every `import … from`, `export … from` and
 * `import("…")` of every .ts file under src/ is an edge when it names a relative path, and the graph must
 * have no cycle. A cycle makes the load order matter and keeps layers from being read alone.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { importsOf, sourceFiles } from "../helpers/source-imports.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const srcDir = path.join(repoRoot, "src");

/** Every cycle's files, one cycle per strongly connected component (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      const selfLoop = (graph.get(node) ?? []).includes(node);
      if (component.length > 1 || selfLoop) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

describe("imports of src/", () => {
  const files = sourceFiles(srcDir);
  const graph = new Map(files.map((file) => [file, importsOf(file)]));

  it("resolve to files that exist", () => {
    const missing = [...graph].flatMap(([file, targets]) =>
      targets
        .filter((t) => !graph.has(t))
        .map((t) => `${path.relative(srcDir, file)} → ${path.relative(srcDir, t)}`),
    );
    assert.deepEqual(missing, []);
  });

  it("form no cycle (type-only imports included)", () => {
    const found = cycles(graph).map((c) => c.map((f) => path.relative(srcDir, f)).join(" ↔ "));
    assert.deepEqual(found, []);
  });

  it("keep the engine's layers: search/core imports nothing from search/indexer", () => {
    const core = path.join(srcDir, "rag/search/core") + path.sep;
    const indexer = path.join(srcDir, "rag/search/indexer") + path.sep;
    const found = [...graph]
      .filter(([file]) => file.startsWith(core))
      .flatMap(([file, targets]) =>
        targets
          .filter((t) => t.startsWith(indexer))
          .map((t) => `${path.relative(srcDir, file)} → ${path.relative(srcDir, t)}`),
      );
    assert.deepEqual(found, []);
  });

  it("are seen by the walker (it finds a cycle where there is one)", () => {
    const a = path.join(srcDir, "a.ts");
    const b = path.join(srcDir, "b.ts");
    assert.equal(
      cycles(
        new Map([
          [a, [b]],
          [b, [a]],
        ]),
      ).length,
      1,
    );
    assert.equal(
      cycles(
        new Map([
          [a, [b]],
          [b, []],
        ]),
      ).length,
      0,
    );
  });
});

describe("imports of test/", () => {
  it("take nothing from bench/ (what both need lives in scripts/lib)", () => {
    const benchDir = path.join(repoRoot, "bench");
    const testDir = path.join(repoRoot, "test");
    const found = sourceFiles(testDir).flatMap((file) =>
      importsOf(file)
        .filter((target) => target.startsWith(`${benchDir}${path.sep}`))
        .map((target) => `${path.relative(repoRoot, file)} → ${path.relative(repoRoot, target)}`),
    );
    assert.deepEqual(found, []);
  });
});
