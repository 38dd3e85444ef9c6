/**
 * The playground's ES modules as the apps serve them, without a browser (so this holds where Chromium
 * is missing): every module is checked (`// @ts-check`), served as JavaScript under /ui/js/, and every
 * relative import among them resolves to a module the app serves; the page loads the entry module.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { WEB_ROOT } from "../../src/core/ui.js";
import { NAME_PATTERN } from "../../src/core/validation.js";
import { SUPPORTED_EXTENSIONS } from "../../src/rag/ingest/loaders.js";
import { openRagApp, removeTempDirs, type RagApp } from "../helpers/rag-http.js";

const MODULES = readdirSync(path.join(WEB_ROOT, "js")).filter((name) => name.endsWith(".js"));

/** The relative specifiers a module imports (static `import … from "./x.js"` and `import("./x.js")`). */
function relativeImports(source: string): string[] {
  const found = new Set<string>();
  for (const match of source.matchAll(/(?:from\s+|import\s*\(\s*)["'](\.{1,2}\/[^"']+)["']/g))
    found.add(match[1]!);
  return [...found];
}

describe("the playground's modules as served", () => {
  let app: RagApp;

  before(async () => {
    ({ app } = await openRagApp());
  });

  after(async () => {
    await app?.close();
    removeTempDirs();
  });

  it("the page loads js/main.js as a module, and app.js is gone", async () => {
    const page = await app.inject({ method: "GET", url: "/ui/" });
    assert.equal(page.statusCode, 200);
    assert.match(page.body, /<script type="module" src="js\/main\.js"><\/script>/);
    assert.equal((await app.inject({ method: "GET", url: "/ui/app.js" })).statusCode, 404);
  });

  it("every module is type-checked and served as JavaScript, and its imports resolve", async () => {
    assert.ok(MODULES.includes("main.js") && MODULES.includes("chat.js") && MODULES.includes("markdown.js"));
    for (const name of MODULES) {
      const source = readFileSync(path.join(WEB_ROOT, "js", name), "utf8");
      assert.ok(source.startsWith("// @ts-check\n"), `${name} starts with // @ts-check`);
      const reply = await app.inject({ method: "GET", url: `/ui/js/${name}` });
      assert.equal(reply.statusCode, 200, name);
      // Browsers refuse a module script served with a type that is not JavaScript.
      assert.match(String(reply.headers["content-type"]), /^(text|application)\/javascript/, name);
      for (const specifier of relativeImports(source)) {
        const target = path.posix.normalize(path.posix.join("js", specifier));
        const imported = await app.inject({ method: "GET", url: `/ui/${target}` });
        assert.equal(imported.statusCode, 200, `${name} imports ${specifier}`);
      }
    }
  });

  it("no module fetches from outside the page's apps (no CDN)", () => {
    for (const name of MODULES) {
      const source = readFileSync(path.join(WEB_ROOT, "js", name), "utf8");
      assert.doesNotMatch(source, /(?:from\s+|import\s*\(\s*)["']https?:/, name);
      assert.doesNotMatch(source, /innerHTML|outerHTML|insertAdjacentHTML|document\.write/, name);
    }
  });

  it("config.json gives the page the app's rules, and the page keeps no copy of them", async () => {
    const config = (await app.inject({ method: "GET", url: "/ui/config.json" })).json();
    assert.equal(config.name_pattern, NAME_PATTERN);
    assert.deepEqual(config.formats, [...SUPPORTED_EXTENSIONS]);
    const page = [
      readFileSync(path.join(WEB_ROOT, "index.html"), "utf8"),
      ...MODULES.map((name) => readFileSync(path.join(WEB_ROOT, "js", name), "utf8")),
    ].join("\n");
    assert.doesNotMatch(
      page,
      /\.docx|A-Za-z0-9\._-/,
      "a format list or the name pattern written in the page",
    );
  });
});
