/**
 * PDF provenance (#33): a chunk's `page` is the page it starts on and `pages` every page it covers,
 * whatever the chunk size; the document's page count is `page_count`, never `pages`. Checked on a PDF
 * written at test time whose every word names its page, so each chunk's words say where it lies.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadFile } from "../../../src/rag/ingest/loaders.js";
import { joinPages, pageAt, pagesOfSpan } from "../../../src/rag/ingest/pages.js";
import { chunkDocuments, normaliseDocuments } from "../../../src/rag/service/documents.js";
import { makePdf } from "../../helpers/doc-fixtures.js";

/** Page p's lines: words `p<p>w<i>`, so a word tells its page. Page 4 is short, page 6 blank. */
function pageLines(page: number): string[] {
  if (page === 6) return [];
  const words = page === 4 ? 6 : 60;
  const lines: string[] = [];
  for (let i = 0; i < words; i += 6) {
    lines.push(Array.from({ length: Math.min(6, words - i) }, (_, j) => `p${page}w${i + j}`).join(" ") + ".");
  }
  return lines;
}

describe("pages and text", () => {
  it("joinPages puts a blank line between pages and says where each starts", () => {
    const { text, pageStarts } = joinPages(["  one ", "", "three\n"]);
    assert.equal(text, "one\n\n\n\nthree");
    assert.deepEqual(pageStarts, [0, 5, 7]);
    assert.deepEqual(
      [0, 3, 4, 5, 7, 11].map((offset) => pageAt(pageStarts, offset)),
      [1, 1, 1, 2, 3, 3],
    );
    assert.deepEqual(pagesOfSpan(pageStarts, 0, 3), { page: 1, pages: [1] });
    assert.deepEqual(pagesOfSpan(pageStarts, 1, 12), { page: 1, pages: [1, 2, 3] });
    assert.deepEqual(pagesOfSpan(pageStarts, 7, 12), { page: 3, pages: [3] });
  });
});

describe("PDF chunk provenance", () => {
  const pageCount = 8;
  const pdf = makePdf(Array.from({ length: pageCount }, (_, i) => pageLines(i + 1)));

  for (const [chunkSize, overlap] of [
    [60, 0],
    [150, 40],
    [700, 128],
    [5000, 500],
  ] as const) {
    it(`every chunk's page and pages point at the text it holds (chunk_size ${chunkSize}, overlap ${overlap})`, async () => {
      const loaded = await loadFile("report.pdf", pdf);
      assert.deepEqual(loaded.metadata, { page_count: pageCount });
      const documents = normaliseDocuments([
        { id: "report.pdf", text: loaded.text, metadata: loaded.metadata, pageStarts: loaded.pageStarts },
      ]);
      const { chunks } = chunkDocuments(documents, { scorer: "bm25", chunkSize, overlap }).chunked[0]!;
      assert.ok(chunks.length > 0);
      for (const chunk of chunks) {
        const { page, pages } = chunk.metadata as { page: number; pages: number[] };
        const seen = [...chunk.text.matchAll(/p(\d+)w\d+/g)].map((match) => Number(match[1]));
        assert.ok(seen.length > 0, chunk.text);
        const first = Math.min(...seen);
        const last = Math.max(...seen);
        assert.equal(page, first, `page of ${JSON.stringify(chunk.text)}`);
        assert.deepEqual(
          pages,
          Array.from({ length: last - first + 1 }, (_, i) => first + i),
          `pages of ${JSON.stringify(chunk.text)}`,
        );
        assert.equal(
          chunk.metadata.page_count,
          pageCount,
          "the document's page count is kept by its own name",
        );
        // Every page named holds text of the chunk, except a blank page between two that do.
        for (const p of pages) assert.ok(seen.includes(p) || pageLines(p).length === 0, `page ${p}`);
      }
      if (chunkSize >= 700) assert.ok(chunks.some((chunk) => (chunk.metadata.pages as number[]).length > 1));
    });
  }
});
