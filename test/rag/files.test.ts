/** `files` builds: only regular, UTF-8 text files inside RAG_FILES_DIR are read; anything else is a 400. */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import {
  assertApiError,
  assertStatus,
  makeTempDir,
  openRagApp,
  ragClient,
  removeTempDirs,
  withoutElapsed,
  type RagApp,
  type RagClient,
} from "../helpers/rag-http.js";

const A_TEXT = "Alpha notes: the solar system has eight planets and one star.";
const B_TEXT = "# Beta\n\nBeta notes about oceans, whales and coral reefs.";

/** root/work is RAG_FILES_DIR; root/outside.txt and root/secret/ lie next to it. */
function makeFilesTree() {
  const root = makeTempDir("rag-files");
  const work = path.join(root, "work");
  fs.mkdirSync(path.join(work, "sub"), { recursive: true });
  fs.mkdirSync(path.join(root, "secret"));
  fs.writeFileSync(path.join(work, "a.txt"), A_TEXT);
  fs.writeFileSync(path.join(work, "sub", "b.md"), B_TEXT);
  fs.writeFileSync(path.join(work, "prog.exe"), "MZ not really a program");
  fs.writeFileSync(path.join(work, "README"), "No extension.");
  // Latin-1 text is read as such (#33); NUL bytes make a file binary.
  fs.writeFileSync(path.join(work, "binary.txt"), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x00, 0xff, 0xfe]));
  fs.writeFileSync(path.join(work, "empty.txt"), "");
  fs.writeFileSync(path.join(work, "blank.md"), " \n\n\t ");
  fs.writeFileSync(path.join(root, "outside.txt"), "Secret outside text about planets.");
  fs.writeFileSync(path.join(root, "secret", "s.txt"), "Secret text in a folder outside.");
  fs.symlinkSync(path.join(root, "outside.txt"), path.join(work, "link.txt"));
  fs.symlinkSync(path.join(root, "secret"), path.join(work, "linkdir"));
  fs.symlinkSync(path.join(work, "missing-target.txt"), path.join(work, "dangling.txt"));
  return { root, work };
}

after(() => removeTempDirs());

describe("files builds with RAG_FILES_DIR set", () => {
  let app: RagApp;
  let rag: RagClient;
  let tree: ReturnType<typeof makeFilesTree>;
  let kept: unknown;
  const KEPT_QUERY = { index_name: "kept", query: "planets oceans", top_k: 10 };

  before(async () => {
    tree = makeFilesTree();
    ({ app } = await openRagApp({ RAG_FILES_DIR: tree.work }));
    rag = ragClient(app);
    assertStatus(await rag.build({ index_name: "kept", files: ["a.txt", "sub/b.md"] }), 201);
    kept = withoutElapsed((await rag.query(KEPT_QUERY)).json());
  });
  after(async () => app.close());

  it("a relative path: source and file fields carry the path relative to the folder", async () => {
    const res = await rag.build({ index_name: "relative", files: ["a.txt"] });
    assertStatus(res, 201);
    assert.equal(res.json().documents_count, 1);
    const query = (await rag.query({ index_name: "relative", query: "planets star" })).json();
    const [top] = query.results;
    assert.equal(top.text, A_TEXT);
    assert.equal(top.file, "a.txt");
    assert.equal(top.document_id, "a.txt");
    assert.equal(top.title, "a.txt");
    assert.deepEqual(top.metadata, { file: "a.txt", start: 0, end: top.text.length });
  });

  it("an absolute path inside the folder is stored under its relative path", async () => {
    const res = await rag.build({ index_name: "absolute", files: [path.join(tree.work, "sub", "b.md")] });
    assertStatus(res, 201);
    const [top] = (await rag.query({ index_name: "absolute", query: "whales" })).json().results;
    assert.equal(top.text, B_TEXT);
    assert.equal(top.file, path.join("sub", "b.md"));
    assert.equal(top.document_id, path.join("sub", "b.md"));
  });

  it("files and inline documents build one index; paths with ./ and inner .. are normalised", async () => {
    const res = await rag.build({
      index_name: "together",
      files: ["./sub/../a.txt", "sub/b.md"],
      documents: [{ id: "inline", text: "Inline text about volcanoes." }],
    });
    assertStatus(res, 201);
    assert.equal(res.json().documents_count, 3);
    const all = (
      await rag.query({ index_name: "together", query: "planets whales volcanoes", top_k: 10 })
    ).json();
    assert.deepEqual(all.results.map((r: { file: string }) => r.file).sort(), [
      "a.txt",
      "inline",
      "sub/b.md",
    ]);
  });

  it("files also work with append", async () => {
    assertStatus(await rag.build({ index_name: "grown", files: ["a.txt"] }), 201);
    assertStatus(await rag.build({ index_name: "grown", mode: "append", files: ["sub/b.md"] }), 201);
    assert.equal((await rag.indexStats("grown")).json().documents_count, 2);
  });

  const refused: Array<[string, (t: ReturnType<typeof makeFilesTree>) => string]> = [
    ["../outside.txt", () => "../outside.txt"],
    ["sub/../../outside.txt", () => "sub/../../outside.txt"],
    ["an absolute path outside", (t) => path.join(t.root, "outside.txt")],
    ["/etc/passwd", () => "/etc/passwd"],
    ["a symlink inside pointing outside", () => "link.txt"],
    ["a file under a symlinked folder pointing outside", () => "linkdir/s.txt"],
    ["a dangling symlink", () => "dangling.txt"],
    ['a path containing "\\u0000"', () => "a.txt\u0000.md"],
    ["a NUL before the extension", () => "a\u0000.txt"],
    ["the folder itself", () => "."],
    ["the folder by absolute path", (t) => t.work],
    ["a missing file", () => "missing.txt"],
    ["an unsupported extension (.exe)", () => "prog.exe"],
    ["no extension", () => "README"],
    ["binary bytes (NUL)", () => "binary.txt"],
    ["an empty file", () => "empty.txt"],
    ["a whitespace-only file", () => "blank.md"],
  ];
  for (const [label, pick] of refused) {
    it(`refused with 400, nothing built: ${label}`, async () => {
      const file = pick(tree);
      const res = await rag.build({ index_name: "refused", files: [file] });
      assertApiError(res, 400);
      assert.ok(!res.body.includes("Secret"), "no content from outside leaks into the error");
      assertApiError(await rag.indexStats("refused"), 404);
      // With a good file in the same request, and as a replace of an existing index: all or nothing.
      assertApiError(await rag.build({ index_name: "refused", files: ["a.txt", file] }), 400);
      assertApiError(await rag.indexStats("refused"), 404);
      assertApiError(await rag.build({ index_name: "kept", mode: "replace", files: [file] }), 400);
      assertApiError(await rag.build({ index_name: "kept", mode: "append", files: ["a.txt", file] }), 400);
      assert.deepEqual(withoutElapsed((await rag.query(KEPT_QUERY)).json()), kept);
    });
  }

  it("the same file named twice (or by a folder and by name) is read once", async () => {
    assertStatus(await rag.build({ index_name: "twice", files: ["a.txt", "a.txt", "./a.txt"] }), 201);
    assert.equal((await rag.indexStats("twice")).json().documents_count, 1);
    assertStatus(await rag.build({ index_name: "twice-folder", files: ["sub", "sub/b.md"] }), 201);
    assert.equal((await rag.indexStats("twice-folder")).json().documents_count, 1);
  });

  it("a folder stands for the supported files below it", async () => {
    assertStatus(await rag.build({ index_name: "folder", files: ["sub"] }), 201);
    const stats = (await rag.indexStats("folder")).json();
    assert.equal(stats.documents_count, 1);
  });
});

describe("files builds with RAG_FILES_DIR reached through a symlink", () => {
  it("relative, link-absolute and real-absolute paths are read; outside is still refused", async () => {
    const tree = makeFilesTree();
    const link = path.join(tree.root, "work-link");
    fs.symlinkSync(tree.work, link);
    const { app } = await openRagApp({ RAG_FILES_DIR: link });
    const rag = ragClient(app);
    try {
      const res = await rag.build({
        index_name: "linked",
        files: ["a.txt", path.join(link, "sub", "b.md")],
      });
      assertStatus(res, 201);
      const files = (await rag.query({ index_name: "linked", query: "planets whales", top_k: 10 })).json();
      assert.deepEqual(files.results.map((r: { file: string }) => r.file).sort(), ["a.txt", "sub/b.md"]);
      assertStatus(await rag.build({ index_name: "real", files: [path.join(tree.work, "a.txt")] }), 201);
      for (const file of ["../outside.txt", path.join(tree.root, "outside.txt"), "link.txt"]) {
        assertApiError(await rag.build({ index_name: "out", files: [file] }), 400);
      }
      assertApiError(await rag.indexStats("out"), 404);
    } finally {
      await app.close();
    }
  });
});

describe("files builds without a usable RAG_FILES_DIR", () => {
  it("with RAG_FILES_DIR unset, any files entry is a 400 and nothing is built", async () => {
    const tree = makeFilesTree();
    const { app } = await openRagApp();
    const rag = ragClient(app);
    try {
      for (const file of ["a.txt", path.join(tree.work, "a.txt"), "../outside.txt"]) {
        const res = await rag.build({ index_name: "nofiles", files: [file] });
        const { message } = assertApiError(res, 400);
        assert.match(message, /RAG_FILES_DIR/);
        assertApiError(
          await rag.build({ index_name: "nofiles", files: [file], documents: ["Inline."] }),
          400,
        );
      }
      assertApiError(await rag.indexStats("nofiles"), 404);
    } finally {
      await app.close();
    }
  });

  it("with RAG_FILES_DIR pointing to a missing folder, files are a 400", async () => {
    const { app } = await openRagApp({ RAG_FILES_DIR: path.join(makeTempDir("rag-files"), "missing") });
    const rag = ragClient(app);
    try {
      assertApiError(await rag.build({ index_name: "nofolder", files: ["a.txt"] }), 400);
      assertApiError(await rag.indexStats("nofolder"), 404);
    } finally {
      await app.close();
    }
  });
});
