/**
 * `npm start` as a user runs it: both apps in one process (src/cli/serve.ts all) and no
 * GENERATION_URL. RAG answers generatively with the model loaded in that process, and start-up says so.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { freePort } from "../../scripts/lib/free-port.js";
import { repoRoot } from "../helpers/env.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";

describe("both apps in one process, no GENERATION_URL", () => {
  let served: ServedProcess;
  let textgenUrl: string;

  before(async () => {
    const textgenPort = await freePort();
    textgenUrl = `http://127.0.0.1:${textgenPort}`;
    delete process.env.GENERATION_URL;
    served = await startServe(
      "rag",
      {
        TEXTGEN_PORT: String(textgenPort),
        LOG_LEVEL: "info",
        DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-all-")),
      },
      [path.join(repoRoot, "src", "cli", "serve.ts"), "all"],
    );
    await waitHealthy(served);
    // The RAG app answers before the model has loaded; wait for the text generation app to be ready.
    const deadline = performance.now() + 120_000;
    while ((await fetch(`${textgenUrl}/health`).catch(() => null))?.status !== 200) {
      assert.ok(performance.now() < deadline, `the model did not load: ${served.stderr()}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });
  after(async () => {
    served.child.kill("SIGTERM");
    await served.exited;
  });

  it("logs how answers are written, and answers generatively with the local model", async () => {
    const lines = served
      .stdout()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => (JSON.parse(line) as { msg: string }).msg);
    assert.ok(
      // Said while the model loads or once it is loaded; never while none is.
      lines.some((msg) =>
        /^RAG: generative answers with the local model "[^"]+" of this process \((loading|ready)\)/.test(msg),
      ),
      lines.join("\n"),
    );
    const built = await fetch(`${served.url}/rag/build`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        index_name: "animals",
        documents: [{ id: "birds", text: "Birds migrate south in winter to find food." }],
      }),
    });
    assert.equal(built.status, 201, await built.text());
    const res = await fetch(`${served.url}/rag/query`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ index_name: "animals", query: "why do birds migrate" }),
    });
    const body = (await res.json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.answer_mode, "generative", body.generation_skipped_reason);
    assert.ok(body.generation.tokens >= 1);
    assert.equal(body.generation_skipped_reason, undefined);
  });
});
