/**
 * Converts unpacked Debian documentation packages into a BEIR-like retrieval corpus:
 *
 *   node --import tsx bench/lib/corpus-debian.ts <packages dir> <output dir>
 *
 * (run by bench/prepare-debian-corpus.sh, which fetches and unpacks the packages). Sources, all optional:
 * - linux-doc-*: the reStructuredText sources of the Sphinx HTML (html/_sources/**.rst.txt);
 * - python3.*-doc: the same for the Python documentation (html/_sources/**.txt);
 * - postgresql-doc-*: DocBook HTML pages, turned into text with a few regexes (tags dropped, entities
 *   decoded, block elements as line breaks);
 * - dict-gcide: the dictd database (gcide.index + gcide.dict.dz): every entry block is a document,
 *   titled by its headwords; short neighbouring blocks are merged so that a document has ≥ 560 characters
 *   (source tags such as "[1913 Webster]" are dropped).
 *
 * Long files are cut at section headings and then into paragraph groups of at most ~2,000 characters, the
 * size of a RAG chunk. Writes `corpus.jsonl` ({_id, title, text}), `queries.jsonl` ({_id, text}: 1,000
 * phrases of 2–6 consecutive words drawn from random documents with a fixed seed; there are no relevance
 * judgements) and `stats.json`.
 */

import { createWriteStream, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import { seededRandom } from "../../scripts/lib/seeded-random.js";

export interface CorpusDocument {
  _id: string;
  title: string;
  text: string;
}

const MAX_SECTION_CHARS = 2000;
const MIN_DICTIONARY_CHARS = 560;
/** Source tags on a line of their own ("[1913 Webster]", "[WordNet 1.5]", "[PJC]"): dropped. */
const SOURCE_TAG_LINE = /^[ \t]*\[[A-Za-z0-9 .]+\][ \t]*$/gm;
export const QUERY_COUNT = 1000;
export const QUERY_SEED = 20240605;

function walk(dir: string, accept: (file: string) => boolean, out: string[] = []): string[] {
  if (!existsSync(dir)) return out;
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
  )) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full, accept, out);
    else if (entry.isFile() && accept(full)) out.push(full);
  }
  return out;
}

/** Collapses runs of blank lines and trailing spaces. */
function tidy(text: string): string {
  return text
    .replace(/[ \t]+\n/g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

/** Splits a section into paragraph groups of at most ~MAX_SECTION_CHARS (a longer paragraph is cut). */
export function paragraphGroups(text: string, limit = MAX_SECTION_CHARS): string[] {
  const groups: string[] = [];
  let current = "";
  for (const paragraph of text.split(/\n\s*\n/)) {
    const p = paragraph.trim();
    if (!p) continue;
    if (current && current.length + p.length + 2 > limit) {
      groups.push(current);
      current = "";
    }
    if (p.length > limit) {
      for (let i = 0; i < p.length; i += limit) {
        const piece = p.slice(i, i + limit);
        if (current) {
          groups.push(current);
          current = "";
        }
        groups.push(piece);
      }
      continue;
    }
    current = current ? `${current}\n\n${p}` : p;
  }
  if (current) groups.push(current);
  return groups;
}

const RST_UNDERLINE = /^([=\-~^"'`#*+:._])\1{2,}\s*$/;
/** Licence tags at the top of kernel documents: not content. */
const SPDX = /^\.\. SPDX-License-Identifier:/;

/** reStructuredText → sections (heading, body), cut at every underlined heading. */
export function rstSections(source: string): { heading: string; body: string }[] {
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  const sections: { heading: string; body: string[] }[] = [{ heading: "", body: [] }];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const next = lines[i + 1] ?? "";
    const isHeading =
      line.trim() !== "" &&
      !RST_UNDERLINE.test(line) &&
      RST_UNDERLINE.test(next) &&
      next.trim().length >= Math.min(line.trim().length, 3);
    if (isHeading) {
      const current = sections[sections.length - 1];
      // An overline belongs to the heading, not to the previous body.
      if (current && RST_UNDERLINE.test(current.body[current.body.length - 1] ?? "")) current.body.pop();
      sections.push({ heading: line.trim().replace(/[`*]|:\w+:/g, ""), body: [] });
      i++;
      continue;
    }
    if (RST_UNDERLINE.test(line) || SPDX.test(line)) continue;
    sections[sections.length - 1]?.body.push(line);
  }
  return sections
    .map((s) => ({ heading: s.heading, body: tidy(s.body.join("\n")) }))
    .filter((s) => s.body.length > 0);
}

const ENTITIES: Record<string, string> = {
  amp: "&",
  lt: "<",
  gt: ">",
  quot: '"',
  apos: "'",
  nbsp: " ",
  mdash: "—",
  ndash: "–",
  hellip: "…",
  copy: "©",
  rarr: "→",
  larr: "←",
  lsquo: "‘",
  rsquo: "’",
  ldquo: "“",
  rdquo: "”",
};

/** HTML → text with regexes: good enough for generated documentation pages. */
export function htmlToText(html: string): { title: string; text: string } {
  const title = decodeEntities((/<title>([\s\S]*?)<\/title>/i.exec(html)?.[1] ?? "").replace(/<[^>]+>/g, ""))
    .replace(/\s+/g, " ")
    .trim();
  let body = /<body[^>]*>([\s\S]*)<\/body>/i.exec(html)?.[1] ?? html;
  body = body
    .replace(/<(script|style|head)[^>]*>[\s\S]*?<\/\1>/gi, " ")
    .replace(/<div class="(navheader|navfooter)"[\s\S]*?<\/div>/gi, " ")
    .replace(/<!--[\s\S]*?-->/g, " ")
    .replace(/<(h[1-6])[^>]*>/gi, "\n\n§§ ")
    .replace(/<\/(h[1-6])>/gi, "\n\n")
    .replace(/<(br|hr)\s*\/?>/gi, "\n")
    .replace(/<\/?(p|div|pre|li|ul|ol|dl|dt|dd|tr|table|blockquote|section)[^>]*>/gi, "\n\n")
    .replace(/<[^>]+>/g, "");
  return { title, text: tidy(decodeEntities(body)) };
}

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]+|#\d+|\w+);/gi, (whole, name: string) => {
    if (name[0] === "#") {
      const code =
        name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
      return Number.isFinite(code) && code > 0 && code < 0x110000 ? String.fromCodePoint(code) : " ";
    }
    return ENTITIES[name.toLowerCase()] ?? whole;
  });
}

/** HTML text with "§§ " heading markers → sections. */
function markedSections(text: string): { heading: string; body: string }[] {
  const sections: { heading: string; body: string }[] = [];
  for (const part of text.split(/\n\n§§ /)) {
    const [first = "", ...rest] = part.replace(/^§§ /, "").split("\n");
    const heading = first.trim();
    const body = tidy(rest.join("\n"));
    if (body) sections.push({ heading, body });
    else if (heading && sections.length === 0) sections.push({ heading: "", body: heading });
  }
  return sections;
}

/** The decoded dictd base64 numbers of gcide.index. */
function dictNumber(text: string): number {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  let n = 0;
  for (const ch of text) n = n * 64 + alphabet.indexOf(ch);
  return n;
}

function* dictionaryDocuments(dir: string): Generator<CorpusDocument> {
  const indexFile = path.join(dir, "gcide.index");
  const dataFile = path.join(dir, "gcide.dict.dz");
  if (!existsSync(indexFile) || !existsSync(dataFile)) return;
  const data = gunzipSync(readFileSync(dataFile));
  // Blocks (offset, length) in file order, each with its headwords.
  const blocks = new Map<number, { length: number; words: string[] }>();
  for (const line of readFileSync(indexFile, "utf8").split("\n")) {
    const [word = "", offset = "", length = ""] = line.split("\t");
    if (!word || !offset || word.startsWith("00-")) continue;
    const start = dictNumber(offset);
    const block = blocks.get(start);
    if (block) {
      if (!block.words.includes(word)) block.words.push(word);
    } else blocks.set(start, { length: dictNumber(length), words: [word] });
  }
  const ordered = [...blocks.entries()].sort((a, b) => a[0] - b[0]);
  let words: string[] = [];
  let text = "";
  let n = 0;
  for (const [start, block] of ordered) {
    const entry = tidy(
      data
        .subarray(start, start + block.length)
        .toString("utf8")
        .replace(SOURCE_TAG_LINE, ""),
    );
    // The first block(s) hold the licence text of each letter file, not entries.
    if (/^\s*Begin file \d+ of/m.test(entry) || !entry) continue;
    words.push(...block.words.slice(0, 4));
    text = text ? `${text}\n\n${entry}` : entry;
    if (text.length >= MIN_DICTIONARY_CHARS) {
      yield { _id: `gcide-${n++}`, title: words.slice(0, 6).join(", "), text };
      words = [];
      text = "";
    }
  }
  if (text) yield { _id: `gcide-${n++}`, title: words.slice(0, 6).join(", "), text };
}

function* rstDocuments(prefix: string, root: string, files: string[]): Generator<CorpusDocument> {
  for (const file of files) {
    const relative = path.relative(root, file).replace(/\.rst\.txt$|\.txt$/, "");
    const sections = rstSections(readFileSync(file, "utf8"));
    const pageTitle = sections.find((s) => s.heading)?.heading ?? relative;
    let n = 0;
    for (const section of sections) {
      const title =
        section.heading && section.heading !== pageTitle ? `${pageTitle} — ${section.heading}` : pageTitle;
      for (const group of paragraphGroups(section.body)) {
        yield { _id: `${prefix}/${relative}#${n++}`, title, text: group };
      }
    }
  }
}

function* htmlDocuments(prefix: string, root: string, files: string[]): Generator<CorpusDocument> {
  for (const file of files) {
    const relative = path.relative(root, file).replace(/\.html$/, "");
    const { title: pageTitle, text } = htmlToText(readFileSync(file, "utf8"));
    let n = 0;
    for (const section of markedSections(text)) {
      const title =
        section.heading && section.heading !== pageTitle ? `${pageTitle} — ${section.heading}` : pageTitle;
      for (const group of paragraphGroups(section.body)) {
        yield { _id: `${prefix}/${relative}#${n++}`, title, text: group };
      }
    }
  }
}

function firstMatch(dir: string, pattern: RegExp): string | undefined {
  if (!existsSync(dir)) return undefined;
  return readdirSync(dir)
    .filter((name) => pattern.test(name))
    .sort()
    .pop();
}

/** Every document of every package found under `packagesDir` (the root of the unpacked .deb files). */
export function* debianDocuments(packagesDir: string): Generator<CorpusDocument> {
  const doc = path.join(packagesDir, "usr/share/doc");
  const linux = firstMatch(doc, /^linux-doc-[\d.]+$/);
  if (linux) {
    const root = path.join(doc, linux, "html/_sources");
    yield* rstDocuments(
      "linux",
      root,
      walk(root, (f) => f.endsWith(".rst.txt")),
    );
  }
  const python = firstMatch(doc, /^python3\.\d+$/);
  if (python) {
    const root = path.join(doc, python, "html/_sources");
    yield* rstDocuments(
      "python",
      root,
      walk(root, (f) => f.endsWith(".txt")),
    );
  }
  const postgres = firstMatch(doc, /^postgresql-doc-\d+$/);
  if (postgres) {
    const root = path.join(doc, postgres, "html");
    yield* htmlDocuments(
      "postgresql",
      root,
      walk(root, (f) => f.endsWith(".html")),
    );
  }
  yield* dictionaryDocuments(path.join(packagesDir, "usr/share/dictd"));
}

const WORD = /[\p{L}\p{N}][\p{L}\p{N}_'-]*/gu;

/**
 * Queries without judgements: phrases of 2–6 consecutive words (at least one of 4+ letters) from random
 * documents, as a user would type a half-remembered phrase.
 */
export function sampleQueries(documents: readonly CorpusDocument[], count = QUERY_COUNT, seed = QUERY_SEED) {
  const next = seededRandom(seed);
  const queries: { _id: string; text: string }[] = [];
  let attempts = 0;
  while (queries.length < count && attempts++ < count * 50) {
    const document = documents[Math.floor(next() * documents.length)];
    if (!document) continue;
    const words = `${document.title} ${document.text}`.match(WORD) ?? [];
    const length = 2 + Math.floor(next() * 5);
    if (words.length < length) continue;
    const start = Math.floor(next() * (words.length - length + 1));
    const phrase = words.slice(start, start + length);
    if (!phrase.some((w) => /^\p{L}{4,}$/u.test(w))) continue;
    queries.push({ _id: `q${queries.length}`, text: phrase.join(" ") });
  }
  return queries;
}

async function main(): Promise<void> {
  const [packagesDir, outDir] = process.argv.slice(2);
  if (!packagesDir || !outDir || !statSync(packagesDir, { throwIfNoEntry: false })?.isDirectory()) {
    process.stderr.write("usage: corpus-debian.ts <unpacked packages dir> <output dir>\n");
    process.exit(2);
  }
  const started = performance.now();
  const documents: CorpusDocument[] = [];
  const bySource = new Map<string, { documents: number; chars: number }>();
  const corpus = createWriteStream(path.join(outDir, "corpus.jsonl"));
  let bytes = 0;
  for (const document of debianDocuments(packagesDir)) {
    const line = `${JSON.stringify(document)}\n`;
    bytes += Buffer.byteLength(line);
    if (!corpus.write(line)) await new Promise<void>((resolve) => corpus.once("drain", () => resolve()));
    documents.push(document);
    const source = document._id.replace(/[/-].*$/, "");
    const stats = bySource.get(source) ?? { documents: 0, chars: 0 };
    stats.documents++;
    stats.chars += document.title.length + document.text.length;
    bySource.set(source, stats);
  }
  await new Promise<void>((resolve, reject) =>
    corpus.end((error?: Error | null) => (error ? reject(error) : resolve())),
  );
  const queries = sampleQueries(documents);
  writeFileSync(path.join(outDir, "queries.jsonl"), queries.map((q) => JSON.stringify(q)).join("\n") + "\n");
  const stats = {
    documents: documents.length,
    corpusBytes: bytes,
    queries: queries.length,
    querySeed: QUERY_SEED,
    sources: Object.fromEntries(bySource),
    seconds: Math.round(performance.now() - started) / 1000,
  };
  writeFileSync(path.join(outDir, "stats.json"), JSON.stringify(stats, null, 2) + "\n");
  process.stdout.write(`${JSON.stringify(stats)}\n`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  await main();
}
