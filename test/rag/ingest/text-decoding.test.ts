/**
 * Text files and HTML pages in the encoding they are in (#33): a byte order mark, a
 * Content-Type charset, an HTML `<meta>`, else UTF-8 when valid and windows-1252 (Latin-1) when not;
 * binary stays refused. Through `loadFile`, as uploads, server-side files and syncs read them.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { toApiError } from "../../../src/core/http.js";
import { loadFile } from "../../../src/rag/ingest/loaders.js";
import {
  charsetOfContentType,
  charsetOfHtmlMeta,
  decodeText,
} from "../../../src/rag/ingest/text-decoding.js";

const ACCENTED = "Crème brûlée à la française, déjà vu — naïve façade";
const latin1 = (text: string) => Buffer.from(text.replace("—", "-"), "latin1");
const utf16be = (text: string) => Buffer.from(text, "utf16le").swap16();

const refused = (pattern: RegExp) => (error: unknown) => {
  const apiError = toApiError(error);
  assert.equal(apiError.statusCode, 400, apiError.message);
  assert.match(apiError.message, pattern);
  return true;
};

describe("HTML charset", () => {
  const page = (head: string, body: string) =>
    `<html><head>${head}<title>Menu</title></head><body><p>${body}</p></body></html>`;

  it("an ISO-8859-1 page declared by <meta charset> keeps its accents", async () => {
    const bytes = latin1(page('<meta charset="ISO-8859-1">', ACCENTED));
    assert.throws(() => new TextDecoder("utf-8", { fatal: true }).decode(bytes), "not UTF-8 as written");
    const loaded = await loadFile("menu.html", bytes);
    assert.match(loaded.text, /Crème brûlée à la française, déjà vu - naïve façade/);
  });

  it("reads <meta http-equiv=Content-Type content=…charset=…> in any quoting", () => {
    for (const meta of [
      '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">',
      "<META HTTP-EQUIV=content-type CONTENT='text/html;charset=windows-1252'>",
      '<meta content="text/html; charset=latin1" http-equiv="content-type" />',
    ]) {
      assert.equal(charsetOfHtmlMeta(Buffer.from(page(meta, "x"))), "windows-1252", meta);
    }
    assert.equal(charsetOfHtmlMeta(Buffer.from(page('<meta charset="koi8-r">', "x"))), "koi8-r");
    // A UTF-16 label in a meta of bytes that are ASCII-compatible means UTF-8, as in browsers.
    assert.equal(charsetOfHtmlMeta(Buffer.from(page('<meta charset="utf-16">', "x"))), "utf-8");
    assert.equal(charsetOfHtmlMeta(Buffer.from(page('<meta charset="no-such">', "x"))), null);
    assert.equal(charsetOfHtmlMeta(Buffer.from(page('<meta name="viewport" content="width=1">', "x"))), null);
  });

  it("only looks at the first 1024 bytes for the meta, as browsers do", () => {
    const late = `<!--${" ".repeat(1100)}--><meta charset="iso-8859-1">`;
    assert.equal(charsetOfHtmlMeta(Buffer.from(page(late, "x"))), null);
  });

  it("a KOI8-R page is decoded as KOI8-R", async () => {
    // "Привет" in KOI8-R.
    const word = Buffer.from([0xf0, 0xd2, 0xc9, 0xd7, 0xc5, 0xd4]);
    const bytes = Buffer.concat([Buffer.from('<meta charset="koi8-r"><p>'), word, Buffer.from("</p>")]);
    assert.match((await loadFile("ru.html", bytes)).text, /Привет/);
  });

  it("a Content-Type charset (for callers that have one) wins over the meta; a byte order mark over both", async () => {
    const bytes = latin1(page('<meta charset="utf-8">', ACCENTED));
    const loaded = await loadFile("menu.html", bytes, undefined, {
      contentType: "text/html; charset=ISO-8859-1",
    });
    assert.match(loaded.text, /Crème brûlée/);
    const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(page("", ACCENTED))]);
    const bomFirst = await loadFile("bom.html", withBom, undefined, {
      contentType: "text/html; charset=latin1",
    });
    assert.match(bomFirst.text, /Crème brûlée à la française, déjà vu — naïve façade/);
  });

  it("an undeclared page that is not UTF-8 is read as windows-1252, not refused", async () => {
    const loaded = await loadFile("old.html", latin1(page("", ACCENTED)));
    assert.match(loaded.text, /Crème brûlée/);
    // windows-1252's typographic bytes: 0x93 0x94 are curly quotes, 0x80 the euro sign.
    const quotes = await loadFile("q.html", Buffer.from([...Buffer.from("<p>"), 0x93, 0x80, 0x35, 0x94]));
    assert.match(quotes.text, /“€5”/);
  });
});

describe("text files", () => {
  it("UTF-16LE and UTF-16BE with a byte order mark are read as such", async () => {
    const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`# Titre\n\n${ACCENTED}`, "utf16le")]);
    const loadedLe = await loadFile("notes.md", le);
    assert.deepEqual([loadedLe.title, loadedLe.text], ["Titre", `# Titre\n\n${ACCENTED}`]);
    const be = Buffer.concat([Buffer.from([0xfe, 0xff]), utf16be(ACCENTED)]);
    assert.equal((await loadFile("notes.txt", be)).text, ACCENTED);
  });

  it("a UTF-8 byte order mark is dropped; valid UTF-8 is UTF-8", async () => {
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(ACCENTED)]);
    assert.equal((await loadFile("a.txt", bytes)).text, ACCENTED);
    assert.equal((await loadFile("b.txt", Buffer.from(ACCENTED))).text, ACCENTED);
  });

  it("a text file in Latin-1 without a mark is read as Latin-1 (windows-1252)", async () => {
    assert.equal((await loadFile("latin.txt", latin1(ACCENTED))).text, ACCENTED.replace("—", "-"));
    assert.equal(decodeText("x.txt", Buffer.from([0x63, 0x61, 0x66, 0xe9]), "text"), "café");
  });

  it("the charset of a Content-Type is used for text files too", () => {
    const bytes = Buffer.from([0xf0, 0xd2, 0xc9, 0xd7, 0xc5, 0xd4]);
    assert.equal(decodeText("ru.txt", bytes, "text", 'text/plain; charset="KOI8-R"'), "Привет");
    assert.equal(charsetOfContentType("text/plain"), null);
    assert.equal(charsetOfContentType("text/plain; charset=bogus"), null);
    assert.equal(charsetOfContentType("text/plain;charset=UTF-8; format=flowed"), "utf-8");
  });

  it("binary stays refused: NUL bytes, or a Latin-1 reading made of control characters", async () => {
    await assert.rejects(
      loadFile("data.txt", Buffer.from([0x68, 0x69, 0x00, 0x01])),
      refused(/data\.txt.*binary/),
    );
    const controls = Buffer.from(Array.from({ length: 400 }, (_, i) => (i % 7 === 0 ? 0x02 : 0xe9)));
    await assert.rejects(loadFile("ctl.md", controls), refused(/ctl\.md.*binary/));
    // Tabs, form feeds and escapes are text.
    assert.equal(
      decodeText("ok.txt", Buffer.from("a\tb\fc\x1b[0m\xe9", "latin1"), "text"),
      "a\tb\fc\x1b[0mé",
    );
  });

  it("a file announcing UTF-16 by its mark but cut inside a character is a 400", async () => {
    await assert.rejects(loadFile("bad.md", Buffer.from([0xff, 0xfe, 0x41])), refused(/bad\.md.*UTF-16LE/));
  });
});
