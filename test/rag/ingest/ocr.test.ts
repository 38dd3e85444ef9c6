/**
 * OCR (#37): a scanned PDF, made here with no text layer (a PDF of known text rasterised by pdftoppm,
 * its pixels embedded as images), is read by tesseract in the parse process; the recognised text is
 * compared with the known text by character error rate, and a query for a sentence of page 3 cites
 * page 3. The tools are killed with the parse process when it passes MAX_PARSE_MS. Skipped only when
 * tesseract or pdftoppm is not installed (CI installs them: .ci/run).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { DEFAULT_INGEST_LIMITS } from "../../../src/rag/ingest/limits.js";
import { isIndexable, isSupported, loadFile, pdfPageTexts } from "../../../src/rag/ingest/loaders.js";
import { missingOcrTools, OcrError, recognisePdfPage } from "../../../src/rag/ingest/ocr.js";
import { parseFileBytes } from "../../../src/rag/ingest/parse-pool.js";
import { ParseProcess, processLimitsFor } from "../../../src/rag/ingest/parse-process.js";
import { RagService } from "../../../src/rag/service.js";
import { SqliteIndexStore } from "../../../src/rag/store/sqlite-store.js";
import { makeImagePdf, makePdf, readPgm, type GrayImage } from "../../helpers/doc-fixtures.js";

const missing = missingOcrTools();
const skip = missing.length > 0 ? `OCR is not installed (missing: ${missing.join(", ")})` : false;
/** CI=true, as CI services set it (test/helpers/browser.ts reads it the same way). */
const isCi = !["", "false", "0"].includes((process.env.CI ?? "").trim().toLowerCase());
if (skip && isCi) {
  // CI installs the tools (.ci/run): there, their absence is a failure, not a reason to skip.
  it("OCR tools are installed under CI=true", () => assert.fail(`CI=true, but ${skip}`));
}

/** Three pages of known text, each line a sentence that names its page's topic. */
const PAGES = [
  [
    "Volcanoes form where molten rock reaches the surface.",
    "Ash clouds can travel across whole continents.",
    "Lava cools into black basalt near the coast.",
  ],
  [
    "Glaciers are rivers of ice that move slowly downhill.",
    "They carve deep valleys shaped like the letter U.",
    "Meltwater feeds many rivers during the summer.",
  ],
  [
    "Deserts receive very little rain in a typical year.",
    "Camels store fat in their humps for long journeys.",
    "Cold nights follow hot days under clear skies.",
  ],
];

/** The resolution the fixture's pages are rendered at before they are embedded as images. */
const DPI = 200;

/**
 * Each page of `pdf` as gray pixels, rendered by pdftoppm at DPI, cut to the top 2.5 inches where
 * makePdf's lines are (fewer pixels for tesseract to read: the test stays fast).
 */
function rasterise(pdf: Buffer, pageCount: number): GrayImage[] {
  return Array.from({ length: pageCount }, (_, i) =>
    readPgm(
      execFileSync(
        "pdftoppm",
        ["-f", String(i + 1), "-l", String(i + 1), "-r", String(DPI), "-gray"].concat([
          "-x",
          "0",
          "-y",
          "0",
          "-W",
          String(8.5 * DPI),
          "-H",
          String(2.5 * DPI),
          "-",
        ]),
        { input: pdf, maxBuffer: 64 * 1024 * 1024 },
      ),
    ),
  );
}

/** Levenshtein distance, two rows. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j]! + 1,
        current[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length]!;
}

const normalise = (text: string) => text.replace(/\s+/g, " ").trim();

describe("without OCR installed", () => {
  /** Runs `body` with no OCR tool on PATH. */
  async function withoutTools(body: () => Promise<void>) {
    const saved = process.env.PATH;
    process.env.PATH = "/nonexistent";
    try {
      assert.ok(missingOcrTools().length === 2);
      await body();
    } finally {
      process.env.PATH = saved;
    }
  }
  // A 64 × 64 gray square: an image, with no text layer, to stand for a scan.
  const square: GrayImage = { width: 64, height: 64, pixels: Buffer.alloc(64 * 64, 0x80) };

  it("folder walks skip images (an image named on its own says why it cannot be read)", () =>
    withoutTools(async () => {
      assert.equal(isIndexable("photos/receipt.png"), false);
      assert.equal(isIndexable("notes.md"), true);
      assert.equal(isIndexable("scan.pdf"), true, "a PDF's text layer needs no OCR");
      assert.equal(isSupported("photos/receipt.png"), true);
    }));

  it("a PDF with no text on any page is refused with the reason", () =>
    withoutTools(async () => {
      await assert.rejects(
        loadFile("scan.pdf", makeImagePdf([square, square])),
        /has no text layer on any page \(a scan\?\) and OCR is not installed \(missing: tesseract/,
      );
    }));

  it("a PDF with some scanned pages says which pages have no text", () =>
    withoutTools(async () => {
      const text = makePdf([["Only this page has text."]]);
      const loaded = await loadFile("mixed.pdf", text);
      assert.equal(loaded.metadata.ocr, undefined, "a page with text needs no OCR");
      const image = makeImagePdf([square]);
      await assert.rejects(loadFile("scan.pdf", image), /OCR is not installed/);
      await assert.rejects(
        loadFile("page.png", Buffer.from("\x89PNG\r\n\x1a\n", "latin1")),
        /needs OCR, and OCR is not installed/,
      );
    }));
});

describe("OCR of a scanned PDF", { skip }, () => {
  const scan = skip ? Buffer.alloc(0) : makeImagePdf(rasterise(makePdf(PAGES), PAGES.length), DPI);
  const folders: string[] = [];
  after(() => {
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it("has no text layer: every page is blank to pdf.js and paints an image", async () => {
    const { pages, blank } = await pdfPageTexts("scan.pdf", scan, DEFAULT_INGEST_LIMITS);
    assert.deepEqual(
      pages.map((page) => page.trim()),
      ["", "", ""],
    );
    assert.deepEqual(
      blank.map(({ page }) => page),
      [1, 2, 3],
    );
  });

  it("is read in the parse process, within 5% character error rate, and page 3 is cited for page 3", async (t) => {
    const started = Date.now();
    const loaded = await parseFileBytes("scan.pdf", scan);
    t.diagnostic(`parsed in ${Date.now() - started} ms (a new parse process, then 3 pages of OCR)`);
    assert.deepEqual(loaded.metadata.ocr_pages, [1, 2, 3]);
    const starts = loaded.pageStarts!;
    assert.equal(starts.length, 3);
    let errors = 0;
    let total = 0;
    PAGES.forEach((lines, i) => {
      const expected = normalise(lines.join(" "));
      const got = normalise(loaded.text.slice(starts[i], starts[i + 1]));
      const distance = editDistance(got, expected);
      t.diagnostic(
        `page ${i + 1}: ${distance} edits / ${expected.length} characters: ${JSON.stringify(got)}`,
      );
      errors += distance;
      total += expected.length;
    });
    const cer = errors / total;
    t.diagnostic(`character error rate ${(100 * cer).toFixed(2)}% (${errors} / ${total})`);
    assert.ok(cer <= 0.05, `character error rate ${cer}`);

    const folder = mkdtempSync(path.join(os.tmpdir(), "lectern-ocr-"));
    folders.push(folder);
    const store = SqliteIndexStore.open(folder);
    const service = new RagService(store);
    try {
      const key = { tenantId: "default", name: "scans" };
      await service.build({
        key,
        documents: [{ id: "scan.pdf", text: loaded.text, metadata: loaded.metadata, pageStarts: starts }],
        chunkSize: 120,
        overlap: 0,
        mode: "create",
      });
      const { results } = await service.query({
        key,
        query: "camels store fat in their humps",
        topK: 1,
        minScore: 0,
      });
      const top = results[0]!;
      assert.match(top.text, /humps/);
      assert.equal(top.metadata.page, 3, JSON.stringify(top.metadata));
      assert.deepEqual(top.metadata.pages, [3]);
      const { start, end } = top.metadata as { start: number; end: number };
      assert.equal(loaded.text.slice(start, end), top.text);
    } finally {
      await service.close();
      await store.close();
    }
  });

  it("an image upload (PNG) is read as one page", async () => {
    const png = execFileSync(
      "pdftoppm",
      [
        "-f",
        "3",
        "-l",
        "3",
        "-r",
        String(DPI),
        "-gray",
        "-png",
        "-W",
        String(8.5 * DPI),
        "-H",
        String(2.5 * DPI),
        "-",
      ],
      { input: makePdf(PAGES) },
    );
    const loaded = await loadFile("page.png", png);
    assert.match(normalise(loaded.text), /Camels store fat/);
    assert.deepEqual(loaded.pageStarts, [0]);
    await assert.rejects(loadFile("fake.png", Buffer.from("not an image")), /is not a PNG image/);
  });

  it("a parse that is stopped kills the OCR tools with its process", async () => {
    const limits = { ...DEFAULT_INGEST_LIMITS, maxParseMs: 600_000 };
    const page = rasterise(makePdf(PAGES), 1)[0]!;
    const long = makeImagePdf(
      Array.from({ length: 4 }, () => page),
      DPI,
    );
    const child = new ParseProcess(processLimitsFor(limits));
    await child.ready;
    const group = child.pid!;
    /** Processes in the parse process's group other than itself: its OCR tools. */
    const tools = () =>
      readdirSync("/proc")
        .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== group)
        .filter((pid) => {
          try {
            // Field 5 of /proc/<pid>/stat (after the parenthesised name) is the process group.
            const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
            return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]) === group;
          } catch {
            return false;
          }
        });
    // Stopped once a tool runs (what MAX_PARSE_MS does too: both kill the process, ParseProcess.kill).
    const stop = new AbortController();
    const parsed = child.parse({ name: "long.pdf", bytes: long, limits }, 1, stop.signal);
    let seen = false;
    for (let i = 0; i < 1200 && !seen; i++) {
      seen = tools().length > 0;
      if (!seen) await new Promise((done) => setTimeout(done, 25));
    }
    assert.ok(seen, "an OCR tool ran in the parse process's group");
    stop.abort();
    const outcome = await parsed;
    assert.ok("error" in outcome && outcome.error.kind === "cancelled");
    await child.ended();
    // SIGKILL to the group is delivered at once; the kernel may take a moment to reap.
    for (let i = 0; i < 200 && tools().length > 0; i++) await new Promise((done) => setTimeout(done, 25));
    assert.deepEqual(tools(), [], "no OCR tool outlives its parse process");
  });

  it("a tool that passes the parse's deadline is stopped with a time error", async () => {
    const [page] = rasterise(makePdf(PAGES), 1);
    const pdf = makeImagePdf([page!], DPI);
    const ocr = { languages: "eng", deadline: Date.now() + 1, maxChars: 1_000_000 };
    await assert.rejects(
      recognisePdfPage(pdf, 1, 612, ocr),
      (error: unknown) => error instanceof OcrError && error.timedOut,
    );
    await assert.rejects(
      loadFile("scan.pdf", pdf, { ...DEFAULT_INGEST_LIMITS, maxParseMs: 1 }),
      /took longer than 1 ms; the limit is 1 \(MAX_PARSE_MS\)/,
    );
  });
});
