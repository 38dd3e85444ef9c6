/**
 * A deterministic embedder for tests: each word of a text hashed (FNV-1a) into one of `dimension`
 * buckets with a sign, plus a constant first component so no text gets a zero vector. Texts that share
 * words get close vectors. It is a test's input (the `Embedder` interface, implemented), not a stand-in
 * for our code; `failAfter` makes it fail like an unreachable embedder after that many texts.
 */
import { DomainError } from "../../src/core/errors.js";
import type { Embedder } from "../../src/rag/retrieval/embedder.js";

function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** Cosine similarity of two vectors (the tests' brute-force reference). */
export function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(na * nb);
}

export function hashVector(text: string, dimension: number): Float32Array {
  const vector = new Float32Array(dimension);
  vector[0] = 0.25;
  for (const word of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    const hash = fnv1a(word);
    vector[hash % dimension] = (vector[hash % dimension] ?? 0) + (hash & 0x80000000 ? -1 : 1);
  }
  return vector;
}

export class HashEmbedder implements Embedder {
  readonly description = "hash embedder (tests)";
  /** Texts embedded so far. */
  embedded = 0;
  /** Calls to `embed` so far. */
  calls = 0;

  constructor(
    readonly model = "hash-test",
    readonly dimension = 16,
    /** Fail (a 503, as an unreachable embedder) once this many texts have been embedded. */
    public failAfter = Infinity,
  ) {}

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    this.calls++;
    if (this.embedded + texts.length > this.failAfter) {
      throw new DomainError("not_ready", "embedder unavailable: connection refused", {
        code: "upstream_error",
      });
    }
    this.embedded += texts.length;
    return texts.map((text) => hashVector(text, this.dimension));
  }

  async close(): Promise<void> {}
}
