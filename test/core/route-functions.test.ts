/**
 * Route files stay thin: every function that registers routes (calls `get`, `post`, `put`, `patch`,
 * `delete`, `head`, `options`, `all` with a path, or `route`) in src/rag/http/, src/textgen/http/,
 * src/textgen/batches/ and
 * src/core/http.ts is at most MAX_LINES lines long, handlers included. Past that, a handler wants to be
 * a function of its own, or the group a plugin of its own. Functions are found with the TypeScript
 * compiler's parser, so a route registered anywhere in those files is counted.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MAX_LINES = 80;

/** Functions over the limit: none. An entry here would name a function its owner must split. */
const KNOWN_EXCEPTIONS = new Set<string>([]);

const ROUTE_METHODS = new Set(["get", "post", "put", "patch", "delete", "head", "options", "all"]);

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return filesUnder(full);
    return entry.name.endsWith(".ts") ? [full] : [];
  });
}

/** Whether `call` registers a route: `x.post("/path", …)` (a path literal first) or `x.route({…})`. */
function registersRoute(call: ts.CallExpression): boolean {
  if (!ts.isPropertyAccessExpression(call.expression)) return false;
  const method = call.expression.name.text;
  if (method === "route") return true;
  if (!ROUTE_METHODS.has(method)) return false;
  const first = call.arguments[0];
  return (
    first !== undefined &&
    (ts.isStringLiteral(first) ||
      ts.isNoSubstitutionTemplateLiteral(first) ||
      ts.isTemplateExpression(first)) &&
    first.getText().slice(1).startsWith("/")
  );
}

type FunctionNode = ts.FunctionDeclaration | ts.FunctionExpression | ts.ArrowFunction | ts.MethodDeclaration;

function isFunction(node: ts.Node): node is FunctionNode {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node)
  );
}

/** Whether `fn` itself (not a function nested in it) registers a route. */
function registersRoutes(fn: FunctionNode): boolean {
  let found = false;
  const visit = (node: ts.Node): void => {
    if (found || (node !== fn && isFunction(node))) return;
    if (ts.isCallExpression(node) && registersRoute(node)) found = true;
    ts.forEachChild(node, visit);
  };
  visit(fn);
  return found;
}

function nameOf(fn: FunctionNode, source: ts.SourceFile): string {
  if (fn.name && ts.isIdentifier(fn.name)) return fn.name.text;
  const parent = fn.parent;
  if (ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  return `(function at line ${source.getLineAndCharacterOfPosition(fn.getStart(source)).line + 1})`;
}

interface RouteFunction {
  id: string;
  lines: number;
}

/** Every route-registering function of `file`, with its length in lines. */
function routeFunctions(file: string): RouteFunction[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const found: RouteFunction[] = [];
  const visit = (node: ts.Node): void => {
    if (isFunction(node) && registersRoutes(node)) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ id: `${path.relative(repoRoot, file)}:${nameOf(node, source)}`, lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe("route-registering functions", () => {
  const files = [
    ...filesUnder(path.join(repoRoot, "src/rag/http")),
    ...filesUnder(path.join(repoRoot, "src/textgen/http")),
    ...filesUnder(path.join(repoRoot, "src/textgen/batches")),
    path.join(repoRoot, "src/core/http.ts"),
  ];
  const functions = files.flatMap(routeFunctions);

  it(`are at most ${MAX_LINES} lines long (handlers included)`, () => {
    const long = functions
      .filter((fn) => fn.lines > MAX_LINES && !KNOWN_EXCEPTIONS.has(fn.id))
      .map((fn) => `${fn.id}: ${fn.lines} lines`);
    assert.deepEqual(long, []);
  });

  it("are found: every plugin of both apps is counted, the known exceptions among them", () => {
    const ids = new Set(functions.map((fn) => fn.id));
    for (const id of [
      "src/rag/http/routes.ts:ragRoutes",
      "src/rag/http/query-routes.ts:queryRoutes",
      "src/rag/http/openai-chat-routes.ts:registerChatCompletions",
      "src/textgen/http/routes.ts:registerPredict",
      ...KNOWN_EXCEPTIONS,
    ])
      assert.ok(ids.has(id), `${id} not found among ${[...ids].join(", ")}`);
  });

  it("the counter measures: a long function registering a route is over the limit", () => {
    const body = Array.from({ length: MAX_LINES }, (_, i) => `  const x${i} = ${i};`).join("\n");
    const file = path.join(repoRoot, "test/core/route-functions.test.ts");
    const source = ts.createSourceFile(
      file,
      `function long(app) {\n  app.get("/x", async () => 1);\n${body}\n}\n`,
      ts.ScriptTarget.Latest,
      true,
    );
    const fn = source.statements[0] as ts.FunctionDeclaration;
    assert.ok(registersRoutes(fn));
    const lines =
      source.getLineAndCharacterOfPosition(fn.getEnd()).line -
      source.getLineAndCharacterOfPosition(fn.getStart(source)).line +
      1;
    assert.ok(lines > MAX_LINES);
  });
});
