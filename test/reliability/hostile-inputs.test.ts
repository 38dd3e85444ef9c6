/**
 * The hostile inputs of issue #23 against the real RAG app (the CLI as a child process, so the RSS
 * measured is the server's): files that stalled the event loop (a Markdown heading that made a regex
 * backtrack, HTML that nests through `<div/>` or implicitly closed tags, markup that made a regex
 * quadratic, a PDF with 9,999 page entries), PDFs that slipped a deflate bomb past the inflation check
 * (a filter chain, `stream\r`, `stream \n`, an `endstream` inside a stored block), a file whose parse
 * needs more heap than its thread has, 20 × 50 MB uploads at once, requests that time out, and
 * clients that leave while queued. Each is answered (a 4xx within its limit, or a 201 where the input
 * is now harmless), the server's peak RSS grows by less than 300 MB, /health answers during it, and
 * nothing is written for a refused request. The limits are set low for the test (MAX_PARSE_MS=4000,
 * MAX_PARSE_HEAP_MB=64) so the run stays short.
 */
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { execFile } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import { after, before, describe, it } from "node:test";
import { makeBombDocx } from "../helpers/bomb-fixtures.js";
import { makePdf } from "../helpers/doc-fixtures.js";
import { makeTempDir, removeTempDirs } from "../helpers/rag-http.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";
import {
  backtrackingMarkdown,
  eolBombPdf,
  hexFlateBombPdf,
  hiddenEndstreamBombPdf,
  implicitNestingHtml,
  manyScriptsHtml,
  repeatedPagePdf,
  selfClosingDivsHtml,
  unclosedTagsHtml,
} from "./hostile-fixtures.js";
import { memoryOf, resetPeak } from "../helpers/process-memory.js";
import { whileProbing as probeWhile } from "../helpers/liveness.js";

const MB = 1_000_000;
const run = promisify(execFile);
const onLinux = existsSync("/proc/self/status");
/**
 * A liveness bound, not a speed figure: /health does no work, so on any machine it answers in
 * milliseconds unless the event loop is blocked; a second is generous even on a loaded 2-core CI box.
 */
const HEALTH_BOUND_MS = 1000;

interface Reply {
  status: number;
  headers: Headers;
  body: { error?: { code: string; message: string } } & Record<string, unknown>;
}

async function upload(
  served: ServedProcess,
  indexName: string,
  files: Array<[string, Buffer | Blob]>,
  options: { signal?: AbortSignal; query?: string } = {},
): Promise<Reply> {
  const form = new FormData();
  form.append("index_name", indexName);
  for (const [name, bytes] of files)
    form.append("files", bytes instanceof Blob ? bytes : new Blob([bytes]), name);
  const res = await fetch(`${served.url}/rag/build${options.query ?? ""}`, {
    method: "POST",
    body: form,
    signal: options.signal,
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Reply["body"] };
}

async function getStatus(served: ServedProcess, path: string): Promise<number> {
  const res = await fetch(`${served.url}${path}`);
  await res.arrayBuffer();
  return res.status;
}

/** Polls /health while `work` runs; resolves with its result and the longest the server's loop was held. */
async function whileProbing<T>(
  served: ServedProcess,
  work: Promise<T>,
): Promise<{ result: T; slowest: number }> {
  const { result, slowest } = await probeWhile(served, () => work);
  return { result, slowest };
}

describe("hostile inputs (#23): parsed off the event loop, bounded, answered", { skip: !onLinux }, () => {
  let served: ServedProcess;
  let baseline = 0;

  before(async () => {
    served = await startServe("rag", {
      DATA_DIR: makeTempDir("hostile-inputs"),
      MAX_PARSE_MS: "4000",
      MAX_PARSE_HEAP_MB: "64",
      MAX_EXTRACTED_BYTES: String(64 * 1024 * 1024),
    });
    await waitHealthy(served);
    // Start both parse threads and load every parser in them, so the baseline holds the code.
    const warm = await Promise.all(
      ["a", "b"].map((name) =>
        upload(served, `warm-${name}`, [
          ["warm.pdf", makePdf([["A small page about tides."]])],
          ["warm.html", Buffer.from("<html><body><p>A small page about lakes.</p></body></html>")],
        ]),
      ),
    );
    for (const reply of warm) assert.equal(reply.status, 201, JSON.stringify(reply.body));
    baseline = memoryOf(served.child.pid!).rss;
  });

  after(() => {
    if (served && served.child.exitCode === null) served.child.kill("SIGKILL");
    removeTempDirs();
  });

  /**
   * Uploads one hostile file beside a fine one, probing /health meanwhile; asserts the answer, that
   * a refusal names the file and the setting and wrote nothing, and the peak RSS growth.
   */
  async function attack(fileName: string, bytes: Buffer, expected: Array<[number, RegExp | null]>) {
    const pid = served.child.pid!;
    resetPeak(pid);
    const indexName = `attack-${fileName.replace(/\W/g, "-")}`;
    const { result: reply, slowest } = await whileProbing(
      served,
      upload(served, indexName, [
        ["fine.md", Buffer.from("# Fine\n\nA fine file.\n")],
        [fileName, bytes],
      ]),
    );
    const { peak } = memoryOf(pid);
    const match = expected.find(([status]) => status === reply.status);
    assert.ok(match, `status ${reply.status}: ${JSON.stringify(reply.body)}`);
    if (reply.status >= 400) {
      const message = reply.body.error?.message ?? "";
      assert.ok(message.includes(`"${fileName}"`), message);
      if (match[1]) assert.match(message, match[1]);
      assert.equal(await getStatus(served, `/rag/stats/${indexName}`), 404, "a refused build wrote an index");
    }
    assert.ok(
      slowest < HEALTH_BOUND_MS,
      `the event loop was held ${Math.round(slowest)} ms during the upload`,
    );
    const growth = peak - baseline;
    assert.ok(growth < 300 * MB, `peak RSS grew by ${Math.round(growth / MB)} MB`);
    return { status: reply.status, growth, slowest };
  }

  const report = (
    t: { diagnostic(message: string): void },
    r: { status: number; growth: number; slowest: number },
  ) =>
    t.diagnostic(
      `${r.status}; peak RSS growth ${Math.round(r.growth / MB)} MB; longest loop stall ${Math.round(r.slowest)} ms`,
    );

  it("a 3 KB Markdown heading that made the title regex backtrack is indexed", async (t) => {
    report(t, await attack("heading.md", backtrackingMarkdown(3000), [[201, null]]));
  });

  it("<div/> 100,000 times (HTML ignores the slash) is a 413 at MAX_HTML_DEPTH", async (t) => {
    report(t, await attack("self-closing.html", selfClosingDivsHtml(100_000), [[413, /MAX_HTML_DEPTH/]]));
  });

  it("<p><td> 100,000 times (implicitly closed tags that still nest) is a 413 at MAX_HTML_DEPTH", async (t) => {
    report(t, await attack("implicit.html", implicitNestingHtml(100_000), [[413, /MAX_HTML_DEPTH/]]));
  });

  // Harmless once scanned linearly; a loaded machine may still pass MAX_PARSE_MS in html-to-text.
  it("2.3 MB of <script></script> is parsed, or stopped at MAX_PARSE_MS", async (t) => {
    const html = manyScriptsHtml(2_300_000);
    report(
      t,
      await attack("scripts.html", html, [
        [201, null],
        [422, /MAX_PARSE_MS/],
      ]),
    );
  });

  it("240 KB of unclosed <a (a quadratic markup regex before) is parsed, or stopped at MAX_PARSE_MS", async (t) => {
    const html = unclosedTagsHtml(240_000);
    report(
      t,
      await attack("unclosed.html", html, [
        [201, null],
        [422, /MAX_PARSE_MS/],
      ]),
    );
  });

  it("a PDF bomb behind /Filter [/ASCIIHexDecode /FlateDecode] is a 413 at MAX_EXTRACTED_BYTES", async (t) => {
    report(t, await attack("hex.pdf", hexFlateBombPdf(800), [[413, /MAX_EXTRACTED_BYTES/]]));
  });

  it("a PDF bomb after `stream\\r` is a 413 at MAX_EXTRACTED_BYTES", async (t) => {
    report(t, await attack("cr.pdf", eolBombPdf(800, "\r"), [[413, /MAX_EXTRACTED_BYTES/]]));
  });

  it("a PDF bomb after `stream \\n` is a 413 at MAX_EXTRACTED_BYTES", async (t) => {
    report(t, await attack("space.pdf", eolBombPdf(800, " \n"), [[413, /MAX_EXTRACTED_BYTES/]]));
  });

  it("a PDF bomb whose stored deflate block holds `endstream` is a 413 at MAX_EXTRACTED_BYTES", async (t) => {
    report(t, await attack("hidden.pdf", hiddenEndstreamBombPdf(800), [[413, /MAX_EXTRACTED_BYTES/]]));
  });

  it("a 60 KB PDF with 9,999 page entries to one page is a 422 at MAX_PARSE_MS", async (t) => {
    const pdf = repeatedPagePdf(9999);
    assert.ok(pdf.length < 70_000, `${pdf.length} bytes`);
    report(t, await attack("pages.pdf", pdf, [[422, /MAX_PARSE_MS/]]));
  });

  it("a .docx whose text needs more heap than its thread has is a 413 at MAX_PARSE_HEAP_MB", async (t) => {
    // 60 MiB of text: within MAX_EXTRACTED_BYTES and MAX_FILE_CHARS, not within a 64 MB heap. A loaded
    // machine may pass MAX_PARSE_MS (4 s here) first: stopped either way, the memory bounded.
    const outcomes: Array<[number, RegExp]> = [
      [413, /MAX_PARSE_HEAP_MB/],
      [422, /MAX_PARSE_MS/],
    ];
    report(t, await attack("heap.docx", makeBombDocx(60), outcomes));
  });

  it("20 hostile uploads at once: each a 4xx, /health answers, peak RSS under 1.5 GB", async (t) => {
    const pid = served.child.pid!;
    resetPeak(pid);
    const files: Array<[string, Buffer]> = [
      ["self-closing.html", selfClosingDivsHtml(100_000)],
      ["hex.pdf", hexFlateBombPdf(800)],
      ["hidden.pdf", hiddenEndstreamBombPdf(800)],
      ["cr.pdf", eolBombPdf(800, "\r")],
      ["implicit.html", implicitNestingHtml(100_000)],
    ];
    const { result: replies, slowest } = await whileProbing(
      served,
      Promise.all(
        Array.from({ length: 20 }, (_, i) => upload(served, `storm-${i}`, [files[i % files.length]!])),
      ),
    );
    const { peak } = memoryOf(pid);
    t.diagnostic(`statuses ${replies.map((r) => r.status).join(" ")}; peak RSS ${Math.round(peak / MB)} MB`);
    for (const reply of replies)
      assert.ok([413, 422, 429].includes(reply.status), JSON.stringify(reply.body));
    assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
    assert.ok(peak < 1500 * MB, `peak RSS ${Math.round(peak / MB)} MB`);
    for (let i = 0; i < 20; i++) assert.equal(await getStatus(served, `/rag/stats/storm-${i}`), 404);
  });

  it("20 uploads of 50 MB at once are spooled, not buffered: /health answers, peak RSS under 1.5 GB", async (t) => {
    const pid = served.child.pid!;
    resetPeak(pid);
    // 50 MB of zeros named .pdf: refused at its first bytes once spooled, so the test measures uploading.
    // curl sends them from processes of their own, so this process is free to probe /health.
    const big = path.join(makeTempDir("big-upload"), "big.pdf");
    writeFileSync(big, new Uint8Array(50 * MB));
    const curl = (i: number) =>
      run("curl", [
        ...["-s", "-o", "/dev/null", "-w", "%{http_code}", "-F", `index_name=big-${i}`],
        ...["-F", `files=@${big};filename=big-${i}.pdf`, `${served.url}/rag/build`],
      ]).then(({ stdout }) => Number(stdout));
    const { result: statuses, slowest } = await whileProbing(
      served,
      Promise.all(Array.from({ length: 20 }, (_, i) => curl(i))),
    );
    const { peak } = memoryOf(pid);
    t.diagnostic(
      `statuses ${statuses.join(" ")}; peak RSS ${Math.round(peak / MB)} MB ` +
        `(baseline ${Math.round(baseline / MB)} MB); longest loop stall ${Math.round(slowest)} ms`,
    );
    for (const status of statuses) assert.ok([400, 429].includes(status), `status ${status}`);
    assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
    assert.ok(peak < 1500 * MB, `peak RSS ${Math.round(peak / MB)} MB`);
    assert.ok(peak - baseline < 300 * MB, `peak RSS grew by ${Math.round((peak - baseline) / MB)} MB`);
  });

  it("?tenant_id= on a multipart POST is honoured, and one that differs from the form is a 400", async () => {
    const honoured = await upload(served, "tenant-query", [["a.md", Buffer.from("# A\n\nSome text.\n")]], {
      query: "?tenant_id=acme",
    });
    assert.equal(honoured.status, 201, JSON.stringify(honoured.body));
    assert.equal(honoured.body.tenant_id, "acme");
    assert.equal(await getStatus(served, "/rag/stats/tenant-query?tenant_id=acme"), 200);
    assert.equal(await getStatus(served, "/rag/stats/tenant-query"), 404);

    const form = new FormData();
    form.append("index_name", "tenant-clash");
    form.append("tenant_id", "other");
    form.append("files", new Blob(["# B\n\nText.\n"]), "b.md");
    const res = await fetch(`${served.url}/rag/build?tenant_id=acme`, { method: "POST", body: form });
    assert.equal(res.status, 400, await res.text());
  });
});

/** Writes `head` on a raw connection and resolves with everything the server sends until it closes. */
function rawExchange(port: number, head: string, afterWrite?: (socket: net.Socket) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => {
      socket.write(head);
      afterWrite?.(socket);
    });
    let received = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (received += chunk));
    socket.on("close", () => resolve(received));
    socket.on("error", reject);
  });
}

describe("request timeouts and clients who leave (#23)", { skip: !onLinux }, () => {
  let served: ServedProcess;

  before(async () => {
    served = await startServe("rag", {
      DATA_DIR: makeTempDir("hostile-timeouts"),
      HTTP_REQUEST_TIMEOUT_MS: "1000",
      MAX_PARSE_MS: "4000",
      MAX_CONCURRENT_PARSES: "1",
      MAX_PARSE_QUEUE: "4",
    });
    await waitHealthy(served);
  });

  after(() => {
    if (served && served.child.exitCode === null) served.child.kill("SIGKILL");
    removeTempDirs();
  });

  /** A multipart body with every part and the closing boundary, and `missing` more bytes declared. */
  function stalledUpload(indexName: string, missing: number): string {
    const boundary = "----lectern-test-boundary";
    const body =
      `--${boundary}\r\nContent-Disposition: form-data; name="index_name"\r\n\r\n${indexName}\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="files"; filename="a.md"\r\n` +
      `Content-Type: text/markdown\r\n\r\n# A\n\nSome text.\n\r\n--${boundary}--\r\n`;
    return (
      `POST /rag/build HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\n` +
      `Content-Length: ${body.length + missing}\r\n\r\n${body}`
    );
  }

  it("a request not received within HTTP_REQUEST_TIMEOUT_MS is a 408, not a 400", async () => {
    const answer = await rawExchange(served.port, stalledUpload("timed-out-part", 1000).slice(0, -40));
    assert.match(answer, /^HTTP\/1\.1 408 /, answer);
    assert.match(answer, /HTTP_REQUEST_TIMEOUT_MS/);
    assert.equal(await getStatus(served, "/rag/stats/timed-out-part"), 404);
  });

  it("an upload whose parts all arrived but whose body did not is answered 408 and not committed", async () => {
    // Every part and the closing boundary are there; the declared epilogue never comes. The files
    // must not be committed before the whole request is in, or the 408 would follow a commit.
    const answer = await rawExchange(served.port, stalledUpload("timed-out-epilogue", 10));
    assert.match(answer, /^HTTP\/1\.1 408 /, answer);
    assert.equal(await getStatus(served, "/rag/stats/timed-out-epilogue"), 404);
  });

  it("clients who leave while queued give their places up: later uploads are not 429s", async () => {
    // The only parse slot is held by a file that takes until MAX_PARSE_MS; its client leaves too.
    const slowClient = new AbortController();
    const slow = upload(served, "slow", [["pages.pdf", repeatedPagePdf(9999)]], {
      signal: slowClient.signal,
    });
    slow.catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 500));
    // 15 clients send a small upload and leave while it waits.
    const leaving = Array.from({ length: 15 }, (_, i) => {
      const controller = new AbortController();
      const reply = upload(served, `left-${i}`, [["a.md", Buffer.from("# A\n\nText.\n")]], {
        signal: controller.signal,
      }).catch(() => null);
      return { controller, reply };
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const { controller } of leaving) controller.abort();
    slowClient.abort();
    await Promise.all(leaving.map(({ reply }) => reply));
    await new Promise((resolve) => setTimeout(resolve, 300));
    // As many as the queue holds, plus the slot: none is turned away.
    const later = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        upload(served, `later-${i}`, [["b.md", Buffer.from("# B\n\nText.\n")]]),
      ),
    );
    for (const reply of later) assert.equal(reply.status, 201, JSON.stringify(reply.body));
    for (let i = 0; i < 15; i++) assert.equal(await getStatus(served, `/rag/stats/left-${i}`), 404);
    assert.equal(await getStatus(served, "/rag/stats/slow"), 404);
  });
});
