/**
 * Graceful shutdown of the real CLI (`node --import tsx src/cli/serve.ts textgen|rag`) on SIGTERM:
 * the process stops accepting connections at once, in-flight requests get complete responses (or,
 * past SHUTDOWN_GRACE_MS, a clean end: a 503 JSON error, or an error event and a properly ended
 * stream), and the process exits 0 (the CLI forces an exit with code 1 past SHUTDOWN_GRACE_MS + 5 s,
 * so 0 also says it was in time). The RAG app's SQLite store reopens cleanly after.
 */
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { SqliteIndexStore } from "../../src/rag/store/sqlite-store.js";
import { parseEvents } from "../helpers/fuzz-http.js";
import { makeTempDir, openRagApp, ragClient, removeTempDirs, assertStatus } from "../helpers/rag-http.js";
import {
  request,
  startServe,
  waitHealthy,
  type RawResponse,
  type ServedProcess,
} from "../helpers/serve-process.js";
import { makeProse, seededRandom } from "../helpers/text-fixtures.js";

const started: ServedProcess[] = [];

after(() => {
  for (const served of started)
    if (served.child.exitCode === null && served.child.signalCode === null) served.child.kill("SIGKILL");
  removeTempDirs();
});

async function serve(which: "textgen" | "rag", env: Record<string, string> = {}) {
  const served = await startServe(which, env);
  started.push(served);
  await waitHealthy(served);
  return served;
}

/** Ways a client sees "not served": refused, reset or hung up before an answer, or a 503. */
const NOT_SERVED = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "answered 503"]);

/** What a new connection gets: the error code when no answer came, else `answered <status>`. */
async function newConnectionOutcome(port: number): Promise<string> {
  try {
    const res = await request(port, { method: "GET", path: "/health" });
    return `answered ${res.status}`;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? String(error);
  }
}

/** Resolves once the child has written `text` to stderr (the CLI says when a signal arrived). */
function stderrShows(served: ServedProcess, text: string): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (!served.stderr().includes(text)) return false;
      served.child.stderr!.off("data", check);
      resolve();
      return true;
    };
    if (!check()) served.child.stderr!.on("data", check);
  });
}

/**
 * After SIGTERM: new connections until one is not served, while `inFlight` is still unanswered.
 * No fixed wait: the probes start once the CLI has said it received the signal, and each waits for
 * the previous one's answer. Resolves with the outcomes seen; the last is the first not served, or
 * the in-flight request was answered first (then the drain let new connections in: the test fails).
 */
async function probeAfterSignal(served: ServedProcess, inFlight: Promise<unknown>): Promise<string[]> {
  await stderrShows(served, "SIGTERM received");
  let answered = false;
  void inFlight.then(
    () => (answered = true),
    () => (answered = true),
  );
  const outcomes: string[] = [];
  for (;;) {
    const outcome = await newConnectionOutcome(served.port);
    outcomes.push(outcome);
    if (NOT_SERVED.has(outcome) || answered) return outcomes;
  }
}

/** Starts a generation, streamed or not; resolves `begun` once tokens flow (streamed) or at once. */
function generation(port: number, body: Record<string, unknown>) {
  let onFirst: () => void = () => {};
  const begun = new Promise<void>((resolve) => (onFirst = resolve));
  const response = request(port, {
    method: "POST",
    path: "/predict",
    body,
    onData: (text) => {
      if (text.includes("data:")) onFirst();
    },
  });
  void response.then(
    () => onFirst(),
    () => onFirst(),
  );
  /** When the response ended (performance.now()). */
  const answeredAt = response.then(
    () => performance.now(),
    () => performance.now(),
  );
  return { begun, response, answeredAt };
}

function assertCompletePrediction(res: RawResponse, label: string) {
  assert.equal(res.status, 200, `${label}: ${res.body.slice(0, 300)}`);
  assert.ok(res.complete, `${label}: the response was cut`);
  const body = JSON.parse(res.body) as {
    generated_text: string;
    tokens_generated: number;
    finish_reason: string;
  };
  assert.ok(body.tokens_generated >= 1, label);
  assert.ok(["length", "stop"].includes(body.finish_reason), label);
  return body;
}

function streamSummary(res: RawResponse) {
  const events = parseEvents(res.body);
  return {
    tokens: events.filter((e) => e.event === "message").length,
    done: events.find((e) => e.event === "done"),
    error: events.find((e) => e.event === "error"),
    endsCleanly: res.complete && res.body.endsWith("\n\n"),
  };
}

describe("graceful shutdown on SIGTERM", () => {
  it(
    "textgen: in-flight generations (plain and streamed) complete, new connections are refused, exit 0",
    { timeout: 90_000 },
    async (t) => {
      const served = await serve("textgen");
      const prompt = { text: "Once upon a time", temperature: 0, max_length: 300 };
      const plain = generation(served.port, prompt);
      const streamed = generation(served.port, { ...prompt, stream: true });
      await streamed.begun;
      const signalled = performance.now();
      served.child.kill("SIGTERM");
      const probes = await probeAfterSignal(served, Promise.all([plain.response, streamed.response]));
      const fresh = probes[probes.length - 1]!;

      const [plainRes, streamRes] = await Promise.all([plain.response, streamed.response]);
      const exit = await served.exited;
      const exitMs = Math.round(exit.at - signalled);
      t.diagnostic(
        `new connections after SIGTERM: ${probes.join(", ")}; exit ${exit.code ?? exit.signal} after ${exitMs} ms`,
      );
      // Both were still running when the signal came, or this test shows nothing.
      assert.ok((await plain.answeredAt) > signalled, "the plain /predict ended before SIGTERM");
      assert.ok((await streamed.answeredAt) > signalled, "the stream ended before SIGTERM");

      assert.ok(NOT_SERVED.has(fresh), `new connections were served while draining: ${probes.join(", ")}`);
      const body = assertCompletePrediction(plainRes, "in-flight /predict");
      const stream = streamSummary(streamRes);
      t.diagnostic(
        `in-flight /predict: ${body.tokens_generated} tokens (${body.finish_reason}); stream: ${stream.tokens} token events, done=${!!stream.done}`,
      );
      assert.ok(stream.endsCleanly, `the stream was cut: ${streamRes.body.slice(-300)}`);
      assert.ok(stream.done, `the stream has no "done" event: ${streamRes.body.slice(-300)}`);
      assert.equal(stream.error, undefined);
      assert.equal(exit.code, 0, `exit ${exit.code ?? exit.signal}: ${served.stderr()}`);
    },
  );

  it(
    "textgen: past SHUTDOWN_GRACE_MS, in-flight generations end cleanly (503 / error event) and the exit is 0",
    { timeout: 90_000 },
    async (t) => {
      const served = await serve("textgen", { SHUTDOWN_GRACE_MS: "300", MAX_CONCURRENT: "2" });
      // Longer than the grace period: 2,000 tokens (about all a sequence holds) take seconds.
      const prompt = { text: "Once upon a time", temperature: 0.8, seed: 1, max_length: 2000 };
      const plain = generation(served.port, prompt);
      const streamed = generation(served.port, { ...prompt, stream: true });
      await streamed.begun;
      const signalled = performance.now();
      served.child.kill("SIGTERM");
      const [plainRes, streamRes] = await Promise.all([plain.response, streamed.response]);
      const exit = await served.exited;
      const exitMs = Math.round(exit.at - signalled);
      const stream = streamSummary(streamRes);
      t.diagnostic(
        `plain: ${plainRes.status} ${plainRes.body.slice(0, 160)}; stream: ${stream.tokens} token events, ` +
          `done=${!!stream.done} error=${stream.error?.data.slice(0, 160) ?? "none"}; exit ${exit.code ?? exit.signal} after ${exitMs} ms`,
      );
      // Either it finished within the grace period (complete), or it was stopped and said so.
      if (plainRes.status === 200) assertCompletePrediction(plainRes, "plain");
      else {
        assert.equal(plainRes.status, 503, plainRes.body);
        assert.ok(plainRes.complete);
        const error = (
          JSON.parse(plainRes.body) as { error: { code: string; message: string; details: unknown[] } }
        ).error;
        assert.equal(typeof error.code, "string");
        assert.ok(Array.isArray(error.details));
      }
      assert.ok(stream.endsCleanly, `the stream was cut: ${streamRes.body.slice(-300)}`);
      assert.ok(stream.done || stream.error, "the stream ends with a done or an error event");
      assert.equal(exit.code, 0, `exit ${exit.code ?? exit.signal}: ${served.stderr()}`);
    },
  );

  it(
    "rag: an in-flight build completes, new connections are refused, exit 0, and the store reopens cleanly",
    { timeout: 90_000 },
    async (t) => {
      const dataDir = makeTempDir("shutdown-rag");
      const served = await serve("rag", { DATA_DIR: dataDir });
      const small = await request(served.port, {
        method: "POST",
        path: "/rag/build",
        body: { index_name: "kept", documents: ["The sun is a star.", "Whales live in the ocean."] },
      });
      assert.equal(small.status, 201, small.body);
      const random = seededRandom(11);
      const documents = Array.from({ length: 2000 }, (_, i) => ({
        id: `d${i}`,
        text: makeProse(random, 1200),
      }));
      let sent: () => void = () => {};
      const bodySent = new Promise<void>((resolve) => (sent = resolve));
      let answeredAt = 0;
      const big = request(served.port, {
        method: "POST",
        path: "/rag/build",
        body: { index_name: "big", documents },
        onSent: sent,
      }).then((res) => {
        answeredAt = performance.now();
        return res;
      });
      // SIGTERM as soon as the whole body is out: the server is reading or building it.
      await bodySent;
      const signalled = performance.now();
      served.child.kill("SIGTERM");
      const probes = await probeAfterSignal(served, big);
      const fresh = probes[probes.length - 1]!;
      let bigRes: RawResponse | Error;
      try {
        bigRes = await big;
      } catch (error) {
        bigRes = error as Error;
      }
      const exit = await served.exited;
      const exitMs = Math.round(exit.at - signalled);
      t.diagnostic(
        `new connections: ${probes.join(", ")}; in-flight build: ${bigRes instanceof Error ? bigRes.message : `${bigRes.status} ${bigRes.body.slice(0, 120)}`}; exit ${exit.code ?? exit.signal} after ${exitMs} ms`,
      );
      assert.ok(NOT_SERVED.has(fresh), `new connections were served while draining: ${probes.join(", ")}`);
      assert.ok(!(bigRes instanceof Error), `the in-flight build got no response: ${String(bigRes)}`);
      assert.ok(answeredAt > signalled, "the build was answered before SIGTERM: it was not in flight");
      assert.ok(bigRes.complete, "the build response was cut");
      assert.ok(
        bigRes.status === 201 || bigRes.status === 503,
        `build: ${bigRes.status} ${bigRes.body.slice(0, 200)}`,
      );
      assert.equal(exit.code, 0, `exit ${exit.code ?? exit.signal}: ${served.stderr()}`);

      const store = SqliteIndexStore.open(dataDir);
      try {
        assert.equal(store.integrityCheck(), "ok");
      } finally {
        await store.close();
      }
      const { app } = await openRagApp({ DATA_DIR: dataDir });
      try {
        const rag = ragClient(app);
        const kept = await rag.query({ index_name: "kept", query: "ocean whales" });
        assertStatus(kept, 200);
        assert.equal((kept.json() as { count: number }).count > 0, true);
        const bigInfo = await rag.indexStats("big");
        // Acknowledged: it is there, whole. Not acknowledged: absent, not half there.
        if (bigRes.status === 201) {
          assertStatus(bigInfo, 200);
          assert.equal((bigInfo.json() as { documents_count: number }).documents_count, documents.length);
        } else {
          assertStatus(bigInfo, 404);
        }
      } finally {
        await app.close();
      }
    },
  );
});
