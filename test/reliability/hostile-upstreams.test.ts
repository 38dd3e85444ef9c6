/**
 * Embedding and rerank servers that answer too much (issue #35), against the RAG app as a child
 * process: 10⁷ floats for one text, or a 700 MB body, had the app read the whole body, parse it on the
 * event loop and build vectors before checking their dimension (/health stalled 10–30 s, +1.2 GB).
 * Now an answer is read as it arrives up to what its batch can take (texts × the known dimension, or
 * MAX_EMBEDDING_DIMENSION before the first answer; candidates × 16 KB for a rerank) and cut off there:
 * a 502 naming the server and the limit; a vector longer than MAX_EMBEDDING_DIMENSION is refused before
 * any is built. Each: /health answers throughout, peak RSS grows by less than 300 MB, nothing written.
 * The hostile servers live in this process and stream their bodies (a piece at a time, as the client
 * reads), so they cost this process little while it probes.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { MAX_EMBEDDING_DIMENSION } from "../../src/rag/retrieval/embedder.js";
import { HEALTH_BOUND_MS, RSS_GROWTH_BOUND, whileProbing } from "../helpers/liveness.js";
import { makeTempDir, removeTempDirs } from "../helpers/rag-http.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";

const onLinux = existsSync("/proc/self/status");
const MB = 1_000_000;
const DIMENSION = 8;

type Mode = "sane" | "ten-million-floats" | "700-mb" | "wide-vectors";

/** Writes `head`, then `piece` until `total` bytes went out (or the client left), then `tail`. */
function stream(res: http.ServerResponse, head: string, piece: string, total: number, tail: string): void {
  const chunk = Buffer.from(piece.repeat(Math.max(1, Math.floor(65_536 / piece.length))));
  let sent = 0;
  let gone = false;
  res.on("close", () => (gone = true));
  res.writeHead(200, { "content-type": "application/json" });
  res.write(head);
  const pump = () => {
    while (!gone && sent < total) {
      sent += chunk.length;
      if (!res.write(chunk)) return void res.once("drain", pump);
    }
    if (!gone) res.end(tail);
  };
  pump();
}

/** One server answering /v1/embeddings and /v1/rerank, each as its mode says. */
function hostileServer(modes: { embeddings: Mode; rerank: Mode }) {
  return http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (piece: string) => (body += piece));
    req.on("end", () => {
      const request = JSON.parse(body) as { input?: string[]; documents?: string[] };
      const count = request.input?.length ?? request.documents?.length ?? 0;
      const kind = req.url?.endsWith("/rerank") ? modes.rerank : modes.embeddings;
      if (kind === "ten-million-floats")
        return stream(res, '{"data":[{"index":0,"embedding":[', "0.12345678,", 10_000_000 * 11, "0]}]}");
      if (kind === "700-mb") return stream(res, '{"data":[', "x", 700 * MB, "]}");
      // One value more than is read, short numbers: well within the bytes the batch may take.
      const width = kind === "wide-vectors" ? MAX_EMBEDDING_DIMENSION + 1 : DIMENSION;
      const answer = req.url?.endsWith("/rerank")
        ? {
            results: Array.from({ length: count }, (_, index) => ({
              index,
              relevance_score: 1 / (index + 1),
            })),
          }
        : {
            model: "hostile",
            data: Array.from({ length: count }, (_, index) => ({
              index,
              embedding: Array.from({ length: width }, (_, d) => ((index + d) % 5) + 1),
            })),
          };
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
    });
  });
}

describe("hostile upstreams (#35): answers read up to their batch's size", { skip: !onLinux }, () => {
  let served: ServedProcess;
  let upstream: http.Server;
  const modes: { embeddings: Mode; rerank: Mode } = { embeddings: "sane", rerank: "sane" };
  let base = "";

  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${served.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return {
      status: res.status,
      body: (await res.json()) as Record<string, unknown> & { error?: { message: string } },
    };
  };
  const statsStatus = async (name: string) => (await fetch(`${served.url}/rag/stats/${name}`)).status;

  /** The attack while probing: its reply, the bounds asserted. */
  async function attack(t: { diagnostic(message: string): void }, work: () => ReturnType<typeof post>) {
    const { result, slowest, growth } = await whileProbing(served, work);
    t.diagnostic(
      `${result.status}; longest loop stall ${Math.round(slowest)} ms; peak RSS +${Math.round(growth / MB)} MB`,
    );
    assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
    assert.ok(growth < RSS_GROWTH_BOUND, `peak RSS grew by ${Math.round(growth / MB)} MB`);
    return result;
  }

  before(async () => {
    upstream = hostileServer(modes);
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
    served = await startServe("rag", {
      DATA_DIR: makeTempDir("hostile-upstreams"),
      EMBEDDING_URL: base,
      RERANK_URL: base,
    });
    await waitHealthy(served);
  });

  after(async () => {
    if (served && served.child.exitCode === null) served.child.kill("SIGKILL");
    upstream?.closeAllConnections();
    await new Promise((resolve) => upstream?.close(resolve));
    removeTempDirs();
  });

  // First, while the app has seen no answer of the embedder (its dimension unknown).
  it("vectors longer than MAX_EMBEDDING_DIMENSION: refused before any is built, 502", async (t) => {
    modes.embeddings = "wide-vectors";
    const reply = await attack(t, () => post("/rag/build", { index_name: "wide", documents: ["Text."] }));
    assert.equal(reply.status, 502, JSON.stringify(reply.body));
    assert.match(reply.body.error!.message, new RegExp(`at most ${MAX_EMBEDDING_DIMENSION} are read`));
    assert.equal(await statsStatus("wide"), 404);
  });

  it("an embedding server answering 10⁷ floats for one text: 502 naming it and the limit", async (t) => {
    modes.embeddings = "ten-million-floats";
    const reply = await attack(t, () =>
      post("/rag/build", { index_name: "floats", documents: ["One short text."] }),
    );
    assert.equal(reply.status, 502, JSON.stringify(reply.body));
    assert.ok(reply.body.error!.message.includes(base), reply.body.error!.message);
    assert.match(
      reply.body.error!.message,
      new RegExp(`more than \\d+ bytes, the most 1 vectors of ${MAX_EMBEDDING_DIMENSION} dimensions`),
    );
    assert.equal(await statsStatus("floats"), 404);
  });

  it("an embedding server answering a 700 MB body: cut off at the limit, 502", async (t) => {
    modes.embeddings = "sane";
    const built = await post("/rag/build", {
      index_name: "kept",
      documents: [
        "The tide comes in twice a day.",
        "Rivers carry silt to the sea.",
        "Lakes freeze in winter.",
      ],
    });
    assert.equal(built.status, 201, JSON.stringify(built.body));
    modes.embeddings = "700-mb";
    const reply = await attack(t, () =>
      post("/rag/indices/kept/documents", { documents: ["Another text about tides."] }),
    );
    assert.equal(reply.status, 502, JSON.stringify(reply.body));
    // The index's dimension is known: the limit is that of 1 vector of DIMENSION floats.
    assert.match(reply.body.error!.message, new RegExp(`the most 1 vectors of ${DIMENSION} dimensions`));
    modes.embeddings = "sane";
    const kept = await post("/rag/query", { index_name: "kept", query: "tide", answer: "none" });
    assert.equal((kept.body.results as unknown[]).length, 3);
  });

  it("a rerank server answering a 700 MB body: 502 naming it and the limit", async (t) => {
    const query = () =>
      post("/rag/query", {
        index_name: "kept",
        query: "sea",
        retrieval: "lexical",
        rerank: true,
        answer: "none",
      });
    assert.equal((await query()).status, 200);
    modes.rerank = "700-mb";
    const reply = await attack(t, query);
    assert.equal(reply.status, 502, JSON.stringify(reply.body));
    assert.match(
      reply.body.error!.message,
      /reranker at .*\/rerank answered more than \d+ bytes, the most scores of \d+ candidates/,
    );
  });
});
