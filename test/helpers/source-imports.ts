/**
 * The relative imports of the project's .ts files, read as text (no compiler): what the import tests
 * (test/core/import-cycles.test.ts, test/core/layering.test.ts) walk.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/** Every .ts file below `dir` (declaration files left out). */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [full] : [];
  });
}

// `from "…"` closes every static import and re-export (`import type` and `export type` included);
// `import("…")` is a dynamic import or an inline type import.
const SPECIFIER =
  /\bfrom\s*["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)|^\s*import\s*["']([^"']+)["']/gm;

/** Relative imports of `file`, as the .ts files they resolve to. */
export function importsOf(file: string): string[] {
  // Comments may mention imports; drop them first (block comments, then line comments at a line start).
  const text = readFileSync(file, "utf8")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/^\s*\/\/.*$/gm, "");
  const targets = new Set<string>();
  for (const match of text.matchAll(SPECIFIER)) {
    const specifier = match[1] ?? match[2] ?? match[3] ?? "";
    if (!specifier.startsWith(".")) continue;
    const resolved = path.resolve(path.dirname(file), specifier).replace(/\.js$/, ".ts");
    targets.add(resolved.endsWith(".ts") ? resolved : `${resolved}.ts`);
  }
  return [...targets];
}
