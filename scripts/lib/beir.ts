/**
 * The one reader of BEIR-like collections (bench/ and the tests): corpus.jsonl ({_id, title, text}),
 * queries.jsonl ({_id, text}) and, when there are relevance judgements, qrels.tsv (or qrels/test.tsv).
 * The qrels are optional (the Debian corpus has none); only judged queries are kept when there are some
 * (as BEIR evaluates them).
 */

import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

/** query id → (document id → graded relevance). */
export type Qrels = Map<string, Map<string, number>>;

/** Parses `query-id \t corpus-id \t score` lines; a header line (non-numeric score) is skipped. */
export function parseQrels(text: string): Qrels {
  const qrels: Qrels = new Map();
  for (const rawLine of text.split("\n")) {
    const line = rawLine.replace(/\r$/, "");
    if (!line.trim()) continue;
    const fields = line.split("\t");
    if (fields.length < 3) throw new Error(`qrels: expected 3 tab-separated fields: ${JSON.stringify(line)}`);
    const [queryId = "", docId = "", scoreText = ""] = fields;
    const score = Number(scoreText);
    if (!Number.isFinite(score) || scoreText.trim() === "") continue; // header
    let judgments = qrels.get(queryId);
    if (judgments === undefined) qrels.set(queryId, (judgments = new Map()));
    judgments.set(docId, score);
  }
  return qrels;
}

export interface Collection {
  name: string;
  dir: string;
  ids: string[];
  titles: string[];
  bodies: string[];
  queries: { id: string; text: string }[];
  qrels: Qrels | null;
  /** Bytes of corpus.jsonl. */
  corpusBytes: number;
}

function readJsonLines(file: string): Record<string, unknown>[] {
  const rows: Record<string, unknown>[] = [];
  const lines = readFileSync(file, "utf8").split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]?.trim();
    if (!line) continue;
    try {
      rows.push(JSON.parse(line) as Record<string, unknown>);
    } catch (error) {
      throw new Error(`${file}:${i + 1}: invalid JSON (${(error as Error).message})`);
    }
  }
  return rows;
}

const asString = (value: unknown): string =>
  typeof value === "string" ? value : value == null ? "" : String(value);

export function collectionAvailable(dir: string): boolean {
  return existsSync(path.join(dir, "corpus.jsonl")) && existsSync(path.join(dir, "queries.jsonl"));
}

/** Loads a collection; `maxDocuments` / `maxQueries` keep the first ones only. */
export function loadCollection(
  name: string,
  dir: string,
  { maxDocuments = Infinity, maxQueries = Infinity }: { maxDocuments?: number; maxQueries?: number } = {},
): Collection {
  const corpusFile = path.join(dir, "corpus.jsonl");
  const corpus = readJsonLines(corpusFile).slice(0, maxDocuments);
  let qrels: Qrels | null = null;
  for (const file of ["qrels.tsv", path.join("qrels", "test.tsv")]) {
    if (existsSync(path.join(dir, file))) {
      qrels = parseQrels(readFileSync(path.join(dir, file), "utf8"));
      break;
    }
  }
  let queries = readJsonLines(path.join(dir, "queries.jsonl")).map((row) => ({
    id: asString(row._id),
    text: asString(row.text),
  }));
  if (qrels) queries = queries.filter((query) => qrels.has(query.id));
  return {
    name,
    dir,
    ids: corpus.map((row) => asString(row._id)),
    titles: corpus.map((row) => asString(row.title)),
    bodies: corpus.map((row) => asString(row.text)),
    queries: queries.slice(0, maxQueries),
    qrels,
    corpusBytes: readFileSync(corpusFile).byteLength,
  };
}

/** A document as one text, the way BEIR/Anserini index it: title + " " + text. */
export function documentText(collection: Collection, i: number): string {
  return `${collection.titles[i] ?? ""} ${collection.bodies[i] ?? ""}`;
}
