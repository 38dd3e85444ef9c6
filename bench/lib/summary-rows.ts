/**
 * The rows of each benchmark's result (bench/lib/result.ts): the figures the report shows, taken from the
 * measurements a benchmark script keeps in its result's `details`. One function per kind of benchmark;
 * `rowsOf` picks it by the result's name.
 */
import { fmt } from "./report.js";
import type { Details as Json, ResultRow } from "./result.js";

/** obj.a.b.c, or undefined. */
export function get(obj: unknown, ...keys: Array<string | number>): unknown {
  let value = obj;
  for (const key of keys) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<string | number, unknown>)[key];
  }
  return value;
}
export const num = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined;

/** The generation bench's reference subject and the key of ratios to it (older files: "direct"). */
export function generationReference(result: Json): { name: string; key: string } {
  return typeof result.reference === "string"
    ? { name: result.reference, key: "ratio_to_reference" }
    : { name: "direct", key: "ratio_to_direct" };
}

function generationRows(result: Json): ResultRow[] {
  const rows: ResultRow[] = [];
  const ref = generationReference(result);
  const refLabel =
    ref.name === "direct-8seq" ? "node-llama-cpp direct, same context" : "node-llama-cpp direct";
  for (const t of ["0", "0.8"]) {
    const entry = get(result, "decode", `temperature_${t}`);
    for (const subject of ["http", "http-stream"]) {
      const ours = num(get(entry, "tokens_per_second", subject, "median"));
      const reference = num(get(entry, "tokens_per_second", ref.name, "median"));
      const ratio = num(get(entry, ref.key, subject, "median"));
      if (ours === undefined || ratio === undefined) continue;
      const cpu = num(get(entry, "cpu_efficiency_vs_reference", subject, "median"));
      rows.push({
        metric: `/predict${subject === "http-stream" ? " streaming" : ""} tokens/s, 128 tokens, temperature ${t} (vs ${refLabel})`,
        value: fmt(ours),
        reference: fmt(reference),
        ratio:
          `${fmt(ratio)} (p25–p75 ${fmt(num(get(entry, ref.key, subject, "p25")))}–${fmt(num(get(entry, ref.key, subject, "p75")))})` +
          (cpu === undefined ? "" : `; CPU/token ${fmt(cpu)}`),
        target: "≥ 0.95",
        held: ratio >= 0.95,
      });
    }
  }
  const prompt = get(result, "prompt_processing");
  const promptRatio = num(get(prompt, ref.key, "http", "median"));
  if (promptRatio !== undefined) {
    rows.push({
      metric: `prompt processing tokens/s, ${String(get(prompt, "prompt_tokens"))}-token prompt (vs ${refLabel})`,
      value: fmt(num(get(prompt, "prompt_tokens_per_second", "http", "median"))),
      reference: fmt(num(get(prompt, "prompt_tokens_per_second", ref.name, "median"))),
      ratio: fmt(promptRatio),
      target: "",
    });
  }
  const conc = get(result, "concurrency");
  const gain = num(get(conc, "ratio_8_to_1", "http", "median"));
  if (gain !== undefined) {
    rows.push({
      metric:
        "aggregate tokens/s, 8 concurrent ÷ 1 (/predict, 64 tokens each; reference: direct, 8 sequences)",
      value: `${fmt(num(get(conc, "tokens_per_second", "http", "8", "median")))} vs ${fmt(num(get(conc, "tokens_per_second", "http", "1", "median")))}`,
      reference: `${fmt(num(get(conc, "ratio_8_to_1", "direct-8seq", "median")))}× direct`,
      ratio: `${fmt(gain)}×`,
      target: "≥ 2×",
      held: gain >= 2,
    });
  }
  for (const level of ["1", "8"]) {
    const ours = num(get(result, "time_to_first_token", "first_token_ms", "http-stream", level, "median"));
    const ref = num(get(result, "time_to_first_token", "first_token_ms", "direct-8seq", level, "median"));
    if (ours === undefined) continue;
    rows.push({
      metric: `time to first token (ms), ${level} concurrent stream(s) (vs node-llama-cpp direct, same context)`,
      value: fmt(ours),
      reference: fmt(ref),
      ratio: ref ? `+${fmt(ours - ref)} ms` : "",
      target: "",
    });
  }
  // Part (e), issue #15: a prompt sharing a 1,100-token prefix with the one before.
  const cache = get(result, "prompt_cache");
  const cacheRatio = num(get(cache, "ratio_second_to_first", "median"));
  if (cacheRatio !== undefined) {
    rows.push({
      metric: `prompt cache: first token (ms) of a ${String(get(cache, "prompt_tokens"))}-token prompt whose prefix is cached (vs the same prefix cold)`,
      value: fmt(num(get(cache, "second_question_first_token_ms", "median"))),
      reference: fmt(num(get(cache, "first_question_first_token_ms", "median"))),
      ratio: fmt(cacheRatio),
      target: "≤ 0.2",
      held: cacheRatio <= 0.2,
    });
  }
  return rows;
}

/** bench/llama-server.ts: our app against llama.cpp's own server on a model of real size. */
function llamaServerRows(result: Json): ResultRow[] {
  const rows: ResultRow[] = [];
  const conc = get(result, "concurrency");
  const model = `${String(result.model ?? "model")
    .replace(/^synthetic-llama-/, "")
    .replace(/\.gguf$/, "")}`;
  const targetOf = (key: string) => get(result, "targets", key) as Json | undefined;
  for (const level of ["1", "4", "8", "16"]) {
    const ratio = num(get(conc, "ratio_to_reference", level, "lectern", "median"));
    if (ratio === undefined) continue;
    const target = level === "1" ? targetOf("one_stream") : targetOf(`concurrent_${level}`);
    rows.push({
      metric: `aggregate tokens/s, ${level} concurrent (${model}, 64 tokens each)`,
      value: fmt(num(get(conc, "tokens_per_second", level, "lectern", "median"))),
      reference: fmt(num(get(conc, "tokens_per_second", level, "llama-server", "median"))),
      ratio: `${fmt(ratio)} (p25–p75 ${fmt(num(get(conc, "ratio_to_reference", level, "lectern", "p25")))}–${fmt(num(get(conc, "ratio_to_reference", level, "lectern", "p75")))})`,
      target: target ? "≥ 1" : "",
      held: target ? (target.held as boolean | undefined) : undefined,
    });
  }
  const ours99 = num(get(conc, "latency_ms", "lectern", "p99"));
  const ref99 = num(get(conc, "latency_ms", "llama-server", "p99"));
  if (ours99 !== undefined && ref99 !== undefined) {
    rows.push({
      metric: `request latency at 8 concurrent, p50 / p99 ms (${model})`,
      value: `${fmt(num(get(conc, "latency_ms", "lectern", "p50")))} / ${fmt(ours99)}`,
      reference: `${fmt(num(get(conc, "latency_ms", "llama-server", "p50")))} / ${fmt(ref99)}`,
      ratio: `p99 ${fmt(ours99 / ref99)}`,
      target: "p99 ≤ 1.1",
      held: targetOf("p99_latency_8")?.held as boolean | undefined,
    });
  }
  const prompt = get(result, "prompt_processing");
  const promptRatio = num(get(prompt, "ratio_to_reference", "lectern", "median"));
  if (promptRatio !== undefined) {
    rows.push({
      metric: `prompt processing tokens/s, ${fmt(num(get(prompt, "prompt_tokens", "lectern")))}-token prompt (${model})`,
      value: fmt(num(get(prompt, "prompt_tokens_per_second", "lectern", "median"))),
      reference: fmt(num(get(prompt, "prompt_tokens_per_second", "llama-server", "median"))),
      ratio: fmt(promptRatio),
      target: "",
    });
  }
  for (const level of ["1", "8"]) {
    const ours = num(get(result, "first_token_ms", level, "lectern", "median"));
    const ref = num(get(result, "first_token_ms", level, "llama-server", "median"));
    if (ours === undefined || ref === undefined) continue;
    rows.push({
      metric: `time to first token (ms), ${level} concurrent stream(s) (${model})`,
      value: fmt(ours),
      reference: fmt(ref),
      ratio: fmt(ours / ref),
      target: "",
    });
  }
  return rows;
}

function httpFloorRows(result: Json): ResultRow[] {
  return ["textgen", "rag"].flatMap((app) => {
    const ours = num(get(result, "results", app, "requests_per_second", "median"));
    // Older results have only the median of per-round ratios.
    const ratio =
      num(get(result, "results", app, "ratio_of_totals")) ??
      num(get(result, "results", app, "ratio_to_bare", "median"));
    if (ours === undefined || ratio === undefined) return [];
    return [
      {
        metric: `GET /health requests/s, ${app} app (vs bare Fastify, same JSON)`,
        value: fmt(ours),
        reference: fmt(num(get(result, "results", `bare[${app}]`, "requests_per_second", "median"))),
        ratio: fmt(ratio),
        target: "≥ 0.8",
        held: ratio >= 0.8,
      },
    ];
  });
}

function concurrencyRows(result: Json): ResultRow[] {
  const ratio = num(result.ratio);
  if (ratio === undefined) return [];
  return [
    {
      metric: `8 × /predict of ${String(result.tokens_per_request)} tokens: all at once ÷ one after another`,
      value: fmt(num(result.concurrent_tokens_per_second)),
      reference: fmt(num(result.serial_tokens_per_second)),
      ratio: `${fmt(ratio)}×`,
      target: "",
    },
  ];
}

function retrievalRows(result: Json): ResultRow[] {
  const rows: ResultRow[] = [];
  for (const collection of (result.collections as Json[] | undefined) ?? []) {
    const targets =
      (collection.targets as Record<string, { ours: number; reference: number; holds: boolean }>) ?? {};
    for (const [name, t] of Object.entries(targets)) {
      rows.push({
        metric: `${String(collection.name)} (${fmt(num(collection.documents))} docs): ${name} (ms)`,
        value: fmt(t.ours),
        reference: fmt(t.reference),
        ratio: fmt(t.ours / t.reference),
        target: "ours ≤ reference",
        held: t.holds,
      });
    }
    const http = collection.http as Json | undefined;
    const qps = num(get(http, "concurrent", "requestsPerSecond"));
    if (qps !== undefined) {
      rows.push({
        metric: `${String(collection.name)}: POST /rag/query queries/s, ${String(get(http, "concurrent", "connections"))} connections`,
        value: fmt(qps),
        reference: "",
        ratio: "",
        target: "",
      });
    }
  }
  return rows;
}

function scaleRows(result: Json): ResultRow[] {
  const scorers = (result.scorers as Json[] | undefined) ?? [];
  const p99 = Math.max(...scorers.map((s) => num(get(s, "pruned", "p99")) ?? Number.NaN));
  const rss = num(result.peakRssMB);
  const chunks = fmt(num(result.chunks));
  const rows: ResultRow[] = [];
  if (Number.isFinite(p99)) {
    rows.push({
      metric: `${chunks} chunks: p99 query latency, pruned, worst scorer (ms)`,
      value: fmt(p99),
      reference: "",
      ratio: "",
      target: "< 20 ms",
      held: p99 < 20,
    });
  }
  if (rss !== undefined) {
    rows.push({
      metric: `${chunks} chunks: peak resident memory (MB)`,
      value: fmt(rss),
      reference: "",
      ratio: "",
      target: "< 2,048 MB",
      held: rss < 2048,
    });
  }
  return rows;
}

/** The segmented index's targets (#14), as bench/segments.ts computed them: one row each. */
function segmentsRows(result: Json): ResultRow[] {
  return ((result.targets as Json[] | undefined) ?? []).map((t) => {
    const value = num(t.value);
    const reference = num(t.reference);
    return {
      metric: String(t.figure),
      value: fmt(num(t.ours)),
      reference: fmt(reference),
      ratio: reference === undefined ? "" : `${fmt(value)}×`,
      target: String(t.target),
      held: typeof t.holds === "boolean" ? t.holds : undefined,
      parts: String(t.parts ?? ""),
    };
  });
}
/** bench/eval-ir.ts: relevance of each scorer on the collection (no reference: trec_eval's own figures). */
function evalIrRows(result: Json): ResultRow[] {
  return ((get(result, "results") as Json[] | undefined) ?? []).map((r) => ({
    metric: `${String(r.scorer)}${r.expansion ? " + RM3" : ""}: nDCG@10 / Recall@100`,
    value: `${fmt(num(r.ndcg10))} / ${fmt(num(r.recall100))}`,
    reference: "",
    ratio: "",
    target: "",
  }));
}

/** bench/pg-latency.ts: warm query latency of the PostgreSQL store against the SQLite store. */
function pgLatencyRows(result: Json): ResultRow[] {
  return (["mean", "p95"] as const).flatMap((stat) => {
    const ratio = num(result[`warm_${stat}_ratio_postgres_to_sqlite`]);
    if (ratio === undefined) return [];
    return [
      {
        metric: `warm query latency, ${stat} (ms), PostgreSQL store (vs SQLite store)`,
        value: fmt(num(get(result, "stores", "postgres", "warm", `${stat}_ms`))),
        reference: fmt(num(get(result, "stores", "sqlite", "warm", `${stat}_ms`))),
        ratio: fmt(ratio),
        target: "",
      },
    ];
  });
}

/** bench/run-all.ts: how each script of the suite's last run ended. */
function runAllRows(result: Json): ResultRow[] {
  const runs = (result.runs as Json[] | undefined) ?? [];
  return runs.map((run) => ({
    metric: `${String(run.script)} ${((run.args as string[] | undefined) ?? []).join(" ")}`.trim(),
    value: `${String(run.status)}${run.note ? ` (${String(run.note)})` : ""}, ${String(run.seconds)} s`,
    reference: "",
    ratio: "",
    target: "",
  }));
}

/** bench/vectors.ts: per size and storage, recall@10 against exact, and query p50 against hnswlib; i8 RSS. */
function vectorsRows(details: Json): ResultRow[] {
  const rows: ResultRow[] = [];
  for (const run of (details.runs as Json[] | undefined) ?? []) {
    const size = num(run.size);
    const label = `${fmt(size)} × ${String(run.dimension)}-d`;
    const reference = run.reference as Json | null;
    const refP50 = num(get(reference, "query", "p50Ms"));
    for (const ours of (run.ours as Json[] | undefined) ?? []) {
      const recall = num(ours.recallAt10);
      if (recall !== undefined)
        rows.push({
          metric: `HNSW recall@10 against exact search, ${label} ${String(ours.storage)}`,
          value: recall.toFixed(3),
          reference: "",
          ratio: "",
          target: "≥ 0.95",
          held: recall >= 0.95,
        });
      const p50 = num(get(ours, "query", "p50Ms"));
      if (p50 !== undefined && refP50 !== undefined)
        rows.push({
          metric: `ANN query p50 (k = 10), ${label} ${String(ours.storage)}; reference hnswlib-node f32`,
          value: `${fmt(p50)} ms`,
          reference: `${fmt(refP50)} ms`,
          ratio: `${(p50 / refP50).toFixed(2)}×`,
          target: "≤ 1.5×",
          held: p50 / refP50 <= 1.5,
        });
    }
    const rss = num(get(run, "serving", "after", "rssMb"));
    if (rss !== undefined)
      rows.push({
        metric: `RSS of a process serving ${label} i8 vectors (loaded from their bytes, graph included)`,
        value: `${Math.round(rss)} MB`,
        reference: "",
        ratio: "",
        target: size !== undefined && size >= 1_000_000 ? "≤ 1.2 GB" : "",
        ...(size !== undefined && size >= 1_000_000 ? { held: rss <= 1200 } : {}),
      });
  }
  return rows;
}

/** bench/hybrid.ts: per stage, hybrid ÷ lexical query latency, append at N ÷ at 10k, serving RSS. */
function hybridRows(details: Json): ResultRow[] {
  const rows: ResultRow[] = [];
  const stages = (details.stages as Json[] | undefined) ?? [];
  const referenceSize = num(details.referenceSize) ?? 10_000;
  const reference = stages.find((s) => (num(s.chunks) ?? 0) >= referenceSize);
  const size = (n: number | undefined) =>
    n === undefined ? "?" : n >= 1_000_000 ? `${fmt(n / 1_000_000)}M` : `${fmt(n / 1000)}k`;
  for (const stage of stages) {
    const chunks = num(stage.chunks);
    const label = `${size(chunks)} chunks, 384-d ${String(details.storage)}`;
    // The issue's targets are set at 1M chunks; smaller stages are shown without one.
    const big = chunks !== undefined && chunks >= 1_000_000;
    const target = (text: string, held: boolean) => (big ? { target: text, held } : { target: "" });
    for (const q of ["p50", "p99"]) {
      const hybrid = num(get(stage, "query", "hybrid", q));
      const lexical = num(get(stage, "query", "lexical", q));
      if (hybrid === undefined || lexical === undefined) continue;
      rows.push({
        metric: `hybrid query ${q} (RRF, top 10) vs lexical-only, ${label}, interleaved`,
        value: `${fmt(hybrid)} ms`,
        reference: `${fmt(lexical)} ms`,
        ratio: `${(hybrid / lexical).toFixed(2)}×`,
        ...target("≤ 3×", hybrid / lexical <= 3),
      });
    }
    const append = num(get(stage, "append", "p50"));
    const appendRef = num(get(reference, "append", "p50"));
    if (append !== undefined && appendRef !== undefined && stage !== reference)
      rows.push({
        metric: `one-document append with its vector p50 (commit included, embedding excluded), ${size(chunks)} vs ${size(num(reference?.chunks))} chunks`,
        value: `${fmt(append)} ms`,
        reference: `${fmt(appendRef)} ms`,
        ratio: `${(append / appendRef).toFixed(2)}×`,
        ...target("≤ 2×", append / appendRef <= 2),
      });
    const rss = num(get(stage, "serving", "after", "rssMB"));
    if (rss !== undefined)
      rows.push({
        metric: `RSS of a fresh process serving ${label} (store loaded, queries served)`,
        value: `${Math.round(rss)} MB`,
        reference: "",
        ratio: "",
        ...target("≤ 1.2 GB", rss <= 1200),
      });
  }
  return rows;
}

const rowsByKind: ReadonlyArray<[prefix: string, rows: (details: Json) => ResultRow[]]> = [
  ["generation", generationRows],
  ["llama-server", llamaServerRows],
  ["http-floor", httpFloorRows],
  ["concurrency", concurrencyRows],
  ["retrieval", retrievalRows],
  ["scale", scaleRows],
  ["segments", segmentsRows],
  ["eval-ir", evalIrRows],
  ["pg-latency", pgLatencyRows],
  ["run-all", runAllRows],
  ["models", modelsRows],
  ["vectors", vectorsRows],
  ["hybrid", hybridRows],
  ["agent-session", precomputedRows],
  ["speculative", precomputedRows],
  ["kv-types", precomputedRows],
  ["batches", precomputedRows],
];

/** Benchmarks that write their rows themselves, in `details.summary_rows` (agent-session.ts, …). */
function precomputedRows(details: Json): ResultRow[] {
  return Array.isArray(details.summary_rows) ? (details.summary_rows as ResultRow[]) : [];
}

/** bench/models.ts: RSS over load/unload cycles, and cold start to first token against llama-server's router. */
function modelsRows(details: Json): ResultRow[] {
  const rows: ResultRow[] = [];
  const growth = num(get(details, "memory", "growthMb"));
  const cycles = num(get(details, "memory", "cycles"));
  if (growth !== undefined)
    rows.push({
      metric: `RSS growth after ${cycles} load/unload cycles of two models (vs after the first)`,
      value: `${growth.toFixed(1)} MB`,
      reference: "",
      ratio: "",
      target: "≤ 50 MB",
      held: growth <= 50,
    });
  const ours = num(get(details, "coldStart", "oursMedianMs"));
  const reference = num(get(details, "coldStart", "referenceMedianMs"));
  if (ours !== undefined && reference !== undefined)
    rows.push({
      metric: "cold start to first token, 0.5B-shaped Q4_K_M (median); reference llama-server's router",
      value: `${Math.round(ours)} ms`,
      reference: `${Math.round(reference)} ms`,
      ratio: `${(ours / reference).toFixed(2)}×`,
      target: "≤ 1.2×",
      held: ours / reference <= 1.2,
    });
  return rows;
}

/** The rows of result `name` (generation-synthetic is a generation result, and so on). */
export function rowsOf(name: string, details: Json): ResultRow[] {
  const kind = rowsByKind.find(([prefix]) => name === prefix || name.startsWith(`${prefix}-`));
  return kind ? kind[1](details) : [];
}
