import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { buildRagApp } from "../../src/rag/app.js";
import { testConfig } from "../helpers/env.js";
import { makeDocx, makePdf } from "../helpers/doc-fixtures.js";

type App = Awaited<ReturnType<typeof buildRagApp>>;

/** A page of ~400 characters: its topic sentence, then filler about that topic. */
const page = (topic: string, filler: string) => [
  topic,
  ...Array.from({ length: 6 }, (_, i) => `${filler} note ${i + 1}.`),
];
const pdf = makePdf([
  page("Volcanoes form where magma reaches the surface.", "More about craters and ash clouds, field"),
  page("Glaciers are rivers of ice that move slowly downhill.", "More about moraines and crevasses, field"),
  page("Deserts receive very little rain each year.", "More about dunes and oases, field"),
]);
const html = Buffer.from(
  `<!doctype html><html><head><title>Otter facts</title><script>var tracking = "zebracode";</script>
   <style>.x{color:red}</style></head><body><nav>Home | Zebranav | Contact</nav>
   <h1>Sea otters</h1><p>Sea otters hold hands while they sleep so they do not drift apart.</p></body></html>`,
);
const docx = makeDocx(["The quarterly report shows revenue grew twelve percent.", "Costs stayed flat."]);
const markdown = Buffer.from("# Gardening notes\n\nTomatoes need full sun and regular watering.\n");

/** A multipart body made by the platform's own FormData encoder. */
async function multipart(fields: Record<string, string>, files: Array<[string, Buffer]>) {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  for (const [name, bytes] of files) form.append("files", new Blob([bytes]), name);
  const response = new Response(form);
  return {
    payload: Buffer.from(await response.arrayBuffer()),
    headers: { "content-type": response.headers.get("content-type")! },
  };
}

describe("uploads: PDF, HTML, DOCX and Markdown", () => {
  let app: App;
  before(async () => {
    app = await buildRagApp({
      config: testConfig({ DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-up-")) }),
    });
    const body = await multipart({ index_name: "mixed", chunk_size: "450", scorer: "bm25" }, [
      ["geography.pdf", pdf],
      ["otters.html", html],
      ["report.docx", docx],
      ["garden.md", markdown],
    ]);
    const res = await app.inject({ method: "POST", url: "/rag/build", ...body });
    assert.equal(res.statusCode, 201, res.body);
    assert.equal(res.json().documents_count, 4);
  });
  after(async () => app.close());

  const ask = async (query: string) => {
    const res = await app.inject({
      method: "POST",
      url: "/rag/query",
      payload: { index_name: "mixed", query, top_k: 3 },
    });
    assert.equal(res.statusCode, 200, res.body);
    return res.json();
  };

  it("a PDF answer cites the file and the page", async () => {
    const glaciers = await ask("glaciers of ice");
    assert.equal(glaciers.results[0].file, "geography.pdf");
    assert.equal(glaciers.results[0].metadata.page, 2);
    assert.match(glaciers.answer, /Glaciers are rivers of ice.*\[1\]/);
    const deserts = await ask("rain in deserts");
    assert.equal(deserts.results[0].file, "geography.pdf");
    assert.equal(deserts.results[0].metadata.page, 3);
    const volcano = await ask("volcano magma");
    assert.equal(volcano.results[0].metadata.page, 1);
  });

  it("an HTML page is indexed without its navigation, scripts and styles, titled by <title>", async () => {
    const otters = await ask("sea otters sleep");
    assert.equal(otters.results[0].file, "otters.html");
    assert.equal(otters.results[0].title, "Otter facts");
    assert.equal((await ask("zebranav")).count, 0);
    assert.equal((await ask("zebracode")).count, 0);
  });

  it("a DOCX and a Markdown file are cited by name", async () => {
    assert.equal((await ask("quarterly revenue")).results[0].file, "report.docx");
    const garden = await ask("tomatoes sun");
    assert.equal(garden.results[0].file, "garden.md");
    assert.equal(garden.results[0].title, "Gardening notes");
  });

  it("uploads to the add-documents route add or replace by file name", async () => {
    const body = await multipart({}, [
      ["garden.md", Buffer.from("# Gardening notes\n\nRoses need pruning in spring.\n")],
    ]);
    const res = await app.inject({ method: "POST", url: "/rag/indices/mixed/documents", ...body });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.json().index_documents_count, 4);
    assert.equal((await ask("tomatoes")).count, 0);
    assert.equal((await ask("roses pruning")).results[0].file, "garden.md");
  });
});

describe("uploads that are refused change nothing", () => {
  let app: App;
  before(async () => {
    app = await buildRagApp({
      config: testConfig({ DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-up-")) }),
    });
  });
  after(async () => app.close());

  const cases: Array<[string, string, Buffer, RegExp]> = [
    ["an unsupported type", "tool.exe", Buffer.from("MZ binary"), /tool\.exe.*unsupported/],
    ["a corrupt PDF", "broken.pdf", Buffer.from("%PDF-1.4\nnot really a pdf"), /broken\.pdf.*corrupt/],
    ["a PDF that is not a PDF", "fake.pdf", Buffer.from("hello"), /fake\.pdf.*not a PDF/],
    ["a DOCX that is not a ZIP", "fake.docx", Buffer.from("hello"), /fake\.docx.*not a \.docx/],
    ["a corrupt DOCX", "broken.docx", Buffer.from("PK\u0003\u0004garbage"), /broken\.docx.*corrupt/],
    ["a binary .txt", "data.txt", Buffer.from([0x68, 0x69, 0x00, 0x01]), /data\.txt.*binary/],
    ["invalid UTF-8 in .md", "bad.md", Buffer.from([0xff, 0xfe, 0x41]), /bad\.md.*UTF-8/],
    ["an .html without markup", "plain.html", Buffer.from("just words"), /plain\.html.*markup/],
  ];
  for (const [name, file, bytes, message] of cases) {
    it(`${name} is a 400 naming the file, and the good files beside it are not built`, async () => {
      const body = await multipart({ index_name: "refused" }, [
        ["good.md", markdown],
        [file, bytes],
      ]);
      const res = await app.inject({ method: "POST", url: "/rag/build", ...body });
      assert.equal(res.statusCode, 400, res.body);
      assert.match(res.json().error.message, message);
      assert.equal((await app.inject({ method: "GET", url: "/rag/stats/refused" })).statusCode, 404);
    });
  }

  it("bad form fields are 400 and build nothing", async () => {
    const badFields: Array<Record<string, string>> = [
      { index_name: "../x" },
      { index_name: "ok", chunk_size: "ten" },
      { chunk_size: "500" },
    ];
    for (const fields of badFields) {
      const res = await app.inject({
        method: "POST",
        url: "/rag/build",
        ...(await multipart(fields, [["a.md", markdown]])),
      });
      assert.equal(res.statusCode, 400, res.body);
    }
    const none = await app.inject({
      method: "POST",
      url: "/rag/build",
      ...(await multipart({ index_name: "ok" }, [])),
    });
    assert.equal(none.statusCode, 400);
    assert.equal((await app.inject({ method: "GET", url: "/rag/indices" })).json().count, 0);
  });
});

describe("server-side folders under RAG_FILES_DIR", () => {
  it("a folder stands for every supported file below it; PDF pages are kept", async () => {
    const root = mkdtempSync(path.join(os.tmpdir(), "lectern-files-"));
    mkdirSync(path.join(root, "docs", "deep"), { recursive: true });
    writeFileSync(path.join(root, "docs", "geography.pdf"), pdf);
    writeFileSync(path.join(root, "docs", "deep", "report.docx"), docx);
    writeFileSync(path.join(root, "docs", "notes.bin"), "skipped: not a supported type");
    const app = await buildRagApp({
      config: testConfig({
        DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-up-")),
        RAG_FILES_DIR: root,
      }),
    });
    try {
      const res = await app.inject({
        method: "POST",
        url: "/rag/build",
        payload: { index_name: "folder", files: ["docs"], chunk_size: 450 },
      });
      assert.equal(res.statusCode, 201, res.body);
      assert.equal(res.json().documents_count, 2);
      const query = await app.inject({
        method: "POST",
        url: "/rag/query",
        payload: { index_name: "folder", query: "glaciers" },
      });
      assert.equal(query.json().results[0].file, path.join("docs", "geography.pdf"));
      assert.equal(query.json().results[0].metadata.page, 2);
    } finally {
      await app.close();
    }
  });
});
