/**
 * A synthetic corpus of any size (e.g. 1,000,000 chunks) grown from a real one, for scale benchmarks.
 *
 * The base corpus (BEIR-like corpus.jsonl) is cut into RAG chunks exactly as the service does
 * (`chunkDocument`, 1,000 characters, overlap 128; the title indexed with every chunk). Chunk i of the
 * large corpus is base chunk i mod B in *replica* ⌊i / B⌋. Replica 0 is the base itself; in replica r > 0
 * every word is dropped with probability 5% (so lengths and frequencies vary, and scores do not all tie)
 * and about a quarter of the distinct words are replaced by a replica-specific variant (`word` →
 * `wordq<r>`), the same variant wherever the word occurs in that replica. So the vocabulary grows with
 * the corpus (roughly as Heaps' law has it: 9 replicas ≈ 3× the terms) and the new terms are reused
 * across documents like real words, instead of every replica repeating the same few hundred thousand
 * terms. Chunks are generated on demand: the large corpus is never held in memory.
 */

import { readFileSync } from "node:fs";
import path from "node:path";

import { chunkDocument } from "../../src/rag/ingest/chunker.js";
import { fmix32 } from "../../src/rag/search/core/term-dictionary.js";

export const SCALE_CHUNK_SIZE = 1000;
export const SCALE_OVERLAP = 128;
const DROP_PER_MILLE = 50;
const VARIANT_PER_MILLE = 250;

/** The base corpus as the texts the service would index: title + "\n" + chunk text. */
export function loadBaseChunks(dir: string): string[] {
  const chunks: string[] = [];
  const lines = readFileSync(path.join(dir, "corpus.jsonl"), "utf8").split("\n");
  for (const line of lines) {
    if (!line.trim()) continue;
    const row = JSON.parse(line) as { _id?: unknown; title?: unknown; text?: unknown };
    const title = typeof row.title === "string" ? row.title : "";
    const text = typeof row.text === "string" ? row.text : "";
    if (!text.trim()) continue;
    const document = { id: String(row._id), title, text, metadata: {}, source: null, contentHash: null };
    for (const chunk of chunkDocument(document, { chunkSize: SCALE_CHUNK_SIZE, overlap: SCALE_OVERLAP })) {
      chunks.push(title ? `${title}\n${chunk.text}` : chunk.text);
    }
  }
  return chunks;
}

const isLetter = (lower: number): boolean => lower >= 0x61 && lower <= 0x7a;

/** Chunk `index` of the large corpus made from `base`. Words are ASCII runs [A-Za-z][A-Za-z0-9]*. */
export function scaledChunk(base: readonly string[], index: number): string {
  const b = base.length;
  const text = base[index % b] ?? "";
  const replica = Math.floor(index / b);
  if (replica === 0) return text;
  const suffix = `q${replica.toString(36)}`;
  const replicaSalt = Math.imul(replica, 0x9e3779b1);
  const chunkSalt = Math.imul(index, 0x7feb352d);
  let out = "";
  let copied = 0;
  let position = 0;
  const length = text.length;
  let i = 0;
  while (i < length) {
    if (!isLetter(text.charCodeAt(i) | 0x20)) {
      i++;
      continue;
    }
    const start = i;
    let h = 0x811c9dc5; // case-insensitive FNV-1a of the word
    while (i < length) {
      const c = text.charCodeAt(i);
      if (!isLetter(c | 0x20) && !(c >= 0x30 && c <= 0x39)) break;
      h = Math.imul(h ^ (c | 0x20), 0x01000193);
      i++;
    }
    // Drops: per (chunk, occurrence); variants: per (word, replica).
    if (fmix32(h ^ chunkSalt ^ Math.imul(++position, 0x27d4eb2f)) % 1000 < DROP_PER_MILLE) {
      out += text.slice(copied, start);
      copied = i;
    } else if (fmix32(h ^ replicaSalt) % 1000 < VARIANT_PER_MILLE) {
      out += text.slice(copied, i) + suffix;
      copied = i;
    }
  }
  return out + text.slice(copied);
}
