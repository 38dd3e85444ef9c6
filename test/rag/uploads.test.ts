import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { buildRagApp } from "../../src/rag/app.js";
import { testConfig } from "../helpers/env.js";
import { makeDocx, makeDocxFromBody, makePdf } from "../helpers/doc-fixtures.js";
import { loadFile } from "../../src/rag/ingest/loaders.js";
import { ParseGate } from "../../src/rag/ingest/limits.js";
import { toApiError } from "../../src/core/http.js";

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

  it("a PDF answer cites the file and the pages", async () => {
    // `page` is the page a chunk starts on, `pages` every page it covers.
    const covers = (result: { metadata: { page: number; pages: number[] } }, page: number) => {
      assert.ok(result.metadata.pages.includes(page), JSON.stringify(result.metadata));
      assert.equal(result.metadata.page, result.metadata.pages[0]);
    };
    const glaciers = await ask("glaciers of ice");
    assert.equal(glaciers.results[0].file, "geography.pdf");
    covers(glaciers.results[0], 2);
    assert.match(glaciers.answer, /Glaciers are rivers of ice.*\[1\]/);
    const deserts = await ask("rain in deserts");
    assert.equal(deserts.results[0].file, "geography.pdf");
    covers(deserts.results[0], 3);
    const volcano = await ask("volcano magma");
    covers(volcano.results[0], 1);
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
    ["a .md cut inside a UTF-16 character", "bad.md", Buffer.from([0xff, 0xfe, 0x41]), /bad\.md.*UTF-16LE/],
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
      assert.ok(query.json().results[0].metadata.pages.includes(2), query.body);
    } finally {
      await app.close();
    }
  });
});

describe("limits on what a file may cost (MAX_FILE_CHARS, MAX_PDF_PAGES, MAX_HTML_DEPTH, MAX_BUILD_CHARS)", () => {
  /** A fresh app with these limits; builds `files` as index "limited" and returns the reply. */
  async function buildWith(env: Record<string, string>, files: Array<[string, Buffer]>) {
    const app = await buildRagApp({
      config: testConfig({ DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-up-")), ...env }),
    });
    try {
      const res = await app.inject({
        method: "POST",
        url: "/rag/build",
        ...(await multipart({ index_name: "limited" }, files)),
      });
      const written = (await app.inject({ method: "GET", url: "/rag/stats/limited" })).statusCode;
      return { status: res.statusCode, body: res.json(), written: written === 200 };
    } finally {
      await app.close();
    }
  }

  const refusals: Array<[string, Record<string, string>, [string, Buffer], RegExp]> = [
    ["a PDF over MAX_PDF_PAGES", { MAX_PDF_PAGES: "2" }, ["three.pdf", pdf], /3 pages.*MAX_PDF_PAGES/],
    [
      "a .docx over MAX_FILE_CHARS",
      { MAX_FILE_CHARS: "40" },
      ["report.docx", docx],
      /more than 40 characters.*MAX_FILE_CHARS/,
    ],
    ["a PDF over MAX_FILE_CHARS", { MAX_FILE_CHARS: "500" }, ["three.pdf", pdf], /MAX_FILE_CHARS/],
    [
      "a Markdown file over MAX_FILE_CHARS",
      { MAX_FILE_CHARS: "20" },
      ["garden.md", markdown],
      /MAX_FILE_CHARS/,
    ],
    [
      "HTML nested deeper than MAX_HTML_DEPTH",
      { MAX_HTML_DEPTH: "8" },
      ["deep.html", Buffer.from(`<html><body>${"<div>".repeat(9)}deep${"</div>".repeat(9)}</body></html>`)],
      /nested too deep.*MAX_HTML_DEPTH/,
    ],
  ];
  for (const [name, env, file, message] of refusals) {
    it(`${name} is a 413 naming the file and the setting, and nothing is built`, async () => {
      const res = await buildWith(env, [["good.txt", Buffer.from("Tiny.")], file]);
      assert.equal(res.status, 413, JSON.stringify(res.body));
      assert.equal(res.body.error.code, "payload_too_large");
      assert.ok(res.body.error.message.includes(`"${file[0]}"`), res.body.error.message);
      assert.match(res.body.error.message, message);
      assert.equal(res.written, false);
    });
  }

  it("MAX_BUILD_CHARS counts the text of all files of a request together", async () => {
    const each = Buffer.from("# Notes\n\n" + "word ".repeat(30));
    const alone = await buildWith({ MAX_BUILD_CHARS: "200" }, [["a.md", each]]);
    assert.equal(alone.status, 201, JSON.stringify(alone.body));
    const together = await buildWith({ MAX_BUILD_CHARS: "200" }, [
      ["a.md", each],
      ["b.md", each],
    ]);
    assert.equal(together.status, 413, JSON.stringify(together.body));
    assert.match(together.body.error.message, /"b\.md".*MAX_BUILD_CHARS/);
    assert.equal(together.written, false);
  });

  it("ordinary HTML with unclosed <p>, <li> and <td> is not mistaken for deep nesting", async () => {
    const rows = Array.from({ length: 50 }, (_, i) => `<tr><td>cell ${i}<td>more`).join("");
    const items = Array.from({ length: 50 }, (_, i) => `<li>item ${i}`).join("");
    const paragraphs = Array.from({ length: 50 }, (_, i) => `<p>paragraph ${i}<br>`).join("");
    const sloppy = `<html><body><div><ul>${items}</ul><table>${rows}</table>${paragraphs}</div></body></html>`;
    const res = await buildWith({ MAX_HTML_DEPTH: "8" }, [["sloppy.html", Buffer.from(sloppy)]]);
    assert.equal(res.status, 201, JSON.stringify(res.body));
  });
});

describe("the .docx reader", () => {
  it("keeps paragraphs, tabs, breaks and entities, and leaves deleted text and field codes out", async () => {
    const simple = await loadFile("menu.docx", makeDocx(["Fish & chips <cheap>", "Second paragraph"]));
    assert.equal(simple.text.trim(), "Fish & chips <cheap>\n\nSecond paragraph");
    // A run with a tab, a break and a character reference, a deleted run and a field code, as Word writes them.
    const word = makeDocxFromBody(
      '<w:p><w:r><w:t>A</w:t><w:tab/><w:t>B</w:t><w:br/><w:t xml:space="preserve">C&#x44; </w:t></w:r>' +
        "<w:del><w:r><w:delText>gone</w:delText></w:r></w:del><w:r><w:instrText>PAGE</w:instrText></w:r></w:p>" +
        "<w:p/><w:p><w:r><w:t>Last</w:t></w:r></w:p>",
    );
    const loaded = await loadFile("word.docx", word);
    assert.equal(loaded.text, "A\tB\nCD \n\n\n\nLast\n\n");
  });
});

describe("the parse gate (MAX_CONCURRENT_PARSES, MAX_PARSE_QUEUE)", () => {
  it("runs at most `concurrency` parses, queues the next in order, and answers 429 with Retry-After past the queue", async () => {
    const gate = new ParseGate(1, 1);
    let releaseFirst: () => void = () => {};
    const order: string[] = [];
    const first = gate.run(
      () =>
        new Promise<void>((resolve) => {
          order.push("first started");
          releaseFirst = resolve;
        }),
    );
    const second = gate.run(async () => {
      order.push("second started");
    });
    await assert.rejects(
      gate.run(async () => order.push("third started")),
      (error: unknown) =>
        toApiError(error).statusCode === 429 &&
        toApiError(error).code === "queue_full" &&
        Number(toApiError(error).headers["retry-after"]) > 0 &&
        /MAX_CONCURRENT_PARSES/.test(toApiError(error).message),
    );
    assert.deepEqual(order, ["first started"]);
    releaseFirst();
    await Promise.all([first, second]);
    assert.deepEqual(order, ["first started", "second started"]);
    // A parse that fails frees its slot too.
    await assert.rejects(
      gate.run(() => Promise.reject(new Error("bad file"))),
      /bad file/,
    );
    assert.equal(await gate.run(async () => "free again"), "free again");
  });
});

describe("a choice field given a wrong value names the allowed values in the message", () => {
  it('scorer "BM25" in JSON and in a form: the message lists "tfidf" and "bm25"', async () => {
    const app = await buildRagApp({
      config: testConfig({ DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-up-")) }),
    });
    try {
      const json = await app.inject({
        method: "POST",
        url: "/rag/build",
        payload: { index_name: "x", documents: ["a b"], scorer: "BM25" },
      });
      const form = await app.inject({
        method: "POST",
        url: "/rag/build",
        ...(await multipart({ index_name: "x", scorer: "BM25" }, [["a.md", markdown]])),
      });
      for (const res of [json, form]) {
        assert.equal(res.statusCode, 400, res.body);
        assert.match(res.json().error.message, /scorer:? must be one of "tfidf", "bm25"/);
      }
    } finally {
      await app.close();
    }
  });
});
