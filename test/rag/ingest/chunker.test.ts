import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { chunkDocument } from "../../../src/rag/ingest/chunker.js";
import type { ChunkRecord, DocumentRecord } from "../../../src/rag/store/types.js";
import { makeProse, seededRandom } from "../../helpers/text-fixtures.js";
import { toApiError } from "../../../src/core/http.js";

const doc = (
  text: string,
  id = "doc-1",
  metadata: Record<string, unknown> = { lang: "en" },
): DocumentRecord => ({
  id,
  title: null,
  text,
  metadata,
  source: null,
  contentHash: null,
});

const isWs = (s: string) => s.trim() === "" && s.length > 0;

/** Invariants every chunking must satisfy. */
function checkInvariants(document: DocumentRecord, chunks: ChunkRecord[], chunkSize: number): void {
  const text = document.text;
  chunks.forEach((c, i) => {
    assert.equal(c.seq, i);
    assert.equal(c.documentId, document.id);
    assert.equal(c.chunkId, `${document.id}#${i}`);
    assert.equal(c.text, text.slice(c.start, c.end), `chunk ${i} text matches its offsets`);
    assert.ok(
      c.text.length > 0 && c.text.length <= chunkSize,
      `chunk ${i} length ${c.text.length} ≤ ${chunkSize}`,
    );
    assert.equal(c.text, c.text.trim(), `chunk ${i} is trimmed`);
    assert.deepEqual(c.metadata, document.metadata);
    assert.notEqual(c.metadata, document.metadata, "metadata is a copy");
    if (i > 0) assert.ok(c.start > chunks[i - 1]!.start, "starts increase");
    // Never inside a surrogate pair.
    for (const at of [c.start, c.end]) {
      const hi = text.charCodeAt(at - 1);
      const lo = text.charCodeAt(at);
      assert.ok(
        !(hi >= 0xd800 && hi <= 0xdbff && lo >= 0xdc00 && lo <= 0xdfff),
        `offset ${at} splits a pair`,
      );
    }
  });
  // No content is lost: every non-whitespace character is in some chunk.
  let covered = 0;
  for (const c of chunks) {
    const gap = text.slice(covered, c.start);
    if (c.start > covered) assert.ok(gap.trim() === "", `uncovered content before chunk ${c.seq}: ${gap}`);
    covered = Math.max(covered, c.end);
  }
  assert.equal(text.slice(covered).trim(), "", "uncovered content at the end");
}

describe("chunkDocument", () => {
  it("returns one trimmed chunk for a short document", () => {
    const d = doc("  \n Hello world. This is short.\n\n ");
    const chunks = chunkDocument(d, { chunkSize: 1000, overlap: 128 });
    assert.equal(chunks.length, 1);
    assert.deepEqual(chunks[0], {
      chunkId: "doc-1#0",
      documentId: "doc-1",
      seq: 0,
      text: "Hello world. This is short.",
      start: 4,
      end: 31,
      metadata: { lang: "en" },
    });
  });

  it("keeps a document of exactly chunkSize characters whole", () => {
    const text = "a".repeat(50) + " " + "b".repeat(49);
    assert.equal(chunkDocument(doc(text), { chunkSize: 100, overlap: 10 }).length, 1);
  });

  it("gives zero chunks for empty and whitespace-only text", () => {
    for (const text of ["", " ", "\n\n\t  \r\n", "\u00a0\u3000\u2028"]) {
      assert.deepEqual(chunkDocument(doc(text), { chunkSize: 100, overlap: 10 }), []);
    }
  });

  it("keeps exact offsets, sizes and coverage on varied prose", () => {
    const random = seededRandom(7);
    for (let n = 0; n < 200; n++) {
      const chunkSize = 20 + Math.floor(random() * 400);
      const overlap = Math.floor(random() * (Math.floor(chunkSize / 2) + 1));
      const d = doc(makeProse(random, 50 + Math.floor(random() * 3000)), `d${n}`);
      checkInvariants(d, chunkDocument(d, { chunkSize, overlap }), chunkSize);
    }
  });

  it("overlaps consecutive chunks by about `overlap` characters", () => {
    const d = doc(makeProse(seededRandom(1), 20_000, 0));
    const chunks = chunkDocument(d, { chunkSize: 1000, overlap: 128 });
    assert.ok(chunks.length >= 20);
    for (let i = 1; i < chunks.length; i++) {
      const shared = chunks[i - 1]!.end - chunks[i]!.start;
      assert.ok(shared > 0 && shared <= 128, `overlap ${shared} between ${i - 1} and ${i}`);
      assert.ok(chunks[i - 1]!.text.endsWith(chunks[i]!.text.slice(0, shared)));
    }
    const mean = chunks.slice(1).reduce((s, c, i) => s + (chunks[i]!.end - c.start), 0) / (chunks.length - 1);
    assert.ok(mean >= 50, `mean overlap ${mean}`);
  });

  it("does not overlap when overlap is 0", () => {
    const d = doc(makeProse(seededRandom(2), 10_000));
    const chunks = chunkDocument(d, { chunkSize: 500, overlap: 0 });
    for (let i = 1; i < chunks.length; i++) assert.ok(chunks[i]!.start >= chunks[i - 1]!.end);
    checkInvariants(d, chunks, 500);
  });

  it("starts an overlapping chunk at a sentence or word boundary", () => {
    const d = doc(makeProse(seededRandom(3), 20_000));
    const chunks = chunkDocument(d, { chunkSize: 800, overlap: 100 });
    for (const c of chunks.slice(1)) assert.ok(isWs(d.text[c.start - 1]!), `chunk ${c.seq} starts mid-word`);
  });

  it("prefers a paragraph boundary to a later sentence boundary", () => {
    const p1 = "First paragraph sentence one. " + "It goes on for a while. ".repeat(14) + "End of one.";
    const p2 = "Second paragraph starts here. " + "More words in it follow. ".repeat(20);
    const d = doc(`${p1}\n\n${p2}`);
    assert.ok(p1.length > 250 && p1.length < 500);
    const [first] = chunkDocument(d, { chunkSize: 500, overlap: 0 });
    assert.equal(first!.text, p1);
  });

  it("prefers a sentence boundary to a later word boundary", () => {
    // (A lower-case word after a period does not start a sentence, hence the capital.)
    const text = "Short sentence here. ".repeat(30) + "Words " + "word ".repeat(200);
    const d = doc(text);
    const [first] = chunkDocument(d, { chunkSize: 700, overlap: 0 });
    assert.ok(first!.text.endsWith("here."), first!.text.slice(-30));
    assert.equal(first!.end, 21 * 30 - 1);
  });

  it("takes a paragraph only in the second half of the window", () => {
    const text = "Tiny start.\n\n" + "Then a long run of sentences without blank lines. ".repeat(20);
    const [first] = chunkDocument(doc(text), { chunkSize: 400, overlap: 0 });
    assert.ok(first!.text.length > 200, `first chunk is ${first!.text.length} chars`);
  });

  it("cuts at whitespace when there is no sentence boundary", () => {
    const text = "lorem ipsum dolor sit amet ".repeat(100);
    const d = doc(text);
    const chunks = chunkDocument(d, { chunkSize: 100, overlap: 20 });
    checkInvariants(d, chunks, 100);
    for (const c of chunks) {
      assert.ok(c.start === 0 || text[c.start - 1] === " ", "starts at a word");
      assert.ok(c.end === text.trimEnd().length || text[c.end] === " ", "ends at a word");
    }
  });

  it("hard-cuts only a single over-long word", () => {
    const word = "x".repeat(2500);
    const text = `Before the word. ${word} after the word.`;
    const d = doc(text);
    const chunks = chunkDocument(d, { chunkSize: 1000, overlap: 100 });
    checkInvariants(d, chunks, 1000);
    assert.equal(chunks[0]!.text, "Before the word.");
    const inWord = chunks.filter((c) => c.start >= 17 && c.end <= 17 + 2500);
    assert.ok(inWord.length >= 2);
    assert.ok(chunks.some((c) => c.text.length === 1000));
    assert.ok(chunks.at(-1)!.text.endsWith("after the word."));
  });

  it("never splits a surrogate pair (emoji, CJK extension B)", () => {
    const emoji = "😀🎉👍🏽🚀".repeat(60); // no whitespace at all
    const cjkB = "𠀀𠀁𠀂𠀃𠀄".repeat(60);
    for (const text of [emoji, cjkB, `${emoji} ${cjkB}`, "a" + emoji]) {
      for (const [chunkSize, overlap] of [
        [100, 0],
        [101, 37],
        [333, 100],
        [2, 1],
        [3, 1],
      ] as const) {
        const d = doc(text);
        checkInvariants(d, chunkDocument(d, { chunkSize, overlap }), chunkSize);
      }
    }
  });

  it("keeps emoji grapheme clusters whole when cutting a long word", () => {
    const family = "👨‍👩‍👧‍👦"; // 11 code units, one grapheme
    const text = family.repeat(100);
    const chunks = chunkDocument(doc(text), { chunkSize: 100, overlap: 20 });
    for (const c of chunks) assert.equal(c.text.length % family.length, 0);
  });

  it("cuts CJK text at sentence ends", () => {
    const sentence = "这是一个用于测试的中文句子，它没有空格。";
    const text = sentence.repeat(60);
    const d = doc(text);
    const chunks = chunkDocument(d, { chunkSize: 200, overlap: 30 });
    checkInvariants(d, chunks, 200);
    for (const c of chunks.slice(0, -1)) assert.ok(c.text.endsWith("。"), c.text.slice(-5));
  });

  it("is deterministic", () => {
    const d = doc(makeProse(seededRandom(9), 30_000));
    const a = chunkDocument(d, { chunkSize: 1000, overlap: 128 });
    const b = chunkDocument(structuredClone(d), { chunkSize: 1000, overlap: 128 });
    assert.deepEqual(a, b);
  });

  it("handles CRLF paragraphs and runs of blank lines", () => {
    const para = "Some words in a sentence. ".repeat(8).trim();
    const text = [para, para, para, para].join("\r\n\r\n\r\n");
    const d = doc(text);
    const chunks = chunkDocument(d, { chunkSize: 300, overlap: 0 });
    checkInvariants(d, chunks, 300);
    assert.ok(chunks.every((c) => c.text === para));
  });

  it("rejects invalid options with a 400", () => {
    for (const options of [
      { chunkSize: 0, overlap: 0 },
      { chunkSize: 100.5, overlap: 0 },
      { chunkSize: 100, overlap: 51 },
      { chunkSize: 100, overlap: -1 },
    ]) {
      assert.throws(
        () => chunkDocument(doc("text"), options),
        (e: unknown) => toApiError(e).statusCode === 400,
      );
    }
  });

  it("chunks 5,000 documents of ~1,500 characters", (t) => {
    const random = seededRandom(11);
    const docs = Array.from({ length: 5000 }, (_, i) => doc(makeProse(random, 1500), `d${i}`));
    // Texts arriving from JSON bodies are flat strings; make these flat too.
    for (const d of docs) d.text = JSON.parse(JSON.stringify(d.text)) as string;
    const started = performance.now();
    let count = 0;
    for (const d of docs) count += chunkDocument(d, { chunkSize: 1000, overlap: 128 }).length;
    const ms = performance.now() - started;
    // The time is reported, not asserted (a loaded CI machine is no stopwatch); bench/ holds the targets.
    assert.ok(count >= 10_000);
    t.diagnostic(`chunked 5000 docs into ${count} chunks in ${ms.toFixed(1)} ms`);
  });
});
