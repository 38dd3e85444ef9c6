/**
 * Writes that held the event loop (issue #35), against the RAG app as a child process: one
 * `/rag/build` of 52 MB of JSON text stalled /health 17–23 s, a million tiny documents ≥ 30 s and kept
 * +1.5 GB (parsing, chunking, analysis and postings ran on the loop). Now a large body is parsed, and a
 * large write normalised, chunked and analysed, on worker threads (http/json-body.ts,
 * service/write-prep.ts), and one request carries at most MAX_BUILD_DOCUMENTS documents (413 past it).
 *
 * The store's write keeps the loop free too: PostgreSQL's is batched and awaited; SQLite's large write
 * runs in slices on a connection of its own that holds the transaction (sqlite-store.ts
 * writeInSlices). Peak memory: the body's bytes move to the parsing thread (not copied), the write's
 * texts stream to the preparing thread one run at a time, the segment is encoded where its postings
 * are made, and SQLite's write needs no thread with a copy of the write: the 52 MB build grew peak RSS
 * 268–327 MB on PostgreSQL and 340–375 MB on SQLite before, 203–259 MB after (docs/RELIABILITY.md).
 * Bodies go out through curl, so this process only probes.
 */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { curl, HEALTH_BOUND_MS, RSS_GROWTH_BOUND, whileProbing } from "../helpers/liveness.js";
import { createTestDatabase, postgresUnavailable, type TestDatabase } from "../helpers/pg.js";
import { makeTempDir, removeTempDirs } from "../helpers/rag-http.js";
import { startServe, waitHealthy, type ServedProcess } from "../helpers/serve-process.js";

const onLinux = fs.existsSync("/proc/self/status");
const MB = 1_000_000;
const pgSkip = await postgresUnavailable();

/** 52 MB of JSON: ten documents of prose-like words, each about 5 MB. */
function bigBuild(file: string): void {
  const words = [
    "harbour",
    "tide",
    "river",
    "ledger",
    "lantern",
    "estuary",
    "gull",
    "anchor",
    "silt",
    "quay",
  ];
  const documents = Array.from({ length: 10 }, (_, d) => {
    const parts: string[] = [];
    for (let i = 0; i < 600_000; i++) parts.push(`${words[(i * 7 + d) % 10]}${i % 997}`);
    return { id: `volume-${d}`, title: `Volume ${d}`, text: parts.join(" ") };
  });
  fs.writeFileSync(file, JSON.stringify({ index_name: "big", documents }));
}

/** A million tiny documents (about 10 MB of JSON). */
function tinyBuild(file: string): void {
  const documents = Array.from({ length: 1_000_000 }, (_, i) => `w${i}`);
  fs.writeFileSync(file, JSON.stringify({ index_name: "tiny", documents }));
}

const build = (served: ServedProcess, file: string) =>
  curl(["-H", "content-type: application/json", "--data-binary", `@${file}`, `${served.url}/rag/build`]);

/** The app on one store, the bodies written once; `attack` sends one and asserts the bounds. */
function suite(store: "SQLite" | "PostgreSQL", options: { skip?: string | false }) {
  describe(
    `hostile writes (#35) on ${store}: parsed and prepared off the loop`,
    { skip: !onLinux || options.skip },
    () => {
      let served: ServedProcess;
      let database: TestDatabase | undefined;
      const scratch = () => makeTempDir("hostile-writes-bodies");
      let bodies: { big: string; tiny: string };

      before(async () => {
        const dir = scratch();
        bodies = { big: path.join(dir, "big.json"), tiny: path.join(dir, "tiny.json") };
        bigBuild(bodies.big);
        tinyBuild(bodies.tiny);
        database = store === "PostgreSQL" ? await createTestDatabase() : undefined;
        served = await startServe("rag", {
          DATA_DIR: makeTempDir("hostile-writes"),
          ...(database ? { DATABASE_URL: database.url } : {}),
        });
        await waitHealthy(served);
        // A first small build: the code of a write is loaded before the baseline.
        const warm = await fetch(`${served.url}/rag/build`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ index_name: "warm", documents: ["A warm-up document."] }),
        });
        assert.equal(warm.status, 201);
      });

      after(async () => {
        if (served && served.child.exitCode === null) served.child.kill("SIGKILL");
        await database?.drop();
        removeTempDirs();
      });

      it("a million tiny documents: 413 naming MAX_BUILD_DOCUMENTS, nothing written", async (t) => {
        const { result, slowest, growth } = await whileProbing(served, () => build(served, bodies.tiny));
        t.diagnostic(
          `${result.status}; longest loop stall ${Math.round(slowest)} ms; peak RSS +${Math.round(growth / MB)} MB`,
        );
        assert.equal(result.status, 413, result.body.slice(0, 300));
        assert.match(result.body, /MAX_BUILD_DOCUMENTS/);
        assert.equal((await fetch(`${served.url}/rag/stats/tiny`)).status, 404);
        assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
        assert.ok(growth < RSS_GROWTH_BOUND, `peak RSS grew by ${Math.round(growth / MB)} MB`);
      });

      it("52 MB of JSON text: built, /health answering throughout", async (t) => {
        const started = performance.now();
        const { result, slowest, growth } = await whileProbing(served, () => build(served, bodies.big));
        t.diagnostic(
          `${result.status} in ${Math.round(performance.now() - started)} ms; longest loop stall ${Math.round(slowest)} ms; peak RSS +${Math.round(growth / MB)} MB`,
        );
        assert.equal(result.status, 201, result.body.slice(0, 300));
        assert.equal((JSON.parse(result.body) as { documents_count: number }).documents_count, 10);
        const query = await fetch(`${served.url}/rag/query`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ index_name: "big", query: "lantern42 estuary", top_k: 3, answer: "none" }),
        });
        assert.equal(((await query.json()) as { results: unknown[] }).results.length, 3);
        assert.ok(slowest < HEALTH_BOUND_MS, `the event loop was held ${Math.round(slowest)} ms`);
        assert.ok(growth < RSS_GROWTH_BOUND, `peak RSS grew by ${Math.round(growth / MB)} MB`);
      });
    },
  );
}

suite("PostgreSQL", { skip: pgSkip ?? false });
suite("SQLite", {});
