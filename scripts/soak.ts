/**
 * Soak test, bounded in time and loopback only:
 *   node --import tsx scripts/soak.ts [--seconds 60] [--connections 50] [--predict-clients 20] [--out docs/RELIABILITY.md]
 *
 * Starts the RAG app and the text generation app (the small test model) as child processes on free
 * loopback ports with a fresh DATA_DIR, then for --seconds runs --connections RAG clients mixing
 * queries, replace builds on scratch indices and appends of uniquely identified documents (every
 * acknowledged id is recorded), and --predict-clients clients looping /predict (max_length 16). It
 * samples both children's RSS every second, and at sixths of the run right after a full garbage
 * collection (asked for through each child's inspector on loopback: V8 collects lazily, so raw RSS over
 * a minute mostly shows when the collector last ran). At the end it checks: zero 5xx (and zero requests
 * without a response), zero lost writes (every acknowledged document is found by its unique word, and
 * the counts match), RSS growth under 10 % over the last half of the run for each app (after a full
 * collection at the middle and at the end), both apps healthy and exiting 0 on SIGTERM. It prints a
 * summary, writes --out, and exits non-zero if a check fails.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import * as prettier from "prettier";
import { Pool } from "undici";
import { prompt, prose, question, seededRandom, uniqueToken, pick } from "./lib/soak-corpus.js";
import { renderReport, type Check } from "./lib/soak-report.js";
import { freePort } from "./lib/free-port.js";
import {
  readRss,
  repoRoot,
  startApp,
  stopApp,
  testModelPath,
  waitHealthy,
  type AppProcess,
} from "./lib/soak-processes.js";
import { Recorder, summariseRss, type RssSample } from "./lib/soak-stats.js";
import { InspectorGc } from "./lib/soak-gc.js";

const { values: args } = parseArgs({
  options: {
    seconds: { type: "string", default: "60" },
    connections: { type: "string", default: "50" },
    "predict-clients": { type: "string", default: "20" },
    out: { type: "string", default: path.join("docs", "RELIABILITY.md") },
    "keep-data": { type: "boolean", default: false },
  },
});
const SECONDS = positive("seconds");
const CONNECTIONS = positive("connections");
const PREDICT_CLIENTS = positive("predict-clients");
const MAX_RSS_GROWTH_PCT = 10;

function positive(name: keyof typeof args): number {
  const value = Number(args[name]);
  if (!Number.isInteger(value) || value <= 0) {
    process.stderr.write(`--${name} must be a positive integer\n`);
    process.exit(2);
  }
  return value;
}

const QUERY_INDICES = ["docs-0", "docs-1", "docs-2", "docs-3"];
const APPEND_INDICES = ["append-0", "append-1", "append-2", "append-3"];
const SCRATCH_INDICES = ["scratch-0", "scratch-1", "scratch-2", "scratch-3", "scratch-4"];
const INITIAL_APPEND_DOCS = 5;

interface Acknowledged {
  index: string;
  id: string;
  token: string;
}

const log = (line: string) => process.stdout.write(`soak: ${line}\n`);

function rssDetail(summary: ReturnType<typeof summariseRss>): string {
  const series = summary.postGc.map(([t, v]) => `${t}s ${v}`).join(", ");
  return (
    `after a full GC: ${series} MiB (${summary.postGcLastHalfGrowthPct} % over the last half); ` +
    `raw, without one: ${summary.midMiB} → ${summary.endMiB} MiB (${summary.lastHalfGrowthPct} %)`
  );
}

async function call(pool: Pool, method: "GET" | "POST" | "DELETE", route: string, body?: unknown) {
  const res = await pool.request({
    method,
    path: route,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, text };
}

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "lectern-soak-"));
  const dataDir = path.join(work, "data");
  log(`data and logs in ${work}`);
  const model = testModelPath();
  const apps: AppProcess[] = [];
  const notes: string[] = [];
  try {
    const inspectorPorts = { rag: await freePort(), textgen: await freePort() };
    const rag = await startApp("rag", { DATA_DIR: dataDir, LOG_LEVEL: "warn" }, path.join(work, "rag.log"), [
      `--inspect=127.0.0.1:${inspectorPorts.rag}`,
    ]);
    apps.push(rag);
    const textgen = await startApp(
      "textgen",
      { MODEL_PATH: model, LLAMA_THREADS: "1", LLAMA_GPU: "false", LOG_LEVEL: "warn" },
      path.join(work, "textgen.log"),
      [`--inspect=127.0.0.1:${inspectorPorts.textgen}`],
    );
    apps.push(textgen);
    await Promise.all([waitHealthy(rag), waitHealthy(textgen)]);
    const collectors = {
      rag: new InspectorGc(inspectorPorts.rag),
      textgen: new InspectorGc(inspectorPorts.textgen),
    };
    await Promise.all([collectors.rag.connect(), collectors.textgen.connect()]);
    log(`rag ${rag.url} (pid ${rag.pid}), textgen ${textgen.url} (pid ${textgen.pid})`);

    const ragPool = new Pool(rag.url, { connections: CONNECTIONS });
    const textgenPool = new Pool(textgen.url, { connections: PREDICT_CLIENTS });
    const setupRandom = seededRandom(1);

    // Indices the load reads and appends to.
    for (const name of QUERY_INDICES) {
      const documents = Array.from({ length: 150 }, (_, i) => ({
        id: `${name}-${i}`,
        text: prose(setupRandom, 600),
      }));
      const res = await call(ragPool, "POST", "/rag/build", { index_name: name, documents, mode: "replace" });
      if (res.status !== 201) throw new Error(`setup build of ${name}: ${res.status} ${res.text}`);
    }
    for (const name of APPEND_INDICES) {
      const documents = Array.from({ length: INITIAL_APPEND_DOCS }, (_, i) => ({
        id: `${name}-seed-${i}`,
        text: prose(setupRandom, 200),
      }));
      const res = await call(ragPool, "POST", "/rag/build", { index_name: name, documents, mode: "replace" });
      if (res.status !== 201) throw new Error(`setup build of ${name}: ${res.status} ${res.text}`);
    }

    const recorder = new Recorder();
    const acknowledged: Acknowledged[] = [];
    const builtSizes = new Map<string, Set<number>>();
    let builds = 0;
    let tokenCounter = 0;
    const timed = async (route: string, run: () => Promise<{ status: number; text: string }>) => {
      const started = performance.now();
      try {
        const res = await run();
        recorder.record(route, res.status, performance.now() - started);
        if (res.status >= 500 && recorder.errorSamples.length < 20) {
          recorder.errorSamples.push(`${route}: ${res.status} ${res.text.slice(0, 200)}`);
        }
        return res;
      } catch (error) {
        recorder.error(route, error);
        return null;
      }
    };

    // Memory samples of both children, every second from the start of the load.
    const rss: Record<"rag" | "textgen", RssSample[]> = { rag: [], textgen: [] };
    const loadStart = performance.now();
    const sample = () => {
      const t = (performance.now() - loadStart) / 1000;
      for (const app of apps) {
        const bytes = readRss(app.pid);
        if (bytes !== null) rss[app.name].push({ t, bytes });
      }
    };
    sample();
    const sampler = setInterval(sample, 1000);
    // RSS right after a full collection, at sixths of the run (the third is the middle, the sixth the end).
    const postGc: Record<"rag" | "textgen", RssSample[]> = { rag: [], textgen: [] };
    const collectAndSample = async () => {
      const t = (performance.now() - loadStart) / 1000;
      await Promise.all(
        apps.map(async (app) => {
          await collectors[app.name].collect();
          const bytes = readRss(app.pid);
          if (bytes !== null) postGc[app.name].push({ t, bytes });
        }),
      );
    };
    const postGcDone: Array<Promise<void>> = [];
    const postGcTimers = [1, 2, 3, 4, 5, 6].map((k) =>
      setTimeout(() => postGcDone.push(collectAndSample()), (k * SECONDS * 1000) / 6),
    );
    const deadline = loadStart + SECONDS * 1000;
    const progress = setInterval(() => {
      const done = recorder.count(() => true);
      log(
        `${Math.round((performance.now() - loadStart) / 1000)} s: ${done} requests, ${acknowledged.length} documents appended`,
      );
    }, 10_000);

    const ragWorker = async (worker: number) => {
      const random = seededRandom(1000 + worker);
      let seq = 0;
      while (performance.now() < deadline) {
        const roll = random();
        if (roll < 0.7) {
          const index = random() < 0.8 ? pick(random, QUERY_INDICES) : pick(random, APPEND_INDICES);
          await timed("POST /rag/query", () =>
            call(ragPool, "POST", "/rag/query", { index_name: index, query: question(random), top_k: 5 }),
          );
        } else if (roll < 0.85) {
          const index = APPEND_INDICES[worker % APPEND_INDICES.length]!;
          const documents = Array.from({ length: 1 + Math.floor(random() * 3) }, () => {
            const token = uniqueToken(tokenCounter++);
            return { id: `w${worker}-${seq++}`, text: `${prose(random, 150)} ${token}`, token };
          });
          const res = await timed("POST /rag/indices/{name}/documents", () =>
            call(ragPool, "POST", `/rag/indices/${index}/documents`, {
              documents: documents.map(({ id, text }) => ({ id, text })),
            }),
          );
          if (res?.status === 200)
            for (const { id, token } of documents) acknowledged.push({ index, id, token });
        } else {
          const index = pick(random, SCRATCH_INDICES);
          const size = 10 + Math.floor(random() * 21);
          const documents = Array.from({ length: size }, (_, i) => ({
            id: `s${i}`,
            text: prose(random, 300),
          }));
          const res = await timed("POST /rag/build (replace)", () =>
            call(ragPool, "POST", "/rag/build", { index_name: index, mode: "replace", documents }),
          );
          if (res?.status === 201) {
            builds++;
            const sizes = builtSizes.get(index) ?? new Set<number>();
            sizes.add(size);
            builtSizes.set(index, sizes);
          }
        }
      }
    };
    const predictWorker = async (worker: number) => {
      const random = seededRandom(5000 + worker);
      while (performance.now() < deadline) {
        await timed("POST /predict", () =>
          call(textgenPool, "POST", "/predict", { text: prompt(random), max_length: 16, temperature: 0.8 }),
        );
      }
    };
    log(`load: ${CONNECTIONS} RAG connections, ${PREDICT_CLIENTS} /predict clients, ${SECONDS} s`);
    await Promise.all([
      ...Array.from({ length: CONNECTIONS }, (_, i) => ragWorker(i)),
      ...Array.from({ length: PREDICT_CLIENTS }, (_, i) => predictWorker(i)),
    ]);
    const loadSeconds = (performance.now() - loadStart) / 1000;
    clearInterval(sampler);
    clearInterval(progress);
    for (const timer of postGcTimers) clearTimeout(timer);
    await Promise.all(postGcDone);
    sample();
    collectors.rag.close();
    collectors.textgen.close();
    log(`load done after ${loadSeconds.toFixed(1)} s; verifying`);

    // Verification: every acknowledged document is there, found by its unique word; the counts match.
    const verify = new Recorder();
    let found = 0;
    const missing: string[] = [];
    const countMismatches: string[] = [];
    for (const index of APPEND_INDICES) {
      const mine = acknowledged.filter((a) => a.index === index);
      for (let i = 0; i < mine.length; i += 40) {
        const batch = mine.slice(i, i + 40);
        const res = await call(ragPool, "POST", "/rag/query", {
          index_name: index,
          query: batch.map((a) => a.token).join(" "),
          top_k: 100,
          answer: "none",
        });
        verify.record("verify query", res.status, 0);
        const ids = new Set(
          res.status === 200
            ? (JSON.parse(res.text) as { results: Array<{ document_id: string }> }).results.map(
                (r) => r.document_id,
              )
            : [],
        );
        for (const a of batch) {
          if (ids.has(a.id)) found++;
          else missing.push(`${index}/${a.id}`);
        }
      }
      const stats = await call(ragPool, "GET", `/rag/stats/${index}`);
      verify.record("verify stats", stats.status, 0);
      const count =
        stats.status === 200 ? (JSON.parse(stats.text) as { documents_count: number }).documents_count : -1;
      const expected = INITIAL_APPEND_DOCS + new Set(mine.map((a) => a.id)).size;
      if (count !== expected) countMismatches.push(`${index}: ${count} documents, expected ${expected}`);
    }
    const scratchProblems: string[] = [];
    for (const [index, sizes] of builtSizes) {
      const stats = await call(ragPool, "GET", `/rag/stats/${index}`);
      const count =
        stats.status === 200 ? (JSON.parse(stats.text) as { documents_count: number }).documents_count : -1;
      if (!sizes.has(count))
        scratchProblems.push(`${index}: ${count} documents, not the size of any acknowledged build`);
    }
    const ragHealth = await call(ragPool, "GET", "/health");
    const textgenHealth = await call(textgenPool, "GET", "/health");
    await ragPool.close();
    await textgenPool.close();

    const ragExit = await stopApp(rag);
    const textgenExit = await stopApp(textgen);

    // Figures and checks.
    const fiveXx = recorder.count((s) => s.startsWith("5")) + verify.count((s) => s.startsWith("5"));
    const noResponse = recorder.count((s) => s === "error");
    const rssRag = summariseRss(rss.rag, postGc.rag, SECONDS);
    const rssTextgen = summariseRss(rss.textgen, postGc.textgen, SECONDS);
    const errorLines = (file: string) =>
      fs
        .readFileSync(path.join(work, file), "utf8")
        .split("\n")
        .filter((line) => /"level":(50|60)/.test(line)).length;
    const checks: Check[] = [
      {
        name: "zero 5xx",
        pass: fiveXx === 0,
        detail: `${fiveXx} responses ≥ 500${recorder.errorSamples.length ? `; e.g. ${recorder.errorSamples.slice(0, 3).join(" / ")}` : ""}`,
      },
      {
        name: "every request answered",
        pass: noResponse === 0,
        detail: `${noResponse} requests without a response`,
      },
      {
        name: "zero lost writes",
        pass: missing.length === 0 && countMismatches.length === 0 && scratchProblems.length === 0,
        detail:
          `${acknowledged.length} acknowledged documents, ${found} found by their unique word, ${missing.length} missing` +
          `${missing.length ? ` (${missing.slice(0, 5).join(", ")})` : ""}; document counts ` +
          `${countMismatches.length ? `differ: ${countMismatches.join("; ")}` : "match"}; scratch indices ` +
          `${scratchProblems.length ? scratchProblems.join("; ") : "each hold one acknowledged build"}`,
      },
      {
        name: `RAG app RSS growth < ${MAX_RSS_GROWTH_PCT} % over the last half (after a full GC)`,
        pass: postGc.rag.length >= 2 && rssRag.postGcLastHalfGrowthPct < MAX_RSS_GROWTH_PCT,
        detail: rssDetail(rssRag),
      },
      {
        name: `text generation app RSS growth < ${MAX_RSS_GROWTH_PCT} % over the last half (after a full GC)`,
        pass: postGc.textgen.length >= 2 && rssTextgen.postGcLastHalfGrowthPct < MAX_RSS_GROWTH_PCT,
        detail: rssDetail(rssTextgen),
      },
      {
        name: "both apps healthy after the load",
        pass: ragHealth.status === 200 && textgenHealth.status === 200,
        detail: `rag /health ${ragHealth.status}, textgen /health ${textgenHealth.status}`,
      },
      {
        name: "both apps exit 0 on SIGTERM",
        pass: ragExit.code === 0 && textgenExit.code === 0,
        detail: `rag ${ragExit.code ?? ragExit.signal}, textgen ${textgenExit.code ?? textgenExit.signal}`,
      },
    ];
    const ragErrors = errorLines("rag.log");
    const textgenErrors = errorLines("textgen.log");
    notes.push(`error-level log lines: rag ${ragErrors}, textgen ${textgenErrors}`);
    notes.push(
      `load ran ${loadSeconds.toFixed(1)} s (requests in flight at the deadline were let finish); the RAG store is SQLite on ${os.tmpdir()}`,
    );

    const cpus = os.cpus();
    const report = {
      command: `node --import tsx scripts/soak.ts --seconds ${SECONDS}${CONNECTIONS !== 50 ? ` --connections ${CONNECTIONS}` : ""}${PREDICT_CLIENTS !== 20 ? ` --predict-clients ${PREDICT_CLIENTS}` : ""}`,
      date: new Date().toISOString(),
      machine: `${cpus.length} × ${cpus[0]?.model.trim() ?? "cpu"}, ${Math.round(os.totalmem() / 2 ** 30)} GiB RAM, ${os.type()} ${os.release()} ${os.arch()}, Node ${process.version}, load average at the end ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`,
      seconds: SECONDS,
      connections: CONNECTIONS,
      predictClients: PREDICT_CLIENTS,
      routes: [...recorder.figures()],
      rss: { rag: rssRag, textgen: rssTextgen },
      checks,
      writes: { acknowledgedDocuments: acknowledged.length, found, lost: missing.length, builds },
      notes,
    };

    for (const r of report.routes) {
      log(
        `${r.route}: ${r.requests} requests ${JSON.stringify(r.statuses)} p50 ${r.p50} ms p99 ${r.p99} ms max ${r.max} ms`,
      );
    }
    log(
      `RSS rag ${rssRag.startMiB} → ${rssRag.midMiB} → ${rssRag.endMiB} MiB; textgen ${rssTextgen.startMiB} → ${rssTextgen.midMiB} → ${rssTextgen.endMiB} MiB`,
    );
    for (const check of checks) log(`${check.pass ? "PASS" : "FAIL"} ${check.name}: ${check.detail}`);
    for (const note of notes) log(`note: ${note}`);

    const out = path.resolve(repoRoot, args.out!);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    // Formatted as `npm run lint` (prettier --check .) expects it.
    const options = (await prettier.resolveConfig(out)) ?? {};
    fs.writeFileSync(
      out,
      await prettier.format(keepHandWritten(out, renderReport(report)), { ...options, parser: "markdown" }),
    );
    log(`wrote ${out.startsWith(repoRoot) ? path.relative(repoRoot, out) : out}`);
    process.exitCode = checks.every((c) => c.pass) ? 0 : 1;
  } finally {
    for (const app of apps)
      if (app.child.exitCode === null && app.child.signalCode === null) app.child.kill("SIGKILL");
    if (!args["keep-data"]) fs.rmSync(work, { recursive: true, force: true });
  }
}

await main();

/**
 * The soak run owns only "What is tested" and "Last soak run": the sections written by hand between
 * them (one per attack family, each naming its tests) are carried over from the file as it is.
 */
function keepHandWritten(file: string, rendered: string): string {
  if (!fs.existsSync(file)) return rendered;
  const current = fs.readFileSync(file, "utf8");
  const sections = (text: string) => text.split(/^(?=## )/m);
  const handWritten = sections(current).filter(
    (section) => section.startsWith("## ") && !/^## (What is tested|Last soak run)\b/.test(section),
  );
  const parts = sections(rendered);
  const last = parts.findIndex((section) => section.startsWith("## Last soak run"));
  if (last < 0) return rendered + "\n" + handWritten.join("");
  return [...parts.slice(0, last), ...handWritten, ...parts.slice(last)].join("");
}
