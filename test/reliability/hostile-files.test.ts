/**
 * Hostile uploads against the real RAG app (the CLI as a child process, default limits): a .docx
 * whose document.xml inflates to 800 MiB (declaring its size, or lying about it), PDFs whose streams
 * do the same (one or two FlateDecode layers), HTML nested 100,000 deep. Each gets a 413 naming the
 * file and the setting, nothing is written, the app keeps serving, and the child's peak RSS (VmHWM in
 * /proc/<pid>/status) grows by less than 300 MB; twenty such uploads at once keep it under 1.5 GB.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { makeBombDocx, makeBombPdf, makeDeepHtml, makeDoubleBombPdf } from "../helpers/bomb-fixtures.js";
import { makeDocx, makePdf } from "../helpers/doc-fixtures.js";
import { makeTempDir, removeTempDirs } from "../helpers/rag-http.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";
import { memoryOf, resetPeak } from "../helpers/process-memory.js";

const MB = 1_000_000;
const onLinux = existsSync("/proc/self/status");

interface Reply {
  status: number;
  headers: Headers;
  body: { error?: { code: string; message: string; details: unknown[] } } & Record<string, unknown>;
}

async function upload(
  served: ServedProcess,
  indexName: string,
  files: Array<[string, Buffer]>,
): Promise<Reply> {
  const form = new FormData();
  form.append("index_name", indexName);
  for (const [name, bytes] of files) form.append("files", new Blob([bytes]), name);
  const res = await fetch(`${served.url}/rag/build`, { method: "POST", body: form });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Reply["body"] };
}

async function getStatus(served: ServedProcess, path: string): Promise<number> {
  const res = await fetch(`${served.url}${path}`);
  await res.arrayBuffer();
  return res.status;
}

describe("hostile files: bounded memory, clear 413s, the app keeps serving", { skip: !onLinux }, () => {
  let served: ServedProcess;
  let baseline = 0;

  before(async () => {
    served = await startServe("rag", { DATA_DIR: makeTempDir("hostile") });
    await waitHealthy(served);
    // Warm up every loader (pdf.js loads on first use) so the baseline includes the code, not the bombs.
    const warm = await upload(served, "warm", [
      ["warm.pdf", makePdf([["A small page about tides."]])],
      ["warm.docx", makeDocx(["A small document about rivers."])],
      ["warm.html", Buffer.from("<html><body><p>A small page about lakes.</p></body></html>")],
    ]);
    assert.equal(warm.status, 201, JSON.stringify(warm.body));
    baseline = memoryOf(served.child.pid!).rss;
  });

  after(() => {
    if (served && served.child.exitCode === null) served.child.kill("SIGKILL");
    removeTempDirs();
  });

  /** Uploads one hostile file; asserts the 413, its message, that nothing was written, and the RSS. */
  async function refuses(fileName: string, bytes: Buffer, setting: RegExp) {
    const pid = served.child.pid!;
    resetPeak(pid);
    const indexName = `bomb-${fileName.replace(/\W/g, "-")}`;
    const reply = await upload(served, indexName, [
      ["fine.md", Buffer.from("# Fine\n\nA fine file.\n")],
      [fileName, bytes],
    ]);
    const { peak } = memoryOf(pid);
    assert.equal(reply.status, 413, JSON.stringify(reply.body));
    assert.equal(reply.body.error?.code, "payload_too_large");
    assert.ok(reply.body.error.message.includes(`"${fileName}"`), reply.body.error.message);
    assert.match(reply.body.error.message, setting);
    assert.equal(await getStatus(served, `/rag/stats/${indexName}`), 404, "the refused build wrote an index");
    assert.equal(await getStatus(served, "/health"), 200);
    const growth = peak - baseline;
    assert.ok(growth < 300 * MB, `peak RSS grew by ${Math.round(growth / MB)} MB`);
    return growth;
  }

  it("a .docx whose document.xml inflates to 800 MiB, declared in the ZIP directory", async (t) => {
    const bomb = makeBombDocx(800);
    assert.ok(bomb.length < 1.2 * MB, `${bomb.length} bytes`);
    const growth = await refuses("declared.docx", bomb, /MAX_EXTRACTED_BYTES/);
    t.diagnostic(`${bomb.length} bytes uploaded; peak RSS growth ${Math.round(growth / MB)} MB`);
  });

  it("a .docx that declares 10 KB and inflates to 800 MiB", async (t) => {
    const growth = await refuses("liar.docx", makeBombDocx(800, 10_000), /MAX_EXTRACTED_BYTES/);
    t.diagnostic(`peak RSS growth ${Math.round(growth / MB)} MB`);
  });

  it("a .docx that declares 200 MiB (under the limit) of text: stopped by the text cap", async (t) => {
    const growth = await refuses("text.docx", makeBombDocx(800, 200 * 1024 * 1024), /MAX_FILE_CHARS/);
    t.diagnostic(`peak RSS growth ${Math.round(growth / MB)} MB`);
  });

  it("a PDF whose content stream inflates to 800 MiB", async (t) => {
    const growth = await refuses("bomb.pdf", makeBombPdf(800), /MAX_EXTRACTED_BYTES/);
    t.diagnostic(`peak RSS growth ${Math.round(growth / MB)} MB`);
  });

  it("a PDF whose stream is a bomb behind two FlateDecode filters", async (t) => {
    const growth = await refuses("double.pdf", makeDoubleBombPdf(800), /MAX_EXTRACTED_BYTES/);
    t.diagnostic(`peak RSS growth ${Math.round(growth / MB)} MB`);
  });

  it("HTML nested 100,000 elements deep", async (t) => {
    const growth = await refuses("deep.html", makeDeepHtml(100_000), /MAX_HTML_DEPTH/);
    t.diagnostic(`peak RSS growth ${Math.round(growth / MB)} MB`);
  });

  it("20 bomb uploads at once: each a 413 (or a 429 with Retry-After), the app healthy, under 1.5 GB", async (t) => {
    const pid = served.child.pid!;
    resetPeak(pid);
    const bombs: Array<[string, Buffer]> = [
      ["declared.docx", makeBombDocx(800)],
      ["liar.docx", makeBombDocx(800, 10_000)],
      ["text.docx", makeBombDocx(800, 200 * 1024 * 1024)],
      ["bomb.pdf", makeBombPdf(800)],
      ["deep.html", makeDeepHtml(100_000)],
    ];
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) => upload(served, `storm-${i}`, [bombs[i % bombs.length]!])),
    );
    // Served while the storm was being parsed, and after it.
    assert.equal(await getStatus(served, "/health"), 200);
    const { peak } = memoryOf(pid);
    const statuses = replies.map((reply) => reply.status);
    t.diagnostic(`statuses ${statuses.join(" ")}; peak RSS ${Math.round(peak / MB)} MB`);
    for (const reply of replies) {
      assert.ok([413, 429].includes(reply.status), JSON.stringify(reply.body));
      if (reply.status === 429) assert.ok(Number(reply.headers.get("retry-after")) > 0);
    }
    assert.ok(peak < 1500 * MB, `peak RSS ${Math.round(peak / MB)} MB`);
    const after = await upload(served, "after-storm", [
      ["fine.md", Buffer.from("# Fine\n\nStill serving.\n")],
    ]);
    assert.equal(after.status, 201, JSON.stringify(after.body));
    for (let i = 0; i < 20; i++) assert.equal(await getStatus(served, `/rag/stats/storm-${i}`), 404);
  });
});
