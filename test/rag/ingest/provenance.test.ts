/**
 * Chunk provenance (#37): every chunk says where it came from — `start` and `end`, its offsets in its
 * document's text; for PDFs `page` and `pages`; for Markdown, HTML and DOCX `headings`, the heading
 * path where it starts. Checked on documents written at test time whose words name their page or
 * section, through the service (inline and on the write-preparation thread's path) and through
 * /rag/query and /rag/chat.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { buildRagApp } from "../../../src/rag/app.js";
import { loadFile, type LoadedFile } from "../../../src/rag/ingest/loaders.js";
import { RagService } from "../../../src/rag/service.js";
import { chunkDocuments, normaliseDocuments } from "../../../src/rag/service/documents.js";
import { recordsOf, runDocumentsJob, analysisOf } from "../../../src/rag/service/write-prep.js";
import type { DocumentInput } from "../../../src/rag/service/types.js";
import { SqliteIndexStore } from "../../../src/rag/store/sqlite-store.js";
import type { ChunkRecord } from "../../../src/rag/store/types.js";
import { makeDocxFromBody, makePdf } from "../../helpers/doc-fixtures.js";
import { testConfig } from "../../helpers/env.js";

const folders: string[] = [];
const tempDir = () => {
  const folder = mkdtempSync(path.join(os.tmpdir(), "lectern-provenance-"));
  folders.push(folder);
  return folder;
};
after(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

/** Page p: sentences whose words `p<p>w<i>` name their page. */
const pageLines = (page: number) =>
  Array.from(
    { length: 8 },
    (_, line) => Array.from({ length: 6 }, (_, word) => `p${page}w${line * 6 + word}`).join(" ") + ".",
  );

const input = (id: string, loaded: LoadedFile): DocumentInput => ({
  id,
  text: loaded.text,
  title: loaded.title,
  metadata: loaded.metadata,
  pageStarts: loaded.pageStarts,
  sections: loaded.sections,
});

interface Position {
  start: number;
  end: number;
  page?: number;
  pages?: number[];
  headings?: string[];
}

/** A chunk's text is its document's text [start, end), and its pages hold its words. */
function assertPdfChunk(text: string, chunkText: string, metadata: Position, pageStarts: number[]): void {
  assert.equal(text.slice(metadata.start, metadata.end), chunkText, "offsets point at the chunk's text");
  const seen = [...chunkText.matchAll(/p(\d+)w\d+/g)].map((match) => Number(match[1]));
  const first = Math.min(...seen);
  const last = Math.max(...seen);
  assert.equal(metadata.page, first, JSON.stringify(chunkText));
  assert.deepEqual(
    metadata.pages,
    Array.from({ length: last - first + 1 }, (_, i) => first + i),
  );
  // Each page named holds the part of the chunk that lies on it.
  for (const page of metadata.pages!) {
    const pageText = text.slice(pageStarts[page - 1], pageStarts[page] ?? text.length);
    for (const word of chunkText.match(new RegExp(`p${page}w\\d+`, "g")) ?? [])
      assert.ok(pageText.includes(word));
  }
}

describe("PDF passages point at their pages and offsets", () => {
  const pdf = makePdf([1, 2, 3, 4].map(pageLines));

  it("through the service: every returned passage, for queries on each page", async () => {
    const loaded = await loadFile("report.pdf", pdf);
    const store = SqliteIndexStore.open(tempDir());
    const service = new RagService(store);
    const key = { tenantId: "default", name: "report" };
    try {
      await service.build({
        key,
        documents: [input("report.pdf", loaded)],
        chunkSize: 160,
        overlap: 40,
        mode: "create",
      });
      let checked = 0;
      for (const query of ["p1w3 p1w20", "p2w47 p3w0", "p3w30", "p4w40 p4w41"]) {
        const { results } = await service.query({ key, query, topK: 5, minScore: 0 });
        assert.ok(results.length > 0, query);
        for (const result of results) {
          assertPdfChunk(
            loaded.text,
            result.text,
            result.metadata as unknown as Position,
            loaded.pageStarts!,
          );
          checked++;
        }
      }
      assert.ok(checked >= 4);
    } finally {
      await service.close();
      await store.close();
    }
  });

  it("on the write-preparation thread's path, chunks get the same provenance as inline", async () => {
    const loaded = await loadFile("report.pdf", pdf);
    const markdown = await loadFile("notes.md", Buffer.from(MARKDOWN));
    const inputs = [input("report.pdf", loaded), input("notes.md", markdown)];
    const settings = { scorer: "bm25" as const, chunkSize: 120, overlap: 30 };
    const inline = chunkDocuments(normaliseDocuments(inputs), settings).chunked;
    const result = runDocumentsJob({
      inputs: [...inputs],
      chunking: { chunkSize: 120, overlap: 30 },
      analysis: analysisOf(settings, null),
      wantTexts: false,
    });
    const threaded = recordsOf(inputs, result).chunked;
    const metadataOf = (chunked: Array<{ chunks: ChunkRecord[] }>) =>
      chunked.flatMap(({ chunks }) => chunks.map((chunk) => chunk.metadata));
    assert.deepEqual(metadataOf(threaded), metadataOf(inline));
    assert.ok(metadataOf(inline).every((metadata) => typeof metadata.start === "number"));
  });
});

/**
 * A document's sections: [level, id], each heading "Topic <id>" and its body sentences naming it
 * ("s<id>", the last word of each), so the first token of a chunk says which section it starts in.
 */
const OUTLINE: Array<[number, string]> = [
  [1, "A"],
  [2, "B"],
  [3, "C"],
  [2, "D"],
  [1, "E"],
  [3, "F"],
];
const body = (id: string) =>
  Array.from({ length: 4 }, (_, i) => `Token s${id} states fact ${i + 1} of s${id}.`).join(" ");

/** The heading path of each section, outermost first. */
function expectedPaths(): Map<string, string[]> {
  const open: string[] = [];
  const paths = new Map<string, string[]>();
  for (const [level, id] of OUTLINE) {
    open.length = level - 1;
    open[level - 1] = `Topic ${id}`;
    paths.set(
      id,
      open.filter((heading) => heading !== undefined),
    );
  }
  return paths;
}

const MARKDOWN =
  "Preface text before any heading.\n\n" +
  OUTLINE.map(([level, id]) => `${"#".repeat(level)} Topic ${id}\n\n${body(id)}\n\n`).join("") +
  "```\n# Not a heading\n```\n";
const HTML =
  "<html><body><nav><h1>Menu</h1></nav><p>Preface text before any heading.</p>" +
  OUTLINE.map(([level, id]) => `<h${level}>Topic ${id}</h${level}><p>${body(id)}</p>`).join("") +
  "</body></html>";
const DOCX = makeDocxFromBody(
  "<w:p><w:r><w:t>Preface text before any heading.</w:t></w:r></w:p>" +
    OUTLINE.map(
      ([level, id]) =>
        `<w:p><w:pPr><w:pStyle w:val="Heading${level}"/></w:pPr><w:r><w:t>Topic ${id}</w:t></w:r></w:p>` +
        `<w:p><w:r><w:t>${body(id)}</w:t></w:r></w:p>`,
    ).join(""),
);

/** The section a chunk starts in, from its first token: a heading ("Topic X") or a body word ("sX"). */
function sectionOf(text: string): string | null {
  const match = /Topic ([A-Z])\b|\bs([A-Z])\b|Preface/.exec(text);
  if (!match || match[0] === "Preface") return null;
  return (match[1] ?? match[2])!;
}

/** Case-insensitive: HTML's h4–h6 are upper-cased in the text, as they were before. */
function assertHeadings(text: string, chunkText: string, metadata: Position): void {
  assert.equal(text.slice(metadata.start, metadata.end), chunkText);
  const section = sectionOf(chunkText);
  const expected = section === null ? [] : expectedPaths().get(section)!;
  assert.deepEqual(metadata.headings, expected, `headings of ${JSON.stringify(chunkText.slice(0, 60))}`);
}

describe("structured documents carry their heading path", () => {
  for (const [name, bytes] of [
    ["notes.md", Buffer.from(MARKDOWN)],
    ["notes.html", Buffer.from(HTML)],
    ["notes.docx", DOCX],
  ] as const) {
    for (const chunkSize of [90, 200]) {
      it(`${name}, chunk size ${chunkSize}`, async () => {
        const loaded = await loadFile(name, bytes);
        assert.ok(!loaded.text.includes("Menu"), "navigation is not text");
        const [document] = normaliseDocuments([input(name, loaded)]);
        const { chunks } = chunkDocuments([document!], { scorer: "bm25", chunkSize, overlap: 20 })
          .chunked[0]!;
        assert.ok(chunks.length >= 6);
        const sections = new Set<string>();
        for (const chunk of chunks) {
          assertHeadings(loaded.text, chunk.text, chunk.metadata as unknown as Position);
          sections.add(JSON.stringify(chunk.metadata.headings));
        }
        assert.ok(sections.size >= 4, "chunks fall under several headings");
      });
    }
  }

  it("a .docx's heading styles are read from its styles part, whatever their id", async () => {
    const styles =
      '<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>' +
      '<w:style w:type="paragraph" w:styleId="Kapitel"><w:name w:val="Kapitel"/><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>' +
      '<w:style w:type="paragraph" w:styleId="Body"><w:name w:val="Body Text"/></w:style>';
    const paragraph = (style: string, text: string) =>
      `<w:p><w:pPr><w:pStyle w:val="${style}"/></w:pPr><w:r><w:t>${text}</w:t></w:r></w:p>`;
    const loaded = await loadFile(
      "de.docx",
      makeDocxFromBody(
        paragraph("berschrift1", "Einleitung") +
          paragraph("Body", "Erster Absatz.") +
          paragraph("Kapitel", "Details") +
          paragraph("Body", "Zweiter Absatz."),
        styles,
      ),
    );
    assert.deepEqual(
      loaded.sections!.map(({ start, headings }) => [loaded.text.slice(start, start + 10), headings]),
      [
        ["Einleitung", ["Einleitung"]],
        ["Details\n\nZ", ["Einleitung", "Details"]],
      ],
    );
  });

  it("a Markdown fence's '#' lines and setext headings", async () => {
    const loaded = await loadFile(
      "fence.md",
      Buffer.from("Title\n=====\n\nintro\n\n```\n# code\n```\n\nSub\n---\n\ntext"),
    );
    assert.deepEqual(
      loaded.sections!.map((section) => section.headings),
      [["Title"], ["Title", "Sub"]],
    );
  });
});

describe("positions in /rag/query and /rag/chat", () => {
  it("a Markdown upload's results carry start, end and headings", async () => {
    const app = await buildRagApp({ config: testConfig({ DATA_DIR: tempDir() }) });
    try {
      const form = new FormData();
      form.append("index_name", "notes");
      form.append("chunk_size", "120");
      form.append("files", new Blob([MARKDOWN]), "notes.md");
      const response = new Response(form);
      const built = await app.inject({
        method: "POST",
        url: "/rag/build",
        payload: Buffer.from(await response.arrayBuffer()),
        headers: { "content-type": response.headers.get("content-type")! },
      });
      assert.equal(built.statusCode, 201, built.body);
      const text = (await loadFile("notes.md", Buffer.from(MARKDOWN))).text;
      const queried = await app.inject({
        method: "POST",
        url: "/rag/query",
        payload: { index_name: "notes", query: "token sC states fact", top_k: 3 },
      });
      assert.equal(queried.statusCode, 200, queried.body);
      const chatted = await app.inject({
        method: "POST",
        url: "/rag/chat",
        payload: {
          index: "notes",
          messages: [{ role: "user", content: "token sF fact" }],
          top_k: 3,
          answer: "extractive",
        },
      });
      assert.equal(chatted.statusCode, 200, chatted.body);
      for (const results of [queried.json().results, chatted.json().results]) {
        assert.ok(results.length > 0);
        for (const result of results) assertHeadings(text, result.text, result.metadata);
      }
      assert.deepEqual(queried.json().results[0].metadata.headings, ["Topic A", "Topic B", "Topic C"]);
      assert.deepEqual(chatted.json().results[0].metadata.headings, ["Topic E", "Topic F"]);
    } finally {
      await app.close();
    }
  });
});
