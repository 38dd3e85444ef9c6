import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { buildRagApp } from "../../src/rag/app.js";
import { citedNumbers } from "../../src/rag/answering/generative.js";
import { testConfig, testModelName } from "../helpers/env.js";
import { sseEvents, startTextgen, type RunningTextgen } from "../helpers/servers.js";

const documents = [
  {
    id: "birds",
    title: "Birds",
    text: "Birds sing in the morning. Many birds migrate south in winter to find food.",
  },
  { id: "cats", title: "Cats", text: "Cats purr when they are content. A cat sleeps for most of the day." },
];

async function ragApp(overrides: Record<string, string>) {
  const app = await buildRagApp({
    config: testConfig({ DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lectern-gen-")), ...overrides }),
  });
  const built = await app.inject({
    method: "POST",
    url: "/rag/build",
    payload: { index_name: "animals", documents },
  });
  assert.equal(built.statusCode, 201);
  return app;
}

describe("generative answers through a real text generation app", () => {
  let textgen: RunningTextgen;
  let app: Awaited<ReturnType<typeof ragApp>>;

  before(async () => {
    textgen = await startTextgen();
    app = await ragApp({ GENERATION_URL: `${textgen.url}/v1` });
  });
  after(async () => {
    await app.close();
    await textgen.close().catch(() => undefined);
  });

  it("with GENERATION_URL set, answers generatively by default, citing result numbers", async () => {
    const res = await app.inject({
      method: "POST",
      url: "/rag/query",
      payload: { index_name: "animals", query: "why do birds migrate" },
    });
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.answer_mode, "generative");
    assert.equal(typeof body.answer, "string");
    assert.ok(body.answer.length > 0);
    assert.ok(Array.isArray(body.citations));
    assert.equal(body.generation.model, testModelName);
    assert.ok(body.generation.tokens >= 1);
    assert.equal(body.results[0].document_id, "birds");
    assert.equal(body.generation_skipped_reason, undefined);
  });

  it("answer extractive and none still work when generation is configured", async () => {
    const extractive = (
      await app.inject({
        method: "POST",
        url: "/rag/query",
        payload: { index_name: "animals", query: "birds migrate", answer: "extractive" },
      })
    ).json();
    assert.equal(extractive.answer_mode, "extractive");
    assert.match(extractive.answer, /migrate south in winter.*\[1\]/);
    const none = (
      await app.inject({
        method: "POST",
        url: "/rag/query",
        payload: { index_name: "animals", query: "birds", answer: "none" },
      })
    ).json();
    assert.equal(none.answer, null);
  });

  it("stream: true sends the results, then answer pieces, then the whole response", async () => {
    await app.listen({ host: "127.0.0.1", port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/rag/query`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        index_name: "animals",
        query: "why do birds migrate",
        answer: "generative",
        stream: true,
      }),
    });
    assert.match(response.headers.get("content-type") ?? "", /text\/event-stream/);
    const seen: string[] = [];
    let text = "";
    let done: { answer: string; answer_mode: string; results: unknown[]; sources_used: number } | undefined;
    let results: { count: number; sources_used: number } | undefined;
    for await (const { event, data } of sseEvents(response)) {
      seen.push(event);
      if (event === "message") text += JSON.parse(data).token;
      if (event === "done") done = JSON.parse(data);
      if (event === "results") results = JSON.parse(data);
    }
    // The results event says already how many results the model is given: all of these short ones.
    assert.equal(results?.sources_used, results?.count);
    assert.equal(done?.sources_used, results?.sources_used);
    assert.equal(seen[0], "results");
    assert.ok(seen.filter((e) => e === "message").length >= 2);
    assert.equal(seen.at(-1), "done");
    assert.equal(done?.answer_mode, "generative");
    assert.equal(done?.answer, text.trim());
    assert.ok((done?.results.length ?? 0) >= 1);
  });

  it("falls back to the extractive answer, saying why, when the generation app is stopped", async () => {
    await textgen.close();
    const res = await app.inject({
      method: "POST",
      url: "/rag/query",
      payload: { index_name: "animals", query: "why do birds migrate" },
    });
    assert.equal(res.statusCode, 200);
    const body = res.json();
    assert.equal(body.answer_mode, "extractive");
    assert.match(body.answer, /\[1\]/);
    assert.match(body.generation_skipped_reason, /ECONNREFUSED|unreachable/);
    assert.equal(body.results[0].document_id, "birds");
  });
});

describe("generative answers when generation is slow or not configured", () => {
  let silent: Server;
  before(async () => {
    // A server that accepts connections and never answers: the slow-upstream case.
    silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  });
  after(async () => {
    silent.closeAllConnections();
    await new Promise((resolve) => silent.close(resolve));
  });

  it("a generation server slower than GENERATION_TIMEOUT_MS gives the extractive answer in time", async () => {
    const { port } = silent.address() as AddressInfo;
    const app = await ragApp({
      GENERATION_URL: `http://127.0.0.1:${port}/v1`,
      GENERATION_MODEL: "any",
      GENERATION_TIMEOUT_MS: "300",
    });
    try {
      // The silent server never answers: an answer at all is the timeout at work.
      const res = await app.inject({
        method: "POST",
        url: "/rag/query",
        payload: { index_name: "animals", query: "cats purr" },
      });
      const body = res.json();
      assert.equal(body.answer_mode, "extractive");
      assert.match(body.generation_skipped_reason, /300 ms|timeout|did not/i);
      assert.match(body.answer, /purr/);
    } finally {
      await app.close();
    }
  });

  it('answer "generative" without GENERATION_URL is extractive with the reason', async () => {
    const app = await ragApp({});
    try {
      const body = (
        await app.inject({
          method: "POST",
          url: "/rag/query",
          payload: { index_name: "animals", query: "cats", answer: "generative" },
        })
      ).json();
      assert.equal(body.answer_mode, "extractive");
      assert.match(body.generation_skipped_reason, /GENERATION_URL/);
    } finally {
      await app.close();
    }
  });
});

describe("citedNumbers", () => {
  it("keeps the result numbers that exist, once, in order", () => {
    assert.deepEqual(citedNumbers("A [2]. B [1][2]. C [3, 1]. D [9]. E [0].", 3), [1, 2, 3]);
    assert.deepEqual(citedNumbers("no citations", 3), []);
  });
});

describe("generative answers when the generation app's model is not ready", () => {
  it("the fallback reason says the model is not ready, not that the server is busy", async () => {
    // A real text generation app whose model cannot load: it answers 503 model_not_ready.
    const notGguf = path.join(mkdtempSync(path.join(os.tmpdir(), "lectern-gen-")), "broken.gguf");
    writeFileSync(notGguf, "this is not a GGUF file");
    const textgen = await startTextgen({ MODEL_PATH: notGguf });
    const app = await ragApp({ GENERATION_URL: `${textgen.url}/v1`, GENERATION_MODEL: "any" });
    try {
      const res = await app.inject({
        method: "POST",
        url: "/rag/query",
        payload: { index_name: "animals", query: "why do birds migrate" },
      });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json();
      assert.equal(body.answer_mode, "extractive");
      assert.match(body.generation_skipped_reason, /model not ready/i);
      assert.doesNotMatch(body.generation_skipped_reason, /busy/i);
    } finally {
      await app.close();
      await textgen.close();
    }
  });
});
