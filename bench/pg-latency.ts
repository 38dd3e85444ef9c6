/**
 * Query latency with the PostgreSQL store against the SQLite store, on the SciFact index.
 *
 *   node --import tsx bench/pg-latency.ts [BEIR folder] [--rounds N] [--json]
 *
 * The folder defaults to LECTERN_IR_DIR, else ../shared/ir/scifact. PostgreSQL: a fresh database
 * `lectern_bench_<random>` is created on the server of LECTERN_TEST_DATABASE_URL (else
 * postgres://postgres@127.0.0.1:5432/postgres) and dropped at the end; SQLite: a temp folder.
 *
 * For each store the SciFact corpus (5,183 documents) is built into one index through RagService
 * (bm25, default chunking), then:
 * - warm: every SciFact query (300) through RagService.query with a warm cache, `rounds` times,
 *   each query on both stores back to back (order alternating); per-query latency mean, p50, p95. With PostgreSQL the cache
 *   is validated by LISTEN/NOTIFY (no round trip per query); with SQLite by a version read per query.
 * - cold: the first query of a new RagService on the open store (snapshot read from the store,
 *   engine index deserialised, then the search), five times; its median and range.
 * Results go to bench/results/pg-latency.json.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import pg from "pg";

import { RagService } from "../src/rag/service.js";
import { PostgresIndexStore } from "../src/rag/store/postgres-store.js";
import { SqliteIndexStore } from "../src/rag/store/sqlite-store.js";
import type { IndexKey, IndexStore } from "../src/rag/store/types.js";
import { repoRoot } from "./lib/bench-env.js";
import { markdownTable } from "./lib/report.js";
import { writeResult } from "./lib/result.js";

interface Arguments {
  dir: string;
  rounds: number;
  json: boolean;
}

function parseArguments(argv: string[]): Arguments {
  const parsed: Arguments = {
    dir: process.env.LECTERN_IR_DIR ?? path.join(repoRoot, "../shared/ir/scifact"),
    rounds: 5,
    json: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--json") parsed.json = true;
    else if (arg === "--rounds") parsed.rounds = Math.max(1, Number(argv[++i]) || 5);
    else if (arg.startsWith("-")) throw new Error(`unknown option ${arg}`);
    else parsed.dir = arg;
  }
  return parsed;
}

interface CorpusDocument {
  id: string;
  title: string;
  text: string;
}

function readJsonLines<T>(file: string): T[] {
  return fs
    .readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as T);
}

const KEY: IndexKey = { tenantId: "default", name: "scifact" };
const ms = (n: number) => Math.round(n * 1000) / 1000;

function summary(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * q) - 1)]!;
  return {
    samples: sorted.length,
    mean_ms: ms(sorted.reduce((s, v) => s + v, 0) / sorted.length),
    p50_ms: ms(at(0.5)),
    p95_ms: ms(at(0.95)),
    min_ms: ms(sorted[0]!),
    max_ms: ms(sorted[sorted.length - 1]!),
  };
}

async function waitUntil(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function admin(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function main(): Promise<void> {
  const args = parseArguments(process.argv.slice(2));
  if (!fs.existsSync(path.join(args.dir, "corpus.jsonl"))) {
    throw new Error(`no BEIR collection at ${args.dir} (corpus.jsonl); pass a folder or set LECTERN_IR_DIR`);
  }
  const corpus = readJsonLines<{ _id: string; title?: string; text?: string }>(
    path.join(args.dir, "corpus.jsonl"),
  ).map((row): CorpusDocument => ({ id: String(row._id), title: row.title ?? "", text: row.text ?? "" }));
  const queries = readJsonLines<{ _id: string; text: string }>(path.join(args.dir, "queries.jsonl")).map(
    (q) => q.text,
  );

  const adminUrl = process.env.LECTERN_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  const database = `lectern_bench_${randomBytes(5).toString("hex")}`;
  await admin(adminUrl, `CREATE DATABASE ${database}`);
  const databaseUrl = new URL(adminUrl);
  databaseUrl.pathname = `/${database}`;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-bench-sqlite-"));

  const stores: Array<{ name: "sqlite" | "postgres"; store: IndexStore }> = [];
  try {
    stores.push({ name: "sqlite", store: SqliteIndexStore.open(dataDir) });
    stores.push({ name: "postgres", store: await PostgresIndexStore.open(databaseUrl.toString()) });

    const report: Record<string, unknown> = {};
    const services = new Map<string, RagService>();
    const warm = new Map<string, number[]>();
    for (const { name, store } of stores) {
      const service = new RagService(store);
      services.set(name, service);
      const started = performance.now();
      const built = await service.build({
        key: KEY,
        documents: corpus.map((d) => ({ id: d.id, title: d.title || null, text: d.text || d.title })),
        chunkSize: 1000,
        overlap: 128,
        scorer: "bm25",
        mode: "create",
      });
      const buildMs = performance.now() - started;
      if (name === "postgres") await waitUntil(() => service.changeFeedLive, "the LISTEN connection");
      report[name] = {
        build_ms: ms(buildMs),
        documents: built.meta.documentsCount,
        chunks: built.meta.chunksCount,
        stored_index_bytes: built.meta.sizeBytes,
        store_bytes: await store.sizeBytes(),
      };
      warm.set(name, []);
      // Warm-up pass: JIT, caches, connection pool.
      for (const query of queries) await service.query({ key: KEY, query, topK: 10, minScore: 0 });
    }

    // Each query on both stores back to back, the order alternating, so that both see the same
    // machine (other processes, GC, frequency) at the same moments.
    for (let round = 0; round < args.rounds; round++) {
      for (const [i, query] of queries.entries()) {
        for (const { name } of (round + i) % 2 === 0 ? stores : [...stores].reverse()) {
          const service = services.get(name)!;
          const started = performance.now();
          await service.query({ key: KEY, query, topK: 10, minScore: 0 });
          warm.get(name)!.push(performance.now() - started);
        }
      }
    }

    const cold = new Map<string, number[]>();
    for (let repeat = 0; repeat < 5; repeat++) {
      for (const { name, store } of repeat % 2 === 0 ? stores : [...stores].reverse()) {
        const fresh = new RagService(store);
        const started = performance.now();
        await fresh.query({ key: KEY, query: queries[repeat]!, topK: 10, minScore: 0 });
        const elapsed = performance.now() - started;
        fresh.close();
        cold.set(name, [...(cold.get(name) ?? []), elapsed]);
      }
    }

    for (const { name } of stores) {
      const entry = report[name] as Record<string, unknown>;
      entry.warm = summary(warm.get(name)!);
      entry.cold_load = summary(cold.get(name)!);
    }
    const sqliteWarm = (report.sqlite as { warm: { mean_ms: number; p95_ms: number } }).warm;
    const pgWarm = (report.postgres as { warm: { mean_ms: number; p95_ms: number } }).warm;
    const result = {
      collection: path.basename(args.dir),
      documents: corpus.length,
      queries: queries.length,
      rounds: args.rounds,
      top_k: 10,
      scorer: "bm25",
      node: process.version,
      cpus: os.availableParallelism(),
      // Other work on the machine shows in the means: the 1-minute load average when measuring ended.
      load_average: Math.round(os.loadavg()[0]! * 100) / 100,
      postgres_server: await serverVersion(databaseUrl.toString()),
      stores: report,
      warm_mean_ratio_postgres_to_sqlite: Math.round((pgWarm.mean_ms / sqliteWarm.mean_ms) * 1000) / 1000,
      warm_p95_ratio_postgres_to_sqlite: Math.round((pgWarm.p95_ms / sqliteWarm.p95_ms) * 1000) / 1000,
      measured_at: new Date().toISOString(),
    };
    writeResult(
      "pg-latency",
      `node --import tsx bench/pg-latency.ts ${process.argv.slice(2).join(" ")}`.trim(),
      result,
    );

    if (args.json) {
      process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    } else {
      const rows = stores.map(({ name }) => {
        const r = report[name] as {
          build_ms: number;
          warm: ReturnType<typeof summary>;
          cold_load: ReturnType<typeof summary>;
        };
        return [
          name,
          `${r.warm.mean_ms.toFixed(3)} ms`,
          `${r.warm.p50_ms.toFixed(3)} ms`,
          `${r.warm.p95_ms.toFixed(3)} ms`,
          `${r.cold_load.p50_ms.toFixed(0)} ms (${r.cold_load.min_ms.toFixed(0)}–${r.cold_load.max_ms.toFixed(0)})`,
          `${(r.build_ms / 1000).toFixed(2)} s`,
        ];
      });
      const header = ["store", "warm mean", "warm p50", "warm p95", "cold load (median, range)", "build"];
      process.stdout.write(
        `SciFact: ${corpus.length} documents, ${queries.length} queries × ${args.rounds} rounds, top 10, bm25\n` +
          `${markdownTable(header, rows)}\n` +
          `warm mean postgres/sqlite: ${result.warm_mean_ratio_postgres_to_sqlite}, ` +
          `p95: ${result.warm_p95_ratio_postgres_to_sqlite} (load average ${result.load_average})\n` +
          `written to bench/results/pg-latency.json\n`,
      );
    }
    for (const service of services.values()) service.close();
  } finally {
    for (const { store } of stores) await store.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    await admin(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
}

async function serverVersion(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ server_version: string }>("SHOW server_version");
    return rows[0]!.server_version;
  } finally {
    await client.end();
  }
}

await main();
