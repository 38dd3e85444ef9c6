/**
 * Relevance and speed of the search engine on a BEIR-style collection.
 *
 *   npm run eval:ir -- <BEIR folder> [--json] [--scorer tfidf|bm25] [--k1 <n>] [--b <n>]
 *                                    [--no-stemming] [--no-stop-words] [--expand]
 *                                    [--retrieval lexical|dense|hybrid] [--embedding-url <url>]
 *                                    [--embedding-model <name>] [--embedding-batch-size <n>]
 *                                    [--embed-max-chars <n>]
 *                                    [--storage f32|f16|i8] [--rerank-url <url>]
 *                                    [--rerank-model <name>] [--rerank-top-n <n>]
 *
 * The folder holds corpus.jsonl ({_id, title, text}; a document is title + " " + text), queries.jsonl
 * ({_id, text}) and qrels.tsv (query-id, corpus-id, score; header line). For each scorer the script
 * builds an index (timed, analysis included), runs every judged query with topK 100 (mean latency after a
 * warm-up pass), and reports nDCG@10 (trec_eval) and Recall@100, plus the serialised size. `--expand`
 * adds a run per scorer with RM3 pseudo-relevance feedback (Anserini's defaults: 10 feedback documents,
 * 10 terms, original query weight 0.5), beside the plain one.
 *
 * `--retrieval dense|hybrid` embeds the corpus and the queries through `--embedding-url` (any
 * OpenAI-compatible base URL with /v1: ours, llama.cpp's server, Ollama, vLLM, TEI) and runs them as
 * /rag/query does (scripts/lib/ir-retrieval.ts); `--rerank-url` (a llama.cpp / Jina / Cohere `/rerank`
 * base URL) rescores each query's top n (default 100). Embedding a corpus takes as long as the server
 * needs: try a small collection first.
 */

import { existsSync, statSync } from "node:fs";

import type { ScorerName, SearchIndexOptions } from "../src/rag/search/index.js";
import { RM3_DEFAULTS } from "../src/rag/search/rm3.js";
import { loadBeir, runEngine, type EngineRun } from "../scripts/lib/ir-eval.js";
import {
  DEFAULT_EMBED_MAX_CHARS,
  runRetrieval,
  type Retrieval,
  type RetrievalRun,
} from "../scripts/lib/ir-retrieval.js";
import { HttpEmbedder } from "../src/rag/retrieval/embedder.js";
import { HttpReranker } from "../src/rag/retrieval/reranker.js";
import { VECTOR_STORAGES, type VectorStorage } from "../src/rag/search/vectors/quantize.js";

const USAGE =
  "usage: tsx bench/eval-ir.ts <BEIR folder> [--json] [--scorer tfidf|bm25] [--k1 <n>] [--b <n>] " +
  "[--no-stemming] [--no-stop-words] [--expand] [--retrieval lexical|dense|hybrid] " +
  "[--embedding-url <url>] [--embedding-model <name>] [--embedding-batch-size <n>] [--embed-max-chars <n>] " +
  "[--storage f32|f16|i8] " +
  "[--rerank-url <url>] [--rerank-model <name>] [--rerank-top-n <n>]";

interface Arguments {
  dir: string;
  json: boolean;
  scorers: ScorerName[];
  k1: number | undefined;
  b: number | undefined;
  stemming: boolean;
  stopWords: boolean;
  expand: boolean;
  retrieval: Retrieval | null;
  embeddingUrl: string | null;
  embeddingModel: string | null;
  embeddingBatchSize: number;
  storage: VectorStorage;
  rerankUrl: string | null;
  rerankModel: string | null;
  rerankTopN: number;
  embedMaxChars: number;
}

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

function parseArguments(argv: string[]): Arguments {
  const parsed: Arguments = {
    dir: "",
    json: false,
    scorers: ["tfidf", "bm25"],
    k1: undefined,
    b: undefined,
    stemming: true,
    stopWords: true,
    expand: false,
    retrieval: null,
    embeddingUrl: null,
    embeddingModel: null,
    embeddingBatchSize: 32,
    storage: "f32",
    rerankUrl: null,
    rerankModel: null,
    rerankTopN: 100,
    embedMaxChars: DEFAULT_EMBED_MAX_CHARS,
  };
  const text = (flag: string, value: string | undefined): string => {
    if (value === undefined || value === "" || value.startsWith("--")) fail(`${flag} needs a value`);
    return value;
  };
  const number = (flag: string, value: string | undefined): number => {
    const n = Number(value);
    if (value === undefined || value.trim() === "" || !Number.isFinite(n)) fail(`${flag} needs a number`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (arg === "--json") parsed.json = true;
    else if (arg === "--no-stemming") parsed.stemming = false;
    else if (arg === "--no-stop-words") parsed.stopWords = false;
    else if (arg === "--expand") parsed.expand = true;
    else if (arg === "--k1") parsed.k1 = number(arg, argv[++i]);
    else if (arg === "--b") parsed.b = number(arg, argv[++i]);
    else if (arg === "--embedding-url") parsed.embeddingUrl = text(arg, argv[++i]);
    else if (arg === "--embedding-model") parsed.embeddingModel = text(arg, argv[++i]);
    else if (arg === "--embedding-batch-size") parsed.embeddingBatchSize = number(arg, argv[++i]);
    else if (arg === "--rerank-url") parsed.rerankUrl = text(arg, argv[++i]);
    else if (arg === "--rerank-model") parsed.rerankModel = text(arg, argv[++i]);
    else if (arg === "--rerank-top-n") parsed.rerankTopN = number(arg, argv[++i]);
    else if (arg === "--embed-max-chars") parsed.embedMaxChars = number(arg, argv[++i]);
    else if (arg === "--retrieval") {
      const retrieval = argv[++i];
      if (retrieval !== "lexical" && retrieval !== "dense" && retrieval !== "hybrid")
        fail("--retrieval must be lexical, dense or hybrid");
      parsed.retrieval = retrieval;
    } else if (arg === "--storage") {
      const storage = argv[++i] as VectorStorage;
      if (!VECTOR_STORAGES.includes(storage)) fail("--storage must be f32, f16 or i8");
      parsed.storage = storage;
    } else if (arg === "--scorer") {
      const scorer = argv[++i];
      if (scorer !== "tfidf" && scorer !== "bm25") fail("--scorer must be tfidf or bm25");
      parsed.scorers = [scorer];
    } else if (arg === "-h" || arg === "--help") {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else if (arg.startsWith("-")) fail(`unknown option ${arg}`);
    else if (parsed.dir) fail(`unexpected argument ${arg}`);
    else parsed.dir = arg;
  }
  if (!parsed.dir) fail("missing the BEIR folder");
  if (parsed.retrieval !== null && parsed.retrieval !== "lexical" && parsed.embeddingUrl === null)
    fail(`--retrieval ${parsed.retrieval} needs --embedding-url`);
  if (!Number.isInteger(parsed.embeddingBatchSize) || parsed.embeddingBatchSize < 1)
    fail("--embedding-batch-size must be an integer ≥ 1");
  if (!Number.isInteger(parsed.rerankTopN) || parsed.rerankTopN < 1)
    fail("--rerank-top-n must be an integer ≥ 1");
  if (!existsSync(parsed.dir) || !statSync(parsed.dir).isDirectory()) fail(`not a folder: ${parsed.dir}`);
  for (const file of ["corpus.jsonl", "queries.jsonl"]) {
    if (!existsSync(`${parsed.dir}/${file}`)) fail(`${parsed.dir} has no ${file}`);
  }
  if (!existsSync(`${parsed.dir}/qrels.tsv`) && !existsSync(`${parsed.dir}/qrels/test.tsv`)) {
    fail(`${parsed.dir} has no qrels.tsv`);
  }
  return parsed;
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? [];
  const line = (row: string[]): string =>
    row
      .map((cell, column) =>
        column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0),
      )
      .join("  ");
  const [header = [], ...body] = rows;
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...body.map(line)].join("\n");
}

/** The run of `--retrieval` / `--rerank-url`: one line per scorer (dense alone: one line). */
async function retrievalMain(args: Arguments): Promise<void> {
  const collection = loadBeir(args.dir);
  const retrieval = args.retrieval ?? "lexical";
  const embedder = args.embeddingUrl
    ? new HttpEmbedder({
        baseUrl: args.embeddingUrl,
        model: args.embeddingModel,
        apiKey: process.env.EMBEDDING_API_KEY ?? null,
        batchSize: args.embeddingBatchSize,
        timeoutMs: 600_000,
      })
    : undefined;
  const reranker = args.rerankUrl
    ? new HttpReranker({
        baseUrl: args.rerankUrl,
        model: args.rerankModel,
        apiKey: process.env.RERANK_API_KEY ?? null,
        timeoutMs: 600_000,
      })
    : undefined;
  const results: Array<Omit<RetrievalRun, "rankings"> & { scorer: string }> = [];
  try {
    for (const scorer of retrieval === "dense" ? args.scorers.slice(0, 1) : args.scorers) {
      const run = await runRetrieval(collection, {
        retrieval,
        lexical: { scorer, analyzer: { stemming: args.stemming, stopWords: args.stopWords } },
        embedder,
        storage: args.storage,
        reranker,
        rerankTopN: args.rerankTopN,
        embedMaxChars: args.embedMaxChars,
      });
      const { rankings: _rankings, ...figures } = run;
      results.push({ ...figures, scorer: retrieval === "dense" ? "-" : scorer });
    }
  } finally {
    await embedder?.close();
    await reranker?.close();
  }
  if (args.json) {
    process.stdout.write(`${JSON.stringify({ collection: args.dir, results }, null, 2)}\n`);
    return;
  }
  process.stdout.write(
    `${args.dir}: ${collection.documents.length} documents, ${results[0]?.queryCount ?? 0} judged queries\n\n`,
  );
  const rows = [
    ["retrieval", "scorer", "embedding", "rerank", "nDCG@10", "R@100", "embed corpus ms", "query ms (mean)"],
    ...results.map((r) => [
      r.retrieval,
      r.scorer,
      r.embeddingModel === null ? "-" : `${r.embeddingModel || "(default)"} ${r.dimension}-d ${args.storage}`,
      r.rerankModel === null ? "-" : `${r.rerankModel || "(default)"} top ${args.rerankTopN}`,
      r.ndcg10.toFixed(4),
      r.recall100.toFixed(4),
      r.embedCorpusMs.toFixed(0),
      r.meanQueryMs.toFixed(3),
    ]),
  ];
  process.stdout.write(`${table(rows)}\n`);
}

async function main(): Promise<void> {
  const args = parseArguments(process.argv.slice(2));
  if (args.retrieval !== null || args.rerankUrl !== null) return retrievalMain(args);
  const loadStart = performance.now();
  const collection = loadBeir(args.dir);
  const loadMs = performance.now() - loadStart;
  const results: EngineRun[] = [];
  for (const scorer of args.scorers) {
    const options: SearchIndexOptions = {
      scorer,
      analyzer: { stemming: args.stemming, stopWords: args.stopWords },
      ...(scorer === "bm25"
        ? {
            bm25: {
              ...(args.k1 !== undefined && { k1: args.k1 }),
              ...(args.b !== undefined && { b: args.b }),
            },
          }
        : {}),
    };
    results.push(runEngine(collection, options));
    if (args.expand) results.push(runEngine(collection, options, 100, RM3_DEFAULTS));
  }

  if (args.json) {
    process.stdout.write(`${JSON.stringify({ collection: args.dir, results }, null, 2)}\n`);
    return;
  }
  const evaluated = results[0]?.queryCount ?? 0;
  process.stdout.write(
    `${args.dir}: ${collection.documents.length} documents, ${evaluated} judged queries ` +
      `(loaded in ${loadMs.toFixed(0)} ms)\n\n`,
  );
  const rows = [
    [
      "scorer",
      "nDCG@10",
      "R@100",
      "build ms",
      "query ms (mean)",
      "p95 ms",
      "terms",
      "serialised",
      "load ms",
      "round trip",
    ],
    ...results.map((r) => [
      (r.scorer === "bm25" ? `bm25 (k1=${r.options.bm25.k1}, b=${r.options.bm25.b})` : r.scorer) +
        (r.expansion === null ? "" : " + rm3"),
      r.ndcg10.toFixed(4),
      r.recall100.toFixed(4),
      r.buildMs.toFixed(0),
      r.meanQueryMs.toFixed(3),
      r.p95QueryMs.toFixed(3),
      String(r.vocabularySize),
      `${(r.serializedBytes / 1024 / 1024).toFixed(2)} MB`,
      r.deserializeMs.toFixed(1),
      r.roundTripIdentical ? "identical" : "DIFFERS",
    ]),
  ];
  process.stdout.write(`${table(rows)}\n`);
  if (results.some((r) => !r.roundTripIdentical)) process.exitCode = 1;
}

await main();
