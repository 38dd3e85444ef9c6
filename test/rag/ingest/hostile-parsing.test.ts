/**
 * The parsing defences of #23 and #35 in process: the linear Markdown title, HTML outline and table
 * text, the PDF inflation check on each bypass (and the spellings it cannot see, which the parse
 * process's memory limit holds), and the parse pool's limits (a 413 past MAX_PARSE_HEAP_MB, a 422
 * past MAX_PARSE_MS, a parse stopped when its client leaves, a process reused after an ordinary file).
 * The HTTP side (the same inputs against a server child process) is in test/reliability.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { describe, it } from "node:test";
import { toApiError } from "../../../src/core/http.js";
import { checkPdfInflation, InflateLimitError } from "../../../src/rag/ingest/inflate-check.js";
import { DEFAULT_INGEST_LIMITS } from "../../../src/rag/ingest/limits.js";
import { loadFile, markdownTitle, outlineHtml } from "../../../src/rag/ingest/loaders.js";
import { parseFileBytes } from "../../../src/rag/ingest/parse-pool.js";
import { decoderFor } from "../../../src/rag/ingest/pdf-filters.js";
import {
  BOMB_SPELLINGS,
  makeBombDocx,
  spelledBombPdf,
  type BombSpelling,
} from "../../helpers/bomb-fixtures.js";
import { makePdf } from "../../helpers/doc-fixtures.js";
import {
  backtrackingMarkdown,
  eolBombPdf,
  hexFlateBombPdf,
  hiddenEndstreamBombPdf,
  implicitNestingHtml,
  lzwBombPdf,
  lzwEncode,
  manyScriptsHtml,
  repeatedPagePdf,
  selfClosingDivsHtml,
  unclosedTagsHtml,
} from "../../reliability/hostile-fixtures.js";

const MIB = 1024 * 1024;

describe("Markdown titles, read by a line scan", () => {
  it("is the first '# ' heading, closing #s dropped", () => {
    assert.equal(markdownTitle("intro\n#  Hello world ##  \n\n# Second\n"), "Hello world");
    assert.equal(markdownTitle("#hashtag\n## Sub\n"), null);
    assert.equal(markdownTitle("# \n# Real\n"), "Real");
  });

  it("keeps what the old regex kept on the heading that made it backtrack", () => {
    const title = markdownTitle(backtrackingMarkdown(3000).toString());
    assert.equal(title, `a${" ".repeat(3000)}b`);
  });

  it("reads a 150 KB heading `# ###…#x` in one pass (the trailing-# trim was quadratic: 60 s)", async () => {
    const line = `# ${"#".repeat(150_000)}x`;
    const started = performance.now();
    assert.equal(markdownTitle(`${line}\n\nbody\n`), line.slice(2));
    assert.equal(markdownTitle(`# Title ${"#".repeat(150_000)}\n`), "Title");
    // As a document's title (indexed with each of its chunks) it is cut to MAX_TITLE_CHARS.
    const loaded = await loadFile("hashes.md", Buffer.from(`${line}\n\nbody\n`));
    assert.equal(loaded.title, `${line.slice(2, 2 + 255)}…`);
    // A liveness bound, not a speed figure: linear work on 300 KB is milliseconds; quadratic was a minute.
    assert.ok(performance.now() - started < 5000);
  });
});

describe("HTML tables, one row a line", () => {
  it("renders rows and cells, captions and header cells, and ignores spans", async () => {
    const html =
      "<table><caption>Prices</caption><thead><tr><th>Fruit</th><th>Price</th></tr></thead>" +
      '<tbody><tr><td colspan="1000" rowspan="1000">Apple</td><td>3 €</td></tr><tr><td>Pear</td><td><p>4 €</p></td></tr></tbody></table><p>After.</p>';
    const { text } = await loadFile("prices.html", Buffer.from(html));
    assert.equal(text, "Prices\nFruit | Price\nApple | 3 €\nPear | 4 €\n\nAfter.");
  });

  it("a 2 KB table of colspan=1000 rowspan=1000 cells (6 min, +900 MB on a grid) and 20,000 rows cost what their markup does", async () => {
    const spans = `<table>${`<tr>${"<td colspan=1000 rowspan=1000>x</td>".repeat(4)}</tr>`.repeat(12)}</table>`;
    const rows = `<table>${"<tr><td>x</td><td>y</td></tr>".repeat(20_000)}</table>`;
    const started = performance.now();
    assert.equal((await loadFile("spans.html", Buffer.from(spans))).text.split("\n").length, 12);
    assert.equal((await loadFile("rows.html", Buffer.from(rows))).text.split("\n").length, 20_000);
    // A liveness bound: both are a few hundred ms of linear work; the grid took minutes.
    assert.ok(performance.now() - started < 20_000);
  });
});

describe("HTML outline: nesting counted as the parser will nest", () => {
  it("counts <div/> as an open div (HTML ignores the slash)", () => {
    assert.equal(outlineHtml(selfClosingDivsHtml(1000).toString(), 256).tooDeep, true);
    assert.equal(outlineHtml(selfClosingDivsHtml(100).toString(), 256).tooDeep, false);
  });

  it("counts implicitly closed elements that still nest (<p><td> …)", () => {
    assert.equal(outlineHtml(implicitNestingHtml(1000).toString(), 256).tooDeep, true);
  });

  it("does not count list items and paragraphs that close each other", () => {
    const html = `<ul>${"<li>item".repeat(5000)}</ul>${"<p>para".repeat(5000)}`;
    assert.equal(outlineHtml(html, 256).tooDeep, false);
  });

  it("reads the title, finds no markup in plain text, and skips script bodies", () => {
    const outline = outlineHtml("<html><head><title> A &amp; B </title></head><body><p>x</body></html>", 8);
    assert.deepEqual([outline.title, outline.tooDeep], ["A & B", false]);
    assert.equal(outlineHtml("no markup < here", 8).elements, 0);
    assert.equal(outlineHtml(`<script>${"<div>".repeat(1000)}</script><p>x</p>`, 8).tooDeep, false);
  });

  it("scans the inputs that were quadratic in one pass (a few hundred ms at most)", () => {
    assert.equal(outlineHtml(manyScriptsHtml(2_300_000).toString(), 256).tooDeep, false);
    assert.equal(outlineHtml(unclosedTagsHtml(240_000).toString(), 256).elements, 1);
  });
});

describe("PDF inflation check follows what pdf.js decodes", () => {
  const limit = 8 * MIB;
  const refused = (pdf: Buffer) =>
    assert.rejects(checkPdfInflation(pdf, limit), (error) => error instanceof InflateLimitError);

  it("through a filter chain: /Filter [/ASCIIHexDecode /FlateDecode]", () => refused(hexFlateBombPdf(16)));
  it("after `stream\\r`", () => refused(eolBombPdf(16, "\r")));
  it("after `stream \\n`", () => refused(eolBombPdf(16, " \n")));
  it("past an `endstream` inside a stored deflate block", () => refused(hiddenEndstreamBombPdf(16)));
  it("through /Filter /LZWDecode (16 MiB from 14 KB)", () => refused(lzwBombPdf(16)));

  it("decodes LZW as written (round trips, table resets included)", async () => {
    for (const input of [
      Buffer.from("TOBEORNOTTOBEORTOBEORNOT"),
      randomBytes(20_000),
      Buffer.alloc(300_000, "a"),
    ]) {
      const decoder = decoderFor("lzw");
      const chunks: Buffer[] = [];
      decoder.on("data", (chunk: Buffer) => chunks.push(chunk));
      const ended = new Promise((resolve) => decoder.on("end", resolve));
      decoder.end(lzwEncode(input));
      await ended;
      assert.ok(Buffer.concat(chunks).equals(input));
    }
  });

  it("is passed by spellings only a PDF parser reads: the parse process's memory limit holds those", async () => {
    for (const spelling of Object.keys(BOMB_SPELLINGS) as BombSpelling[]) {
      await checkPdfInflation(spelledBombPdf(spelling, 16), limit);
    }
  });

  it("lets ordinary PDFs through", async () => {
    await checkPdfInflation(makePdf([["Hello world", "line two"], ["page 2"]]), 1024);
    await checkPdfInflation(repeatedPagePdf(9999), limit);
  });
});

describe("parse pool: bounded processes", () => {
  const limits = {
    ...DEFAULT_INGEST_LIMITS,
    maxParseMs: 3000,
    maxParseHeapMb: 64,
    maxExtractedBytes: 64 * MIB,
  };
  const status = (code: number, setting: RegExp) => (error: unknown) => {
    const apiError = toApiError(error);
    assert.equal(apiError.statusCode, code, apiError.message);
    assert.match(apiError.message, setting);
    return true;
  };

  it("parses an ordinary file, then another in the same kind of process", async () => {
    const first = await parseFileBytes("a.md", Buffer.from("# Tides\n\nThe moon pulls the sea.\n"), limits);
    assert.deepEqual([first.title, first.text.includes("moon")], ["Tides", true]);
    const second = await parseFileBytes(
      "b.html",
      Buffer.from("<title>Lakes</title><p>Still water.</p>"),
      limits,
    );
    assert.equal(second.title, "Lakes");
  });

  it("a parse whose client left is stopped, and the next file still parses", async () => {
    const controller = new AbortController();
    const parse = parseFileBytes(
      "pages.pdf",
      repeatedPagePdf(9999),
      { ...limits, maxParseMs: 60_000 },
      controller.signal,
    );
    setTimeout(() => controller.abort(), 200);
    await assert.rejects(parse, status(499, /closed/));
    const after = await parseFileBytes("c.txt", Buffer.from("plain text"), limits);
    assert.equal(after.text, "plain text");
  });

  it("a bad file is the loader's 400, not a crash of the process", async () => {
    await assert.rejects(
      parseFileBytes("x.pdf", Buffer.from("not a pdf"), limits),
      status(400, /is not a PDF/),
    );
  });
  it("a file that needs more heap than MAX_PARSE_HEAP_MB is a 413 naming the file and the setting", async () => {
    // 60 MiB of text: within MAX_EXTRACTED_BYTES and MAX_FILE_CHARS, not within a 64 MB heap. V8
    // collects hard before it gives up: the time limit is set well past that, the heap is what is tested.
    await assert.rejects(
      parseFileBytes("heap.docx", makeBombDocx(60), { ...limits, maxParseMs: 30_000 }),
      status(413, /"heap\.docx".*MAX_PARSE_HEAP_MB/),
    );
  });

  it("a parse past MAX_PARSE_MS is a 422 naming the file and the setting", async () => {
    await assert.rejects(
      parseFileBytes("pages.pdf", repeatedPagePdf(9999), { ...limits, maxParseMs: 1000 }),
      status(422, /"pages\.pdf".*MAX_PARSE_MS/),
    );
  });
});
